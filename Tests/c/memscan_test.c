/*
 * memscan_test.c — no copy of the Client Session Token is left in this process's memory after
 * each API path, once its handles are freed.
 *
 *   scripts/with-keyring.sh scripts/with-portal-api.sh build/c/memscan_test   (Tests/c/run.sh)
 *
 * Paths, each with its own token (so a copy is attributed to the path that left it):
 *   persist-file the same into a file keyring (PORTAL_KEYRING_BACKEND=file:… with a master
 *               secret file: the file backend a Flatpak sandbox uses, outside one), three times;
 *   persist     portal_auth_persist_session, then portal_session_free / portal_auth_free;
 *   restore     a session stored by another process (portal-session persist), restored here;
 *   sign-in     a magic-link grant from the fake Portal API exchanged by
 *               portal_auth_handle_redirect (the CST is made by the server: this process first
 *               sees it through the library);
 *   request     portal_new (validation request with the bearer) + portal_request with a body out
 *               (portal_string_free), on a restored session;
 *   nul-body    a response body "ok\0<token>" from a loopback server (portal_request,
 *               portal_string_free must wipe past the NUL);
 *   invalidate  portal_request answered 401 (the token was revoked): the session is invalidated,
 *               its item deleted, the listener fired; then portal_session_invalidate.
 *   the _async forms of these (docs/security.md, "Token copies left in memory"): persist-async,
 *   restore-async, sign-in-async (portal_auth_handle_redirect_async), request-async (the bearer
 *   of portal_request_async to the Portal API), invalidate-401-async (portal_request_async
 *   answered 401, then portal_session_invalidate_async), invalidate-async
 *   (portal_session_invalidate_async on a live session: the token also leaves memory before the
 *   handle is freed), nul-body-async (portal_request_async's body "ok\0<token>");
 *   the other exports that take a secret, each blocking and async: report (the rejected token
 *   of portal_report_unauthorized and _async), api-key (portal_new_with_api_key; no _async
 *   form), totp-jwt (the user JWT of portal_auth_verify_totp and _async, answered 401 by the API);
 *   core-dump   a held session's token is left out of a gcore dump of this
 *               process (MADV_DONTDUMP pages); control: a held copy_token string is in it.
 * After each path every readable, writable mapping of /proc/self/maps is read through
 * /proc/self/mem (heap, anonymous mappings, thread stacks, .data/.bss; a read error skips the
 * rest of a mapping) and the occurrences of the token's bytes 16..end are counted: free() writes
 * its list links over the first 16 bytes of a freed block, so a full-token search would miss a
 * freed, unwiped copy. So are those of its stored form (stored_form: base64url, as a session
 * document holds it; bytes 16..end as well): a copy of a stored document — the secret of a
 * file-keyring item copied into GLib's heap on its way into the file — holds no byte
 * of the token as such. Both counts must be 0 on every path.
 *
 * This program never keeps a token in clear: it holds it XOR-masked, and wipes every clear copy
 * it makes for a call (or reads from a child's pipe) at once. A control check makes sure the
 * scan sees a copy: a held portal_session_copy_token string must be found.
 *
 * PORTAL_MEMSCAN_REPORT=1 prints the counts without failing (for before/after figures).
 * Exit 0 when every check passed; every failed check is reported.
 */
#define _GNU_SOURCE
#include <portal_keyring.h>
#include "check.h"

#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_TOKEN 4096
#define SKIP 16 /* malloc's free-list links overwrite a freed block's first 16 bytes */
#define MASK 0x3C

static int report_only;

/* A token this program knows only masked. */
struct marker {
    unsigned char masked[MAX_TOKEN];
    size_t len;
};

static void make_marker_of(struct marker *m, const char *label, size_t len) {
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
    size_t prefix = strlen(label);
    m->len = len;
    for (size_t i = 0; i < m->len; i++) {
        char c = i < prefix ? label[i] : alphabet[random() % 64];
        m->masked[i] = (unsigned char)c ^ MASK;
    }
}

static void make_marker(struct marker *m, const char *label) { make_marker_of(m, label, 160); }

/* Takes over a clear token (masking it) and wipes the clear bytes. */
static void adopt_marker(struct marker *m, char *clear, size_t len) {
    m->len = len < MAX_TOKEN ? len : MAX_TOKEN;
    for (size_t i = 0; i < m->len; i++) m->masked[i] = (unsigned char)clear[i] ^ MASK;
    explicit_bzero(clear, len);
}

static char *marker_copy(const struct marker *m) {
    char *plain = malloc(m->len + 1);
    if (!plain) abort();
    for (size_t i = 0; i < m->len; i++) plain[i] = (char)(m->masked[i] ^ MASK);
    plain[m->len] = '\0';
    return plain;
}

static void drop(char *plain) {
    explicit_bzero(plain, strlen(plain));
    free(plain);
}

static int show_where;
static const char *scan_mapping;
static unsigned long scan_base;

