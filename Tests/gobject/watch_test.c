/*
 * watch_test.c — PortalKeyringWatch (the session watch of the GNOME API) from C, against the
 * private keyring of scripts/with-keyring.sh:
 *   1. another process (this program as `watch_test persist|clear ENV [END_USER]`) signs
 *      in and out: "changed" gives STARTED, then SIGNED_IN with its end user id, then SIGNED_OUT
 *      with NULL, each on the thread and thread-default context that made the watch: the main
 *      thread's default context, and a worker's own pushed context (the main context is iterated
 *      meanwhile, so an emission on the wrong one is seen there); their origin OTHER_PROCESS, and
 *      THIS_PROCESS for this process's own sign-in and sign-out;
 *   2. the provider stopped (SIGSTOP of PORTAL_TEST_KEYRING_PID, SIGCONT at the end): making a
 *      watch, stopping it and dropping the last reference of another each return at once, no
 *      signal comes from a stopped watch, and a 10 ms timer on the same loop never gaps more
 *      than GAP_MS; a watch made while stopped reports STARTED once the provider resumes;
 *   3. with no session bus (a child without DBUS_SESSION_BUS_ADDRESS): FAILED with a message;
 *   4. every watch is finalised with its last reference (a weak pointer), stop or not.
 *
 * Prints a line a failed check (check.h) and "watch_test: N checks, M failed".
 */
#define _GNU_SOURCE
#include "check.h"
#include "main_loop.h"

#include <portal-keyring-gobject/portal-keyring-gobject.h>

#include <signal.h>
#include <sys/types.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

/* The largest timer gap, and the longest a make, stop or unref may take, while the provider is
 * stopped. A call that waits on the keyring takes the auth's call deadline (CALL_TIMEOUT_MS);
 * under valgrind everything runs some 20 times slower, so the bound there is 1 s. */
#define CALL_TIMEOUT_MS 3000
#define GAP_MS (RUNNING_ON_VALGRIND ? 1000 : 50)

static char env_id[64];
static const char *self_path;

/* What one watch's "changed" handler saw, and where it expects to run. */
typedef struct {
    int started, signed_in, signed_out, failed, other, misplaced;
    /* The origin (portal_keyring_watch_get_origin in the handler) of the last sign-in and out. */
    PortalKeyringWatchOrigin signed_in_origin, signed_out_origin;
    char end_user_id[128];
    gboolean signed_out_had_id;
    GThread *thread;
    GMainContext *context;
} Seen;

static void on_changed(PortalKeyringWatch *watch, PortalKeyringWatchEvent event, const char *end_user_id, Seen *seen) {
    if (g_thread_self() != seen->thread || !g_main_context_is_owner(seen->context)) seen->misplaced++;
    switch (event) {
    case PORTAL_KEYRING_WATCH_EVENT_STARTED: seen->started++; break;
    case PORTAL_KEYRING_WATCH_EVENT_FAILED: /* the message, in the end user id's place */
        seen->failed++;
        g_strlcpy(seen->end_user_id, end_user_id ? end_user_id : "(null)", sizeof seen->end_user_id);
        break;
    case PORTAL_KEYRING_WATCH_EVENT_SIGNED_IN:
        seen->signed_in++;
        seen->signed_in_origin = portal_keyring_watch_get_origin(watch);
        g_strlcpy(seen->end_user_id, end_user_id ? end_user_id : "(null)", sizeof seen->end_user_id);
        break;
    case PORTAL_KEYRING_WATCH_EVENT_SIGNED_OUT:
        seen->signed_out++;
        seen->signed_out_origin = portal_keyring_watch_get_origin(watch);
        seen->signed_out_had_id |= end_user_id != NULL;
        break;
    default: seen->other++; break;
    }
}

/* Iterates context until *flag >= want or timeout_ms passed; true when reached. */
static int spin_until(GMainContext *context, volatile int *flag, int want, int timeout_ms) {
    gint64 end = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    while (*flag < want && g_get_monotonic_time() < end) g_main_context_iteration(context, FALSE), g_usleep(1000);
    return *flag >= want;
}

static void spin_for(int ms) {
    int never = 0;
    spin_until(NULL, &never, 1, ms);
}

static PortalKeyringAuth *make_auth(void) {
    g_autoptr(GError) error = NULL;
    PortalKeyringAuth *auth = g_initable_new(PORTAL_KEYRING_TYPE_AUTH, NULL, &error, "auth-environment-id", env_id,
                                             "redirect-url", "portalkeyring://auth/callback", "call-timeout-ms",
                                             CALL_TIMEOUT_MS, NULL);
    CHECK_MSG(auth != NULL, "auth: %s", error ? error->message : "");
    return auth;
}

