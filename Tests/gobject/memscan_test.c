/*
 * memscan_test.c — no copy of the Client Session Token is left in this process's memory once the
 * GNOME API's objects that held it are finalised, and every operation runs from a worker thread
 * with a thread-default context of its own while the main context is never iterated.
 *
 *   scripts/with-keyring.sh scripts/with-portal-api.sh Tests/gobject/run.sh
 *
 * Each path has its own random token (a marker of Tests/c/memscan_test/: held masked, every clear
 * copy wiped), issued on the fake Portal API, and does, through the GObject API: persist, restore
 * (a PortalKeyringSession), portal_keyring_session_copy_token (checked, then released with
 * portal_keyring_token_free: the scan counts one copy more than the sessions hold while it is
 * held, none more right after), a PortalKeyringPortal (its validation request carries the token)
 * and a request, clear; then every object is unreffed and checked finalised (weak pointers), the
 * path's context runs for 1.5 s (the C handles wind down), and the whole process's writable memory
 * is scanned (Tests/c/memscan_test/scan.c): 0 copies of the token and of its stored form.
 *
 *   main-async, main-sync    the _async forms, then the _sync forms, on the main thread
 *   worker-async             the _async forms on a GThread that pushed its own GMainContext:
 *                            every callback runs on that thread and context; the main thread only
 *                            waits in g_thread_join (a callback queued on the main context would
 *                            never run, and its wait would fail)
 *   worker-sync, worker-sync-cancellable   the _sync forms on that worker (the blocking C calls;
 *                            with a cancellable, the _async forms on a private context)
 *
 * Reference cycles: each portal gets a handler whose closure holds a reference to the portal (as a
 * GJS or Python closure capturing it does) and one connected with g_signal_connect_object() to the
 * session. The app's unref leaves the portal alive (the closure holds it); the disconnect
 * finalises it; the session, held by the portal, goes with its own last unref.
 *
 * Under valgrind the paths and the finalisation checks run, the scans do not: valgrind's own
 * mappings (shadow memory, its heap) are part of the process, so a count there says nothing of
 * this layer.
 *
 * Prints one line per scan and "memscan_test: N checks, M failed"; exits 1 on any failure.
 */
#include "../c/memscan_test/memscan_test.h" /* first: it defines _GNU_SOURCE */
#include "gobject_wait.h"

#include <portal-keyring-gobject/portal-keyring-gobject.h>

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

#define END_USER "eu-memscan-gobject"

/* What memscan_test.h declares and Tests/c/memscan_test/main.c defines: this program's own. */
int report_only;
const char *api_url, *api_host, *cli;

/* A path: its forms, and the thread and thread-default context its callbacks must run on. */
typedef struct {
    const char *label;
    gboolean sync;
    GCancellable *cancellable; /* the _sync forms' */
    GThread *thread;
    GMainContext *context;
    struct marker marker;
} Path;

static void settle(GMainContext *context, int ms) {
    gint64 end = g_get_monotonic_time() + (gint64)ms * 1000;
    while (g_get_monotonic_time() < end) g_main_context_iteration(context, FALSE), g_usleep(2000);
}

/* Waits for an _async call's callback: it ran once, on the path's thread and context. */
static gboolean await(Path *path, Wait *wait) {
    gboolean done = wait_run(wait, path->context, 15000);
    CHECK_MSG(done, "%s: the callback never ran", path->label);
    CHECK_MSG(wait->thread == path->thread, "%s: a callback ran on another thread", path->label);
    CHECK_MSG(wait->context == path->context, "%s: a callback ran on another context", path->label);
    return done;
}

/* ---- each operation in the path's forms */

static PortalKeyringSession *persist(Path *path, PortalKeyringAuth *auth, const char *token, GError **error) {
    if (path->sync) return portal_keyring_auth_persist_session_sync(auth, END_USER, token, path->cancellable, error);
    Wait wait = {0};
    portal_keyring_auth_persist_session_async(auth, END_USER, token, NULL, wait_callback, &wait);
    PortalKeyringSession *session =
        await(path, &wait) ? portal_keyring_auth_persist_session_finish(auth, wait.result, error) : NULL;
    wait_clear(&wait);
    return session;
}