/* PORTAL_MEMSCAN_WHERE=1: where each copy is, with the 40 bytes before it (never the token). */
static void show(const unsigned char *p, size_t i) {
    char context[41];
    size_t from = i >= SKIP + 40 ? i - SKIP - 40 : 0, n = 0;
    for (size_t k = from; k + SKIP < i && n < 40; k++) context[n++] = p[k] >= 0x20 && p[k] < 0x7f ? (char)p[k] : '.';
    context[n] = '\0';
    printf("      at %#lx in %.*s after \"%s\"\n", scan_base + i, (int)strcspn(scan_mapping, "\n"), scan_mapping, context);
}

static long scan_buffer(const struct marker *m, const unsigned char *p, size_t len) {
    const size_t tail = m->len - SKIP;
    const unsigned char first = m->masked[SKIP] ^ MASK;
    long found = 0;
    for (size_t i = 0; i + tail <= len; i++) {
        if (p[i] != first) continue;
        size_t k = 1;
        while (k < tail && p[i + k] == (unsigned char)(m->masked[SKIP + k] ^ MASK)) k++;
        if (k == tail) {
            if (show_where) show(p, i);
            found++;
            i += tail - 1;
        }
    }
    return found;
}

/* Copies of the marker's bytes SKIP..end in every readable, writable mapping. The mappings are
 * read through /proc/self/mem in chunks (with an overlap), so the scanner's own buffer holds a
 * copy only transiently and is wiped; a chunk is never a copy of itself because the buffer is an
 * mmap'd region outside the scan (it is skipped by address). */
static long count_copies(const struct marker *m) {
    enum { CHUNK = 1 << 20 };
    static unsigned char *buffer;
    if (!buffer) buffer = malloc(CHUNK + MAX_TOKEN);
    if (!buffer) abort();
    FILE *maps = fopen("/proc/self/maps", "r");
    int mem = open("/proc/self/mem", O_RDONLY);
    if (!maps || mem < 0) {
        if (maps) fclose(maps);
        if (mem >= 0) close(mem);
        return -1;
    }
    char line[1024];
    long total = 0;
    uintptr_t skip_lo = (uintptr_t)buffer, skip_hi = skip_lo + CHUNK + MAX_TOKEN;
    while (fgets(line, sizeof line, maps)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3) continue;
        if (perms[0] != 'r' || perms[1] != 'w') continue;
        if (strstr(line, "[vvar]") || strstr(line, "[vsyscall]")) continue;
        size_t overlap = m->len - SKIP - 1;
        for (unsigned long at = lo; at < hi;) {
            size_t want = hi - at < CHUNK ? hi - at : CHUNK;
            ssize_t got = pread(mem, buffer, want, (off_t)at);
            if (got <= 0) break;
            /* The scanner's own buffer is read as it is being overwritten: blank its range. */
            for (ssize_t i = 0; i < got; i++)
                if (at + (uintptr_t)i >= skip_lo && at + (uintptr_t)i < skip_hi) buffer[i] = 0;
            scan_mapping = strchr(line, '/') ? strchr(line, '/') : strchr(line, '[') ? strchr(line, '[') : "anonymous";
            scan_base = at;
            total += scan_buffer(m, buffer, (size_t)got);
            if ((size_t)got < want || at + (size_t)got >= hi) break;
            at += (size_t)got - overlap;
        }
    }
    explicit_bzero(buffer, CHUNK + MAX_TOKEN);
    close(mem);
    fclose(maps);
    return total;
}

static const char *api_url, *api_host, *cli;

/* Runs a shell command; its first output line into out (if given). */
static int run(const char *command, char *out, size_t out_size) {
    FILE *p = popen(command, "r");
    if (!p) return -1;
    char line[2048] = "";
    if (!fgets(line, sizeof line, p)) line[0] = '\0';
    int rc = pclose(p);
    line[strcspn(line, "\n")] = '\0';
    if (out) snprintf(out, out_size, "%s", line);
    explicit_bzero(line, sizeof line);
    return rc;
}

/* A JSON POST to the fake Portal API's admin API; prints data[field]. The token in the command
 * (when there is one) is wiped right after. */
static int admin(const char *route, const char *json, const char *field, char *out, size_t out_size) {
    char command[4096];
    snprintf(command, sizeof command,
             "python3 -c 'import json,sys,urllib.request as u; r=u.Request(sys.argv[1],data=sys.argv[2].encode(),"
             "headers={\"Content-Type\":\"application/json\"}); print(json.load(u.urlopen(r))[\"data\"].get(sys.argv[3]) or \"\")'"
             " '%s/_admin/%s' '%s' '%s'", api_url, route, json, field);
    int rc = run(command, out, out_size);
    explicit_bzero(command, sizeof command);
    return rc;
}

