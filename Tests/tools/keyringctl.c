/*
 * keyringctl — control and inspect the PRIVATE test keyring (Secret Service)
 * that scripts/with-keyring.sh starts. Test tool only; not part of the library.
 *
 * Build:
 *   gcc -O1 -Wall -Wextra -Werror -o keyringctl keyringctl.c \
 *       $(pkg-config --cflags --libs libsecret-1)
 *
 * It talks to org.freedesktop.secrets directly over GDBus (the Secret Service
 * D-Bus API, plus gnome-keyring's internal UnlockWithMasterPassword and
 * KeePassXC's org.keepassxc.KeePassXC.MainWindow) rather than through
 * libsecret's convenience calls, so that EVERY D-Bus call has an explicit
 * timeout (KEYRINGCTL_TIMEOUT_MS, default 5000 ms) and nothing is ever
 * auto-activated. A prompt that the daemon hands back (KeePassXC returns one
 * for every CreateItem and Item.Delete; gnome-keyring for a locked
 * collection) is RUN: Prompt.Prompt("") and a wait for Completed, bounded by
 * the same timeout. No dialog can appear (the providers run headless), so a
 * prompt that needs a user ends dismissed or unanswered: both are reported as
 * errors. Prompts are never Dismiss()ed (that crashed gnome-keyring 42). A
 * SIGALRM watchdog bounds the whole run as well (connection set-up
 * included), so a stopped daemon can never hang a test.
 *
 * Providers: works with every provider of scripts/with-keyring.sh
 * --provider. KeePassXC is recognised by its bus name
 * org.keepassxc.KeePassXC.MainWindow; lock/unlock then use that interface
 * (lockAllDatabases / openDatabase($PORTAL_TEST_KEEPASSXC_DB,
 * $PORTAL_TEST_KEYRING_PASSWORD, "")). Elsewhere lock is Service.Lock and
 * unlock is gnome-keyring's UnlockWithMasterPassword, falling back to
 * Service.Unlock plus its prompt when the daemon has no such method. lock and
 * unlock return only once the default collection's Locked property says so.
 *
 * Safety: it refuses to run unless PORTAL_TEST_KEYRING_DIR is set and
 * DBUS_SESSION_BUS_ADDRESS points inside it (i.e. inside with-keyring.sh),
 * so it cannot modify the developer's real keyring by accident. Set
 * KEYRINGCTL_ALLOW_REAL_KEYRING=1 to override (you almost never want that).
 *
 * Subcommands (exit 0 = success/true, 1 = not found/false, 2 = error, with a
 * message on stderr):
 *   lock                      lock the default collection (KeePassXC: after
 *                             `settle`, so that no write is lost)
 *   settle                    KeePassXC only (elsewhere nothing): make sure
 *                             every write it has answered reaches the
 *                             database file before it is locked or stopped.
 *                             KeePassXC 2.7.4 saves on a worker thread while
 *                             it keeps answering D-Bus, then marks the
 *                             database clean: a write answered during a save
 *                             is never saved unless another follows, and a
 *                             lock or a quit after it reloads the file
 *                             without it (docs/providers.md). settle waits
 *                             until the database's directory has been quiet
 *                             for 1 s (no save running), then renames a
 *                             scratch item of the schema
 *                             io.portalhq.PortalKeyring.TestSettle (created
 *                             the first time): a write that is saved, with
 *                             everything before it, by the next autosave or
 *                             by the lock's own save.
 *   unlock                    unlock it without a dialog (password from
 *                             $PORTAL_TEST_KEYRING_PASSWORD)
 *   is-locked                 0 if the default collection is locked, 1 if not
 *   store --schema NAME [--content-type T] [--label L] [--replace] K=V...
 *                             store stdin (byte-exact) as a new item of the
 *                             default collection with exactly attributes K=V
 *                             plus xdg:schema=NAME; prints the item path
 *                             (a creation prompt is run, see above).
 *                             Without --replace an item with the same
 *                             attributes is never replaced (a second one is
 *                             added).
 *   count  [--schema NAME] K=V...   number of matching items (locked+unlocked)
 *   get    [--schema NAME] K=V...   secret of the single match to stdout;
 *                             1 if none, 2 if several or locked
 *   content-type [--schema NAME] K=V...  content type of the single match's
 *                             secret; exit codes as for get
 *   attrs  [--schema NAME] K=V...   one line per matching item: sorted k=v
 *                             pairs separated by spaces (bytes <= 0x20, 0x7f
 *                             and '\' are written as \xHH); lines sorted;
 *                             1 if none match
 *   delete-all [--schema NAME] K=V...  delete matches (running each
 *                             deletion prompt), print how many
 *   unlock-prompt [--wait MS] probe: Service.Unlock on the default collection
 *                             and, if the daemon returns a prompt, run it and
 *                             wait up to MS (default 10000) for Completed;
 *                             prints what happened and how long it took.
 *                             0 = unlocked, 1 = dismissed, 2 = error/no answer
 *   stuck-prompter            own org.gnome.keyring.SystemPrompter on the bus
 *                             and never answer any call to it (so that the
 *                             keyring daemon's prompts hang instead of being
 *                             dismissed at once); prints "ready" when the
 *                             name is owned, runs until killed. Exit 2 if
 *                             the name cannot be owned.
 *
 * Matching uses Service.SearchItems (all collections). With no K=V and no
 * --schema, every item matches.
 */
