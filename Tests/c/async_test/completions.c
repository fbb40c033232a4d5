/* async_test: completions on the main thread, on a context a thread named, and 1,000 in flight. */
#include "async_test.h"

void test_basic_on_main_thread(portal_auth *auth) {
    probe persisted, restored, cleared;
    probe_init(&persisted);
    uint64_t op = 0;
    gap_reset();
    CHECK(portal_auth_persist_session_async(auth, "user-1", "token-1", NULL, on_done, &persisted, on_destroy, &op) ==
          PORTAL_OK);
    CHECK(op != 0);
    CHECK(persisted.calls == 0); /* never synchronously */
    CHECK(run_until(&persisted.destroyed, 1, 10000));
    expect_once(&persisted, PORTAL_OK, "", "persist");
    CHECK(persisted.message[0] == '\0');
    CHECK(persisted.session && strcmp(portal_session_get_end_user_id(persisted.session), "user-1") == 0);

    probe_init(&restored);
    CHECK(portal_auth_restore_session_async(auth, NULL, on_done, &restored, on_destroy, NULL) == PORTAL_OK);
    CHECK(run_until(&restored.destroyed, 1, 10000));
    expect_once(&restored, PORTAL_OK, "", "restore");
    char *token = NULL;
    CHECK(restored.session && portal_session_copy_token(restored.session, &token) == PORTAL_OK &&
          strcmp(token, "token-1") == 0);
    portal_string_free(token);
    gap_report("persist + restore");

    /* An argument error: nothing starts, destroy_notify ran before the return, no callback. */
    probe bad;
    probe_init(&bad);
    CHECK(portal_auth_restore_session_async(NULL, NULL, on_done, &bad, on_destroy, NULL) == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(bad.destroyed == 1);
    CHECK(portal_auth_persist_session_async(auth, "u", " ", NULL, on_done, &bad, on_destroy, NULL) ==
          PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(portal_last_error_message(), "client_session_token") != NULL);
    CHECK(portal_auth_restore_session_async(auth, NULL, NULL, &bad, on_destroy, NULL) == PORTAL_ERR_INVALID_ARGUMENT);
    /* The same checks as the blocking call, before the return (a trial got these through the
     * callback): whitespace or a line end in the token, a control character in the end user id. */
    const char *bad_tokens[] = {"tok ok", "tok\n", "tok\xc2\xa0x", "a\r\nX-Injected: 1"};
    for (size_t i = 0; i < sizeof bad_tokens / sizeof *bad_tokens; i++) {
        CHECK(portal_auth_persist_session_async(auth, "u", bad_tokens[i], NULL, on_done, &bad, on_destroy, NULL) ==
              PORTAL_ERR_INVALID_ARGUMENT);
        CHECK(strstr(portal_last_error_message(), "client_session_token") != NULL);
    }
    CHECK(portal_auth_persist_session_async(auth, "u\tv", "tok", NULL, on_done, &bad, on_destroy, NULL) ==
          PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(portal_last_error_message(), "end_user_id") != NULL);
    CHECK(bad.destroyed == 8);
    run_for(50);
    CHECK(bad.calls == 0);
    portal_session_free(persisted.session);

    /* The invalidate of a session runs, and the session's token is gone at once. */
    probe invalidated;
    probe_init(&invalidated);
    CHECK(portal_session_invalidate_async(restored.session, NULL, on_done, &invalidated, on_destroy, NULL) == PORTAL_OK);
    CHECK(portal_session_copy_token(restored.session, &token) == PORTAL_ERR_SESSION_INVALIDATED);
    CHECK(run_until(&invalidated.destroyed, 1, 10000));
    expect_once(&invalidated, PORTAL_OK, "", "invalidate");
    portal_session_free(restored.session);

    probe_init(&restored);
    CHECK(portal_auth_restore_session_async(auth, NULL, on_done, &restored, on_destroy, NULL) == PORTAL_OK);
    CHECK(run_until(&restored.destroyed, 1, 10000));
    expect_once(&restored, PORTAL_OK, "", "restore after invalidate");
    CHECK(restored.session == NULL); /* signed out */

    probe_init(&cleared);
    CHECK(portal_auth_clear_persisted_session_async(auth, NULL, on_done, &cleared, on_destroy, NULL) == PORTAL_OK);
    CHECK(run_until(&cleared.destroyed, 1, 10000));
    expect_once(&cleared, PORTAL_OK, "", "clear");
}

static gboolean tick_quietly(gpointer data) {
    (void)data;
    return G_SOURCE_CONTINUE;
}

/* NULL queue = the thread-default context at call time: a thread that pushed its own context. */
typedef struct {
    portal_auth *auth;
    probe done;
    int explicit_ok;
} named_context_args;

static void *named_context_thread(void *data) {
    named_context_args *args = data;
    GMainContext *context = g_main_context_new();
    /* A ticking source, so that a completion that never comes cannot block the iteration. */
    GSource *ticker = g_timeout_source_new(20);
    g_source_set_callback(ticker, tick_quietly, NULL, NULL);
    g_source_attach(ticker, context);
    g_main_context_push_thread_default(context);
    probe_init(&args->done);
    CHECK(portal_auth_restore_session_async(args->auth, NULL, on_done, &args->done, on_destroy, NULL) == PORTAL_OK);
    gint64 end = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
    while (args->done.destroyed < 1 && g_get_monotonic_time() < end) g_main_context_iteration(context, TRUE);
    g_main_context_pop_thread_default(context);

    /* An explicit context, named from a thread where it is not the thread default. */
    portal_completion_queue *queue = NULL;
    CHECK(portal_completion_queue_new_for_main_context(&queue, context) == PORTAL_OK);
    CHECK(portal_completion_queue_get_fd(queue) == -1);
    probe second;
    probe_init(&second);
    CHECK(portal_auth_restore_session_async(args->auth, queue, on_done, &second, on_destroy, NULL) == PORTAL_OK);
    portal_completion_queue_free(queue); /* still delivered: the operation keeps the queue */
    end = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
    while (second.destroyed < 1 && g_get_monotonic_time() < end) g_main_context_iteration(context, TRUE);
    args->explicit_ok = second.calls == 1 && second.destroyed == 1 && second.same_thread && second.status == PORTAL_OK;
    g_source_destroy(ticker);
    g_source_unref(ticker);
    g_main_context_unref(context);
    return NULL;
}

void test_named_context(portal_auth *auth) {
    /* Static: a completion wrongly sent to the main context must land in live memory. */
    static named_context_args args;
    args.auth = auth;
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, named_context_thread, &args) == 0);
    pthread_join(thread, NULL);
    expect_once(&args.done, PORTAL_OK, "", "restore completed on the thread-default context at call time");
    CHECK(args.explicit_ok);
}

