/*
 * gobject_test.c — the GNOME API (libportal-keyring-gobject-1.so) from C, against the private
 * keyring of scripts/with-keyring.sh: construction errors as GErrors, restore / persist / clear in
 * the three GIO forms, "signed out" (NULL, no error) told apart from a keyring that cannot be read
 * (PORTAL_KEYRING_ERROR_SESSION_STORAGE), cancellation (G_IO_ERROR_CANCELLED, at once, also with
 * the provider stopped), completions on the thread-default context of the calling thread, and
 * every object finalised with its last unref.
 *
 *   PORTAL_TEST_KEYRING_PID=… gobject_test      (the provider's pid: stopped with SIGSTOP for the
 *                                               stalled-keyring cases)
 *
 * Prints a line a failed check (check.h) and "gobject_test: N checks, M failed"; exits 1 on any.
 */
#define _GNU_SOURCE
#include "gobject_wait.h"
#include "main_loop.h"

#include <portal-keyring-gobject/portal-keyring-gobject.h>

#include <signal.h>
#include <sys/types.h>

#define TOKEN "cst-gobject-test.Token_0123456789"
#define END_USER "end-user-gobject"

static char env_id[64];
static pid_t provider_pid;

static PortalKeyringAuth *make_auth(guint call_timeout_ms) {
    g_autoptr(GError) error = NULL;
    PortalKeyringAuth *auth = g_initable_new(PORTAL_KEYRING_TYPE_AUTH, NULL, &error, "auth-environment-id", env_id,
                                             "redirect-url", "portalkeyring://auth/callback", "call-timeout-ms",
                                             call_timeout_ms, NULL);
    CHECK_MSG(auth != NULL && error == NULL, "construction failed: %s", error ? error->message : "");
    return auth;
}