/* Issues the marker as a CST of end user `user` on the fake Portal API. */
static void issue(const struct marker *m, const char *user) {
    char *token = marker_copy(m);
    char json[MAX_TOKEN + 128];
    snprintf(json, sizeof json, "{\"endUserId\":\"%s\",\"token\":\"%s\"}", user, token);
    drop(token);
    CHECK_MSG(admin("sessions", json, "sessionId", NULL, 0) == 0, "issue a session on the fake Portal API");
    explicit_bzero(json, sizeof json);
}

static void revoke_marker(const struct marker *m) {
    char *token = marker_copy(m);
    char json[MAX_TOKEN + 64];
    snprintf(json, sizeof json, "{\"token\":\"%s\"}", token);
    drop(token);
    CHECK_MSG(admin("revoke", json, "revoked", NULL, 0) == 0, "revoke the token");
    explicit_bzero(json, sizeof json);
}

/* Stores the marker from another process: `portal-session persist` (token on stdin), so that
 * this process first meets the token when it restores it. */
static void persist_elsewhere(const struct marker *m, const char *env_id, const char *user) {
    char command[1024];
    snprintf(command, sizeof command, "'%s' --env '%s' persist --end-user-id '%s' >/dev/null", cli, env_id, user);
    FILE *p = popen(command, "w");
    CHECK_MSG(p != NULL, "popen %s", command);
    if (!p) return;
    setvbuf(p, NULL, _IONBF, 0); /* no stdio buffer keeps a copy */
    char *token = marker_copy(m);
    fputs(token, p);
    drop(token);
    CHECK_MSG(pclose(p) == 0, "portal-session persist");
}

/* The copies a path is known to leave: none. (Sign-in left 1 or 2 until SignIn.swift decoded the
 * exchange response in place and zeroed the decoder's token String.) Kept as a function so that a
 * path with a documented, unavoidable copy can say so here. */
static long known_copies(const char *path) { (void)path; return 0; }

/* The token as a keyring stores it: the session document holds it base64url-encoded (unpadded,
 * from the token's first byte: SessionDocument.encode), so a copy of a stored document (a
 * secret copied into GLib's heap on its way into a keyring file) holds these bytes and
 * none of the token's own. Masked like the marker; the clear bytes are wiped at once. */
static void stored_form(const struct marker *m, struct marker *out) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned char clear[MAX_TOKEN];
    for (size_t i = 0; i < m->len; i++) clear[i] = m->masked[i] ^ MASK;
    size_t o = 0, i = 0;
    for (; i + 3 <= m->len && o + 4 <= MAX_TOKEN; i += 3) {
        unsigned long n = (unsigned long)clear[i] << 16 | (unsigned long)clear[i + 1] << 8 | clear[i + 2];
        for (int shift = 18; shift >= 0; shift -= 6) out->masked[o++] = (unsigned char)alphabet[(n >> shift) & 63] ^ MASK;
    }
    size_t rest = m->len - i;
    if (rest > 0 && o + rest + 1 <= MAX_TOKEN) {
        unsigned long n = (unsigned long)clear[i] << 16 | (rest == 2 ? (unsigned long)clear[i + 1] << 8 : 0);
        for (size_t k = 0; k <= rest; k++) out->masked[o++] = (unsigned char)alphabet[(n >> (18 - 6 * k)) & 63] ^ MASK;
    }
    out->len = o;
    explicit_bzero(clear, sizeof clear);
}

static int paths_failed;
/* No copy of the token, nor of its stored form (stored_form), is left in memory. */
static void expect_none(const char *path, const struct marker *m) {
    struct marker stored;
    stored_form(m, &stored);
    show_where = getenv("PORTAL_MEMSCAN_WHERE") != NULL;
    long n = count_copies(m), s = count_copies(&stored);
    show_where = 0;
    printf("  %-20s %ld cop%s of the token, %ld of its stored form, after the handles were freed\n", path, n,
           n == 1 ? "y" : "ies", s);
    if (report_only) return;
    long known = known_copies(path);
    CHECK_MSG(n <= known, "%s: %ld copies of the token remain in memory (known and documented: at most %ld)", path, n, known);
    CHECK_MSG(s == 0, "%s: %ld copies of the token's stored form (base64url, as in a session document) remain in memory", path, s);
    if (n > known || s > 0) paths_failed++;
}

static portal_auth *new_auth(const char *label, char *env_id, size_t size) {
    snprintf(env_id, size, "c-memscan-%s-%d", label, (int)getpid());
    portal_auth *auth = NULL;
    CHECK_MSG(portal_auth_new(&auth, env_id, "portalkeyring://auth/callback", api_host) == PORTAL_OK, "portal_auth_new");
    CHECK_MSG(portal_auth_set_magic_link(auth, "login@example.com", "tpl-c") == PORTAL_OK, "portal_auth_set_magic_link");
    return auth;
}

/* ---- the non-blocking exports: one pollable queue, dispatched until the callback ran */

static portal_completion_queue *queue;
static int async_done;
static portal_status async_status;
static long async_http_status;
static portal_redirect_kind async_kind;
static portal_session *async_session;
static char *async_body;
static size_t async_body_len;

