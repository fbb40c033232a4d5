/*
 * abi_test: auth environments, the keyring through keyringctl, the provider, and the checks of a
 * restored session.
 */
#include "abi_test.h"

const char *const redirect = "abi-test://portal/redirect";
char sentinel_storage[2];

/* A fresh auth environment id: unique per process and per test case. */
const char *new_env_id(const char *tag) {
    static int counter;
    static char ids[64][96];
    char *id = ids[counter % 64];
    snprintf(id, sizeof ids[0], "abi-test-%ld-%d-%s", (long)getpid(), ++counter, tag);
    return id;
}

portal_auth *new_auth(const char *env_id) {
    portal_auth *auth = NULL;
    CHECK_OK(portal_auth_new(&auth, env_id, redirect, NULL));
    CHECK(auth != NULL);
    CHECK_NO_ERROR();
    return auth;
}

const char *keyringctl_path(void) {
    const char *path = getenv("PORTAL_TEST_KEYRINGCTL");
    if (!path || !*path || strchr(path, '\'')) {
        fprintf(stderr, "abi_test: set PORTAL_TEST_KEYRINGCTL to the keyringctl binary "
                        "(a path without single quotes)\n");
        exit(2);
    }
    return path;
}

/* Runs `keyringctl ARGS` (ARGS is shell text; our ids need no quoting). With `input`, writes
 * input[0..len) to its stdin; with `output`, captures up to cap-1 bytes of stdout (NUL-terminated).
 * Returns the exit status, or -1 if it did not exit normally. */
int keyringctl_io(const char *input, size_t len, char *output, size_t cap, const char *fmt, ...) {
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    int status;
    if (input) {
        snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null", keyringctl_path(), args);
        FILE *p = popen(cmd, "w");
        CHECK_MSG(p != NULL, "popen(%s): %s", cmd, strerror(errno));
        if (len) CHECK(fwrite(input, 1, len, p) == len);
        status = pclose(p);
    } else if (output) {
        snprintf(cmd, sizeof cmd, "'%s' %s", keyringctl_path(), args);
        FILE *p = popen(cmd, "r");
        CHECK_MSG(p != NULL, "popen(%s): %s", cmd, strerror(errno));
        size_t n = fread(output, 1, cap - 1, p);
        output[n] = '\0';
        char drain[4096];
        while (fread(drain, 1, sizeof drain, p) > 0) {
        }
        status = pclose(p);
    } else {
        snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null", keyringctl_path(), args);
        status = system(cmd);
    }
    return (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
}


/* Number of items of `schema` (NULL: any schema) with auth_environment_id=id, locked or not. */
long keyring_count(const char *schema, const char *id) {
    char out[64];
    int rc = schema ? keyringctl_io(NULL, 0, out, sizeof out, "count --schema %s auth_environment_id=%s", schema, id)
                    : keyringctl_io(NULL, 0, out, sizeof out, "count auth_environment_id=%s", id);
    CHECK_MSG(rc == 0, "keyringctl count exited %d", rc);
    return strtol(out, NULL, 10);
}


/* Whether a secret holds an escape gnome-keyring's passwordless key file rewrites: it writes a
 * secret raw into the file and reads it back with g_key_file_get_string, which turns \\, \n,
 * \t, \r and \s into the characters they stand for, whenever the daemon reloads the file (at a
 * moment no test controls: docs/providers.md). JSON's \uXXXX survives. */
static int rewritten_by_key_file(const char *secret, size_t len) {
    for (size_t i = 0; i + 1 < len; i++) {
        if (secret[i] == '\\' && secret[i + 1] != '\0' && strchr("\\ntrs", secret[i + 1])) return 1;
    }
    return 0;
}

/* Stores secret[0..len) as an item of `schema`; `extra_attrs` is appended to the attributes.
 * On the passwordless keyring a secret the key file would rewrite fails the check at once,
 * instead of one run in many when the daemon happens to reload (a version-1 document written
 * there spells its escapes \uXXXX). */
void keyring_store_bytes(const char *schema, const char *id, const char *extra_attrs,
                                const char *secret, size_t len) {
    CHECK_MSG(!(provider_is("gnome-keyring-passwordless") && rewritten_by_key_file(secret, len)),
              "test fault: the passwordless key file would rewrite the escapes in this secret: %.60s", secret);
    int rc = keyringctl_io(secret, len, NULL, 0, "store --schema %s auth_environment_id=%s %s", schema, id,
                           extra_attrs ? extra_attrs : "");
    CHECK_MSG(rc == 0, "keyringctl store exited %d", rc);
}

void keyring_store(const char *schema, const char *id, const char *extra_attrs, const char *secret) {
    keyring_store_bytes(schema, id, extra_attrs, secret, strlen(secret));
}

/* The provider scripts/with-keyring.sh started (--provider); gnome-keyring by default. */
const char *provider(void) {
    const char *p = getenv("PORTAL_TEST_PROVIDER");
    return p && *p ? p : "gnome-keyring";
}

int provider_is(const char *name) { return strcmp(provider(), name) == 0; }

/* Providers whose unlock needs no user: a passwordless gnome-keyring (no prompt at all) and
 * KWallet's empty-password wallet (its prompt completes by itself). */
int unlocks_without_user(void) {
    return provider_is("gnome-keyring-passwordless") || provider_is("kwallet");
}

/* Where the unlock needs no user a lock is undone by any reader (libsecret unlocks on its own),
 * so "locked" is not a state the library can observe there. */
int lock_observable(const char *what) {
    if (provider_is("flatpak")) {
        printf("    SKIP %s in a Flatpak sandbox: the host's keyring is locked from outside "
               "(Tests/flatpak/run.sh: RetrieveSecret answered 2)\n", what);
        return 0;
    }
    if (unlocks_without_user()) {
        printf("    SKIP %s on %s: it unlocks without a user, so a lock is undone by the "
               "library's own read\n", what, provider());
        return 0;
    }
    return 1;
}

/* Restarts the provider daemon (scripts/keyring-restart.sh; "--locked" or "--unlocked"). */
void keyring_restart(const char *how) {
    const char *script = getenv("PORTAL_TEST_KEYRING_RESTART");
    CHECK_MSG(script && *script && !strchr(script, '\''), "PORTAL_TEST_KEYRING_RESTART is unset");
    if (!script || !*script || strchr(script, '\'')) return;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null", script, how);
    int status = system(cmd);
    CHECK_MSG(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s failed", cmd);
}

/* Locks the default collection in the running daemon (keyringctl lock: Service.Lock, or
 * KeePassXC's lockAllDatabases). A keyring locked since login is test_restart's subject. */
void keyring_lock(void) {
    if (provider_is("keepassxc") && keyringctl_io(NULL, 0, NULL, 0, "lock") != 0) {
        /* KeePassXC 2.7.4 cannot be locked over D-Bus while an unlock dialog that an earlier
         * prompt opened (headless: never answered) is open: restart it locked instead. */
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "'%s' --locked >/dev/null", getenv("PORTAL_TEST_KEYRING_RESTART"));
        CHECK_MSG(getenv("PORTAL_TEST_KEYRING_RESTART") && system(cmd) == 0, "keyring-restart.sh --locked failed");
    } else {
        CHECK_MSG(keyringctl_io(NULL, 0, NULL, 0, "lock") == 0, "keyringctl lock failed");
    }
    CHECK_MSG(keyringctl_io(NULL, 0, NULL, 0, "is-locked") == 0, "collection not locked after lock");
}

void keyring_unlock(void) {
    CHECK_MSG(keyringctl_io(NULL, 0, NULL, 0, "unlock") == 0, "keyringctl unlock failed");
    CHECK_MSG(keyringctl_io(NULL, 0, NULL, 0, "is-locked") == 1, "collection still locked after unlock");
}

/* A failed check must not leave the shared test keyring locked for later steps of run.sh. */
int locked_by_us;
void unlock_at_exit(void) {
    if (locked_by_us) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "'%s' unlock >/dev/null", keyringctl_path());
        if (system(cmd) != 0) fprintf(stderr, "abi_test: could not unlock the keyring at exit\n");
    }
}