#include <gio/gio.h>

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SECRETS_NAME "org.freedesktop.secrets"
#define SECRETS_PATH "/org/freedesktop/secrets"
#define IFACE_SERVICE "org.freedesktop.Secret.Service"
#define IFACE_COLLECTION "org.freedesktop.Secret.Collection"
#define IFACE_ITEM "org.freedesktop.Secret.Item"
#define IFACE_PROMPT "org.freedesktop.Secret.Prompt"
#define IFACE_GNOME "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface"
#define KEEPASSXC_NAME "org.keepassxc.KeePassXC.MainWindow"
#define KEEPASSXC_PATH "/keepassxc"
#define KEEPASSXC_IFACE "org.keepassxc.KeePassXC.MainWindow"
#define IFACE_PROPS "org.freedesktop.DBus.Properties"

#define MAX_SECRET_BYTES (64u * 1024u * 1024u)

static GDBusConnection *bus;
static int call_timeout_ms = 5000;

/* ---------------------------------------------------------------- errors */

static void G_GNUC_PRINTF(2, 3) G_GNUC_NORETURN
die(int code, const char *fmt, ...)
{
    va_list ap;
    fputs("keyringctl: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(code);
}

static void G_GNUC_NORETURN
die_gerror(const char *what, GError *err)
{
    char *remote = err ? g_dbus_error_get_remote_error(err) : NULL;
    if (remote)
        g_dbus_error_strip_remote_error(err);
    const char *timeout_hint =
        (err && g_error_matches(err, G_IO_ERROR, G_IO_ERROR_TIMED_OUT))
            ? " (timed out)" : "";
    die(2, "%s failed%s: %s%s%s", what, timeout_hint,
        remote ? remote : "", remote ? ": " : "",
        err ? err->message : "unknown error");
}

static void
watchdog_fired(int sig)
{
    static const char msg[] =
        "keyringctl: watchdog: overall time limit exceeded, giving up\n";
    (void)sig;
    ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)r;
    _exit(2);
}

static void
arm_watchdog(unsigned extra_ms)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = watchdog_fired;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    /* Connection set-up + a handful of calls, each bounded by call_timeout_ms;
     * the watchdog is a backstop for anything GLib might not bound itself. */
    unsigned secs = (unsigned)((4u * (unsigned)call_timeout_ms + extra_ms) / 1000u) + 2u;
    alarm(secs);
}

/* ----------------------------------------------------------------- D-Bus */

static GVariant *
call(const char *path, const char *iface, const char *method,
     GVariant *params, const char *reply_type, const char *what)
{
    GError *err = NULL;
    GVariant *r = NULL;
    g_variant_ref_sink(params);
    /* The service object answered UnknownMethod for SearchItems once on gnome-keyring-locked in
     * the middle of a suite (the next call a moment later worked): a call the service object did
     * not dispatch ran nothing, so it is made again, up to 10 times 100 ms apart. Item paths are
     * not retried: there an unknown object is an answer (the item is gone). */
    for (int attempt = 1;; attempt++) {
        r = g_dbus_connection_call_sync(bus, SECRETS_NAME, path, iface, method, params,
                                        reply_type ? G_VARIANT_TYPE(reply_type) : NULL,
                                        G_DBUS_CALL_FLAGS_NO_AUTO_START, call_timeout_ms, NULL, &err);
        gboolean undispatched = !r && strcmp(path, SECRETS_PATH) == 0 &&
                                (g_error_matches(err, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD) ||
                                 g_error_matches(err, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_OBJECT) ||
                                 g_error_matches(err, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_INTERFACE));
        if (!undispatched || attempt == 10)
            break;
        g_clear_error(&err);
        g_usleep(100 * 1000);
    }
    g_variant_unref(params);
    if (!r)
        die_gerror(what ? what : method, err);
    return r;
}

static void
connect_bus(void)
{
    const char *addr = g_getenv("DBUS_SESSION_BUS_ADDRESS");
    const char *dir = g_getenv("PORTAL_TEST_KEYRING_DIR");
    const char *allow = g_getenv("KEYRINGCTL_ALLOW_REAL_KEYRING");
    gboolean allow_real = allow && strcmp(allow, "1") == 0;

    if (!addr || !*addr)
        die(2, "DBUS_SESSION_BUS_ADDRESS is not set (run me under scripts/with-keyring.sh)");
    if (!allow_real) {
        if (!dir || !*dir)
            die(2, "PORTAL_TEST_KEYRING_DIR is not set: refusing to touch a keyring "
                   "that scripts/with-keyring.sh did not create "
                   "(KEYRINGCTL_ALLOW_REAL_KEYRING=1 overrides)");
        if (!strstr(addr, dir))
            die(2, "DBUS_SESSION_BUS_ADDRESS (%s) is not inside PORTAL_TEST_KEYRING_DIR (%s): "
                   "refusing (KEYRINGCTL_ALLOW_REAL_KEYRING=1 overrides)", addr, dir);
    }

    GError *err = NULL;
    bus = g_dbus_connection_new_for_address_sync(
        addr,
        G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
            G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
        NULL, NULL, &err);
    if (!bus)
        die_gerror("connecting to the session bus", err);
    g_dbus_connection_set_exit_on_close(bus, FALSE);
}

static void
dismiss_prompt(const char *prompt)
{
    /* Best effort, bounded; never waits for the prompt itself. */
    GVariant *r = g_dbus_connection_call_sync(
        bus, SECRETS_NAME, prompt, IFACE_PROMPT, "Dismiss", NULL, NULL,
        G_DBUS_CALL_FLAGS_NO_AUTO_START, call_timeout_ms, NULL, NULL);
    if (r)
        g_variant_unref(r);
}

/* Prompt.Completed bookkeeping, shared by run_prompt and unlock-prompt. */
typedef struct {
    GMainLoop *loop;
    gboolean completed;
    gboolean dismissed;
    char *result;
    GVariant *value;
} PromptState;