/* A watch of auth whose "changed" goes to seen, expected on this thread's thread-default context. */
static PortalKeyringWatch *make_watch(PortalKeyringAuth *auth, Seen *seen) {
    g_autoptr(GError) error = NULL;
    seen->thread = g_thread_self();
    seen->context = g_main_context_ref_thread_default();
    g_main_context_unref(seen->context); /* kept only for comparison */
    PortalKeyringWatch *watch = portal_keyring_watch_new(auth, &error);
    CHECK_MSG(watch != NULL && error == NULL, "portal_keyring_watch_new: %s", error ? error->message : "");
    if (watch) g_signal_connect(watch, "changed", G_CALLBACK(on_changed), seen);
    return watch;
}

/* Drops the last reference of watch: it must be finalised then. */
static void unref_last(PortalKeyringWatch *watch) {
    gpointer weak = watch;
    g_object_add_weak_pointer(G_OBJECT(watch), &weak);
    g_object_unref(watch);
    CHECK_MSG(weak == NULL, "the watch outlived its last reference");
    if (weak) g_object_remove_weak_pointer(G_OBJECT(weak), &weak);
}

/* The other process: persist or clear with the _sync forms, then exit. */
static int act(int argc, char **argv) {
    g_autoptr(GError) error = NULL;
    g_strlcpy(env_id, argv[2], sizeof env_id);
    PortalKeyringAuth *auth = make_auth();
    gboolean ok = FALSE;
    if (auth && strcmp(argv[1], "persist") == 0 && argc == 4) {
        PortalKeyringSession *session = portal_keyring_auth_persist_session_sync(auth, argv[3], "cst-watch.Token_0123",
                                                                                 NULL, &error);
        ok = session != NULL;
        g_clear_object(&session);
    } else if (auth && strcmp(argv[1], "clear") == 0) {
        ok = portal_keyring_auth_clear_persisted_session_sync(auth, NULL, &error);
    }
    if (!ok) fprintf(stderr, "watch_test %s: %s\n", argv[1], error ? error->message : "bad arguments");
    g_clear_object(&auth);
    return ok ? 0 : 1;
}

static void run_other_process(const char *what, const char *end_user_id) {
    char *argv[] = {(char *)self_path, (char *)what, env_id, (char *)end_user_id, NULL};
    int status = -1;
    g_autoptr(GError) error = NULL;
    CHECK_MSG(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL, &status, &error) &&
                  g_spawn_check_wait_status(status, NULL),
              "the other process's %s failed: %s", what, error ? error->message : "exit status");
}

/* The worker of test_other_process: a watch made on a context of its own, iterated here until the
 * sign-out, while the main thread iterates the default one. */
typedef struct {
    Seen seen;
    volatile int live; /* set once STARTED came */
    int finalised;
} Worker;

static gpointer worker_watch(gpointer data) {
    Worker *worker = data;
    GMainContext *context = g_main_context_new();
    g_main_context_push_thread_default(context);
    PortalKeyringAuth *auth = make_auth();
    PortalKeyringWatch *watch = make_watch(auth, &worker->seen);
    CHECK(spin_until(context, &worker->seen.started, 1, 10000));
    g_atomic_int_set(&worker->live, 1);
    CHECK(spin_until(context, &worker->seen.signed_out, 1, 20000));
    portal_keyring_watch_stop(watch);
    unref_last(watch);
    g_object_unref(auth);
    g_main_context_pop_thread_default(context);
    g_main_context_unref(context);
    return NULL;
}

