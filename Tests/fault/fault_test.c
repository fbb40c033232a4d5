/*
 * fault_test.c — the in-process conditions of the fault-injection suite (Tests/fault/run.sh),
 * against libportal-keyring.so and a real gnome-keyring-daemon on a private bus
 * (scripts/with-keyring.sh). keyringctl (PORTAL_TEST_KEYRINGCTL) and secret-tool write and
 * inspect the keyring independently of the library.
 *
 *   fault_test absent-secret   5: an item locked (or deleted) between the search and GetSecrets
 *   fault_test locked-app      6: restore while locked + the app's usual error handling
 *   fault_test lookalike       9: other applications' look-alike items
 *   fault_test tokens         10: token bytes: round trip or explicit rejection
 *   fault_test threads N      11: 16 threads, first call at once, N rounds each
 *   fault_test churn ENV N ID 11: one process of the 8-process run
 *   fault_test memory ENV A B 12: marker token, A then B restore+free rounds, pausing for gcore
 *   fault_test bad-input      13: every entry point with NULL, "", invalid UTF-8, 1 MiB
 *   fault_test reentry        14: callbacks that call back into the library
 *
 * Output: "ok ..." per passed check, "FAIL ..." per failed one, "time ..." for measurements;
 * exit status 1 if any check failed. A watchdog (SIGALRM) turns a hang into a failure.
 *
 * Fault injection for condition 5: this program defines secret_item_load_secrets_sync, which the
 * library finds with dlsym (linked with -rdynamic; the library does not link libsecret). When armed
 * it runs "keyringctl lock" (or deletes the items) right before the library's GetSecrets, i.e.
 * exactly between its search and GetSecrets. Forwarded to libsecret's only where some other part
 * of the process loaded it.
 */
#define _GNU_SOURCE
#include "portal_keyring.h"

#include "../c/check.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SCHEMA "io.portalhq.PortalKeyring.Session"
#define REDIRECT "fault-test://redirect"

/* A line for what passed or failed without one condition to check. */
#define ok(...) CHECK_MSG(1, __VA_ARGS__)
#define fail(...) CHECK_MSG(0, __VA_ARGS__)

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void on_alarm(int sig) {
    static const char msg[] = "FAIL  watchdog: the test did not finish in time (deadlock or hang)\n";
    (void)sig;
    ssize_t r = write(STDOUT_FILENO, msg, sizeof msg - 1);
    (void)r;
    _exit(1);
}

static void watchdog(unsigned seconds) {
    signal(SIGALRM, on_alarm);
    alarm(seconds);
}

/* ------------------------------------------------------------------------- keyringctl */

static const char *kctl(void) {
    const char *p = getenv("PORTAL_TEST_KEYRINGCTL");
    if (!p || !*p || strchr(p, '\'')) {
        fprintf(stderr, "fault_test: set PORTAL_TEST_KEYRINGCTL\n");
        exit(2);
    }
    return p;
}