static void
on_prompt_completed(GDBusConnection *c, const char *sender, const char *path,
                    const char *iface, const char *signal, GVariant *params, gpointer data)
{
    PromptState *st = data;
    (void)c; (void)sender; (void)path; (void)iface; (void)signal;
    if (!g_variant_is_of_type(params, G_VARIANT_TYPE("(bv)")))
        return;
    GVariant *v = NULL;
    g_variant_get(params, "(bv)", &st->dismissed, &v);
    st->result = g_variant_print(v, TRUE);
    st->value = v;
    st->completed = TRUE;
    g_main_loop_quit(st->loop);
}

static gboolean
on_prompt_timeout(gpointer data)
{
    g_main_loop_quit(((PromptState *)data)->loop);
    return G_SOURCE_REMOVE;
}

/* Runs PROMPT (if it is not "/"): Prompt.Prompt("") and a wait of at most
 * call_timeout_ms for Completed. Dies (exit 2) if it ends dismissed or does
 * not complete in time; never calls Dismiss. Returns Completed's result
 * (caller unrefs), or NULL when there was no prompt. */
static GVariant *
run_prompt(const char *prompt, const char *what)
{
    if (!prompt || strcmp(prompt, "/") == 0)
        return NULL;
    /* Each prompt gets its own share of the watchdog. */
    alarm((unsigned)(3u * (unsigned)call_timeout_ms / 1000u) + 2u);
    PromptState st = { g_main_loop_new(NULL, FALSE), FALSE, FALSE, NULL, NULL };
    guint sub = g_dbus_connection_signal_subscribe(
        bus, NULL, IFACE_PROMPT, "Completed", prompt, NULL, G_DBUS_SIGNAL_FLAGS_NONE,
        on_prompt_completed, &st, NULL);
    char *label = g_strdup_printf("%s: Prompt.Prompt(%s)", what, prompt);
    GVariant *pr = call(prompt, IFACE_PROMPT, "Prompt", g_variant_new("(s)", ""), "()", label);
    g_variant_unref(pr);
    guint to = g_timeout_add((guint)call_timeout_ms, on_prompt_timeout, &st);
    if (!st.completed)
        g_main_loop_run(st.loop);
    g_dbus_connection_signal_unsubscribe(bus, sub);
    if (!st.completed)
        die(2, "%s: the daemon's prompt %s did not complete within %d ms (it needs a user? "
               "left open, never dismissed)", what, prompt, call_timeout_ms);
    g_source_remove(to);
    if (st.dismissed)
        die(2, "%s: the daemon's prompt %s completed dismissed (collection locked, or a "
               "confirmation no one can answer headless?)", what, prompt);
    g_main_loop_unref(st.loop);
    g_free(st.result);
    g_free(label);
    return st.value;
}

static gboolean
name_has_owner(const char *name)
{
    GVariant *r = g_dbus_connection_call_sync(
        bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
        "NameHasOwner", g_variant_new("(s)", name), G_VARIANT_TYPE("(b)"),
        G_DBUS_CALL_FLAGS_NONE, call_timeout_ms, NULL, NULL);
    gboolean owned = FALSE;
    if (r) {
        g_variant_get(r, "(b)", &owned);
        g_variant_unref(r);
    }
    return owned;
}

static gboolean
is_keepassxc(void)
{
    return name_has_owner(KEEPASSXC_NAME);
}

static GVariant *
call_keepassxc(const char *method, GVariant *params)
{
    GError *err = NULL;
    GVariant *r = g_dbus_connection_call_sync(
        bus, KEEPASSXC_NAME, KEEPASSXC_PATH, KEEPASSXC_IFACE, method, params, NULL,
        G_DBUS_CALL_FLAGS_NO_AUTO_START, call_timeout_ms, NULL, &err);
    if (!r) {
        char *what = g_strdup_printf("KeePassXC MainWindow.%s", method);
        die_gerror(what, err);
    }
    return r;
}

static char *
default_collection(void)
{
    GVariant *r = call(SECRETS_PATH, IFACE_SERVICE, "ReadAlias",
                       g_variant_new("(s)", "default"), "(o)", "ReadAlias(\"default\")");
    char *path = NULL;
    g_variant_get(r, "(o)", &path);
    g_variant_unref(r);
    if (strcmp(path, "/") == 0)
        die(2, "there is no default collection (ReadAlias(\"default\") returned \"/\")");
    return path;
}

static char *
open_plain_session(void)
{
    GVariant *r = call(SECRETS_PATH, IFACE_SERVICE, "OpenSession",
                       g_variant_new("(sv)", "plain", g_variant_new_string("")),
                       "(vo)", "OpenSession(\"plain\")");
    GVariant *out = NULL;
    char *session = NULL;
    g_variant_get(r, "(vo)", &out, &session);
    g_variant_unref(out);
    g_variant_unref(r);
    return session;
}

static gboolean
collection_locked(const char *coll)
{
    GVariant *r = call(coll, IFACE_PROPS, "Get",
                       g_variant_new("(ss)", IFACE_COLLECTION, "Locked"),
                       "(v)", "reading Collection.Locked");
    GVariant *v = NULL;
    g_variant_get(r, "(v)", &v);
    if (!g_variant_is_of_type(v, G_VARIANT_TYPE_BOOLEAN))
        die(2, "Collection.Locked has unexpected type %s", g_variant_get_type_string(v));
    gboolean locked = g_variant_get_boolean(v);
    g_variant_unref(v);
    g_variant_unref(r);
    return locked;
}

/* Polls Collection.Locked until it is WANT, for at most call_timeout_ms. */
static gboolean
wait_locked(const char *coll, gboolean want)
{
    gint64 deadline = g_get_monotonic_time() + (gint64)call_timeout_ms * 1000;
    for (;;) {
        if (collection_locked(coll) == want)
            return TRUE;
        if (g_get_monotonic_time() >= deadline)
            return FALSE;
        g_usleep(20 * 1000);
    }
}