static void on_done(portal_status status, portal_result *result, const char *message, void *user_data) {
    (void)message;
    (void)user_data;
    async_status = status;
    async_http_status = result->http_status;
    if (result->body) { /* take it: freed by the path with portal_string_free */
        async_body = result->body;
        async_body_len = result->body_len;
        result->body = NULL;
    }
    if (result->session) { /* take it: freed by the path with portal_session_free */
        async_session = result->session;
        result->session = NULL;
    }
    async_done = 1;
}

static void on_sign_in_done(portal_status status, portal_sign_in_result *result, const char *message, void *user_data) {
    (void)message;
    (void)user_data;
    async_status = status;
    async_kind = result->kind;
    if (result->session) {
        async_session = result->session;
        result->session = NULL;
    }
    async_done = 1;
}

/* Dispatches the queue until the callback ran (10 s at most); returns its status. */
static portal_status finish_async(portal_status started) {
    if (started != PORTAL_OK) return started;
    struct pollfd fd = {.fd = portal_completion_queue_get_fd(queue), .events = POLLIN};
    for (int i = 0; i < 1000 && !async_done; i++) {
        if (poll(&fd, 1, 10) > 0) portal_completion_queue_dispatch(queue, NULL);
    }
    CHECK_MSG(async_done, "the completion never ran");
    async_done = 0;
    return async_status;
}

/* The session the last callback delivered (NULL when none); the caller frees it. */
static portal_session *take_async_session(void) {
    portal_session *session = async_session;
    async_session = NULL;
    return session;
}

static void path_persist(void) {
    struct marker m;
    make_marker(&m, "persist-");
    char env_id[96];
    portal_auth *auth = new_auth("persist", env_id, sizeof env_id);
    char *token = marker_copy(&m);
    portal_session *session = NULL;
    CHECK_MSG(portal_auth_persist_session(auth, "memscan-user", token, &session) == PORTAL_OK && session, "persist");
    drop(token);
    portal_session_free(session);
    CHECK_MSG(portal_auth_clear_persisted_session(auth) == PORTAL_OK, "clear");
    portal_auth_free(auth);
    expect_none("persist", &m);
}

/* The file keyring's persist (the backend of a Flatpak sandbox; here named by
 * PORTAL_KEYRING_BACKEND=file:… with a master secret file, outside any sandbox): the item's
 * secret (the session document) is serialized and sealed into the file without a copy in
 * GLib's heap. The variables are read by portal_auth_new, so they are set around it
 * only, before any library thread runs. Tests/flatpak/c.sh runs every path in a sandbox too,
 * where the file keyring is the Secret portal's. */