static PortalKeyringSession *restore(Path *path, PortalKeyringAuth *auth, GError **error) {
    if (path->sync) return portal_keyring_auth_restore_session_sync(auth, path->cancellable, error);
    Wait wait = {0};
    portal_keyring_auth_restore_session_async(auth, NULL, wait_callback, &wait);
    PortalKeyringSession *session =
        await(path, &wait) ? portal_keyring_auth_restore_session_finish(auth, wait.result, error) : NULL;
    wait_clear(&wait);
    return session;
}

static gboolean clear(Path *path, PortalKeyringAuth *auth, GError **error) {
    if (path->sync) return portal_keyring_auth_clear_persisted_session_sync(auth, path->cancellable, error);
    Wait wait = {0};
    portal_keyring_auth_clear_persisted_session_async(auth, NULL, wait_callback, &wait);
    gboolean cleared =
        await(path, &wait) && portal_keyring_auth_clear_persisted_session_finish(auth, wait.result, error);
    wait_clear(&wait);
    return cleared;
}

static PortalKeyringPortal *new_portal(Path *path, PortalKeyringSession *session, GError **error) {
    if (path->sync) return portal_keyring_portal_new_sync(session, path->cancellable, error);
    Wait wait = {0};
    portal_keyring_portal_new_async(session, NULL, wait_callback, &wait);
    PortalKeyringPortal *portal = await(path, &wait) ? portal_keyring_portal_new_finish(wait.result, error) : NULL;
    wait_clear(&wait);
    return portal;
}

static GBytes *request(Path *path, PortalKeyringPortal *portal, guint *status, GError **error) {
    if (path->sync)
        return portal_keyring_portal_request_sync(portal, "GET", "/api/v3/clients/me", NULL, status, path->cancellable,
                                                  error);
    Wait wait = {0};
    portal_keyring_portal_request_async(portal, "GET", "/api/v3/clients/me", NULL, NULL, wait_callback, &wait);
    GBytes *body = await(path, &wait) ? portal_keyring_portal_request_finish(portal, wait.result, status, error) : NULL;
    wait_clear(&wait);
    return body;
}

/* ---- the path */

static void on_invalidated(PortalKeyringPortal *portal, gpointer data) {
    (void)portal, (void)data;
    CHECK_MSG(FALSE, "a session the API knows was invalidated");
}

static void release_portal(gpointer portal, GClosure *closure) {
    (void)closure;
    g_object_unref(portal);
}

static void check_ok(const Path *path, gboolean ok, const char *what, GError **error) {
    CHECK_MSG(ok && *error == NULL, "%s: %s: %s", path->label, what, *error ? (*error)->message : "no error");
    g_clear_error(error);
}

/* Drops the last reference the test holds and checks that the object went with it. */
static void unref_last(const Path *path, gpointer object, const char *what) {
    if (!object) return;
    gpointer alive = object;
    g_object_add_weak_pointer(object, &alive);
    g_object_unref(object);
    CHECK_MSG(alive == NULL, "%s: %s outlived its last unref", path->label, what);
}

/* The portal: a handler whose closure holds it keeps it alive after the app's unref; the
 * disconnect finalises it. */
static void portal_part(Path *path, PortalKeyringSession *session) {
    GError *error = NULL;
    PortalKeyringPortal *portal = new_portal(path, session, &error);
    check_ok(path, portal != NULL, "portal construction", &error);
    if (!portal) return;
    gulong holding = g_signal_connect_data(portal, "session-invalidated", G_CALLBACK(on_invalidated),
                                           g_object_ref(portal), release_portal, 0);
    g_signal_connect_object(portal, "session-invalidated", G_CALLBACK(on_invalidated), session, 0);
    guint status = 0;
    GBytes *body = request(path, portal, &status, &error);
    check_ok(path, body != NULL && status == 200, "request", &error);
    gsize size = 0;
    const char *data = body ? g_bytes_get_data(body, &size) : NULL;
    CHECK_MSG(data && g_strstr_len(data, (gssize)size, END_USER), "%s: the body names the end user", path->label);
    g_clear_pointer(&body, g_bytes_unref);
    gpointer alive = portal;
    g_object_add_weak_pointer(G_OBJECT(portal), &alive);
    g_object_unref(portal);
    CHECK_MSG(alive != NULL, "%s: the portal went while a handler's closure held it", path->label);
    g_signal_handler_disconnect(portal, holding);
    CHECK_MSG(alive == NULL, "%s: the portal outlived the disconnect of the handler that held it", path->label);
}