static GVariant *
bytes_variant(const void *data, gsize len)
{
    return g_variant_new_fixed_array(G_VARIANT_TYPE_BYTE, data, len, 1);
}

/* (oayays): session, parameters, value, content type */
static GVariant *
secret_struct(const char *session, const void *data, gsize len, const char *content_type)
{
    return g_variant_new("(o@ay@ays)", session, bytes_variant("", 0),
                         bytes_variant(data, len), content_type);
}

/* ------------------------------------------------------- argument parsing */

typedef struct {
    const char *schema;
    const char *content_type;
    const char *label;
    gboolean replace;
    unsigned wait_ms;
    GHashTable *attrs; /* key -> value, borrowed from argv */
} Args;

static void
check_utf8(const char *what, const char *s)
{
    if (!g_utf8_validate(s, -1, NULL))
        die(2, "%s is not valid UTF-8 (D-Bus strings must be)", what);
}

static void
parse_args(int argc, char **argv, Args *a, gboolean store_opts, gboolean attrs_allowed)
{
    gboolean opts_done = FALSE;
    a->attrs = g_hash_table_new(g_str_hash, g_str_equal);
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (!opts_done && strncmp(arg, "--", 2) == 0) {
            if (strcmp(arg, "--") == 0) {
                opts_done = TRUE;
                continue;
            }
            gboolean is_flag = FALSE;
            const char **target = NULL;
            if (strcmp(arg, "--schema") == 0 && attrs_allowed)
                target = &a->schema;
            else if (strcmp(arg, "--content-type") == 0 && store_opts)
                target = &a->content_type;
            else if (strcmp(arg, "--label") == 0 && store_opts)
                target = &a->label;
            else if (strcmp(arg, "--replace") == 0 && store_opts)
                is_flag = TRUE;
            else if (strcmp(arg, "--wait") == 0 && !attrs_allowed) {
                if (i + 1 >= argc)
                    die(2, "--wait needs a value");
                char *end = NULL;
                errno = 0;
                unsigned long v = strtoul(argv[++i], &end, 10);
                if (errno || !end || *end || v > 600000)
                    die(2, "--wait: bad number of milliseconds");
                a->wait_ms = (unsigned)v;
                continue;
            } else
                die(2, "unknown option %s (see the header of keyringctl.c)", arg);
            if (is_flag) {
                a->replace = TRUE;
                continue;
            }
            if (i + 1 >= argc)
                die(2, "%s needs a value", arg);
            *target = argv[++i];
            check_utf8(arg, *target);
            continue;
        }
        if (!attrs_allowed)
            die(2, "unexpected argument %s", arg);
        char *eq = strchr(arg, '=');
        if (!eq || eq == arg)
            die(2, "expected KEY=VALUE, got \"%s\"", arg);
        *eq = '\0';
        const char *key = arg, *value = eq + 1;
        check_utf8("attribute name", key);
        check_utf8("attribute value", value);
        if (g_hash_table_contains(a->attrs, key))
            die(2, "attribute %s given twice", key);
        if (strcmp(key, "xdg:schema") == 0 && a->schema)
            die(2, "give the schema either with --schema or as xdg:schema=, not both");
        g_hash_table_insert(a->attrs, (gpointer)key, (gpointer)value);
    }
    if (a->schema) {
        if (!*a->schema)
            die(2, "--schema must not be empty");
        if (g_hash_table_contains(a->attrs, "xdg:schema"))
            die(2, "give the schema either with --schema or as xdg:schema=, not both");
        g_hash_table_insert(a->attrs, (gpointer) "xdg:schema", (gpointer)a->schema);
    }
}

static GVariant *
attrs_variant(GHashTable *attrs)
{
    GVariantBuilder b;
    GHashTableIter it;
    gpointer k, v;
    g_variant_builder_init(&b, G_VARIANT_TYPE("a{ss}"));
    g_hash_table_iter_init(&it, attrs);
    while (g_hash_table_iter_next(&it, &k, &v))
        g_variant_builder_add(&b, "{ss}", (const char *)k, (const char *)v);
    return g_variant_builder_end(&b);
}

/* --------------------------------------------------------------- helpers */

static GByteArray *
read_stdin_all(void)
{
    GByteArray *buf = g_byte_array_new();
    guint8 chunk[65536];
    for (;;) {
        size_t n = fread(chunk, 1, sizeof chunk, stdin);
        if (n > 0) {
            if (buf->len + n > MAX_SECRET_BYTES)
                die(2, "secret on stdin is larger than %u bytes", MAX_SECRET_BYTES);
            g_byte_array_append(buf, chunk, (guint)n);
        }
        if (n < sizeof chunk) {
            if (ferror(stdin))
                die(2, "reading stdin: %s", g_strerror(errno));
            if (feof(stdin))
                break;
        }
    }
    return buf;
}

/* Returns a NULL-terminated vector of object paths; *n_locked of them (at
 * the end) are locked. */
static char **
search(GHashTable *attrs, guint *n_unlocked, guint *n_locked)
{
    GVariant *r = call(SECRETS_PATH, IFACE_SERVICE, "SearchItems",
                       g_variant_new("(@a{ss})", attrs_variant(attrs)),
                       "(aoao)", "SearchItems");
    GVariant *u = g_variant_get_child_value(r, 0);
    GVariant *l = g_variant_get_child_value(r, 1);
    gsize nu = 0, nl = 0;
    const char **pu = g_variant_get_objv(u, &nu);
    const char **pl = g_variant_get_objv(l, &nl);
    char **out = g_new0(char *, nu + nl + 1);
    for (gsize i = 0; i < nu; i++)
        out[i] = g_strdup(pu[i]);
    for (gsize i = 0; i < nl; i++)
        out[nu + i] = g_strdup(pl[i]);
    g_free(pu);
    g_free(pl);
    g_variant_unref(u);
    g_variant_unref(l);
    g_variant_unref(r);
    *n_unlocked = (guint)nu;
    *n_locked = (guint)nl;
    return out;
}