static void path_persist_file(void) {
    char dir[] = "/tmp/memscan-file-XXXXXX", keyring[128], secret[128], backend[160];
    CHECK_MSG(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(keyring, sizeof keyring, "%s/keyrings/default.keyring", dir);
    snprintf(secret, sizeof secret, "%s/master-secret", dir);
    snprintf(backend, sizeof backend, "file:%s", keyring);
    int fd = open(secret, O_WRONLY | O_CREAT | O_EXCL, 0600);
    CHECK_MSG(fd >= 0 && write(fd, "memscan-test-master-secret-memscan-test-master-secret-memscan-te", 64) == 64, "master secret file");
    if (fd >= 0) close(fd);
    setenv("PORTAL_KEYRING_BACKEND", backend, 1);
    setenv("PORTAL_KEYRING_MASTER_SECRET_FILE", secret, 1);
    struct marker m;
    make_marker(&m, "persist-file-");
    char env_id[96];
    portal_auth *auth = new_auth("persist-file", env_id, sizeof env_id);
    unsetenv("PORTAL_KEYRING_BACKEND");
    unsetenv("PORTAL_KEYRING_MASTER_SECRET_FILE");
    /* Three sign-ins of the same token (each replacing the one before): a copy freed unwiped by
     * one persist may be overwritten by the next allocation, hardly all three. */
    for (int round = 0; round < 3; round++) {
        char *token = marker_copy(&m);
        portal_session *session = NULL;
        CHECK_MSG(portal_auth_persist_session(auth, "memscan-user", token, &session) == PORTAL_OK && session,
              "persist into a file keyring");
        drop(token);
        portal_session_free(session);
    }
    struct stat info;
    CHECK_MSG(stat(keyring, &info) == 0 && info.st_size > 0, "the file keyring %s was written", keyring);
    CHECK_MSG(portal_auth_clear_persisted_session(auth) == PORTAL_OK, "clear");
    portal_auth_free(auth);
    expect_none("persist-file", &m);
    char command[300];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    CHECK_MSG(system(command) == 0, "%s", command);
}

static void path_restore(int async) {
    struct marker m;
    make_marker(&m, async ? "restore-async-" : "restore-");
    char env_id[96];
    portal_auth *auth = new_auth(async ? "restore-async" : "restore", env_id, sizeof env_id);
    persist_elsewhere(&m, env_id, "memscan-user");
    CHECK_MSG(count_copies(&m) == 0, "the token is in memory before this process restored it");
    portal_session *session = NULL;
    if (async) {
        CHECK_MSG(finish_async(portal_auth_restore_session_async(auth, queue, on_done, NULL, NULL, NULL)) == PORTAL_OK,
              "restore_async");
        session = take_async_session();
        CHECK_MSG(session != NULL, "restore_async delivered the stored session");
    } else {
        CHECK_MSG(portal_auth_restore_session(auth, &session) == PORTAL_OK && session, "restore");
    }
    /* Control: a held copy is seen by the scan. */
    char *copy = NULL;
    CHECK_MSG(session && portal_session_copy_token(session, &copy) == PORTAL_OK && copy, "copy_token");
    long held = count_copies(&m);
    CHECK_MSG(held >= 1, "the scan does not see a held copy of the token (%ld): scanner blind", held);
    portal_string_free(copy);
    portal_session_free(session);
    CHECK_MSG(portal_auth_clear_persisted_session(auth) == PORTAL_OK, "clear");
    portal_auth_free(auth);
    expect_none(async ? "restore-async" : "restore", &m);
}

static void path_sign_in(int async) {
    char env_id[96];
    portal_auth *auth = new_auth(async ? "signin-async" : "signin", env_id, sizeof env_id);
    char redirect[2048] = "";
    CHECK_MSG(admin("grants", "{\"kind\":\"magic_link\",\"endUserId\":\"eu-memscan\",\"redirectUrl\":\"portalkeyring://auth/callback\"}",
                "redirectUrl", redirect, sizeof redirect) == 0 && redirect[0],
          "mint a magic-link grant");
    /* The sign-in is started first, as an app does: handle_redirect refuses an unsolicited one. */
    CHECK_MSG(portal_auth_send_magic_link(auth, "memscan@example.com") == PORTAL_OK, "send_magic_link");
    portal_redirect_kind kind = PORTAL_REDIRECT_NOT_HANDLED;
    portal_session *session = NULL;
    if (async) {
        async_kind = PORTAL_REDIRECT_NOT_HANDLED;
        CHECK_MSG(finish_async(portal_auth_handle_redirect_async(auth, redirect, 0, queue, on_sign_in_done, NULL, NULL, NULL)) ==
                  PORTAL_OK,
              "handle_redirect_async");
        kind = async_kind;
        session = take_async_session();
        CHECK_MSG(kind == PORTAL_REDIRECT_AUTHENTICATED && session, "handle_redirect_async authenticated (kind %d)", (int)kind);
    } else {
        CHECK_MSG(portal_auth_handle_redirect(auth, redirect, &kind, &session, NULL, NULL) == PORTAL_OK &&
                  kind == PORTAL_REDIRECT_AUTHENTICATED && session,
              "handle_redirect");
    }
    struct marker m = {.len = 0};
    char *token = NULL;
    if (session && portal_session_copy_token(session, &token) == PORTAL_OK && token) {
        size_t len = strlen(token);
        CHECK_MSG(len > SKIP + 8 && len < MAX_TOKEN, "the server's CST is %zu bytes", len);
        adopt_marker(&m, token, len); /* wipes token's bytes */
    }
    portal_string_free(token);
    portal_session_free(session);
    CHECK_MSG(portal_auth_clear_persisted_session(auth) == PORTAL_OK, "clear");
    portal_auth_free(auth);
    if (m.len > SKIP + 8) expect_none(async ? "sign-in-async" : "sign-in", &m);
}

static void path_body_with_nul(portal *p, int async);

/* Copies of the marker in a file (a core dump), read in chunks with an overlap. */
static long count_in_file(const struct marker *m, const char *path) {
    enum { CHUNK = 1 << 20 };
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    unsigned char *buffer = malloc(CHUNK);
    if (!buffer) abort();
    long total = 0;
    size_t overlap = m->len - SKIP - 1;
    off_t at = 0;
    for (;;) {
        ssize_t got = pread(fd, buffer, CHUNK, at);
        if (got <= 0) break;
        total += scan_buffer(m, buffer, (size_t)got);
        if (got < CHUNK) break;
        at += got - (ssize_t)overlap;
    }
    explicit_bzero(buffer, CHUNK);
    free(buffer);
    close(fd);
    return total;
}

/* gcore of this process; the number of marker copies in the dump, or -1. */
static long copies_in_core(const struct marker *m) {
    char prefix[128], command[512], core[160];
    snprintf(prefix, sizeof prefix, "/tmp/memscan-core.%d", (int)getpid());
    snprintf(core, sizeof core, "%s.%d", prefix, (int)getpid());
    unlink(core);
    snprintf(command, sizeof command, "gcore -o '%s' %d >/dev/null 2>&1", prefix, (int)getpid());
    if (system(command) != 0) return -1;
    long n = count_in_file(m, core);
    unlink(core);
    return n;
}

/* Core dumps: a held session's token lives in MADV_DONTDUMP memory, so gcore
 * of the host leaves it out, while this process's own scan sees it. Two sizes: a 160-byte token
 * (a slot of the library's secret pool) and a 3000-byte one (pages of its own). Control: a
 * caller-owned portal_session_copy_token string (ordinary heap) is in the dump. */
static void core_dump_case(const char *label, size_t len) {
    struct marker m;
    make_marker_of(&m, "core-dump-", len);
    char env_id[96];
    portal_auth *auth = new_auth(label, env_id, sizeof env_id);
    persist_elsewhere(&m, env_id, "memscan-user");
    portal_session *session = NULL;
    CHECK_MSG(portal_auth_restore_session(auth, &session) == PORTAL_OK && session, "restore");
    long live = count_copies(&m), dumped = copies_in_core(&m);
    printf("  core-dump   a held session (%zu-byte token): %ld cop%s in memory, %ld in a gcore dump\n", len, live,
           live == 1 ? "y" : "ies", dumped);
    CHECK_MSG(live >= 1, "the held session's token is not in memory (%ld): scanner blind", live);
    CHECK_MSG(dumped == 0, "gcore dumped %ld copies of a held session's %zu-byte token (MADV_DONTDUMP; -1: gcore failed)", dumped, len);
    char *copy = NULL;
    CHECK_MSG(session && portal_session_copy_token(session, &copy) == PORTAL_OK && copy, "copy_token");
    long control = copies_in_core(&m);
    CHECK_MSG(control >= 1, "control: gcore does not show a caller-owned token copy (%ld): the dump check proves nothing", control);
    portal_string_free(copy);
    portal_session_free(session);
    CHECK_MSG(portal_auth_clear_persisted_session(auth) == PORTAL_OK, "clear");
    portal_auth_free(auth);
}

static void path_core_dump(void) {
    core_dump_case("core-small", 160);
    core_dump_case("core-large", 3000);
}

static void on_invalidated(void *user_data) { (*(int *)user_data)++; }

/* The bearer of a request to the Portal API (blocking or _async); with `invalidate` the token
 * is revoked first, so the request is answered 401 and invalidates the session, which is then
 * invalidated by the caller too (portal_session_invalidate or _async). */
static void path_request(int invalidate, int async) {
    static const char *labels[2][2] = {{"request", "request-async"}, {"invalidate", "invalidate-401-async"}};
    const char *label = labels[invalidate][async];
    struct marker m;
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s-", label);
    make_marker(&m, prefix);
    char env_id[96];
    portal_auth *auth = new_auth(label, env_id, sizeof env_id);
    issue(&m, "eu-memscan");
    persist_elsewhere(&m, env_id, "eu-memscan");
    portal_session *session = NULL;
    CHECK_MSG(portal_auth_restore_session(auth, &session) == PORTAL_OK && session, "restore");
    portal *p = NULL;
    CHECK_MSG(session && portal_new(&p, session, api_host) == PORTAL_OK && p, "portal_new");
    int fired = 0;
    uint64_t listener = 0;
    CHECK_MSG(p && portal_on_session_invalidated(p, on_invalidated, &fired, NULL, &listener) == PORTAL_OK, "listener");
    if (invalidate) revoke_marker(&m);
    long status = 0;
    char *body = NULL;
    size_t body_len = 0;
    portal_status st = PORTAL_ERR_INTERNAL;
    if (p && async) {
        async_http_status = 0;
        st = finish_async(portal_request_async(p, "GET", "/api/v3/clients/me", NULL, queue, on_done, NULL, NULL, NULL));
        status = async_http_status;
        body = async_body;
        body_len = async_body_len;
        async_body = NULL;
    } else if (p) {
        st = portal_request(p, "GET", "/api/v3/clients/me", NULL, &status, &body, &body_len);
    }
    if (invalidate) {
        CHECK_MSG((st == PORTAL_OK && status == 401) || st == PORTAL_ERR_SESSION_INVALIDATED, "a revoked token gets 401 (status %d, HTTP %ld)", st, status);
        if (async)
            CHECK_MSG(finish_async(portal_session_invalidate_async(session, queue, on_done, NULL, NULL, NULL)) == PORTAL_OK,
                  "portal_session_invalidate_async");
        else
            CHECK_MSG(portal_session_invalidate(session) == PORTAL_OK, "portal_session_invalidate");
    } else {
        CHECK_MSG(st == PORTAL_OK && status == 200 && body && body_len > 0, "request (status %d, HTTP %ld)", st, status);
    }
    portal_string_free(body);
    if (!invalidate && !async && p) path_body_with_nul(p, 0);
    if (!invalidate && !async && p) path_body_with_nul(p, 1);
    /* Delivery is asynchronous (a library thread): wait for it, at most 10 s. */
    for (int i = 0; invalidate && fired == 0 && i < 1000; i++) usleep(10000);
    portal_free(p);
    if (invalidate) CHECK_MSG(fired == 1, "the listener fired once (%d)", fired);
    portal_session_free(session);
    CHECK_MSG(portal_auth_clear_persisted_session(auth) == PORTAL_OK, "clear");
    portal_auth_free(auth);
    expect_none(label, &m);
}

/* portal_session_invalidate_async on a live session: the token leaves memory while the caller
 * still holds the handle (dropped before the call returns), and the stored item is deleted. */
static void path_invalidate_async(void) {
    struct marker m;
    make_marker(&m, "invalidate-async-");
    char env_id[96];
    portal_auth *auth = new_auth("invalidate-async", env_id, sizeof env_id);
    persist_elsewhere(&m, env_id, "memscan-user");
    portal_session *session = NULL;
    CHECK_MSG(portal_auth_restore_session(auth, &session) == PORTAL_OK && session, "restore");
    long held = count_copies(&m);
    CHECK_MSG(held >= 1, "the restored session's token is not in memory (%ld): scanner blind", held);
    CHECK_MSG(session && finish_async(portal_session_invalidate_async(session, queue, on_done, NULL, NULL, NULL)) == PORTAL_OK,
          "portal_session_invalidate_async");
    long after = count_copies(&m);
    CHECK_MSG(after == 0, "%ld copies of the token remain while the invalidated session's handle is held", after);
    char *copy = NULL;
    CHECK_MSG(session && portal_session_copy_token(session, &copy) == PORTAL_ERR_SESSION_INVALIDATED && !copy,
          "the invalidated session hands out no token");
    portal_session *again = NULL;
    CHECK_MSG(portal_auth_restore_session(auth, &again) == PORTAL_OK && !again, "the stored item was deleted");
    portal_session_free(again);
    portal_session_free(session);
    portal_auth_free(auth);
    expect_none("invalidate-async", &m);
}

/* A response body with a NUL byte before the token: portal_string_free must wipe the whole
 * body (the length recorded when it was handed out), not stop at the first NUL. The body comes
 * from a one-shot loopback HTTP server (Tests/c/one_shot_server.py, another process) through
 * portal_request to its absolute URL (no bearer: not the Portal API host). */
static void path_body_with_nul(portal *p, int async) {
    struct marker m;
    make_marker(&m, async ? "nul-body-async-" : "nul-body-");
    char dir[512], port_file[600], command[1400];
    snprintf(dir, sizeof dir, "%s", __FILE__);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0'; else snprintf(dir, sizeof dir, ".");
    snprintf(port_file, sizeof port_file, "/tmp/memscan-port.%d", (int)getpid());
    unlink(port_file);
    snprintf(command, sizeof command, "python3 '%s/one_shot_server.py' '%s'", dir, port_file);
    FILE *server = popen(command, "w");
    CHECK_MSG(server != NULL, "start %s", command);
    if (!server) return;
    setvbuf(server, NULL, _IONBF, 0);
    char *token = marker_copy(&m);
    fputs(token, server);
    fputs("\n", server);
    drop(token);
    char port[16] = "";
    for (int i = 0; i < 1000 && !port[0]; i++) { /* the server writes its port at once; 10 s at most */
        FILE *f = fopen(port_file, "r");
        if (f) {
            if (!fgets(port, sizeof port, f)) port[0] = '\0';
            fclose(f);
        }
        if (!port[0]) usleep(10000);
    }
    unlink(port_file);
    CHECK_MSG(port[0] != '\0', "the one-shot server did not start");
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%s/body", port);
    long status = 0;
    char *body = NULL;
    size_t body_len = 0;
    if (async) {
        status = 200;
        CHECK_MSG(port[0] && finish_async(portal_request_async(p, "GET", url, NULL, queue, on_done, NULL, NULL, NULL)) == PORTAL_OK,
              "request_async to the one-shot server");
        body = async_body;
        body_len = async_body_len;
        async_body = NULL;
    } else {
        CHECK_MSG(port[0] && portal_request(p, "GET", url, NULL, &status, &body, &body_len) == PORTAL_OK, "request");
    }
    CHECK_MSG(status == 200 && body && body_len == 3 + m.len && memcmp(body, "ok", 3) == 0,
          "request to the one-shot server (HTTP %ld, %zu bytes)", status, body_len);
    portal_string_free(body);
    pclose(server);
    expect_none(async ? "nul-body-async" : "nul-body", &m);
}

static void path_persist_async(void) {
    struct marker m;
    make_marker(&m, "persist-async-");
    char env_id[96];
    portal_auth *auth = new_auth("persist-async", env_id, sizeof env_id);
    char *token = marker_copy(&m);
    portal_status st = portal_auth_persist_session_async(auth, "memscan-user", token, queue, on_done, NULL, NULL, NULL);
    drop(token);
    CHECK_MSG(finish_async(st) == PORTAL_OK, "persist_async");
    portal_session *session = take_async_session();
    CHECK_MSG(session != NULL, "persist_async delivered the session");
    portal_session_free(session);
    CHECK_MSG(portal_auth_clear_persisted_session(auth) == PORTAL_OK, "clear");
    portal_auth_free(auth);
    expect_none("persist-async", &m);
}

/* The rejected token of report_unauthorized (another token than the session's: nothing is
 * invalidated, only the argument's copies count). */
static void path_report(void) {
    struct marker session_token, rejected;
    make_marker(&session_token, "report-session-");
    make_marker(&rejected, "report-rejected-");
    char env_id[96];
    portal_auth *auth = new_auth("report", env_id, sizeof env_id);
    char *token = marker_copy(&session_token);
    portal_session *session = NULL;
    CHECK_MSG(portal_auth_persist_session(auth, "memscan-user", token, &session) == PORTAL_OK && session, "persist");
    drop(token);
    portal *p = NULL;
    CHECK_MSG(session && portal_new(&p, session, "127.0.0.1:1") == PORTAL_OK && p, "portal_new");
    bool invalidated = true;
    char *copy = marker_copy(&rejected);
    CHECK_MSG(p && portal_report_unauthorized(p, copy, &invalidated) == PORTAL_OK && !invalidated, "report_unauthorized");
    drop(copy);
    expect_none("report", &rejected);
    make_marker(&rejected, "report-rejected-async-");
    copy = marker_copy(&rejected);
    portal_status st = portal_report_unauthorized_async(p, copy, queue, on_done, NULL, NULL, NULL);
    drop(copy);
    CHECK_MSG(finish_async(st) == PORTAL_OK, "report_unauthorized_async");
    expect_none("report-async", &rejected);
    portal_free(p);
    portal_session_free(session);
    CHECK_MSG(portal_auth_clear_persisted_session(auth) == PORTAL_OK, "clear");
    portal_auth_free(auth);
}

static void path_api_key(void) {
    struct marker m;
    make_marker(&m, "api-key-");
    char *key = marker_copy(&m);
    portal *p = NULL;
    CHECK_MSG(portal_new_with_api_key(&p, key, "127.0.0.1:1") == PORTAL_OK && p, "portal_new_with_api_key");
    drop(key);
    portal_free(p);
    expect_none("api-key", &m);
}

/* A user JWT the fake API does not know: the verification fails (401) after the argument was read.
 * The marker is a JWT with an endUserId claim (read before anything is sent), so it reaches the API. */
#define TOTP_JWT_PREFIX "eyJhbGciOiJIUzI1NiJ9.eyJlbmRVc2VySWQiOiJldS1tZW1zY2FuIn0."
static void path_totp_jwt(void) {
    struct marker m;
    make_marker(&m, TOTP_JWT_PREFIX "totp-jwt-");
    char env_id[96];
    portal_auth *auth = new_auth("totp-jwt", env_id, sizeof env_id);
    char *jwt = marker_copy(&m);
    portal_session *session = NULL;
    CHECK_MSG(portal_auth_verify_totp(auth, "123456", jwt, &session) != PORTAL_OK && !session, "verify_totp fails");
    drop(jwt);
    expect_none("totp-jwt", &m);
    make_marker(&m, TOTP_JWT_PREFIX "totp-jwt-async-");
    jwt = marker_copy(&m);
    portal_status st = portal_auth_verify_totp_async(auth, "123456", jwt, queue, on_sign_in_done, NULL, NULL, NULL);
    drop(jwt);
    CHECK_MSG(finish_async(st) != PORTAL_OK, "verify_totp_async fails");
    portal_auth_free(auth);
    expect_none("totp-jwt-async", &m);
}

int main(void) {
    api_url = getenv("PORTAL_TEST_API_URL");
    api_host = getenv("PORTAL_TEST_API_HOST");
    cli = getenv("PORTAL_SESSION_BIN");
    if (!getenv("PORTAL_TEST_KEYRING_PID") || !api_url || !api_host || !cli) {
        fprintf(stderr, "memscan_test: run inside scripts/with-keyring.sh and scripts/with-portal-api.sh, "
                        "with PORTAL_SESSION_BIN set\n");
        return 2;
    }
    report_only = getenv("PORTAL_MEMSCAN_REPORT") && strcmp(getenv("PORTAL_MEMSCAN_REPORT"), "1") == 0;
    srandom((unsigned)time(NULL) ^ (unsigned)getpid());
    path_persist_file(); /* first: it sets environment variables, before any library thread runs */
    CHECK_MSG(portal_completion_queue_new_pollable(&queue) == PORTAL_OK, "pollable queue");
    path_persist();
    path_restore(0);
    path_restore(1);
    path_sign_in(0);
    path_sign_in(1);
    path_request(0, 0);
    path_request(1, 0);
    path_request(0, 1);
    path_request(1, 1);
    path_invalidate_async();
    path_persist_async();
    path_report();
    path_api_key();
    path_totp_jwt();
    path_core_dump();
    portal_completion_queue_free(queue);
    printf("memscan_test: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
