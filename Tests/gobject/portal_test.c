/*
 * portal_test.c — PortalKeyringPortal from C, against the private keyring of
 * scripts/with-keyring.sh and the loopback Portal API of scripts/with-portal-api.sh: a valid
 * session's requests in the three GIO forms; a session the API rejects (HTTP 401, its token
 * revoked through /_admin/revoke) turning PortalKeyringPortal:invalidated TRUE and emitting
 * ::session-invalidated exactly once, on the construction's thread-default context (a pushed
 * one; the main loop's for a portal initialised on a worker), with a handler connected after the
 * rejection learning it from the property; cancels completing at
 * once with G_IO_ERROR_CANCELLED while the API is slow (/_admin/faults); errors by code; every
 * portal finalised with its last unref, its session outliving it (no reference cycle).
 *
 * Prints a line a failed check (check.h) and "portal_test: N checks, M failed"; exits 1 on any.
 */
#define _GNU_SOURCE
#include "fake_api.h"
#include "gobject_wait.h"

#include <portal-keyring-gobject/portal-keyring-gobject.h>

#define END_USER "end-user-gobject-portal"

static char env_id[64];
static PortalKeyringAuth *auth;

/* What one portal's handlers saw: the signal's and notify's counts, and where the signal ran. */
typedef struct {
    int signals, notifies;
    GThread *thread;
    GMainContext *context;
} Seen;

static void on_invalidated(PortalKeyringPortal *portal, gpointer data) {
    Seen *seen = data;
    seen->signals++;
    seen->thread = g_thread_self();
    seen->context = g_main_context_get_thread_default();
    CHECK_MSG(portal_keyring_portal_get_invalidated(portal), "the property is TRUE when the signal runs");
}

static void on_notify(GObject *portal, GParamSpec *pspec, gpointer data) {
    (void)portal, (void)pspec;
    ((Seen *)data)->notifies++;
}

static void watch(PortalKeyringPortal *portal, Seen *seen) {
    g_signal_connect(portal, "session-invalidated", G_CALLBACK(on_invalidated), seen);
    g_signal_connect(portal, "notify::invalidated", G_CALLBACK(on_notify), seen);
}

/* Iterates context for ms: time for a second (wrong) emission to show. */
static void settle(GMainContext *context, int ms) {
    gint64 end = g_get_monotonic_time() + (gint64)ms * 1000;
    while (g_get_monotonic_time() < end) g_main_context_iteration(context, FALSE), g_usleep(2000);
}

static void admin(const char *method, const char *path, const char *json) {
    char ignored[256];
    CHECK_MSG(fake_api_admin(method, path, json, "1", ignored, sizeof ignored) == 0, "%s %s", method, path);
}

/* A session the API knows (token minted by /_admin/sessions), persisted and then restored. */
static PortalKeyringSession *stored_session(char *token, size_t size) {
    char json[256];
    g_snprintf(json, sizeof json, "{\"endUserId\":\"%s\"}", END_USER);
    CHECK(fake_api_admin("POST", "/_admin/sessions", json, "d[\"data\"][\"token\"]", token, size) == 0 && token[0]);
    g_autoptr(GError) error = NULL;
    g_autoptr(PortalKeyringSession) persisted =
        portal_keyring_auth_persist_session_sync(auth, END_USER, token, NULL, &error);
    CHECK_MSG(persisted != NULL, "persist: %s", error ? error->message : "");
    g_clear_error(&error);
    PortalKeyringSession *session = portal_keyring_auth_restore_session_sync(auth, NULL, &error);
    CHECK_MSG(session != NULL, "restore: %s", error ? error->message : "signed out");
    return session;
}

static void revoke_token(const char *token) {
    char json[512];
    g_snprintf(json, sizeof json, "{\"token\":\"%s\"}", token);
    admin("POST", "/_admin/revoke", json);
}

static PortalKeyringPortal *new_portal(PortalKeyringSession *session, GCancellable *cancellable, GError **error) {
    Wait wait = {0};
    portal_keyring_portal_new_async(session, cancellable, wait_callback, &wait);
    CHECK_MSG(wait.done == 0, "the callback ran inside the _async call");
    CHECK(wait_run(&wait, NULL, 15000));
    CHECK(wait.thread == g_thread_self());
    PortalKeyringPortal *portal = portal_keyring_portal_new_finish(wait.result, error);
    wait_clear(&wait);
    return portal;
}