static void
append_escaped(GString *s, const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p <= 0x20 || *p == 0x7f || *p == '\\')
            g_string_append_printf(s, "\\x%02x", *p);
        else
            g_string_append_c(s, (char)*p);
    }
}

static int
cmp_strptr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ------------------------------------------------------------ subcommands */

/* Collection.CreateItem in COLL with LABEL, ATTRS and the secret (plain transfer session),
 * running the creation prompt the daemon returns (KeePassXC: every create). Returns the new
 * item's path (g_free); dies when no item was created. */
static char *
create_item(const char *coll, const char *label, GHashTable *attrs, const void *data, gsize len,
            const char *content_type, gboolean replace)
{
    char *session = open_plain_session();
    GVariantBuilder props;
    g_variant_builder_init(&props, G_VARIANT_TYPE("a{sv}"));
    g_variant_builder_add(&props, "{sv}", IFACE_ITEM ".Label", g_variant_new_string(label));
    g_variant_builder_add(&props, "{sv}", IFACE_ITEM ".Attributes", attrs_variant(attrs));
    GVariant *r = call(coll, IFACE_COLLECTION, "CreateItem",
                       g_variant_new("(@a{sv}@(oayays)b)", g_variant_builder_end(&props),
                                     secret_struct(session, data, len, content_type), replace),
                       "(oo)", "Collection.CreateItem");
    char *item = NULL, *prompt = NULL;
    g_variant_get(r, "(oo)", &item, &prompt);
    g_variant_unref(r);
    GVariant *res = run_prompt(prompt, "Collection.CreateItem");
    if (res) {
        /* The prompt's result is the new item's path. */
        if (!g_variant_is_of_type(res, G_VARIANT_TYPE_OBJECT_PATH))
            die(2, "Collection.CreateItem's prompt completed with %s, not an item path",
                g_variant_get_type_string(res));
        g_free(item);
        item = g_variant_dup_string(res, NULL);
        g_variant_unref(res);
    }
    g_free(prompt);
    g_free(session);
    if (strcmp(item, "/") == 0)
        die(2, "Collection.CreateItem returned no item");
    return item;
}

#define SETTLE_SCHEMA "io.portalhq.PortalKeyring.TestSettle"

/* The newest modification time (ns) of the database file's directory and its entries. A
 * KeePassXC save writes a temporary file there and renames it over the database. */
static long long
newest_mtime_ns(const char *dir)
{
    long long newest = 0;
    struct stat st;
    if (stat(dir, &st) == 0)
        newest = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    GDir *d = g_dir_open(dir, 0, NULL);
    if (!d)
        return newest;
    const char *name;
    while ((name = g_dir_read_name(d)) != NULL) {
        char *path = g_build_filename(dir, name, NULL);
        if (stat(path, &st) == 0) {
            long long t = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
            if (t > newest)
                newest = t;
        }
        g_free(path);
    }
    g_dir_close(d);
    return newest;
}

/* See `settle` in the header comment. Best effort: a failure is reported on stderr and the
 * caller goes on (the lock or stop that follows is what the caller asked for). */
static void
keepassxc_settle(void)
{
    const char *db = g_getenv("PORTAL_TEST_KEEPASSXC_DB");
    if (!db || !*db) {
        fprintf(stderr, "keyringctl: settle: PORTAL_TEST_KEEPASSXC_DB is not set; not settled\n");
        return;
    }
    char *dir = g_path_get_dirname(db);
    /* Quiet for 1 s, waiting at most 15 s (a save under load takes well under that). */
    long long seen = newest_mtime_ns(dir);
    gint64 quiet_since = g_get_monotonic_time(), give_up = quiet_since + 15 * G_USEC_PER_SEC;
    while (g_get_monotonic_time() - quiet_since < G_USEC_PER_SEC && g_get_monotonic_time() < give_up) {
        g_usleep(50 * 1000);
        long long now = newest_mtime_ns(dir);
        if (now != seen) {
            seen = now;
            quiet_since = g_get_monotonic_time();
        }
    }
    g_free(dir);
    char *coll = default_collection();
    if (collection_locked(coll))
        return; /* nothing can be written, nothing is pending */
    GHashTable *attrs = g_hash_table_new(g_str_hash, g_str_equal);
    g_hash_table_insert(attrs, (gpointer) "xdg:schema", (gpointer)SETTLE_SCHEMA);
    guint nu = 0, nl = 0;
    char **found = search(attrs, &nu, &nl);
    char *label = g_strdup_printf("keyringctl settle %" G_GINT64_FORMAT, g_get_real_time());
    if (nu > 0) {
        GError *err = NULL;
        GVariant *r = g_dbus_connection_call_sync(
            bus, SECRETS_NAME, found[0], IFACE_PROPS, "Set",
            g_variant_new("(ssv)", IFACE_ITEM, "Label", g_variant_new_string(label)), NULL,
            G_DBUS_CALL_FLAGS_NO_AUTO_START, call_timeout_ms, NULL, &err);
        if (r)
            g_variant_unref(r);
        else {
            fprintf(stderr, "keyringctl: settle: renaming %s: %s\n", found[0], err->message);
            g_error_free(err);
        }
    } else {
        g_free(create_item(coll, label, attrs, "settle", 6, "application/octet-stream", FALSE));
    }
    g_free(label);
    g_strfreev(found);
    g_hash_table_unref(attrs);
    g_free(coll);
}

static int
cmd_settle(void)
{
    if (is_keepassxc())
        keepassxc_settle();
    return 0;
}

