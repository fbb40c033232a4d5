/*
 * gi_async.c — the async restore through the GNOME API (libportal-keyring-gobject-1) vs the C ABI's,
 * in one process on one GMainLoop.
 *
 *   gi_async N   N pairs, one line each, "gi_ns c_ns": portal_keyring_auth_restore_session_async
 *                with the completion included (call → the GAsyncReadyCallback ran on this thread,
 *                _finish took the session, portal_keyring_session_copy_token, token wiped, session
 *                unreffed) vs portal_auth_restore_session_async measured as bench/async.c does
 *                (call → callback, session taken, token copied, freed); alternating, the order
 *                flipped every pair, after 50 warm-up calls each.
 *
 * Both sides restore the same item (auth environment "bench-gi-async", stored first through the C
 * ABI, cleared at the end), so the ratio is the layer's own cost: GTask, the GObject session and
 * the GError path. Exit 2 if a call fails.
 */
#include "bench_common.h"

#include <portal-keyring-gobject/portal-keyring-gobject.h>
#include <portal_keyring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENV_ID "bench-gi-async"

static portal_auth *c_auth;
static PortalKeyringAuth *gi_auth;

static void die(const char *what, const char *message) {
    fprintf(stderr, "gi_async: %s: %s\n", what, message ? message : "no session");
    exit(2);
}

/* ----------------------------------------------------------------------------- the GNOME API */

static void on_gi_restored(GObject *source, GAsyncResult *result, gpointer data) {
    GError *error = NULL;
    PortalKeyringSession *session =
        portal_keyring_auth_restore_session_finish(PORTAL_KEYRING_AUTH(source), result, &error);
    if (!session) die("portal_keyring_auth_restore_session_finish", error ? error->message : NULL);
    gchar *token = portal_keyring_session_copy_token(session, &error);
    if (!token) die("portal_keyring_session_copy_token", error->message);
    portal_keyring_token_free(token);
    g_object_unref(session);
    *(int *)data = 1;
}

static void gi_restore(void) {
    int done = 0;
    portal_keyring_auth_restore_session_async(gi_auth, NULL, on_gi_restored, &done);
    while (!done) g_main_context_iteration(NULL, TRUE);
}

/* ------------------------------------------------------------ the C ABI (as bench/async.c) */

static void on_c_restored(portal_status st, portal_result *result, const char *message, void *data) {
    if (st != PORTAL_OK || !result->session) die("portal_auth_restore_session_async", message);
    char *token = NULL;
    if (portal_session_copy_token(result->session, &token) != PORTAL_OK)
        die("portal_session_copy_token", portal_last_error_message());
    portal_string_free(token);
    portal_session_free(result->session);
    result->session = NULL;
    *(int *)data = 1;
}

static void c_restore(void) {
    int done = 0;
    if (portal_auth_restore_session_async(c_auth, NULL, on_c_restored, &done, NULL, NULL) != PORTAL_OK)
        die("portal_auth_restore_session_async", portal_last_error_message());
    while (!done) g_main_context_iteration(NULL, TRUE);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: gi_async N\n");
        return 64;
    }
    long n = atol(argv[1]);
    GError *error = NULL;
    if (portal_auth_new(&c_auth, ENV_ID, BENCH_REDIRECT_URL, NULL) != PORTAL_OK)
        die("portal_auth_new", portal_last_error_message());
    gi_auth = portal_keyring_auth_new(ENV_ID, BENCH_REDIRECT_URL, NULL, &error);
    if (!gi_auth) die("portal_keyring_auth_new", error->message);
    portal_session *stored = NULL;
    if (portal_auth_persist_session(c_auth, BENCH_END_USER_ID, BENCH_TOKEN, &stored) != PORTAL_OK)
        die("portal_auth_persist_session", portal_last_error_message());
    portal_session_free(stored);

    for (int i = 0; i < 50; i++) {
        gi_restore();
        c_restore();
    }
    uint64_t *g = calloc((size_t)n, sizeof *g), *c = calloc((size_t)n, sizeof *c);
    if (!g || !c) return 2;
    for (long i = 0; i < n; i++) {
        uint64_t t0, t1, t2;
        if (i & 1) {
            t0 = bench_now_ns(); c_restore(); t1 = bench_now_ns(); gi_restore(); t2 = bench_now_ns();
            c[i] = t1 - t0; g[i] = t2 - t1;
        } else {
            t0 = bench_now_ns(); gi_restore(); t1 = bench_now_ns(); c_restore(); t2 = bench_now_ns();
            g[i] = t1 - t0; c[i] = t2 - t1;
        }
    }
    for (long i = 0; i < n; i++) printf("%llu %llu\n", (unsigned long long)g[i], (unsigned long long)c[i]);
    free(g);
    free(c);
    portal_auth_clear_persisted_session(c_auth);
    g_object_unref(gi_auth);
    portal_auth_free(c_auth);
    return 0;
}