static void test_bad_arguments(void) {
    check_context = "bad arguments";
    GError *error = NULL;
    PortalKeyringAuth *auth = portal_keyring_auth_new("", "myapp://auth", NULL, &error);
    CHECK(auth == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
    CHECK_MSG(error && strstr(error->message, "auth_environment_id"), "message: %s", error ? error->message : "");
    g_clear_error(&error);

    auth = portal_keyring_auth_new(NULL, "myapp://auth", NULL, &error);
    CHECK(auth == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);

    auth = portal_keyring_auth_new(env_id, "javascript:alert(1)", NULL, &error);
    CHECK(auth == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
    CHECK_MSG(error && strstr(error->message, "redirect_url"), "message: %s", error ? error->message : "");
    g_clear_error(&error);

    auth = portal_keyring_auth_new(env_id, "myapp://auth", "evil.test/x", &error);
    CHECK(auth == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);

    /* An out-of-range timeout is the C library's to refuse, as a GError, not a GLib warning. */
    PortalKeyringAuth *half = g_object_new(PORTAL_KEYRING_TYPE_AUTH, "auth-environment-id", env_id, "redirect-url",
                                           "myapp://auth", "prompt-timeout-ms", 600001u, NULL);
    CHECK(!g_initable_init(G_INITABLE(half), NULL, &error));
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
    CHECK_MSG(error && g_str_has_prefix(error->message, "prompt-timeout-ms: "), "message: %s",
              error ? error->message : "");
    g_clear_error(&error);
    /* A second init answers as the first; an operation on the failed object fails the same way. */
    CHECK(!g_initable_init(G_INITABLE(half), NULL, &error));
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);
    CHECK(portal_keyring_auth_restore_session_sync(half, NULL, &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);
    Wait wait = {0};
    portal_keyring_auth_restore_session_async(half, NULL, wait_callback, &wait);
    CHECK_MSG(wait.done == 0, "the callback ran inside the _async call");
    CHECK(wait_run(&wait, NULL, 1000));
    CHECK(portal_keyring_auth_restore_session_finish(half, wait.result, &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);
    wait_clear(&wait);
    g_object_unref(half);

    /* Never initialised: the operations say so instead of crashing. */
    PortalKeyringAuth *raw = g_object_new(PORTAL_KEYRING_TYPE_AUTH, "auth-environment-id", env_id, "redirect-url",
                                          "myapp://auth", NULL);
    CHECK(!portal_keyring_auth_clear_persisted_session_sync(raw, NULL, &error));
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
    CHECK_MSG(error && strstr(error->message, "initialis"), "message: %s", error ? error->message : "");
    g_clear_error(&error);
    g_object_unref(raw);

    /* A bad persist argument is the operation's error, at its completion. */
    PortalKeyringAuth *good = make_auth(5000);
    portal_keyring_auth_persist_session_async(good, END_USER, "token with spaces", NULL, wait_callback, &wait);
    CHECK(wait_run(&wait, NULL, 5000));
    CHECK(portal_keyring_auth_persist_session_finish(good, wait.result, &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
    CHECK_MSG(error && strstr(error->message, "client_session_token"), "message: %s", error ? error->message : "");
    g_clear_error(&error);
    wait_clear(&wait);
    CHECK(portal_keyring_auth_persist_session_sync(good, "", TOKEN, NULL, &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);
    g_object_unref(good);
}

static void test_async_round_trip(void) {
    check_context = "async round trip";
    GError *error = NULL;
    PortalKeyringAuth *auth = make_auth(5000);
    gpointer auth_alive = auth;
    g_object_add_weak_pointer(G_OBJECT(auth), &auth_alive);
    Wait wait = {0};

    portal_keyring_auth_clear_persisted_session_async(auth, NULL, wait_callback, &wait);
    CHECK(wait_run(&wait, NULL, 10000));
    CHECK(portal_keyring_auth_clear_persisted_session_finish(auth, wait.result, &error));
    CHECK_MSG(error == NULL, "clear: %s", error ? error->message : "");
    g_clear_error(&error);
    wait_clear(&wait);

    /* Signed out: NULL and no error. */
    portal_keyring_auth_restore_session_async(auth, NULL, wait_callback, &wait);
    CHECK_MSG(wait.done == 0, "the callback ran inside the _async call");
    CHECK(wait_run(&wait, NULL, 10000));
    CHECK(wait.source == G_OBJECT(auth));
    CHECK(wait.thread == g_thread_self());
    PortalKeyringSession *session = portal_keyring_auth_restore_session_finish(auth, wait.result, &error);
    CHECK_MSG(session == NULL && error == NULL, "signed out: session %p, error %s", (void *)session,
              error ? error->message : "none");
    g_clear_error(&error);
    wait_clear(&wait);

    portal_keyring_auth_persist_session_async(auth, END_USER, TOKEN, NULL, wait_callback, &wait);
    CHECK(wait_run(&wait, NULL, 15000));
    session = portal_keyring_auth_persist_session_finish(auth, wait.result, &error);
    CHECK_MSG(session != NULL && error == NULL, "persist: %s", error ? error->message : "");
    if (session) {
        CHECK(g_strcmp0(portal_keyring_session_get_end_user_id(session), END_USER) == 0);
        g_object_unref(session);
    }
    g_clear_error(&error);
    wait_clear(&wait);

    portal_keyring_auth_restore_session_async(auth, NULL, wait_callback, &wait);
    CHECK(wait_run(&wait, NULL, 10000));
    session = portal_keyring_auth_restore_session_finish(auth, wait.result, &error);
    CHECK_MSG(session != NULL && error == NULL, "restore: %s", error ? error->message : "none, and no session");
    g_clear_error(&error);
    wait_clear(&wait);
    if (session) {
        gpointer session_alive = session;
        g_object_add_weak_pointer(G_OBJECT(session), &session_alive);
        CHECK(g_strcmp0(portal_keyring_session_get_end_user_id(session), END_USER) == 0);
        CHECK(g_strcmp0(portal_keyring_session_get_auth_environment_id(session), env_id) == 0);
        CHECK(portal_keyring_session_get_client_id(session) == NULL);
        CHECK(portal_keyring_session_get_account_abstraction(session) == PORTAL_KEYRING_ACCOUNT_ABSTRACTION_DEFAULT);
        g_autofree char *end_user = NULL, *client = NULL;
        PortalKeyringAccountAbstraction abstraction = PORTAL_KEYRING_ACCOUNT_ABSTRACTION_ON;
        g_object_get(session, "end-user-id", &end_user, "client-id", &client, "account-abstraction", &abstraction,
                     NULL);
        CHECK(g_strcmp0(end_user, END_USER) == 0 && client == NULL &&
              abstraction == PORTAL_KEYRING_ACCOUNT_ABSTRACTION_DEFAULT);
        /* The token only through the explicit call, and no property names it. */
        CHECK(g_object_class_find_property(G_OBJECT_GET_CLASS(session), "token") == NULL);
        char *token = portal_keyring_session_copy_token(session, &error);
        CHECK_MSG(g_strcmp0(token, TOKEN) == 0, "token %s, error %s", token ? "differs" : "NULL",
                  error ? error->message : "none");
        g_clear_error(&error);
        portal_keyring_token_free(token);
        g_object_unref(session);
        CHECK_MSG(session_alive == NULL, "the session outlived its last reference");
    }

    portal_keyring_auth_clear_persisted_session_async(auth, NULL, wait_callback, &wait);
    CHECK(wait_run(&wait, NULL, 10000));
    CHECK(portal_keyring_auth_clear_persisted_session_finish(auth, wait.result, &error));
    g_clear_error(&error);
    wait_clear(&wait);
    portal_keyring_auth_restore_session_async(auth, NULL, wait_callback, &wait);
    CHECK(wait_run(&wait, NULL, 10000));
    session = portal_keyring_auth_restore_session_finish(auth, wait.result, &error);
    CHECK_MSG(session == NULL && error == NULL, "after clear: signed out");
    g_clear_error(&error);
    wait_clear(&wait);

    g_object_unref(auth);
    CHECK_MSG(auth_alive == NULL, "the auth outlived its last reference");
}

static void test_sync(void) {
    check_context = "sync";
    GError *error = NULL;
    PortalKeyringAuth *auth = make_auth(5000);
    GCancellable *cancellable = g_cancellable_new();
    PortalKeyringSession *session = portal_keyring_auth_persist_session_sync(auth, END_USER, TOKEN, NULL, &error);
    CHECK_MSG(session != NULL && error == NULL, "persist_sync: %s", error ? error->message : "");
    g_clear_error(&error);
    g_clear_object(&session);
    /* Without a cancellable (the blocking C call) and with one (the _async form on a private
     * context): the same answers. */
    session = portal_keyring_auth_restore_session_sync(auth, NULL, &error);
    CHECK(session != NULL && g_strcmp0(portal_keyring_session_get_end_user_id(session), END_USER) == 0);
    g_clear_error(&error);
    g_clear_object(&session);
    session = portal_keyring_auth_restore_session_sync(auth, cancellable, &error);
    CHECK_MSG(session != NULL && error == NULL, "restore_sync with a cancellable: %s", error ? error->message : "");
    g_clear_error(&error);
    g_clear_object(&session);
    CHECK(portal_keyring_auth_clear_persisted_session_sync(auth, cancellable, &error));
    g_clear_error(&error);
    session = portal_keyring_auth_restore_session_sync(auth, NULL, &error);
    CHECK_MSG(session == NULL && error == NULL, "signed out after clear_sync");
    g_clear_error(&error);
    /* Cancelled before the call: no keyring work, G_IO_ERROR_CANCELLED. */
    g_cancellable_cancel(cancellable);
    CHECK(portal_keyring_auth_restore_session_sync(auth, cancellable, &error) == NULL);
    CHECK_GERROR(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
    g_clear_error(&error);
    g_object_unref(cancellable);
    g_object_unref(auth);
}

static gboolean cancel_later(gpointer cancellable) {
    g_cancellable_cancel(cancellable);
    return G_SOURCE_REMOVE;
}

static gpointer cancel_after_100ms(gpointer cancellable) {
    g_usleep(100 * 1000);
    g_cancellable_cancel(cancellable);
    return NULL;
}

static void test_cancel_and_storage_failure(void) {
    check_context = "cancel";
    GError *error = NULL;
    PortalKeyringAuth *auth = make_auth(1500);
    Wait wait = {0};

    GCancellable *cancelled = g_cancellable_new();
    g_cancellable_cancel(cancelled);
    portal_keyring_auth_persist_session_async(auth, END_USER, TOKEN, cancelled, wait_callback, &wait);
    CHECK_MSG(wait.done == 0, "the callback ran inside the _async call");
    CHECK(wait_run(&wait, NULL, 1000));
    CHECK(portal_keyring_auth_persist_session_finish(auth, wait.result, &error) == NULL);
    CHECK_GERROR(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
    g_clear_error(&error);
    wait_clear(&wait);
    g_object_unref(cancelled);

    if (provider_pid <= 0) {
        printf("  skip  stalled-provider cases: PORTAL_TEST_KEYRING_PID unset\n");
        g_object_unref(auth);
        return;
    }
    /* The provider stopped: a restore would wait its whole call deadline (1500 ms). A cancel
     * 100 ms in completes it at once. */
    CHECK(kill(provider_pid, SIGSTOP) == 0);
    GCancellable *cancellable = g_cancellable_new();
    gint64 start = g_get_monotonic_time();
    portal_keyring_auth_restore_session_async(auth, cancellable, wait_callback, &wait);
    g_timeout_add(100, cancel_later, cancellable);
    CHECK(wait_run(&wait, NULL, 5000));
    gint64 took_ms = (g_get_monotonic_time() - start) / 1000;
    CHECK(portal_keyring_auth_restore_session_finish(auth, wait.result, &error) == NULL);
    CHECK_GERROR(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
    CHECK_MSG(took_ms < 600, "the cancelled restore completed after %lld ms (deadline 1500 ms)", (long long)took_ms);
    printf("cancelled restore completed after %lld ms\n", (long long)took_ms);
    g_clear_error(&error);
    wait_clear(&wait);
    g_object_unref(cancellable);

    /* _sync with a cancellable, cancelled from another thread: the same. */
    cancellable = g_cancellable_new();
    GThread *canceller = g_thread_new("canceller", cancel_after_100ms, cancellable);
    start = g_get_monotonic_time();
    CHECK(portal_keyring_auth_restore_session_sync(auth, cancellable, &error) == NULL);
    took_ms = (g_get_monotonic_time() - start) / 1000;
    CHECK_GERROR(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
    CHECK_MSG(took_ms < 600, "the cancelled restore_sync returned after %lld ms (deadline 1500 ms)", (long long)took_ms);
    g_clear_error(&error);
    g_thread_join(canceller);
    g_object_unref(cancellable);

    check_context = "storage failure";
    /* Still stopped: the restore runs out of its call deadline. That is a storage error, never
     * "signed out". */
    start = g_get_monotonic_time();
    PortalKeyringSession *session = portal_keyring_auth_restore_session_sync(auth, NULL, &error);
    took_ms = (g_get_monotonic_time() - start) / 1000;
    CHECK_MSG(session == NULL, "a session from a stopped provider");
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_SESSION_STORAGE);
    printf("restore_sync with the provider stopped: %s after %lld ms\n", error ? error->message : "no error",
           (long long)took_ms);
    g_clear_error(&error);
    /* The async form meanwhile leaves the loop free: a 10 ms timer on it keeps ticking while the
     * restore waits out its deadline. */
    guint timer = g_timeout_add(10, tick, NULL);
    gap_reset();
    portal_keyring_auth_restore_session_async(auth, NULL, wait_callback, &wait);
    CHECK(wait_run(&wait, NULL, 10000));
    g_source_remove(timer);
    gap_report("restore_async with the provider stopped");
    session = portal_keyring_auth_restore_session_finish(auth, wait.result, &error);
    CHECK_MSG(session == NULL, "a session from a stopped provider");
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_SESSION_STORAGE);
    g_clear_error(&error);
    wait_clear(&wait);
    CHECK(kill(provider_pid, SIGCONT) == 0);
    g_object_unref(auth);
}

/* A worker thread with its own thread-default context: the completion runs there, not on the
 * main context. */
static gpointer worker_restore(gpointer data) {
    Wait *wait = data;
    GMainContext *context = g_main_context_new();
    g_main_context_push_thread_default(context);
    PortalKeyringAuth *auth = make_auth(5000);
    portal_keyring_auth_restore_session_async(auth, NULL, wait_callback, wait);
    wait_run(wait, context, 10000);
    CHECK_MSG(wait->context == context, "completed on another context than the worker's thread-default");
    CHECK_MSG(wait->thread == g_thread_self(), "completed on another thread than the worker");
    GError *error = NULL;
    PortalKeyringSession *session = portal_keyring_auth_restore_session_finish(auth, wait->result, &error);
    CHECK_MSG(session == NULL && error == NULL, "worker restore: signed out, no error");
    g_clear_error(&error);
    g_object_unref(auth);
    g_main_context_pop_thread_default(context);
    g_main_context_unref(context);
    return NULL;
}

static void test_contexts(void) {
    check_context = "contexts";
    Wait wait = {0};
    GThread *worker = g_thread_new("gobject-test-worker", worker_restore, &wait);
    /* The main context is iterated meanwhile: the worker's completion must not run here. */
    for (int i = 0; i < 200 && !wait.done; i++) g_main_context_iteration(NULL, FALSE), g_usleep(5000);
    g_thread_join(worker);
    CHECK(wait.done == 1);
    wait_clear(&wait);
}

int main(void) {
    g_snprintf(env_id, sizeof env_id, "gobject-test-%d", (int)getpid());
    const char *pid = getenv("PORTAL_TEST_KEYRING_PID");
    provider_pid = pid ? (pid_t)atoi(pid) : 0;
    test_bad_arguments();
    test_async_round_trip();
    test_sync();
    test_contexts();
    test_cancel_and_storage_failure();
    printf("gobject_test: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