static int
cmd_lock(void)
{
    char *coll = default_collection();
    if (collection_locked(coll))
        return 0; /* KWallet answers InvalidArgs to Service.Lock of a locked wallet */
    if (is_keepassxc()) {
        keepassxc_settle();
        g_variant_unref(call_keepassxc("lockAllDatabases", NULL));
        /* Observed with 2.7.4 headless: once a prompt has opened an unlock
         * dialog (a write into the locked database), lockAllDatabases and
         * Service.Lock no longer lock anything, even after openDatabase. */
        if (!wait_locked(coll, TRUE))
            die(2, "KeePassXC: %s still unlocked %d ms after lockAllDatabases (known KeePassXC "
                   "2.7.4 state after a prompt opened an unlock dialog headless; "
                   "scripts/keyring-restart.sh --locked recovers)", coll, call_timeout_ms);
    } else {
        GVariant *r = call(SECRETS_PATH, IFACE_SERVICE, "Lock",
                           g_variant_new("(@ao)", g_variant_new_objv((const char *const[]){coll}, 1)),
                           "(aoo)", "Service.Lock");
        char *prompt = NULL;
        g_variant_get_child(r, 1, "o", &prompt);
        g_variant_unref(r);
        GVariant *res = run_prompt(prompt, "Service.Lock");
        if (res)
            g_variant_unref(res);
    }
    if (!wait_locked(coll, TRUE))
        die(2, "%s still unlocked %d ms after the lock call", coll, call_timeout_ms);
    return 0;
}

static int
cmd_unlock(void)
{
    const char *pw = g_getenv("PORTAL_TEST_KEYRING_PASSWORD");
    if (!pw)
        die(2, "PORTAL_TEST_KEYRING_PASSWORD is not set");
    char *coll = default_collection();
    if (!collection_locked(coll))
        return 0;
    if (is_keepassxc()) {
        const char *db = g_getenv("PORTAL_TEST_KEEPASSXC_DB");
        if (!db || !*db)
            die(2, "PORTAL_TEST_KEEPASSXC_DB is not set (the database KeePassXC serves)");
        g_variant_unref(call_keepassxc("openDatabase", g_variant_new("(sss)", db, pw, "")));
    } else {
        /* The session must belong to this connection: the daemon checks that. */
        char *session = open_plain_session();
        GError *err = NULL;
        GVariant *r = g_dbus_connection_call_sync(
            bus, SECRETS_NAME, SECRETS_PATH, IFACE_GNOME, "UnlockWithMasterPassword",
            g_variant_new("(o@(oayays))", coll, secret_struct(session, pw, strlen(pw), "text/plain")),
            G_VARIANT_TYPE("()"), G_DBUS_CALL_FLAGS_NO_AUTO_START, call_timeout_ms, NULL, &err);
        if (r) {
            g_variant_unref(r);
        } else if (g_error_matches(err, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD) ||
                   g_error_matches(err, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_INTERFACE) ||
                   g_error_matches(err, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_OBJECT)) {
            /* Not gnome-keyring: Service.Unlock, whose prompt must then finish
             * on its own (e.g. KWallet's empty-password wallet). */
            g_error_free(err);
            GVariant *u = call(SECRETS_PATH, IFACE_SERVICE, "Unlock",
                               g_variant_new("(@ao)", g_variant_new_objv((const char *const[]){coll}, 1)),
                               "(aoo)", "Service.Unlock");
            char *prompt = NULL;
            g_variant_get_child(u, 1, "o", &prompt);
            g_variant_unref(u);
            GVariant *res = run_prompt(prompt, "Service.Unlock");
            if (res)
                g_variant_unref(res);
        } else {
            die_gerror("UnlockWithMasterPassword", err);
        }
    }
    if (!wait_locked(coll, FALSE))
        die(2, "%s still locked %d ms after the unlock call", coll, call_timeout_ms);
    return 0;
}

static int
cmd_is_locked(void)
{
    char *coll = default_collection();
    return collection_locked(coll) ? 0 : 1;
}

static int
cmd_store(Args *a)
{
    if (!a->schema)
        die(2, "store needs --schema NAME");
    /* Byte-exact on every provider: KeePassXC turns text types (application/json among them) into
     * entry passwords, which it may rewrite (invalid UTF-8 replaced). */
    const char *ctype = a->content_type ? a->content_type : "application/octet-stream";
    const char *label = a->label ? a->label : "keyringctl test item";
    GByteArray *secret = read_stdin_all();
    char *coll = default_collection();
    char *item = create_item(coll, label, a->attrs, secret->data, secret->len, ctype, a->replace);
    memset(secret->data, 0, secret->len);
    g_byte_array_unref(secret);
    printf("%s\n", item);
    return 0;
}

static int
cmd_count(Args *a)
{
    guint nu, nl;
    char **items = search(a->attrs, &nu, &nl);
    printf("%u\n", nu + nl);
    g_strfreev(items);
    return 0;
}

static int
cmd_get(Args *a, gboolean want_content_type)
{
    guint nu, nl;
    char **items = search(a->attrs, &nu, &nl);
    if (nu + nl == 0) {
        fprintf(stderr, "keyringctl: no matching item\n");
        return 1;
    }
    if (nu + nl > 1)
        die(2, "%u items match (%u unlocked, %u locked); expected exactly one", nu + nl, nu, nl);
    if (nl)
        die(2, "the matching item %s is locked", items[0]);
    char *session = open_plain_session();
    GVariant *r = call(items[0], IFACE_ITEM, "GetSecret", g_variant_new("(o)", session),
                       "((oayays))", "Item.GetSecret");
    GVariant *sec = g_variant_get_child_value(r, 0);
    if (want_content_type) {
        const char *ct = NULL;
        g_variant_get_child(sec, 3, "&s", &ct);
        printf("%s\n", ct);
        g_variant_unref(sec);
        g_variant_unref(r);
        g_strfreev(items);
        return 0;
    }
    GVariant *val = g_variant_get_child_value(sec, 2);
    gsize len = 0;
    const void *data = g_variant_get_fixed_array(val, &len, 1);
    if (len && fwrite(data, 1, len, stdout) != len)
        die(2, "writing the secret to stdout: %s", g_strerror(errno));
    if (fflush(stdout) != 0)
        die(2, "writing the secret to stdout: %s", g_strerror(errno));
    g_variant_unref(val);
    g_variant_unref(sec);
    g_variant_unref(r);
    g_strfreev(items);
    return 0;
}