static void run_path(Path *path) {
    path->thread = g_thread_self();
    path->context = g_main_context_ref_thread_default();
    g_main_context_unref(path->context); /* kept only for comparison */
    char prefix[48], env_id[96];
    g_snprintf(prefix, sizeof prefix, "gobject-%s-", path->label);
    make_marker(&path->marker, prefix);
    issue(&path->marker, END_USER);
    g_snprintf(env_id, sizeof env_id, "gobject-memscan-%s-%d", path->label, (int)getpid());
    GError *error = NULL;
    PortalKeyringAuth *auth =
        g_initable_new(PORTAL_KEYRING_TYPE_AUTH, NULL, &error, "auth-environment-id", env_id, "redirect-url",
                       "portalkeyring://auth/callback", "api-host", api_host, NULL);
    check_ok(path, auth != NULL, "auth", &error);
    if (!auth) return;

    char *token = marker_copy(&path->marker);
    PortalKeyringSession *persisted = persist(path, auth, token, &error);
    drop(token);
    check_ok(path, persisted != NULL, "persist", &error);
    PortalKeyringSession *session = restore(path, auth, &error);
    check_ok(path, session != NULL, "restore", &error);
    if (session) {
        /* The explicit call: the marker's bytes, one more copy while it is held (the scan's
         * control), none once it is released (the C library's copy wiped inside the call, the
         * one handed out by portal_keyring_token_free: a freed block is found here before any
         * later allocation reuses it). */
        long held = RUNNING_ON_VALGRIND ? 0 : count_copies(&path->marker); /* the sessions' own */
        char *copy = portal_keyring_session_copy_token(session, &error);
        check_ok(path, copy != NULL, "copy_token", &error);
        CHECK_MSG(copy && strlen(copy) == path->marker.len &&
                      scan_buffer(&path->marker, (const unsigned char *)copy, path->marker.len) == 1,
                  "%s: copy_token gave another token", path->label);
        long holding = copy && !RUNNING_ON_VALGRIND ? count_copies(&path->marker) : held + 1;
        CHECK_MSG(holding == held + 1, "%s: %ld copies while the copy is held, %ld before", path->label, holding, held);
        portal_keyring_token_free(copy);
        long after = RUNNING_ON_VALGRIND ? held : count_copies(&path->marker);
        CHECK_MSG(after == held, "%s: copy_token and token_free left %ld copies behind", path->label, after - held);
        portal_part(path, session);
    }
    check_ok(path, clear(path, auth, &error), "clear", &error);
    unref_last(path, session, "the restored session");
    unref_last(path, persisted, "the persisted session");
    unref_last(path, auth, "the auth");
    settle(path->context, 1500);
}

static gpointer run_on_worker(gpointer data) {
    GMainContext *context = g_main_context_new();
    g_main_context_push_thread_default(context);
    run_path(data);
    g_main_context_pop_thread_default(context);
    g_main_context_unref(context);
    return NULL;
}

/* Runs a path (on a worker: the main thread waits in g_thread_join, never iterating the main
 * context), then scans. */
static void run(const char *label, gboolean sync, gboolean cancellable, gboolean on_worker) {
    Path path = {.label = label, .sync = sync, .cancellable = cancellable ? g_cancellable_new() : NULL};
    check_context = label;
    if (on_worker)
        g_thread_join(g_thread_new(label, run_on_worker, &path));
    else
        run_path(&path);
    g_clear_object(&path.cancellable);
    if (RUNNING_ON_VALGRIND)
        printf("  %-24s scan skipped under valgrind\n", label);
    else
        expect_none(label, &path.marker);
}

int main(void) {
    api_url = getenv("PORTAL_TEST_API_URL");
    api_host = getenv("PORTAL_TEST_API_HOST");
    if (!api_url || !api_host) {
        fprintf(stderr, "memscan_test: run inside scripts/with-keyring.sh and scripts/with-portal-api.sh\n");
        return 2;
    }
    srandom((unsigned)time(NULL) ^ (unsigned)getpid());
    run("main-async", FALSE, FALSE, FALSE);
    run("main-sync", TRUE, FALSE, FALSE);
    run("worker-async", FALSE, FALSE, TRUE);
    run("worker-sync", TRUE, FALSE, TRUE);
    run("worker-sync-cancellable", TRUE, TRUE, TRUE);
    printf("memscan_test: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
