/*
 * warm.c — warm, in-process figures: portal-keyring's C ABI and raw libsecret in one process,
 * alternating call by call (ABAB…, the order flipped every pair) so drift hits both sides alike.
 *
 *   warm restore N   portal_auth_restore_session (+ portal_session_copy_token, frees)
 *                    vs secret_password_lookup_nonpageable_sync (+ secret_password_free)
 *   warm persist N   portal_auth_persist_session (+ portal_session_free)
 *                    vs secret_password_store_sync, same document
 *
 * Each side has its own auth environment id (its own item), same schema and same document
 * (bench_common.h). Both sides run on GLib's shared session-bus connection after 50 warm-up calls
 * each. In a Flatpak sandbox both use their file keyring (bench/sandbox.py, restore only: libsecret
 * stores nothing after another writer changed the file). Prints one line per pair, "portal_ns raw_ns". Exit 2 if any call fails.
 */
#include "bench_common.h"

#include <portal_keyring.h>
#include <libsecret/secret.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_schema.h"

#define PORTAL_ENV "bench-warm-portal"
#define RAW_ENV "bench-warm-raw"

static portal_auth *auth;

static void die_portal(const char *what, portal_status st) {
    fprintf(stderr, "warm: %s: %s: %s\n", what, portal_status_str(st), portal_last_error_message());
    exit(2);
}

static void die_raw(const char *what, GError *error) {
    fprintf(stderr, "warm: %s: %s\n", what, error ? error->message : "nothing found");
    exit(2);
}

static void portal_restore(void) {
    portal_session *session = NULL;
    portal_status st = portal_auth_restore_session(auth, &session);
    if (st != PORTAL_OK) die_portal("portal_auth_restore_session", st);
    if (!session) die_portal("portal_auth_restore_session returned no session", PORTAL_OK);
    char *token = NULL;
    st = portal_session_copy_token(session, &token);
    if (st != PORTAL_OK) die_portal("portal_session_copy_token", st);
    portal_string_free(token);
    portal_session_free(session);
}

static void raw_lookup(void) {
    GError *error = NULL;
    gchar *doc = secret_password_lookup_nonpageable_sync(&schema, NULL, &error, "auth_environment_id", RAW_ENV, NULL);
    if (error || !doc) die_raw("secret_password_lookup_nonpageable_sync", error);
    if (!strstr(doc, "\"clientSessionToken\"")) die_raw("lookup: unexpected document", NULL);
    secret_password_free(doc);
}

static void portal_persist(void) {
    portal_session *session = NULL;
    portal_status st = portal_auth_persist_session(auth, BENCH_END_USER_ID, BENCH_TOKEN, &session);
    if (st != PORTAL_OK) die_portal("portal_auth_persist_session", st);
    portal_session_free(session);
}

static void raw_store(void) {
    GError *error = NULL;
    if (!secret_password_store_sync(&schema, SECRET_COLLECTION_DEFAULT, "Portal session (bench baseline)",
                                    BENCH_DOCUMENT, NULL, &error, "auth_environment_id", RAW_ENV,
                                    "session_generation", "00000000000000000000000000000000",
                                    "persisted_at", "1700000000000000", NULL))
        die_raw("secret_password_store_sync", error);
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "restore") && strcmp(argv[1], "persist"))) {
        fprintf(stderr, "usage: %s restore|persist N\n", argv[0]);
        return 2;
    }
    int restore = strcmp(argv[1], "restore") == 0;
    long n = strtol(argv[2], NULL, 10);
    portal_status st = portal_auth_new(&auth, PORTAL_ENV, BENCH_REDIRECT_URL, NULL);
    if (st != PORTAL_OK) die_portal("portal_auth_new", st);

    /* Start from one stored item on each side, libsecret's first: in a Flatpak sandbox
     * (bench/sandbox.py) libsecret's file backend reads the file once and then refuses to store
     * ("The file was externally modified") after anyone else wrote it — here, our persist. */
    GError *error = NULL;
    secret_password_clear_sync(&schema, NULL, &error, "auth_environment_id", RAW_ENV, NULL);
    if (error) die_raw("secret_password_clear_sync", error);
    raw_store();
    st = portal_auth_clear_persisted_session(auth);
    if (st != PORTAL_OK) die_portal("portal_auth_clear_persisted_session", st);
    portal_persist();

    void (*ours)(void) = restore ? portal_restore : portal_persist;
    void (*base)(void) = restore ? raw_lookup : raw_store;
    for (int i = 0; i < 50; i++) {
        ours();
        base();
    }
    uint64_t *a = calloc((size_t)n, sizeof *a), *b = calloc((size_t)n, sizeof *b);
    if (!a || !b) return 2;
    for (long i = 0; i < n; i++) {
        uint64_t t0, t1, t2;
        if (i & 1) {
            t0 = bench_now_ns(); base(); t1 = bench_now_ns(); ours(); t2 = bench_now_ns();
            b[i] = t1 - t0; a[i] = t2 - t1;
        } else {
            t0 = bench_now_ns(); ours(); t1 = bench_now_ns(); base(); t2 = bench_now_ns();
            a[i] = t1 - t0; b[i] = t2 - t1;
        }
    }
    for (long i = 0; i < n; i++) printf("%llu %llu\n", (unsigned long long)a[i], (unsigned long long)b[i]);
    free(a);
    free(b);
    portal_auth_clear_persisted_session(auth);
    secret_password_clear_sync(&schema, NULL, NULL, "auth_environment_id", RAW_ENV, NULL);
    portal_auth_free(auth);
    return 0;
}