static int
cmd_attrs(Args *a)
{
    guint nu, nl;
    char **items = search(a->attrs, &nu, &nl);
    guint n = nu + nl;
    if (n == 0) {
        fprintf(stderr, "keyringctl: no matching item\n");
        return 1;
    }
    char **lines = g_new0(char *, n + 1);
    for (guint i = 0; i < n; i++) {
        GVariant *r = call(items[i], IFACE_PROPS, "Get",
                           g_variant_new("(ss)", IFACE_ITEM, "Attributes"),
                           "(v)", "reading Item.Attributes");
        GVariant *v = NULL;
        g_variant_get(r, "(v)", &v);
        if (!g_variant_is_of_type(v, G_VARIANT_TYPE("a{ss}")))
            die(2, "Item.Attributes of %s has unexpected type %s", items[i],
                g_variant_get_type_string(v));
        gsize na = g_variant_n_children(v);
        char **pairs = g_new0(char *, na + 1);
        for (gsize j = 0; j < na; j++) {
            const char *k = NULL, *val = NULL;
            g_variant_get_child(v, j, "{&s&s}", &k, &val);
            GString *s = g_string_new(NULL);
            append_escaped(s, k);
            g_string_append_c(s, '=');
            append_escaped(s, val);
            pairs[j] = g_string_free(s, FALSE);
        }
        qsort(pairs, na, sizeof *pairs, cmp_strptr);
        lines[i] = g_strjoinv(" ", pairs);
        g_strfreev(pairs);
        g_variant_unref(v);
        g_variant_unref(r);
    }
    qsort(lines, n, sizeof *lines, cmp_strptr);
    for (guint i = 0; i < n; i++)
        printf("%s\n", lines[i]);
    g_strfreev(lines);
    g_strfreev(items);
    if (fflush(stdout) != 0)
        die(2, "writing to stdout: %s", g_strerror(errno));
    return 0;
}

static int
cmd_delete_all(Args *a)
{
    guint nu, nl, deleted = 0;
    char **items = search(a->attrs, &nu, &nl);
    for (guint i = 0; items[i]; i++) {
        GError *err = NULL;
        GVariant *r = g_dbus_connection_call_sync(
            bus, SECRETS_NAME, items[i], IFACE_ITEM, "Delete", NULL, G_VARIANT_TYPE("(o)"),
            G_DBUS_CALL_FLAGS_NO_AUTO_START, call_timeout_ms, NULL, &err);
        if (!r) {
            fprintf(stderr, "keyringctl: deleted %u of %u matching items before an error\n",
                    deleted, nu + nl);
            die_gerror("Item.Delete", err);
        }
        char *prompt = NULL;
        g_variant_get(r, "(o)", &prompt);
        g_variant_unref(r);
        if (strcmp(prompt, "/") != 0) {
            GVariant *res = run_prompt(prompt, "Item.Delete");
            if (res)
                g_variant_unref(res);
        }
        g_free(prompt);
        deleted++;
    }
    printf("%u\n", deleted);
    g_strfreev(items);
    return 0;
}

/* unlock-prompt: observe what the daemon does when an unlock needs a prompt. */
static int
cmd_unlock_prompt(Args *a)
{
    unsigned wait_ms = a->wait_ms ? a->wait_ms : 10000;
    char *coll = default_collection();
    gint64 t0 = g_get_monotonic_time();
    GVariant *r = call(SECRETS_PATH, IFACE_SERVICE, "Unlock",
                       g_variant_new("(@ao)", g_variant_new_objv((const char *const[]){coll}, 1)),
                       "(aoo)", "Service.Unlock");
    char *prompt = NULL;
    g_variant_get_child(r, 1, "o", &prompt);
    g_variant_unref(r);
    printf("Service.Unlock returned prompt %s after %.0f ms\n", prompt,
           (g_get_monotonic_time() - t0) / 1000.0);
    if (strcmp(prompt, "/") == 0) {
        printf("no prompt needed; locked=%s\n", collection_locked(coll) ? "true" : "false");
        return collection_locked(coll) ? 2 : 0;
    }

    PromptState st = { g_main_loop_new(NULL, FALSE), FALSE, FALSE, NULL, NULL };
    guint sub = g_dbus_connection_signal_subscribe(
        bus, NULL, IFACE_PROMPT, "Completed", prompt, NULL, G_DBUS_SIGNAL_FLAGS_NONE,
        on_prompt_completed, &st, NULL);
    gint64 t1 = g_get_monotonic_time();
    GVariant *pr = call(prompt, IFACE_PROMPT, "Prompt", g_variant_new("(s)", ""), "()",
                        "Prompt.Prompt");
    g_variant_unref(pr);
    printf("Prompt.Prompt returned after %.0f ms\n", (g_get_monotonic_time() - t1) / 1000.0);
    guint to = g_timeout_add(wait_ms, on_prompt_timeout, &st);
    g_main_loop_run(st.loop);
    double waited = (g_get_monotonic_time() - t1) / 1000.0;
    g_dbus_connection_signal_unsubscribe(bus, sub);
    if (!st.completed) {
        dismiss_prompt(prompt);
        printf("no Completed signal within %u ms; dismissed the prompt\n", wait_ms);
        return 2;
    }
    g_source_remove(to);
    gboolean locked = collection_locked(coll);
    printf("Completed(dismissed=%s, result=%s) after %.0f ms; collection locked=%s\n",
           st.dismissed ? "true" : "false", st.result, waited, locked ? "true" : "false");
    if (st.dismissed)
        return 1;
    return locked ? 2 : 0;
}