static void test_other_process(void) {
    check_context = "another process signs in and out";
    PortalKeyringAuth *auth = make_auth();
    CHECK(portal_keyring_auth_clear_persisted_session_sync(auth, NULL, NULL));
    Seen seen = {0};
    PortalKeyringWatch *watch = make_watch(auth, &seen);
    CHECK_MSG(seen.started == 0, "STARTED emitted inside portal_keyring_watch_new()");
    CHECK(portal_keyring_watch_get_auth(watch) == auth);
    Worker worker = {0};
    GThread *thread = g_thread_new("watch-test-worker", worker_watch, &worker);
    CHECK(spin_until(NULL, &seen.started, 1, 10000));
    CHECK(spin_until(NULL, &worker.live, 1, 10000));

    run_other_process("persist", "end-user-watch");
    CHECK(spin_until(NULL, &seen.signed_in, 1, 10000));
    CHECK_MSG(strcmp(seen.end_user_id, "end-user-watch") == 0, "SIGNED_IN named \"%s\"", seen.end_user_id);
    run_other_process("clear", NULL);
    CHECK(spin_until(NULL, &seen.signed_out, 1, 10000));
    g_thread_join(thread);
    printf("main context: started %d, signed in %d (\"%s\"), signed out %d, other %d\n", seen.started, seen.signed_in,
           seen.end_user_id, seen.signed_out, seen.other);

    for (Seen *s = &seen; s; s = s == &seen ? &worker.seen : NULL) {
        const char *where = s == &seen ? "main" : "worker";
        CHECK_MSG(s->misplaced == 0, "%s watch: %d signals off its thread or context", where, s->misplaced);
        CHECK_MSG(s->started == 1 && s->failed == 0, "%s watch: started %d, failed %d", where, s->started, s->failed);
        CHECK_MSG(s->signed_in >= 1 && strcmp(s->end_user_id, "end-user-watch") == 0, "%s watch: signed in %d as \"%s\"",
                  where, s->signed_in, s->end_user_id);
        CHECK_MSG(s->signed_out >= 1 && !s->signed_out_had_id, "%s watch: signed out %d (with an id: %d)", where,
                  s->signed_out, s->signed_out_had_id);
        CHECK_MSG(s->signed_in_origin == PORTAL_KEYRING_WATCH_ORIGIN_OTHER_PROCESS &&
                      s->signed_out_origin == PORTAL_KEYRING_WATCH_ORIGIN_OTHER_PROCESS,
                  "%s watch: another process's sign-in and out had origins %d and %d", where, s->signed_in_origin,
                  s->signed_out_origin);
    }
    CHECK(portal_keyring_watch_get_origin(watch) == PORTAL_KEYRING_WATCH_ORIGIN_UNKNOWN); /* outside a handler */

    /* This process's own sign-in and sign-out: the same events, with the origin THIS_PROCESS. */
    g_autoptr(PortalKeyringSession) own =
        portal_keyring_auth_persist_session_sync(auth, "end-user-own", "cst-watch.Own_0123", NULL, NULL);
    CHECK(own != NULL);
    CHECK(spin_until(NULL, &seen.signed_in, 2, 10000));
    CHECK_MSG(seen.signed_in_origin == PORTAL_KEYRING_WATCH_ORIGIN_THIS_PROCESS, "own sign-in: origin %d",
              seen.signed_in_origin);
    CHECK(portal_keyring_auth_clear_persisted_session_sync(auth, NULL, NULL));
    CHECK(spin_until(NULL, &seen.signed_out, 2, 10000));
    CHECK_MSG(seen.signed_out_origin == PORTAL_KEYRING_WATCH_ORIGIN_THIS_PROCESS, "own sign-out: origin %d",
              seen.signed_out_origin);

    /* Stopped: a change after it is not emitted. */
    portal_keyring_watch_stop(watch);
    portal_keyring_watch_stop(watch);
    int before = seen.signed_in;
    run_other_process("persist", "end-user-after-stop");
    spin_for(1000);
    CHECK_MSG(seen.signed_in == before, "a stopped watch emitted SIGNED_IN");
    unref_last(watch);
    CHECK(portal_keyring_auth_clear_persisted_session_sync(auth, NULL, NULL));
    g_object_unref(auth);
}

/* With no session bus (this program as `watch_test no-bus ENV`): the watch is made, and
 * FAILED, with a message naming the bus, is its only signal. */
static int no_bus(void) {
    check_context = "no session bus";
    PortalKeyringAuth *auth = make_auth();
    Seen seen = {0};
    PortalKeyringWatch *watch = make_watch(auth, &seen);
    CHECK(spin_until(NULL, &seen.failed, 1, 10000));
    spin_for(200);
    CHECK_MSG(seen.failed == 1 && seen.started + seen.signed_in + seen.signed_out + seen.other == 0,
              "failed %d, started %d, other events %d", seen.failed, seen.started,
              seen.signed_in + seen.signed_out + seen.other);
    CHECK_MSG(strstr(seen.end_user_id, "bus") != NULL, "FAILED's message: \"%s\"", seen.end_user_id);
    CHECK(seen.misplaced == 0);
    unref_last(watch);
    g_object_unref(auth);
    return failures ? 1 : 0;
}