/* Copies the session's token and checks it equals token[0..len) byte for byte. */
void check_token(const portal_session *session, const char *token, size_t len) {
    char *copy = SENTINEL_STRING;
    CHECK_OK(portal_session_copy_token(session, &copy));
    CHECK(copy != NULL && copy != SENTINEL_STRING);
    if (copy == NULL || copy == SENTINEL_STRING) return; /* reported; nothing to compare or free */
    CHECK_MSG(strlen(copy) == len, "token length %zu, expected %zu", strlen(copy), len);
    CHECK_MSG(memcmp(copy, token, len) == 0, "token bytes differ (length %zu)", len);
    portal_string_free(copy);
}

void check_session(const portal_session *session, const char *env_id, const char *user,
                          const char *token) {
    CHECK(session != NULL);
    const char *got_user = portal_session_get_end_user_id(session);
    CHECK_NO_ERROR();
    CHECK_MSG(got_user && strcmp(got_user, user) == 0, "end user \"%s\", expected \"%s\"",
              got_user ? got_user : "(null)", user);
    const char *got_env = portal_session_get_auth_environment_id(session);
    CHECK_NO_ERROR();
    CHECK_MSG(got_env && strcmp(got_env, env_id) == 0, "auth environment \"%s\", expected \"%s\"",
              got_env ? got_env : "(null)", env_id);
    check_token(session, token, strlen(token));
}

/* Restores through `auth` and checks the result (user NULL: signed out). */
void check_restore(portal_auth *auth, const char *env_id, const char *user, const char *token) {
    portal_session *session = SENTINEL_SESSION;
    CHECK_OK(portal_auth_restore_session(auth, &session));
    CHECK_NO_ERROR();
    CHECK(session != SENTINEL_SESSION);
    if (!user) {
        CHECK_MSG(session == NULL, "expected signed out (NULL session)");
        return;
    }
    check_session(session, env_id, user, token);
    portal_session_free(session);
}

/* A token of exactly n bytes of valid UTF-8 mixing ASCII, JSON-special characters, control
 * characters and multi-byte characters. Caller frees. */
char *make_token(size_t n) {
    /* No whitespace or control characters: persist refuses them. */
    static const char *const units[] = {"a", "Z", "0", "-", "_", ".", "~", "\"", "\\", "/", "\\n",
                                        "\\t", "{", "}", "\xc3\xa9", "\xe6\xbc\xa2", "\xf0\x9f\x94\x91"};
    char *t = malloc(n + 1);
    CHECK(t != NULL);
    size_t len = 0, i = 0;
    while (len < n) {
        const char *u = units[i++ % (sizeof units / sizeof units[0])];
        size_t ul = strlen(u);
        if (len + ul > n) u = "x", ul = 1;
        memcpy(t + len, u, ul);
        len += ul;
    }
    t[0] = 'T'; /* not blank, whatever n */
    t[n] = '\0';
    return t;
}
