/*
 * async.c — the non-blocking restore: what it costs, and what the main loop feels.
 *
 *   async restore N        N pairs, one line each, "async_ns sync_ns": on a GMainLoop,
 *                          portal_auth_restore_session_async with the completion included (call →
 *                          the callback ran on this thread, session taken, token copied, freed) vs
 *                          portal_auth_restore_session (+ portal_session_copy_token, frees);
 *                          alternating, the order flipped every pair, after 50 warm-up calls each.
 *   async prompt MS KCTL   the keyring locked behind KCTL's stuck prompter (nobody answers), one
 *                          async restore with a prompt deadline of MS while a 10 ms GLib timer
 *                          ticks; prints "max_gap_ns elapsed_ns ticks status" (status: the
 *                          completion's, PORTAL_ERR_SESSION_STORAGE at the deadline), then unlocks.
 *
 * Both modes store their own session first (auth environment "bench-async"). Exit 2 if a call
 * fails unexpectedly.
 */
#define _DEFAULT_SOURCE 1
#include "bench_common.h"

#include <glib.h>
#include <portal_keyring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static portal_auth *auth;

static void die(const char *what, portal_status st, const char *message) {
    fprintf(stderr, "async: %s: %s: %s\n", what, portal_status_str(st), message);
    exit(2);
}

static void take(portal_session *session, const char *what) {
    if (!session) die(what, PORTAL_OK, "no session");
    char *token = NULL;
    portal_status st = portal_session_copy_token(session, &token);
    if (st != PORTAL_OK) die("portal_session_copy_token", st, portal_last_error_message());
    portal_string_free(token);
    portal_session_free(session);
}

static void sync_restore(void) {
    portal_session *session = NULL;
    portal_status st = portal_auth_restore_session(auth, &session);
    if (st != PORTAL_OK) die("portal_auth_restore_session", st, portal_last_error_message());
    take(session, "portal_auth_restore_session");
}

typedef struct {
    int done;
    portal_status status;
} completion;

static void on_restored(portal_status st, portal_result *result, const char *message, void *data) {
    completion *c = data;
    c->status = st;
    c->done = 1;
    if (st == PORTAL_OK) {
        take(result->session, "portal_auth_restore_session_async");
        result->session = NULL;
    } else if (st != PORTAL_ERR_SESSION_STORAGE) {
        die("portal_auth_restore_session_async", st, message);
    }
}

static void async_restore(void) {
    completion c = {0, PORTAL_OK};
    portal_status st = portal_auth_restore_session_async(auth, NULL, on_restored, &c, NULL, NULL);
    if (st != PORTAL_OK) die("portal_auth_restore_session_async", st, portal_last_error_message());
    while (!c.done) g_main_context_iteration(NULL, TRUE);
}

static void run_restore(long n) {
    for (int i = 0; i < 50; i++) {
        sync_restore();
        async_restore();
    }
    for (long i = 0; i < n; i++) {
        uint64_t a_ns, s_ns, t0, t1, t2;
        if (i % 2 == 0) {
            t0 = bench_now_ns(); async_restore(); t1 = bench_now_ns(); sync_restore(); t2 = bench_now_ns();
            a_ns = t1 - t0; s_ns = t2 - t1;
        } else {
            t0 = bench_now_ns(); sync_restore(); t1 = bench_now_ns(); async_restore(); t2 = bench_now_ns();
            s_ns = t1 - t0; a_ns = t2 - t1;
        }
        printf("%llu %llu\n", (unsigned long long)a_ns, (unsigned long long)s_ns);
    }
}

static gint64 last_tick, max_gap;
static long ticks;
static gboolean tick(gpointer data) {
    (void)data;
    gint64 now = g_get_monotonic_time();
    if (last_tick && now - last_tick > max_gap) max_gap = now - last_tick;
    last_tick = now;
    ticks++;
    return G_SOURCE_CONTINUE;
}

static int sh(const char *command) {
    int rc = system(command);
    return rc == 0 ? 0 : -1;
}

static void run_prompt(unsigned prompt_ms, const char *kctl) {
    char command[1024], dir[] = "/tmp/bench-async-XXXXXX";
    if (!mkdtemp(dir) || chdir(dir) != 0) die("mkdtemp", PORTAL_ERR_INTERNAL, "no temporary directory");
    snprintf(command, sizeof command, "%s stuck-prompter >/dev/null 2>&1 & echo $! > prompter.pid", kctl);
    if (sh(command) != 0) die("stuck-prompter", PORTAL_ERR_INTERNAL, command);
    usleep(500000); /* the prompter owns its bus name */
    snprintf(command, sizeof command, "%s lock", kctl);
    if (sh(command) != 0) die("lock", PORTAL_ERR_INTERNAL, command);
    portal_auth_set_keyring_timeouts(auth, 5000, prompt_ms);

    GSource *timer = g_timeout_source_new(10);
    g_source_set_callback(timer, tick, NULL, NULL);
    g_source_attach(timer, NULL);
    completion c = {0, PORTAL_OK};
    gint64 start = g_get_monotonic_time();
    last_tick = start;
    portal_status st = portal_auth_restore_session_async(auth, NULL, on_restored, &c, NULL, NULL);
    if (st != PORTAL_OK) die("portal_auth_restore_session_async", st, portal_last_error_message());
    while (!c.done) g_main_context_iteration(NULL, TRUE);
    gint64 elapsed = g_get_monotonic_time() - start;
    g_source_destroy(timer);
    g_source_unref(timer);
    printf("%lld %lld %ld %d\n", (long long)max_gap * 1000, (long long)elapsed * 1000, ticks, (int)c.status);

    sh("kill $(cat prompter.pid)");
    snprintf(command, sizeof command, "%s unlock", kctl);
    sh(command);
    unlink("prompter.pid");
    if (chdir("/") == 0) rmdir(dir);
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "restore") != 0 && strcmp(argv[1], "prompt") != 0) ||
        (strcmp(argv[1], "prompt") == 0 && argc < 4)) {
        fprintf(stderr, "usage: async restore N | async prompt MS KEYRINGCTL\n");
        return 64;
    }
    portal_status st = portal_auth_new(&auth, "bench-async", BENCH_REDIRECT_URL, NULL);
    if (st != PORTAL_OK) die("portal_auth_new", st, portal_last_error_message());
    portal_session *session = NULL;
    st = portal_auth_persist_session(auth, BENCH_END_USER_ID, BENCH_TOKEN, &session);
    if (st != PORTAL_OK) die("portal_auth_persist_session", st, portal_last_error_message());
    portal_session_free(session);
    if (strcmp(argv[1], "restore") == 0)
        run_restore(atol(argv[2]));
    else
        run_prompt((unsigned)atol(argv[2]), argv[3]);
    portal_auth_clear_persisted_session(auth);
    portal_auth_free(auth);
    return 0;
}