static void test_no_bus(void) {
    check_context = "no session bus";
    char *argv[] = {(char *)self_path, "no-bus", env_id, NULL};
    char **envp = g_environ_unsetenv(g_get_environ(), "DBUS_SESSION_BUS_ADDRESS");
    int status = -1;
    g_autoptr(GError) error = NULL;
    CHECK_MSG(g_spawn_sync(NULL, argv, envp, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL, &status, &error) &&
                  g_spawn_check_wait_status(status, NULL),
              "the watch without a session bus: %s (see its lines above)", error ? error->message : "failed");
    g_strfreev(envp);
}

/* The provider's pid now: scripts/with-keyring.sh keeps it in $PORTAL_TEST_KEYRING_DIR/keyring.pid
 * (a restart changes it), else $PORTAL_TEST_KEYRING_PID. */
static pid_t provider_pid(void) {
    g_autofree char *path = g_build_filename(g_getenv("PORTAL_TEST_KEYRING_DIR") ?: "", "keyring.pid", NULL);
    g_autofree char *text = NULL;
    if (g_file_get_contents(path, &text, NULL, NULL) && atol(text) > 0) return (pid_t)atol(text);
    return (pid_t)atol(g_getenv("PORTAL_TEST_KEYRING_PID") ?: "0");
}

/* Runs call and checks that it returned within GAP_MS. */
#define CHECK_QUICK(what, call)                                                                          \
    do {                                                                                                 \
        gint64 t0_ = g_get_monotonic_time();                                                             \
        call;                                                                                            \
        gint64 took_ = (g_get_monotonic_time() - t0_) / 1000;                                            \
        printf("%s with the provider stopped: %lld ms\n", what, (long long)took_);                       \
        CHECK_MSG(took_ <= GAP_MS, "%s took %lld ms with the provider stopped", what, (long long)took_); \
    } while (0)

static void test_stopped_provider(void) {
    check_context = "provider stopped";
    pid_t provider = provider_pid();
    if (provider <= 0) {
        CHECK_MSG(0, "PORTAL_TEST_KEYRING_PID unset: run inside scripts/with-keyring.sh");
        return;
    }
    PortalKeyringAuth *auth = make_auth();
    Seen stopped = {0}, dropped = {0}, resumed = {0};
    PortalKeyringWatch *watch = NULL;
    guint timer = g_timeout_add(10, tick, NULL);
    spin_for(50);
    gap_reset();
    CHECK(kill(provider, SIGSTOP) == 0);

    /* Made, left 200 ms on the hung baseline read, stopped: no signal, no wait. */
    CHECK_QUICK("portal_keyring_watch_new", watch = make_watch(auth, &stopped));
    spin_for(200);
    CHECK_QUICK("portal_keyring_watch_stop", portal_keyring_watch_stop(watch));
    CHECK_QUICK("the last unref of a stopped watch", unref_last(watch));
    /* Made and dropped without stop: dispose stops it. */
    CHECK_QUICK("portal_keyring_watch_new", watch = make_watch(auth, &dropped));
    spin_for(200);
    CHECK_QUICK("the last unref of a running watch", unref_last(watch));
    /* Made while stopped, kept: it goes live once the provider resumes. */
    CHECK_QUICK("portal_keyring_watch_new", watch = make_watch(auth, &resumed));
    spin_for(300);
    CHECK(resumed.started == 0);

    CHECK(kill(provider, SIGCONT) == 0);
    printf("largest main-loop timer gap with the provider stopped: %.1f ms\n", max_gap / 1000.0);
    CHECK_MSG(max_gap <= GAP_MS * 1000, "the main loop stalled for %.1f ms (bound %d ms)", max_gap / 1000.0, GAP_MS);
    CHECK(spin_until(NULL, &resumed.started, 1, 2 * CALL_TIMEOUT_MS + 5000));
    spin_for(300);
    CHECK_MSG(stopped.started + stopped.signed_in + stopped.signed_out + stopped.other + stopped.failed == 0,
              "a watch stopped while the provider hung emitted a signal");
    CHECK_MSG(dropped.started + dropped.signed_in + dropped.signed_out + dropped.other + dropped.failed == 0,
              "a watch dropped while the provider hung emitted a signal");
    CHECK(resumed.misplaced == 0 && resumed.failed == 0);
    unref_last(watch);
    g_source_remove(timer);
    g_object_unref(auth);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "no-bus") == 0) return g_strlcpy(env_id, argv[2], sizeof env_id), no_bus();
    if (argc >= 3) return act(argc, argv);
    self_path = argv[0];
    g_snprintf(env_id, sizeof env_id, "gobject-watch-test-%d", (int)getpid());
    test_other_process();
    test_stopped_provider();
    test_no_bus();
    printf("watch_test: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