/* stuck-prompter: a prompter that accepts the name and never replies. */
static GDBusMessage *
swallow_calls(GDBusConnection *c, GDBusMessage *m, gboolean incoming, gpointer data)
{
    (void)c; (void)data;
    if (incoming && g_dbus_message_get_message_type(m) == G_DBUS_MESSAGE_TYPE_METHOD_CALL &&
        g_strcmp0(g_dbus_message_get_sender(m), "org.freedesktop.DBus") != 0) {
        g_object_unref(m);
        return NULL; /* dropped: the caller waits for its own timeout */
    }
    return m;
}

static int
cmd_stuck_prompter(void)
{
    g_dbus_connection_add_filter(bus, swallow_calls, NULL, NULL);
    GError *err = NULL;
    GVariant *r = g_dbus_connection_call_sync(
        bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
        "RequestName",
        g_variant_new("(su)", "org.gnome.keyring.SystemPrompter", 4u /* DO_NOT_QUEUE */),
        G_VARIANT_TYPE("(u)"), G_DBUS_CALL_FLAGS_NONE, call_timeout_ms, NULL, &err);
    if (!r)
        die_gerror("RequestName(org.gnome.keyring.SystemPrompter)", err);
    guint32 reply = 0;
    g_variant_get(r, "(u)", &reply);
    g_variant_unref(r);
    if (reply != 1 /* PRIMARY_OWNER */)
        die(2, "could not own org.gnome.keyring.SystemPrompter (RequestName reply %u)", reply);
    alarm(0); /* runs until killed */
    printf("ready\n");
    fflush(stdout);
    g_main_loop_run(g_main_loop_new(NULL, FALSE));
    return 0;
}

/* ------------------------------------------------------------------- main */

static void G_GNUC_NORETURN
usage(void)
{
    fprintf(stderr,
            "usage: keyringctl lock | unlock | is-locked | settle\n"
            "       keyringctl store --schema NAME [--content-type T] [--label L] [--replace] K=V... < secret\n"
            "       keyringctl count|get|content-type|attrs|delete-all [--schema NAME] K=V...\n"
            "       keyringctl unlock-prompt [--wait MS]\n"
            "       keyringctl stuck-prompter\n"
            "exit: 0 ok/true, 1 not found/false, 2 error\n");
    exit(2);
}

int
main(int argc, char **argv)
{
    if (argc < 2)
        usage();
    const char *cmd = argv[1];
    const char *t = g_getenv("KEYRINGCTL_TIMEOUT_MS");
    if (t && *t) {
        char *end = NULL;
        long v = strtol(t, &end, 10);
        if (!end || *end || v < 1 || v > 600000)
            die(2, "KEYRINGCTL_TIMEOUT_MS must be 1..600000");
        call_timeout_ms = (int)v;
    }

    Args a = { 0 };
    gboolean is_store = strcmp(cmd, "store") == 0;
    gboolean takes_attrs = is_store || strcmp(cmd, "count") == 0 || strcmp(cmd, "get") == 0 || strcmp(cmd, "content-type") == 0 ||
                           strcmp(cmd, "attrs") == 0 || strcmp(cmd, "delete-all") == 0;
    gboolean no_args = strcmp(cmd, "lock") == 0 || strcmp(cmd, "unlock") == 0 || strcmp(cmd, "settle") == 0 ||
                       strcmp(cmd, "is-locked") == 0 || strcmp(cmd, "stuck-prompter") == 0;
    gboolean probe = strcmp(cmd, "unlock-prompt") == 0;
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || (!takes_attrs && !no_args && !probe))
        usage();
    if (no_args && argc > 2)
        die(2, "%s takes no arguments", cmd);
    if (!no_args)
        parse_args(argc - 2, argv + 2, &a, is_store, takes_attrs);

    gboolean settles = strcmp(cmd, "lock") == 0 || strcmp(cmd, "settle") == 0; /* up to 16 s more */
    arm_watchdog(a.wait_ms ? a.wait_ms : (probe ? 10000u : settles ? 16000u : 0u));
    connect_bus();

    int rc;
    if (strcmp(cmd, "lock") == 0)
        rc = cmd_lock();
    else if (strcmp(cmd, "settle") == 0)
        rc = cmd_settle();
    else if (strcmp(cmd, "unlock") == 0)
        rc = cmd_unlock();
    else if (strcmp(cmd, "is-locked") == 0)
        rc = cmd_is_locked();
    else if (strcmp(cmd, "stuck-prompter") == 0)
        rc = cmd_stuck_prompter();
    else if (is_store)
        rc = cmd_store(&a);
    else if (strcmp(cmd, "count") == 0)
        rc = cmd_count(&a);
    else if (strcmp(cmd, "get") == 0)
        rc = cmd_get(&a, FALSE);
    else if (strcmp(cmd, "content-type") == 0)
        rc = cmd_get(&a, TRUE);
    else if (strcmp(cmd, "attrs") == 0)
        rc = cmd_attrs(&a);
    else if (strcmp(cmd, "delete-all") == 0)
        rc = cmd_delete_all(&a);
    else
        rc = cmd_unlock_prompt(&a);

    if (fflush(stdout) != 0)
        die(2, "writing to stdout: %s", g_strerror(errno));
    return rc;
}
