/* async_test: the Portal API calls: a slow API, listeners, report_unauthorized, portal_free_async. */
#include "async_test.h"

/* portal_free_async returns within `ms` (the loop's gap measured from here); its completion
 * comes to `freed` later. */
static void free_async_returns_within(portal *client, probe *freed, int ms, const char *what) {
    gap_reset();
    gint64 before = g_get_monotonic_time();
    CHECK(portal_free_async(client, NULL, on_done, freed, on_destroy) == PORTAL_OK);
    gint64 returned = g_get_monotonic_time();
    printf("portal_free_async %s returned after %.2f ms\n", what, (returned - before) / 1000.0);
    CHECK(returned - before < ms * 1000);
}

/* (c) a slow Portal API: request, cancel of a request, portal_free_async with one in flight. */
void test_slow_api(void) {
    signed_in user;
    portal *client = sign_in(&user, "user-slow");
    usleep(300000); /* the validation request is done */
    CHECK(admin_fault("{\"route\":\"/api/v3/clients/me\",\"delayMs\":1500,\"count\":1}") == 0);

    probe request;
    probe_init(&request);
    gap_reset();
    gint64 start = g_get_monotonic_time();
    CHECK(portal_request_async(client, "GET", "/api/v3/clients/me", NULL, NULL, on_done, &request, on_destroy, NULL) ==
          PORTAL_OK);
    CHECK(run_until(&request.destroyed, 1, 15000));
    printf("request to the slow API completed after %.0f ms (HTTP %ld)\n", (request.at - start) / 1000.0,
           request.http_status);
    expect_once(&request, PORTAL_OK, "", "slow request");
    CHECK(request.http_status == 200);
    CHECK(request.at - start >= 1400 * 1000);
    gap_report("slow Portal API");

    CHECK(admin_fault("{\"route\":\"/api/v3/clients/me\",\"delayMs\":8000,\"count\":2}") == 0);
    probe cancelled;
    probe_init(&cancelled);
    uint64_t op = 0;
    gap_reset();
    CHECK(portal_request_async(client, "GET", "/api/v3/clients/me", NULL, NULL, on_done, &cancelled, on_destroy, &op) ==
          PORTAL_OK);
    run_for(300);
    CHECK(portal_operation_cancel(op) == PORTAL_OK);
    CHECK(run_until(&cancelled.destroyed, 1, 5000));
    expect_once(&cancelled, PORTAL_ERR_CANCELLED, "cancelled", "request cancelled");
    gap_report("request cancelled");

    /* portal_free_async with a request in flight returns at once; its callback follows. */
    probe inflight, freed;
    probe_init(&inflight);
    probe_init(&freed);
    CHECK(portal_request_async(client, "GET", "/api/v3/clients/me", NULL, NULL, on_done, &inflight, on_destroy, NULL) ==
          PORTAL_OK);
    run_for(300);
    free_async_returns_within(client, &freed, 20, "with a request in flight");
    CHECK(run_until(&freed.destroyed, 1, 5000));
    CHECK(run_until(&inflight.destroyed, 1, 5000));
    expect_once(&freed, PORTAL_OK, "", "portal_free_async");
    expect_once(&inflight, PORTAL_ERR_NETWORK, "closed", "request aborted by portal_free_async");
    CHECK(inflight.at <= freed.at); /* the free completes after its requests returned */
    gap_report("portal_free_async");

    sign_out(&user);
}

/* Listeners delivered on the main context; report_unauthorized and clear_session async. */
static int listener_calls, listener_destroyed, listener_same_thread;
static void on_invalidated(void *data) {
    (void)data;
    listener_calls++;
    listener_same_thread = pthread_equal(pthread_self(), main_thread);
}
static void on_listener_destroy(void *data) {
    (void)data;
    __atomic_add_fetch(&listener_destroyed, 1, __ATOMIC_SEQ_CST);
}