void test_thousand_in_flight(portal_auth *auth) {
    enum { N = 1000 };
    static probe probes[N];
    int destroyed_total = 0;
    gap_reset();
    for (int i = 0; i < N; i++) {
        probe_init(&probes[i]);
        CHECK(portal_auth_restore_session_async(auth, NULL, on_done, &probes[i], on_destroy, NULL) == PORTAL_OK);
    }
    gint64 start = g_get_monotonic_time(), end = start + 120 * G_USEC_PER_SEC;
    while (g_get_monotonic_time() < end) {
        destroyed_total = 0;
        for (int i = 0; i < N; i++) destroyed_total += probes[i].destroyed;
        if (destroyed_total >= N) break;
        g_main_context_iteration(NULL, TRUE);
    }
    run_for(100); /* a second completion would show up here */
    int once = 0, ok = 0;
    for (int i = 0; i < N; i++) {
        once += probes[i].calls == 1 && probes[i].destroyed == 1 && probes[i].same_thread;
        ok += probes[i].status == PORTAL_OK && probes[i].session != NULL;
        portal_session_free(probes[i].session);
    }
    printf("1000 restores in flight: %d completed exactly once on the main thread, %d with the session, in %.0f ms\n",
           once, ok, (g_get_monotonic_time() - start) / 1000.0);
    CHECK(once == N);
    CHECK(ok == N);
    gap_report("1000 restores");
}