static GBytes *request(PortalKeyringPortal *portal, const char *target, GCancellable *cancellable, guint *status,
                       GError **error) {
    Wait wait = {0};
    portal_keyring_portal_request_async(portal, "GET", target, NULL, cancellable, wait_callback, &wait);
    CHECK(wait_run(&wait, NULL, 15000));
    GBytes *body = portal_keyring_portal_request_finish(portal, wait.result, status, error);
    wait_clear(&wait);
    return body;
}

/* Drops the last reference and checks that the object went with it. */
static void unref_last(gpointer object, const char *what) {
    gpointer alive = object;
    g_object_add_weak_pointer(object, &alive);
    g_object_unref(object);
    CHECK_MSG(alive == NULL, "%s outlived its last unref", what);
}

static void test_valid(void) {
    check_context = "valid session";
    char token[512];
    PortalKeyringSession *session = stored_session(token, sizeof token);
    g_autoptr(GError) error = NULL;
    PortalKeyringPortal *portal = new_portal(session, NULL, &error);
    CHECK_MSG(portal != NULL && error == NULL, "construction: %s", error ? error->message : "");
    if (!portal) return;
    Seen seen = {0};
    watch(portal, &seen);
    CHECK(!portal_keyring_portal_get_invalidated(portal));
    CHECK(portal_keyring_portal_get_session(portal) == session);

    guint status = 0;
    g_autoptr(GBytes) body = request(portal, "/api/v3/clients/me", NULL, &status, &error);
    CHECK_MSG(body != NULL && status == 200, "status %u: %s", status, error ? error->message : "");
    CHECK(body && g_strstr_len(g_bytes_get_data(body, NULL), (gssize)g_bytes_get_size(body), END_USER));
    g_autoptr(GBytes) sync_body =
        portal_keyring_portal_request_sync(portal, "GET", "/api/v3/clients/me", NULL, &status, NULL, &error);
    CHECK_MSG(sync_body != NULL && status == 200, "sync: status %u: %s", status, error ? error->message : "");
    g_autoptr(GCancellable) cancellable = g_cancellable_new();
    g_autoptr(GBytes) cancellable_body =
        portal_keyring_portal_request_sync(portal, "GET", "/api/v3/clients/me", NULL, NULL, cancellable, &error);
    CHECK_MSG(cancellable_body != NULL, "sync with a cancellable: %s", error ? error->message : "");

    /* Errors by code: one per C status. */
    CHECK(portal_keyring_portal_request_sync(portal, "get", "/api/v3/clients/me", NULL, NULL, NULL, &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);
    CHECK(request(portal, "https://127.0.0.1:1/api/v3/clients/me", NULL, NULL, &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_NETWORK);
    g_clear_error(&error);
    CHECK(portal_keyring_portal_new_sync(NULL, NULL, &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);

    settle(NULL, 300);
    CHECK_MSG(seen.signals == 0 && seen.notifies == 0, "a valid session invalidated: %d signals", seen.signals);
    /* The portal holds the session; the session, the handlers' data and the C listener hold
     * nothing of the portal. */
    unref_last(portal, "a portal");
    unref_last(session, "the session");
}

/* Rejected at construction: a handler connected before the initialisation is called once; one
 * connected after it is not called, and learns the rejection from the property. */
static void test_rejected_at_construction(void) {
    check_context = "rejected at construction";
    char token[512];
    PortalKeyringSession *session = stored_session(token, sizeof token);
    revoke_token(token);
    Seen early = {0};
    PortalKeyringPortal *portal = g_object_new(PORTAL_KEYRING_TYPE_PORTAL, "session", session, NULL);
    watch(portal, &early);
    Wait wait = {0};
    g_async_initable_init_async(G_ASYNC_INITABLE(portal), G_PRIORITY_DEFAULT, NULL, wait_callback, &wait);
    CHECK(wait_run(&wait, NULL, 15000));
    g_autoptr(GError) error = NULL;
    CHECK_MSG(g_async_initable_init_finish(G_ASYNC_INITABLE(portal), wait.result, &error),
              "a rejected session fails no construction: %s", error ? error->message : "");
    wait_clear(&wait);
    CHECK(portal_keyring_portal_get_invalidated(portal));
    CHECK_MSG(early.signals == 1 && early.notifies == 1, "at construction: %d signals, %d notifies", early.signals,
              early.notifies);
    /* Both the validation and the C listener saw the 401: still one emission. */
    settle(NULL, 1000);
    CHECK_MSG(early.signals == 1 && early.notifies == 1, "later: %d signals, %d notifies", early.signals,
              early.notifies);
    CHECK(early.thread == g_thread_self() && early.context == NULL);
    g_autofree char *copy = portal_keyring_session_copy_token(session, &error);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_SESSION_INVALIDATED);
    g_clear_error(&error);
    CHECK(request(portal, "/api/v3/clients/me", NULL, NULL, &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_SESSION_INVALIDATED);
    g_clear_error(&error);
    CHECK_MSG(portal_keyring_auth_restore_session_sync(auth, NULL, &error) == NULL && error == NULL,
              "the rejected session's item is deleted");
    unref_last(portal, "a rejected portal");
    unref_last(session, "the rejected session");

    PortalKeyringSession *again = stored_session(token, sizeof token);
    revoke_token(token);
    PortalKeyringPortal *late = new_portal(again, NULL, &error);
    CHECK_MSG(late != NULL, "construction: %s", error ? error->message : "");
    if (!late) return;
    Seen seen = {0};
    watch(late, &seen);
    CHECK_MSG(portal_keyring_portal_get_invalidated(late), "a late handler learns it from the property");
    settle(NULL, 1000);
    CHECK_MSG(seen.signals == 0, "the signal was emitted again for a late handler: %d", seen.signals);
    unref_last(late, "a late-connected portal");
    unref_last(again, "its session");

    /* The sync form: the property is TRUE when it returns. */
    PortalKeyringSession *third = stored_session(token, sizeof token);
    revoke_token(token);
    PortalKeyringPortal *sync = portal_keyring_portal_new_sync(third, NULL, &error);
    CHECK_MSG(sync && portal_keyring_portal_get_invalidated(sync), "new_sync: %s", error ? error->message : "");
    if (sync) unref_last(sync, "a portal made with new_sync");
    unref_last(third, "its session");
}

/* Rejected later, on a context of its own: the signal runs there, once, and only there. */
static void test_rejected_later(void) {
    check_context = "rejected later";
    char token[512];
    PortalKeyringSession *session = stored_session(token, sizeof token);
    GMainContext *context = g_main_context_new();
    g_main_context_push_thread_default(context);
    g_autoptr(GError) error = NULL;
    Wait wait = {0};
    portal_keyring_portal_new_async(session, NULL, wait_callback, &wait);
    CHECK(wait_run(&wait, context, 15000));
    PortalKeyringPortal *portal = portal_keyring_portal_new_finish(wait.result, &error);
    wait_clear(&wait);
    CHECK_MSG(portal && !portal_keyring_portal_get_invalidated(portal), "construction: %s",
              error ? error->message : "");
    if (portal) {
        Seen seen = {0};
        watch(portal, &seen);
        revoke_token(token);
        guint status = 0;
        portal_keyring_portal_request_async(portal, "GET", "/api/v3/clients/me", NULL, NULL, wait_callback, &wait);
        CHECK(wait_run(&wait, context, 15000));
        g_autoptr(GBytes) body = portal_keyring_portal_request_finish(portal, wait.result, &status, &error);
        wait_clear(&wait);
        CHECK_MSG(body != NULL && status == 401, "a 401 is an answer: status %u, %s", status,
                  error ? error->message : "");
        /* Only this context is iterated: a signal meant for another context never comes. */
        gint64 end = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
        while (seen.signals == 0 && g_get_monotonic_time() < end)
            g_main_context_iteration(context, FALSE), g_usleep(1000);
        settle(context, 500);
        CHECK_MSG(seen.signals == 1 && seen.notifies == 1, "%d signals, %d notifies", seen.signals, seen.notifies);
        CHECK(seen.thread == g_thread_self() && seen.context == context);
        CHECK(portal_keyring_portal_get_invalidated(portal));
        unref_last(portal, "a portal invalidated later");
    }
    g_main_context_pop_thread_default(context);
    settle(context, 50);
    g_main_context_unref(context);
    unref_last(session, "its session");
}

typedef struct {
    PortalKeyringPortal *portal;
    GMainLoop *loop;
    gboolean initialised;
} Worker;

static gpointer init_on_worker(gpointer data) {
    Worker *worker = data;
    worker->initialised = g_initable_init(G_INITABLE(worker->portal), NULL, NULL);
    return NULL;
}

/* Runs inside the main loop, which holds the global default context meanwhile: the worker can
 * neither take it nor have anything of it dispatched until it is done, so an emission made on
 * the worker shows as one. */
static gboolean run_worker(gpointer data) {
    Worker *worker = data;
    g_thread_join(g_thread_new("portal-test", init_on_worker, worker));
    g_main_loop_quit(worker->loop);
    return G_SOURCE_REMOVE;
}

/* Initialised (the sync form) on a worker that pushed no context while the main thread runs the
 * global default context's loop: the signal runs there, on the main thread, once. */
static void test_made_on_worker(void) {
    check_context = "made on a worker";
    char token[512];
    PortalKeyringSession *session = stored_session(token, sizeof token);
    revoke_token(token);
    Worker worker = {g_object_new(PORTAL_KEYRING_TYPE_PORTAL, "session", session, NULL), g_main_loop_new(NULL, FALSE),
                     FALSE};
    Seen seen = {0};
    watch(worker.portal, &seen);
    g_idle_add(run_worker, &worker);
    g_main_loop_run(worker.loop);
    gint64 end = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
    while (seen.signals == 0 && g_get_monotonic_time() < end) g_main_context_iteration(NULL, FALSE), g_usleep(1000);
    settle(NULL, 500);
    CHECK(worker.initialised);
    CHECK_MSG(seen.signals == 1 && seen.notifies == 1, "%d signals, %d notifies", seen.signals, seen.notifies);
    CHECK(seen.thread == g_thread_self() && seen.context == NULL);
    g_main_loop_unref(worker.loop);
    unref_last(worker.portal, "a portal made on a worker");
    unref_last(session, "its session");
}

/* With the API slow (every validation and request delayed 5 s), a cancel completes at once. */
static void test_cancel(void) {
    check_context = "cancel";
    char token[512];
    PortalKeyringSession *session = stored_session(token, sizeof token);
    g_autoptr(GError) error = NULL;
    PortalKeyringPortal *portal = new_portal(session, NULL, &error);
    CHECK_MSG(portal != NULL, "construction: %s", error ? error->message : "");
    admin("POST", "/_admin/faults", "{\"route\":\"/api/v3/clients/me\",\"delayMs\":5000}");

    GCancellable *cancellable = g_cancellable_new();
    Wait wait = {0};
    portal_keyring_portal_new_async(session, cancellable, wait_callback, &wait);
    settle(NULL, 100);
    gint64 start = g_get_monotonic_time();
    g_cancellable_cancel(cancellable);
    CHECK(wait_run(&wait, NULL, 1000));
    CHECK_MSG(g_get_monotonic_time() - start < 1000 * 1000, "new_async completed %lld ms after the cancel",
              (long long)((g_get_monotonic_time() - start) / 1000));
    CHECK(portal_keyring_portal_new_finish(wait.result, &error) == NULL);
    CHECK_GERROR(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
    g_clear_error(&error);
    wait_clear(&wait);
    g_object_unref(cancellable);

    if (portal) {
        cancellable = g_cancellable_new();
        portal_keyring_portal_request_async(portal, "GET", "/api/v3/clients/me", NULL, cancellable, wait_callback,
                                            &wait);
        settle(NULL, 100);
        start = g_get_monotonic_time();
        g_cancellable_cancel(cancellable);
        CHECK(wait_run(&wait, NULL, 1000));
        CHECK(g_get_monotonic_time() - start < 1000 * 1000);
        CHECK(portal_keyring_portal_request_finish(portal, wait.result, NULL, &error) == NULL);
        CHECK_GERROR(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
        g_clear_error(&error);
        wait_clear(&wait);
        /* Already cancelled: the sync form fails at once too. */
        start = g_get_monotonic_time();
        CHECK(portal_keyring_portal_request_sync(portal, "GET", "/api/v3/clients/me", NULL, NULL, cancellable,
                                                 &error) == NULL);
        CHECK_GERROR(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
        CHECK(g_get_monotonic_time() - start < 1000 * 1000);
        g_clear_error(&error);
        g_object_unref(cancellable);
    }
    admin("DELETE", "/_admin/faults", NULL);
    if (portal) {
        CHECK(!portal_keyring_portal_get_invalidated(portal));
        unref_last(portal, "a portal whose request was cancelled");
    }
    unref_last(session, "its session");
}

int main(void) {
    g_snprintf(env_id, sizeof env_id, "gobject-portal-test-%d", (int)getpid());
    g_autoptr(GError) error = NULL;
    auth = g_initable_new(PORTAL_KEYRING_TYPE_AUTH, NULL, &error, "auth-environment-id", env_id, "redirect-url",
                          "portalkeyring://auth/callback", "api-host", getenv("PORTAL_TEST_API_HOST"), NULL);
    CHECK_MSG(auth != NULL, "auth: %s", error ? error->message : "");
    if (auth) {
        test_valid();
        test_rejected_at_construction();
        test_rejected_later();
        test_made_on_worker();
        test_cancel();
        CHECK(portal_keyring_auth_clear_persisted_session_sync(auth, NULL, NULL));
        unref_last(auth, "the auth");
    }
    /* The freed portals' C handles wind down on a worker (aborted requests: about a second). */
    settle(NULL, 1500);
    printf("portal_test: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