void test_listener_and_portal_calls(void) {
    signed_in user;
    portal *client = sign_in(&user, "user-listen");
    uint64_t handle = 0;
    CHECK(portal_on_session_invalidated_queued(client, NULL, on_invalidated, NULL, on_listener_destroy, &handle) ==
          PORTAL_OK);
    probe other;
    probe_init(&other);
    CHECK(portal_report_unauthorized_async(client, "not-the-token", NULL, on_done, &other, on_destroy, NULL) == PORTAL_OK);
    CHECK(run_until(&other.destroyed, 1, 10000));
    expect_once(&other, PORTAL_OK, "", "report of another token");
    probe report;
    probe_init(&report);
    int invalidated = 0;
    CHECK(portal_report_unauthorized_async(client, user.token, NULL, on_done, &report, on_destroy, NULL) == PORTAL_OK);
    CHECK(run_until(&report.destroyed, 1, 10000));
    expect_once(&report, PORTAL_OK, "", "report of the token");
    CHECK(run_until(&listener_calls, 1, 5000));
    run_for(100);
    CHECK(listener_calls == 1 && listener_same_thread && listener_destroyed == 1);
    (void)invalidated;
    probe clear;
    probe_init(&clear);
    CHECK(portal_clear_session_async(client, NULL, on_done, &clear, on_destroy, NULL) == PORTAL_OK);
    CHECK(run_until(&clear.destroyed, 1, 10000));
    expect_once(&clear, PORTAL_OK, "", "clear_session");
    probe request;
    probe_init(&request);
    CHECK(portal_request_async(client, "BREW", "/x", NULL, NULL, on_done, &request, on_destroy, NULL) ==
          PORTAL_ERR_INVALID_ARGUMENT);
    /* The target too, before the return: a line end, neither a path nor an absolute URL. */
    CHECK(portal_request_async(client, "GET", "/x\r\nX-A: b", NULL, NULL, on_done, &request, on_destroy, NULL) ==
          PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(portal_last_error_message(), "target") != NULL);
    CHECK(portal_request_async(client, "GET", "api/v3/clients/me", NULL, NULL, on_done, &request, on_destroy, NULL) ==
          PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(portal_last_error_message(), "target") != NULL);
    run_for(50);
    CHECK(request.destroyed == 3 && request.calls == 0);
    portal_free(client);
    portal_session_free(user.session);
    portal_auth_free(user.auth);
}

/* portal_free_async while a plain listener runs on the library's thread (found by the third
 * trial: it waited for the listener, 2 s, on the loop's thread; a listener waiting for the loop
 * deadlocked with it). It must return at once; the listener finishes, then its destroy_notify,
 * then the free's completion. */
static int slow_started, slow_finished, slow_destroyed;
static gint64 slow_finished_at, slow_destroyed_at;
static void on_slow_invalidated(void *data) {
    (void)data;
    __atomic_store_n(&slow_started, 1, __ATOMIC_SEQ_CST);
    usleep(1000 * 1000);
    slow_finished_at = g_get_monotonic_time();
    __atomic_store_n(&slow_finished, 1, __ATOMIC_SEQ_CST);
}
static void on_slow_destroy(void *data) {
    (void)data;
    slow_destroyed_at = g_get_monotonic_time();
    __atomic_store_n(&slow_destroyed, 1, __ATOMIC_SEQ_CST);
}

void test_free_async_with_a_listener_running(void) {
    signed_in user;
    portal *client = sign_in(&user, "user-slow-listener");
    uint64_t handle = 0;
    CHECK(portal_on_session_invalidated(client, on_slow_invalidated, NULL, on_slow_destroy, &handle) == PORTAL_OK);
    bool invalidated = false;
    CHECK(portal_report_unauthorized(client, user.token, &invalidated) == PORTAL_OK && invalidated);
    gint64 end = g_get_monotonic_time() + 5 * 1000 * 1000;
    while (!__atomic_load_n(&slow_started, __ATOMIC_SEQ_CST) && g_get_monotonic_time() < end) usleep(1000);
    CHECK(slow_started);
    probe freed;
    probe_init(&freed);
    free_async_returns_within(client, &freed, 200, "while a listener runs");
    CHECK(!__atomic_load_n(&slow_finished, __ATOMIC_SEQ_CST));
    CHECK(run_until(&freed.destroyed, 1, 10000));
    expect_once(&freed, PORTAL_OK, "", "portal_free_async while a listener runs");
    CHECK(slow_finished && slow_destroyed);
    CHECK(slow_finished_at <= slow_destroyed_at && slow_destroyed_at <= freed.at);
    gap_report("portal_free_async while a listener runs");
    sign_out(&user);
}