/* Runs a shell command; with `input`, feeds it input[0..len); with `out`, captures stdout. */
static int sh_io(const char *input, size_t len, char *out, size_t cap, const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    FILE *p;
    int status;
    if (input) {
        p = popen(cmd, "w");
        if (!p) return -1;
        if (len) fwrite(input, 1, len, p);
        status = pclose(p);
    } else if (out) {
        p = popen(cmd, "r");
        if (!p) return -1;
        size_t n = fread(out, 1, cap - 1, p);
        out[n] = '\0';
        char drain[4096];
        while (fread(drain, 1, sizeof drain, p) > 0) {
        }
        status = pclose(p);
    } else {
        status = system(cmd);
    }
    return (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
}

static long count_items(const char *schema, const char *env) {
    char out[64];
    int rc = schema ? sh_io(NULL, 0, out, sizeof out, "'%s' count --schema '%s' auth_environment_id='%s'", kctl(), schema, env)
                    : sh_io(NULL, 0, out, sizeof out, "'%s' count auth_environment_id='%s'", kctl(), env);
    return rc == 0 ? strtol(out, NULL, 10) : -1;
}

static int store_raw(const char *schema, const char *env, const char *secret, size_t len) {
    return sh_io(secret, len, NULL, 0, "'%s' store --schema '%s' auth_environment_id='%s' >/dev/null", kctl(), schema, env);
}

static int keyring_lock(void) { return sh_io(NULL, 0, NULL, 0, "'%s' lock", kctl()); }
static int keyring_unlock(void) { return sh_io(NULL, 0, NULL, 0, "'%s' unlock", kctl()); }

static portal_auth *new_auth(const char *env) {
    portal_auth *auth = NULL;
    if (portal_auth_new(&auth, env, REDIRECT, NULL) != PORTAL_OK) {
        fail("portal_auth_new(%s)", env);
        exit(1);
    }
    return auth;
}

/* Restores and compares: user NULL = signed out expected. Returns the status. */
static portal_status expect_restore(portal_auth *auth, const char *user, const char *token, size_t token_len,
                                    const char *what) {
    portal_session *s = NULL;
    portal_status st = portal_auth_restore_session(auth, &s);
    if (st != PORTAL_OK) {
        fail("%s: restore returned %d", what, (int)st);
        return st;
    }
    if (!user) {
        CHECK_MSG(s == NULL, "%s: signed out", what);
    } else if (!s) {
        fail("%s: signed out, expected user %s", what, user);
    } else {
        char *copy = NULL;
        portal_status cst = portal_session_copy_token(s, &copy);
        int same = cst == PORTAL_OK && strcmp(portal_session_get_end_user_id(s), user) == 0 &&
                   strlen(copy) == token_len && memcmp(copy, token, token_len) == 0;
        CHECK_MSG(same, "%s: restored user %s with a byte-exact token (%zu bytes)", what, user, token_len);
        portal_string_free(copy);
    }
    portal_session_free(s);
    return st;
}

/* ----------------------------------------------------- 5: fault injection at GetSecrets */

typedef int (*load_secrets_fn)(void *items, void *cancellable, void **error);
static volatile int inject; /* 0 none, 1 lock the collection, 2 delete the env's items */
static const char *inject_env;

int secret_item_load_secrets_sync(void *items, void *cancellable, void **error);
int secret_item_load_secrets_sync(void *items, void *cancellable, void **error) {
    static load_secrets_fn real;
    if (!real) real = (load_secrets_fn)dlsym(RTLD_NEXT, "secret_item_load_secrets_sync");
    int what = inject;
    inject = 0;
    if (what == 1) keyring_lock();
    if (what == 2) sh_io(NULL, 0, NULL, 0, "'%s' delete-all --schema %s auth_environment_id='%s' >/dev/null", kctl(), SCHEMA, inject_env);
    return real ? real(items, cancellable, error) : 0;
}

static void test_absent_secret(void) {
    check_context = "5 absent secret";
    const char *env = "fault-absent";
    portal_auth *auth = new_auth(env);
    CHECK_MSG(portal_auth_persist_session(auth, "user-a", "token-a", NULL) == PORTAL_OK, "persist a session");

    inject = 1;
    portal_session *s = (portal_session *)&s;
    double t0 = now_ms();
    portal_status st = portal_auth_restore_session(auth, &s);
    double t1 = now_ms();
    CHECK_MSG(st == PORTAL_ERR_SESSION_STORAGE, "collection locked between search and GetSecrets: storage failure (%d)", (int)st);
    CHECK_MSG(s == (portal_session *)&s, "no output written on failure");
    CHECK_MSG(strstr(portal_last_error_message(), "locked") != NULL, "message says locked: \"%s\"", portal_last_error_message());
    printf("time  [%s] restore with the item locked before GetSecrets: %.1f ms, status %d, \"%s\"\n", check_context,
           t1 - t0, (int)st, portal_last_error_message());
    CHECK_MSG(keyring_unlock() == 0, "unlock with keyringctl");
    CHECK_MSG(count_items(SCHEMA, env) == 1, "nothing was deleted");
    expect_restore(auth, "user-a", "token-a", 7, "after unlocking");

    inject = 2;
    inject_env = env;
    t0 = now_ms();
    st = portal_auth_restore_session(auth, &s);
    t1 = now_ms();
    CHECK_MSG(st == PORTAL_OK && s == NULL, "item deleted between search and GetSecrets: signed out, not an error (%d)", (int)st);
    printf("time  [%s] restore with the item deleted before GetSecrets: %.1f ms, status %d\n", check_context, t1 - t0, (int)st);
    portal_auth_free(auth);
}

/* ---------------------------------------------------- 6: locked restore + app handling */

static int listener_calls;
static void count_call(void *data) {
    (void)data;
    __atomic_add_fetch(&listener_calls, 1, __ATOMIC_SEQ_CST);
}

static void test_locked_app(void) {
    check_context = "6 locked restore";
    const char *env = "fault-locked-app";
    portal_auth *auth = new_auth(env);
    portal_session *session = NULL;
    CHECK_MSG(portal_auth_persist_session(auth, "user-6", "token-6", &session) == PORTAL_OK, "persist a session");
    portal *p = NULL;
    /* A closed loopback port: the validation request fails with a network error (never invalidates). */
    CHECK_MSG(portal_new(&p, session, "127.0.0.1:9") == PORTAL_OK, "portal_new with a listener");
    uint64_t handle = 0;
    CHECK_MSG(portal_on_session_invalidated(p, count_call, NULL, NULL, &handle) == PORTAL_OK, "listener registered");
    CHECK_MSG(keyring_lock() == 0, "keyringctl lock");

    portal_session *again = NULL;
    double t0 = now_ms();
    portal_status st = portal_auth_restore_session(auth, &again);
    double t1 = now_ms();
    CHECK_MSG(st == PORTAL_ERR_SESSION_STORAGE, "restore while locked: PORTAL_ERR_SESSION_STORAGE (%d)", (int)st);
    printf("time  [%s] restore while locked: %.1f ms, status %d, \"%s\"\n", check_context, t1 - t0, (int)st,
           portal_last_error_message());
    /* The app's usual handling (docs/api.md#signed-out-vs-unavailable): report it, keep the current session, retry later. It
     * also keeps making requests; a network error never invalidates. */
    long http = 0;
    st = portal_request(p, "GET", "/api/v3/clients/me", NULL, &http, NULL, NULL);
    CHECK_MSG(st == PORTAL_ERR_NETWORK, "a request meanwhile fails with a network error (%d), not an invalidation", (int)st);
    char *token = NULL;
    CHECK_MSG(portal_session_copy_token(session, &token) == PORTAL_OK && strcmp(token, "token-6") == 0,
          "the in-memory session is still valid");
    portal_string_free(token);
    st = portal_auth_restore_session(auth, &again);
    CHECK_MSG(st == PORTAL_ERR_SESSION_STORAGE, "a retry while still locked fails the same way");
    usleep(500 * 1000);
    CHECK_MSG(__atomic_load_n(&listener_calls, __ATOMIC_SEQ_CST) == 0, "no invalidation listener fired");
    CHECK_MSG(keyring_unlock() == 0, "keyringctl unlock");
    CHECK_MSG(count_items(SCHEMA, env) == 1, "nothing was deleted");
    expect_restore(auth, "user-6", "token-6", 7, "after unlocking, the same session");
    CHECK_MSG(__atomic_load_n(&listener_calls, __ATOMIC_SEQ_CST) == 0, "still no listener call");
    portal_free(p);
    portal_session_free(session);
    portal_auth_free(auth);
}

/* ------------------------------------------------------------------- 9: look-alikes */

static void test_lookalike(void) {
    check_context = "9 look-alike items";
    const char *env = "fault-lookalike";
    const char *doc = "{\"clientSessionToken\":\"FOREIGN-TOKEN\",\"endUserId\":\"intruder\",\"v\":1}";
    static const char *const schemas[] = {
        "io.portalhq.PortalKeyring.Session.v2", "io.portalhq.portalkeyring.session", "io.portalhq.PortalKeyring",
        "org.freedesktop.Secret.Generic", "org.example.Other",
    };
    size_t n = sizeof schemas / sizeof schemas[0];
    /* No xdg:schema at all (secret-tool stores without a schema), same attribute. First: its
     * store replaces any item whose attributes include {auth_environment_id} (gnome-keyring's
     * CreateItem replace semantics), which would eat one of the others. */
    int rc = sh_io(doc, strlen(doc), NULL, 0, "secret-tool store --label=lookalike auth_environment_id '%s'", env);
    CHECK_MSG(rc == 0, "secret-tool stored an item without xdg:schema");
    for (size_t i = 0; i < n; i++) store_raw(schemas[i], env, doc, strlen(doc));
    /* Our schema, other auth environments that look like ours. */
    store_raw(SCHEMA, "fault-lookalike ", doc, strlen(doc));
    store_raw(SCHEMA, "fault-lookalik", doc, strlen(doc));
    store_raw(SCHEMA, "FAULT-LOOKALIKE", doc, strlen(doc));
    long before = count_items(NULL, env);
    CHECK_MSG(before == (long)n + 1, "%ld look-alike items with auth_environment_id=%s", before, env);

    portal_auth *auth = new_auth(env);
    expect_restore(auth, NULL, NULL, 0, "restore ignores every look-alike");
    CHECK_MSG(portal_auth_clear_persisted_session(auth) == PORTAL_OK, "clear succeeds");
    CHECK_MSG(count_items(NULL, env) == before, "clear deleted no look-alike");
    CHECK_MSG(portal_auth_persist_session(auth, "user-9", "token-9", NULL) == PORTAL_OK, "persist ours");
    CHECK_MSG(count_items(NULL, env) == before + 1, "persist removed no look-alike");
    expect_restore(auth, "user-9", "token-9", 7, "restore returns ours only");
    CHECK_MSG(portal_auth_clear_persisted_session(auth) == PORTAL_OK, "clear ours");
    CHECK_MSG(count_items(SCHEMA, env) == 0 && count_items(NULL, env) == before, "only ours was deleted");
    CHECK_MSG(count_items(SCHEMA, "fault-lookalike ") == 1 && count_items(SCHEMA, "fault-lookalik") == 1 &&
              count_items(SCHEMA, "FAULT-LOOKALIKE") == 1,
          "items of look-alike auth environments are untouched");
    portal_auth_free(auth);
}

/* --------------------------------------------------------------------- 10: tokens */

static void test_tokens(void) {
    check_context = "10 token bytes";
    const char *env = "fault-tokens";
    portal_auth *auth = new_auth(env);
    struct { const char *name; const char *bytes; } exact[] = {
        {"quotes, backslashes", "\"q\"\\\\/\\u0000"},
        {"non-ASCII", "\xc3\xa9\xe6\xbc\xa2\xf0\x9f\x94\x91\xef\xbb\xbf"},
    };
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        portal_status st = portal_auth_persist_session(auth, "user-10", exact[i].bytes, NULL);
        CHECK_MSG(st == PORTAL_OK, "%s: persisted", exact[i].name);
        expect_restore(auth, "user-10", exact[i].bytes, strlen(exact[i].bytes), exact[i].name);
    }
    /* Whitespace or control characters: refused at persist, the stored token intact. */
    struct { const char *name; const char *bytes; } spaced[] = {
        {"newlines and CR", "line1\nline2\r\nline3\n"}, {"a tab", "\ttab"},
        {"control characters", "\x01\x02\x1f\x7f-ctl"}, {"leading/trailing spaces", "  padded token  "},
        {"U+2028", "a\xe2\x80\xa8" "b"},
    };
    for (size_t i = 0; i < sizeof spaced / sizeof spaced[0]; i++) {
        portal_status st = portal_auth_persist_session(auth, "user-10", spaced[i].bytes, NULL);
        CHECK_MSG(st == PORTAL_ERR_INVALID_ARGUMENT && strstr(portal_last_error_message(), "client_session_token"),
              "%s: PORTAL_ERR_INVALID_ARGUMENT naming client_session_token (\"%s\")", spaced[i].name,
              portal_last_error_message());
        expect_restore(auth, "user-10", exact[1].bytes, strlen(exact[1].bytes), "the stored token is intact");
    }
    /* ... but an earlier version's item holding them is restored byte-exact (only persist checks). */
    struct { const char *doc; const char *bytes; } earlier[] = {
        {"{\"clientSessionToken\":\"line1\\nline2\\r\\nline3\\n\",\"endUserId\":\"user-10\",\"v\":1}", "line1\nline2\r\nline3\n"},
        {"{\"clientSessionToken\":\"\\u0001\\t  padded token  \",\"endUserId\":\"user-10\",\"v\":1}", "\x01\t  padded token  "},
    };
    for (size_t i = 0; i < sizeof earlier / sizeof earlier[0]; i++) {
        portal_auth_clear_persisted_session(auth);
        CHECK_MSG(store_raw(SCHEMA, env, earlier[i].doc, strlen(earlier[i].doc)) == 0, "store an earlier version's item");
        expect_restore(auth, "user-10", earlier[i].bytes, strlen(earlier[i].bytes), "an earlier version's token");
    }
    char *big = malloc(65537 + 1);
    for (size_t i = 0; i < 65537; i++) big[i] = (char)('!' + i % 90);
    big[65536] = '\0';
    CHECK_MSG(portal_auth_persist_session(auth, "user-10", big, NULL) == PORTAL_OK, "64 KiB (65536 bytes): persisted");
    expect_restore(auth, "user-10", big, 65536, "64 KiB");
    big[65536] = 'x';
    big[65537] = '\0';
    portal_status st = portal_auth_persist_session(auth, "user-10", big, NULL);
    CHECK_MSG(st == PORTAL_ERR_INVALID_ARGUMENT && strstr(portal_last_error_message(), "client_session_token"),
          "65537 bytes: PORTAL_ERR_INVALID_ARGUMENT naming client_session_token (\"%s\")", portal_last_error_message());
    big[65536] = '\0';
    expect_restore(auth, "user-10", big, 65536, "after the rejected 65537-byte token, the 64 KiB one is intact");

    struct { const char *name; const char *bytes; } bad[] = {
        {"a lone 0xff byte", "abc\xff"},       {"an overlong encoding", "a\xc0\xaf"},
        {"a UTF-16 surrogate", "a\xed\xa0\x80"}, {"a truncated sequence", "a\xe2\x82"},
        {"a lone continuation byte", "\x80z"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st = portal_auth_persist_session(auth, "user-10", bad[i].bytes, NULL);
        CHECK_MSG(st == PORTAL_ERR_INVALID_ARGUMENT && strstr(portal_last_error_message(), "UTF-8"),
              "%s: rejected as not valid UTF-8 (\"%s\")", bad[i].name, portal_last_error_message());
    }
    expect_restore(auth, "user-10", big, 65536, "rejected tokens changed nothing stored");
    /* A C string ends at its first NUL: what the library receives is "a", stored whole. */
    CHECK_MSG(portal_auth_persist_session(auth, "user-10", "a\0b", NULL) == PORTAL_OK, "\"a\\0b\" is the C string \"a\"");
    expect_restore(auth, "user-10", "a", 1, "stored as \"a\"");
    free(big);

    /* Stored documents the C ABI could not hand out whole are unusable (deleted, signed out). */
    portal_auth_clear_persisted_session(auth);
    const char *nul_doc = "{\"clientSessionToken\":\"a\\u0000b\",\"endUserId\":\"u\",\"v\":1}";
    store_raw(SCHEMA, env, nul_doc, strlen(nul_doc));
    expect_restore(auth, NULL, NULL, 0, "a stored token with \\u0000 is unusable: signed out");
    CHECK_MSG(count_items(SCHEMA, env) == 0, "... and the unusable item was deleted");
    const char *bad_utf8 = "{\"clientSessionToken\":\"\xff\",\"endUserId\":\"u\",\"v\":1}";
    store_raw(SCHEMA, env, bad_utf8, strlen(bad_utf8));
    expect_restore(auth, NULL, NULL, 0, "a stored document with invalid UTF-8 is unusable: signed out");
    portal_auth_free(auth);
}

/* ------------------------------------------------------------------- 11: threads */

#define THREADS 16
static pthread_barrier_t barrier;
static int rounds = 100;
static long mixes, storage_errors, other_errors, sessions_seen, signed_out_seen;

/* The token is derived from the user id, so a restored pair that does not match is a mix. */
static void token_for(const char *user, char *token, size_t cap) { snprintf(token, cap, "tok:%s:%s", user, user); }

static void churn(const char *env, int id, int n) {
    portal_auth *auth = NULL;
    if (portal_auth_new(&auth, env, REDIRECT, NULL) != PORTAL_OK) {
        __atomic_add_fetch(&other_errors, 1, __ATOMIC_SEQ_CST);
        return;
    }
    for (int i = 0; i < n; i++) {
        char user[64], token[160];
        snprintf(user, sizeof user, "u%d-%d", id, i);
        token_for(user, token, sizeof token);
        portal_status st = portal_auth_persist_session(auth, user, token, NULL);
        if (st == PORTAL_ERR_SESSION_STORAGE) __atomic_add_fetch(&storage_errors, 1, __ATOMIC_SEQ_CST);
        else if (st != PORTAL_OK) __atomic_add_fetch(&other_errors, 1, __ATOMIC_SEQ_CST);
        if (st != PORTAL_OK) fprintf(stderr, "persist: %s\n", portal_last_error_message());
        portal_session *s = NULL;
        st = portal_auth_restore_session(auth, &s);
        if (st == PORTAL_OK && s) {
            __atomic_add_fetch(&sessions_seen, 1, __ATOMIC_SEQ_CST);
            char *got = NULL;
            char want[160];
            token_for(portal_session_get_end_user_id(s), want, sizeof want);
            if (portal_session_copy_token(s, &got) != PORTAL_OK || strcmp(got, want) != 0)
                __atomic_add_fetch(&mixes, 1, __ATOMIC_SEQ_CST);
            portal_string_free(got);
        } else if (st == PORTAL_OK) {
            __atomic_add_fetch(&signed_out_seen, 1, __ATOMIC_SEQ_CST);
        } else {
            fprintf(stderr, "restore: %s\n", portal_last_error_message());
            __atomic_add_fetch(st == PORTAL_ERR_SESSION_STORAGE ? &storage_errors : &other_errors, 1, __ATOMIC_SEQ_CST);
        }
        portal_session_free(s);
        st = portal_auth_clear_persisted_session(auth);
        if (st != PORTAL_OK) fprintf(stderr, "clear: %s\n", portal_last_error_message());
        if (st == PORTAL_ERR_SESSION_STORAGE) __atomic_add_fetch(&storage_errors, 1, __ATOMIC_SEQ_CST);
        else if (st != PORTAL_OK) __atomic_add_fetch(&other_errors, 1, __ATOMIC_SEQ_CST);
    }
    portal_auth_free(auth);
}

static void *thread_main(void *arg) {
    int id = (int)(long)arg;
    pthread_barrier_wait(&barrier); /* the first library call of every thread, at once */
    churn("fault-threads", id, rounds);
    return NULL;
}

static void report_churn(const char *what, int calls) {
    printf("time  [%s] %s: %d calls; sessions %ld, signed out %ld, storage failures %ld, other errors %ld, mixes %ld\n",
           check_context, what, calls, sessions_seen, signed_out_seen, storage_errors, other_errors, mixes);
    CHECK_MSG(mixes == 0, "%s: never a mix of two sessions", what);
    CHECK_MSG(other_errors == 0, "%s: no unexpected status", what);
    CHECK_MSG(storage_errors == 0, "%s: no storage failure under contention", what);
}

static void test_threads(int n) {
    check_context = "11 threads";
    rounds = n;
    pthread_t threads[THREADS];
    pthread_barrier_init(&barrier, NULL, THREADS);
    double t0 = now_ms();
    for (long i = 0; i < THREADS; i++) pthread_create(&threads[i], NULL, thread_main, (void *)i);
    for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
    double t1 = now_ms();
    printf("time  [%s] %d threads x %d rounds (persist, restore, clear): %.0f ms\n", check_context, THREADS, n, t1 - t0);
    report_churn("16 threads", THREADS * n * 3);
}

/* -------------------------------------------------------------------- 12: memory */

static void test_memory(const char *env, int first, int second) {
    check_context = "12 memory";
    char marker[80];
    FILE *r = fopen("/dev/urandom", "rb");
    unsigned char raw[16];
    if (!r || fread(raw, 1, sizeof raw, r) != sizeof raw) exit(2);
    fclose(r);
    int off = snprintf(marker, sizeof marker, "MARKER-");
    for (size_t i = 0; i < sizeof raw; i++) off += snprintf(marker + off, sizeof marker - (size_t)off, "%02x", raw[i]);
    portal_auth *auth = new_auth(env);
    if (portal_auth_persist_session(auth, "user-12", marker, NULL) != PORTAL_OK) {
        fail("persist the marker");
        exit(1);
    }
    /* Tell the script the marker through the pipe, then forget our own copies of it. */
    char line[128];
    int n = snprintf(line, sizeof line, "MARKER %s\n", marker);
    if (write(STDOUT_FILENO, line, (size_t)n) != n) exit(2);
    explicit_bzero(line, sizeof line);
    explicit_bzero(marker, sizeof marker);
    explicit_bzero(raw, sizeof raw);
    int total = 0;
    int plan[2] = {first, second};
    for (int phase = 0; phase < 2; phase++) {
        for (int i = 0; i < plan[phase]; i++) {
            portal_session *s = NULL;
            if (portal_auth_restore_session(auth, &s) != PORTAL_OK || !s) {
                fail("restore %d", total);
                exit(1);
            }
            portal_session_free(s);
            total++;
        }
        n = snprintf(line, sizeof line, "PAUSE %d\n", total);
        if (write(STDOUT_FILENO, line, (size_t)n) != n) exit(2);
        if (read(STDIN_FILENO, line, sizeof line) <= 0) exit(2);
    }
    /* Control for the method: while a restored session and a token copy are held, the marker
     * must be found (the session's buffer and the caller's copy). */
    portal_session *held = NULL;
    char *copy = NULL;
    if (portal_auth_restore_session(auth, &held) != PORTAL_OK || !held || portal_session_copy_token(held, &copy) != PORTAL_OK) {
        fail("restore for the control dump");
        exit(1);
    }
    n = snprintf(line, sizeof line, "PAUSE held\n");
    if (write(STDOUT_FILENO, line, (size_t)n) != n) exit(2);
    if (read(STDIN_FILENO, line, sizeof line) <= 0) exit(2);
    portal_string_free(copy);
    portal_session_free(held);
    portal_auth_clear_persisted_session(auth);
    portal_auth_free(auth);
}

/* ----------------------------------------------------------------- 13: bad input */

static char *mib;      /* 1 MiB of 'a' */
static char *mib_bad;  /* 1 MiB with an invalid byte at the end */
static int bad_cases;

#define EXPECT_INVALID(expr, argname)                                                                      \
    do {                                                                                                   \
        portal_status st_ = (expr);                                                                        \
        const char *m_ = portal_last_error_message();                                                      \
        bad_cases++;                                                                                       \
        if (st_ != PORTAL_ERR_INVALID_ARGUMENT || !m_ || !strstr(m_, argname))                             \
            fail("%s -> %d \"%s\" (expected invalid argument naming %s)", #expr, (int)st_, m_ ? m_ : "(null)", \
                 argname);                                                                                 \
    } while (0)

/* The four bad strings for one string argument of a call. */
#define BAD_STRINGS(call_with, argname)                 \
    do {                                                \
        const char *bad_[] = {NULL, "", "\xff\xfe", mib, mib_bad, " \t\n"}; \
        for (size_t b_ = 0; b_ < 6; b_++) {            \
            const char *S = bad_[b_];                   \
            EXPECT_INVALID(call_with, argname);         \
        }                                               \
    } while (0)

static void noop_cb(void *d) { (void)d; }
static int destroyed;
static void destroy_cb(void *d) { (void)d; destroyed++; }

static void test_bad_input(void) {
    check_context = "13 bad input";
    mib = malloc((1u << 20) + 1);
    memset(mib, 'a', 1u << 20);
    mib[1u << 20] = '\0';
    mib_bad = malloc((1u << 20) + 1);
    memset(mib_bad, 'b', 1u << 20);
    mib_bad[(1u << 20) - 1] = '\xff';
    mib_bad[1u << 20] = '\0';
    portal_auth *auth = new_auth("fault-bad-input");
    portal_auth *a = NULL;
    BAD_STRINGS(portal_auth_new(&a, S, REDIRECT, NULL), "auth_environment_id");
    BAD_STRINGS(portal_auth_new(&a, "env", S, NULL), "redirect_url");
    {
        const char *bad_[] = {"", "\xff\xfe", mib, mib_bad, " ", "host/path", "user@host", "h ost"};
        for (size_t i = 0; i < 8; i++) EXPECT_INVALID(portal_auth_new(&a, "env", REDIRECT, bad_[i]), "api_host");
    }
    EXPECT_INVALID(portal_auth_new(NULL, "env", REDIRECT, NULL), "out");
    CHECK_MSG(a == NULL, "portal_auth_new wrote no output on failure");
    EXPECT_INVALID(portal_auth_set_keyring_timeouts(NULL, 1000, 1000), "auth");
    EXPECT_INVALID(portal_auth_set_keyring_timeouts(auth, 0, 1000), "call_timeout_ms");
    EXPECT_INVALID(portal_auth_set_keyring_timeouts(auth, 600001, 1000), "call_timeout_ms");
    EXPECT_INVALID(portal_auth_set_keyring_timeouts(auth, 1000, 0), "prompt_timeout_ms");
    EXPECT_INVALID(portal_auth_set_keyring_timeouts(auth, 1000, UINT32_MAX), "prompt_timeout_ms");
    portal_session *s = NULL;
    EXPECT_INVALID(portal_auth_restore_session(NULL, &s), "auth");
    EXPECT_INVALID(portal_auth_restore_session(auth, NULL), "out");
    EXPECT_INVALID(portal_auth_clear_persisted_session(NULL), "auth");
    EXPECT_INVALID(portal_auth_persist_session(NULL, "u", "t", NULL), "auth");
    BAD_STRINGS(portal_auth_persist_session(auth, S, "token", NULL), "end_user_id");
    BAD_STRINGS(portal_auth_persist_session(auth, "user", S, NULL), "client_session_token");
    CHECK_MSG(portal_session_get_end_user_id(NULL) == NULL && strstr(portal_last_error_message(), "session"),
          "portal_session_get_end_user_id(NULL) = NULL with a message");
    CHECK_MSG(portal_session_get_auth_environment_id(NULL) == NULL && strstr(portal_last_error_message(), "session"),
          "portal_session_get_auth_environment_id(NULL) = NULL with a message");
    char *tok = NULL;
    EXPECT_INVALID(portal_session_copy_token(NULL, &tok), "session");
    EXPECT_INVALID(portal_session_invalidate(NULL), "session");
    portal *p = NULL;
    EXPECT_INVALID(portal_new(&p, NULL, NULL), "session");
    EXPECT_INVALID(portal_new(NULL, NULL, NULL), "out");
    BAD_STRINGS(portal_new_with_api_key(&p, S, NULL), "api_key");
    {
        const char *bad_[] = {"", "\xff\xfe", mib, " ", "a/b"};
        for (size_t i = 0; i < 5; i++) EXPECT_INVALID(portal_new_with_api_key(&p, "key", bad_[i]), "api_host");
    }
    EXPECT_INVALID(portal_new_with_api_key(NULL, "key", NULL), "out");
    uint64_t h = 0;
    destroyed = 0;
    EXPECT_INVALID(portal_on_session_invalidated(NULL, noop_cb, NULL, destroy_cb, &h), "portal");
    CHECK_MSG(destroyed == 1, "destroy_notify ran once on a failed registration");
    EXPECT_INVALID(portal_listener_cancel(NULL, 1), "portal");
    EXPECT_INVALID(portal_report_unauthorized(NULL, "t", NULL), "portal");
    EXPECT_INVALID(portal_clear_session(NULL), "portal");
    long status = 0;
    EXPECT_INVALID(portal_request(NULL, "GET", "/x", NULL, &status, NULL, NULL), "portal");

    /* With real handles: the remaining string arguments. */
    portal_session *session = NULL;
    if (portal_auth_persist_session(auth, "user-13", "token-13", &session) != PORTAL_OK) {
        fail("persist for the handle cases");
    } else {
        EXPECT_INVALID(portal_session_copy_token(session, NULL), "out");
        {
            const char *bad_[] = {"", "\xff\xfe", mib, " ", "host/x"};
            for (size_t i = 0; i < 5; i++) EXPECT_INVALID(portal_new(&p, session, bad_[i]), "api_host");
        }
        if (portal_new(&p, session, "127.0.0.1:9") == PORTAL_OK) {
            destroyed = 0;
            EXPECT_INVALID(portal_on_session_invalidated(p, NULL, NULL, destroy_cb, &h), "callback");
            EXPECT_INVALID(portal_on_session_invalidated(p, noop_cb, NULL, destroy_cb, NULL), "out");
            CHECK_MSG(destroyed == 2, "destroy_notify ran once per failed registration (%d)", destroyed);
            BAD_STRINGS(portal_report_unauthorized(p, S, NULL), "rejected_token");
            BAD_STRINGS(portal_request(p, S, "/api/v3/clients/me", NULL, &status, NULL, NULL), "method");
            EXPECT_INVALID(portal_request(p, "TRACE", "/x", NULL, &status, NULL, NULL), "method");
            BAD_STRINGS(portal_request(p, "GET", S, NULL, &status, NULL, NULL), "target");
            {
                const char *bad_[] = {"\xff\xfe", mib_bad};
                for (size_t i = 0; i < 2; i++) EXPECT_INVALID(portal_request(p, "POST", "/x", bad_[i], &status, NULL, NULL), "body");
            }
            EXPECT_INVALID(portal_request(p, "GET", "/x", NULL, NULL, NULL, NULL), "status_out");
            portal_free(p);
        } else {
            fail("portal_new for the handle cases");
        }
        portal_session_free(session);
    }
    portal_auth_clear_persisted_session(auth);
    /* Frees of NULL are no-ops; unknown status codes have a name. */
    portal_auth_free(NULL);
    portal_session_free(NULL);
    portal_free(NULL);
    portal_string_free(NULL);
    CHECK_MSG(strcmp(portal_status_str((portal_status)12345), "unknown status") == 0 &&
              strcmp(portal_status_str((portal_status)-1), "unknown status") == 0,
          "portal_status_str of unknown codes");
    ok("%d bad-argument calls checked (NULL, \"\", invalid UTF-8, 1 MiB, blank), *_free(NULL) are no-ops",
       bad_cases);
    portal_auth_free(auth);
    free(mib);
    free(mib_bad);
}

/* ---------------------------------------------------------------------- 14: reentry */

static pthread_mutex_t re_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t re_cond = PTHREAD_COND_INITIALIZER;
static int re_done, re_replayed, re_destroyed, re_l3_called;
static portal_auth *re_auth;
static portal *re_portal;
static uint64_t re_handle[4];

static void re_signal(int *counter) {
    pthread_mutex_lock(&re_lock);
    (*counter)++;
    pthread_cond_broadcast(&re_cond);
    pthread_mutex_unlock(&re_lock);
}

static void re_replay_cb(void *d) { (void)d; re_signal(&re_replayed); }
static void re_destroy(void *d) { (void)d; re_signal(&re_destroyed); }

/* Listener 0: keyring I/O from the delivery thread (restore, clear, restore). */
static void re_keyring_cb(void *d) {
    (void)d;
    portal_session *s = NULL;
    portal_status a = portal_auth_restore_session(re_auth, &s);
    portal_session_free(s);
    portal_status b = portal_auth_clear_persisted_session(re_auth);
    portal_status c = portal_auth_restore_session(re_auth, &s);
    portal_session_free(s);
    if (a != PORTAL_OK || b != PORTAL_OK || c != PORTAL_OK) fail("keyring calls inside a callback: %d %d %d", a, b, c);
    else ok("restore, clear, restore inside a callback");
    re_signal(&re_done);
}

/* Listener 1: cancels itself and listener 2, reports again, registers a new listener. */
static void re_cancel_cb(void *d) {
    (void)d;
    portal_status a = portal_listener_cancel(re_portal, re_handle[1]);
    portal_status b = portal_listener_cancel(re_portal, re_handle[2]);
    bool inv = true;
    portal_status c = portal_report_unauthorized(re_portal, "whatever", &inv);
    uint64_t h = 0;
    portal_status e = portal_on_session_invalidated(re_portal, re_replay_cb, NULL, re_destroy, &h);
    if (a || b || c || e || inv) fail("cancel/report/register inside a callback: %d %d %d %d inv=%d", a, b, c, e, inv);
    else ok("cancel own and another handle, report again, register a listener inside a callback");
    re_signal(&re_done);
}

static void re_l2_cb(void *d) {
    (void)d;
    re_signal(&re_l3_called); /* may run before listener 1 cancels it: callbacks of one portal run in turn */
}

/* Listener 3: frees the portal from inside its own callback. */
static void re_free_cb(void *d) {
    (void)d;
    portal_free(re_portal);
    ok("portal_free inside a callback returned");
    re_signal(&re_done);
}

static void test_reentry(void) {
    check_context = "14 reentrant callbacks";
    re_auth = new_auth("fault-reentry");
    portal_session *session = NULL;
    if (portal_auth_persist_session(re_auth, "user-14", "token-14", &session) != PORTAL_OK ||
        portal_new(&re_portal, session, "127.0.0.1:9") != PORTAL_OK) {
        fail("set-up");
        return;
    }
    portal_on_session_invalidated(re_portal, re_keyring_cb, NULL, re_destroy, &re_handle[0]);
    portal_on_session_invalidated(re_portal, re_cancel_cb, NULL, re_destroy, &re_handle[1]);
    portal_on_session_invalidated(re_portal, re_l2_cb, NULL, re_destroy, &re_handle[2]);
    portal_on_session_invalidated(re_portal, re_free_cb, NULL, re_destroy, &re_handle[3]);
    bool invalidated = false;
    double t0 = now_ms();
    portal_status st = portal_report_unauthorized(re_portal, "token-14", &invalidated);
    CHECK_MSG(st == PORTAL_OK && invalidated, "the 401 report invalidated the session");
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 15;
    pthread_mutex_lock(&re_lock);
    while (re_done < 3 || re_destroyed < 4) {
        if (pthread_cond_timedwait(&re_cond, &re_lock, &until) == ETIMEDOUT) break;
    }
    int done = re_done, destroyed_n = re_destroyed;
    pthread_mutex_unlock(&re_lock);
    double t1 = now_ms();
    CHECK_MSG(done == 3, "all three reentrant callbacks returned (%d), no deadlock", done);
    CHECK_MSG(destroyed_n >= 4, "every destroy_notify ran (%d)", destroyed_n);
    printf("time  [%s] deliveries with reentrant calls finished in %.0f ms\n", check_context, t1 - t0);
    CHECK_MSG(re_l3_called <= 1, "the cancelled listener ran at most once (%d)", re_l3_called);
    char *tok = NULL;
    CHECK_MSG(portal_session_copy_token(session, &tok) == PORTAL_ERR_SESSION_INVALIDATED, "the session is invalidated");
    portal_session_free(session);
    portal_auth_free(re_auth);
}

/* ------------------------------------------------------------------------------ main */

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    check_verbose = 1;
    if (argc < 2) {
        fprintf(stderr, "usage: fault_test CONDITION [ARGS]\n");
        return 2;
    }
    const char *what = argv[1];
    if (strcmp(what, "absent-secret") == 0) {
        watchdog(60);
        test_absent_secret();
    } else if (strcmp(what, "locked-app") == 0) {
        watchdog(60);
        test_locked_app();
    } else if (strcmp(what, "lookalike") == 0) {
        watchdog(60);
        test_lookalike();
    } else if (strcmp(what, "tokens") == 0) {
        watchdog(60);
        test_tokens();
    } else if (strcmp(what, "threads") == 0 && argc == 3) {
        watchdog(600);
        test_threads(atoi(argv[2]));
    } else if (strcmp(what, "churn") == 0 && argc == 5) {
        check_context = "11 processes";
        watchdog(600);
        churn(argv[2], atoi(argv[4]), atoi(argv[3]));
        printf("CHURN sessions=%ld signed_out=%ld storage=%ld other=%ld mixes=%ld\n", sessions_seen, signed_out_seen,
               storage_errors, other_errors, mixes);
        return 0;
    } else if (strcmp(what, "memory") == 0 && argc == 5) {
        watchdog(300);
        test_memory(argv[2], atoi(argv[3]), atoi(argv[4]));
    } else if (strcmp(what, "bad-input") == 0) {
        watchdog(60);
        test_bad_input();
    } else if (strcmp(what, "reentry") == 0) {
        watchdog(60);
        test_reentry();
    } else {
        fprintf(stderr, "fault_test: unknown condition %s\n", what);
        return 2;
    }
    return failures ? 1 : 0;
}
