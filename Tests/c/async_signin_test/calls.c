/* async_signin_test: how the sign-in calls complete: refused arguments, a cancel, 200 in flight, a 429. */
#include "async_signin_test.h"

void test_argument_checks(portal_auth *auth) {
    probe p;
    probe_init(&p);
    CHECK(portal_auth_get_methods_async(auth, NULL, NULL, &p, on_destroy, NULL) == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(p.destroyed == 1 && p.calls == 0);
    CHECK(portal_auth_handle_redirect_async(auth, "app://cb?token=x", 4, NULL, on_done, &p, on_destroy, NULL) ==
          PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(portal_last_error_message(), "flags") != NULL);
    CHECK(portal_auth_handle_redirect_async(auth, NULL, 0, NULL, on_done, &p, on_destroy, NULL) ==
          PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(portal_auth_verify_totp_async(auth, "123456", NULL, NULL, on_done, &p, on_destroy, NULL) ==
          PORTAL_ERR_INVALID_ARGUMENT);
    /* The code and the JWT are checked before the call returns, as the header says: not digits,
     * a non-ASCII digit, too long, a blank JWT. */
    const char *bad_codes[] = {"12a456", "\xd9\xa3\xd9\xa3", "12345678901234567", ""};
    for (size_t i = 0; i < sizeof bad_codes / sizeof *bad_codes; i++) {
        CHECK(portal_auth_verify_totp_async(auth, bad_codes[i], "jwt", NULL, on_done, &p, on_destroy, NULL) ==
              PORTAL_ERR_INVALID_ARGUMENT);
        CHECK(strstr(portal_last_error_message(), "code") != NULL);
    }
    CHECK(portal_auth_verify_totp_async(auth, "123456", "  ", NULL, on_done, &p, on_destroy, NULL) ==
          PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(portal_last_error_message(), "user_jwt") != NULL);
    CHECK(portal_auth_send_magic_link_async(NULL, "a@example.com", NULL, on_done, &p, on_destroy, NULL) ==
          PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(portal_auth_login_with_google_async(NULL, NULL, on_done, &p, on_destroy, NULL) == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(portal_auth_login_with_apple_async(NULL, NULL, on_done, &p, on_destroy, NULL) == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(p.destroyed == 12 && p.calls == 0);
}

/* A cancel during a request the API holds for 8 s: CANCELLED at once, exactly once. */
void test_cancel_mid_request(portal_auth *auth) {
    CHECK(fault("{\"route\":\"/api/v3/auth/methods\",\"delayMs\":8000,\"count\":1}") == 0);
    probe cancelled;
    probe_init(&cancelled);
    uint64_t op = 0;
    int never = 0;
    gap_reset();
    CHECK(portal_auth_get_methods_async(auth, NULL, on_done, &cancelled, on_destroy, &op) == PORTAL_OK);
    CHECK(op != 0);
    run_until(&never, 1, 300);
    CHECK(cancelled.calls == 0);
    gint64 at = g_get_monotonic_time();
    CHECK(portal_operation_cancel(op) == PORTAL_OK);
    CHECK(run_until(&cancelled.destroyed, 1, 5000));
    expect_once(&cancelled, PORTAL_ERR_CANCELLED, "cancelled", "get_methods_async cancelled mid-request");
    CHECK(cancelled.text == NULL);
    printf("cancel mid-request: completion %.1f ms after the cancel\n", (cancelled.at - at) / 1000.0);
    CHECK(cancelled.at - at < 200 * 1000);
    CHECK(portal_operation_cancel(op) == PORTAL_OK); /* a second cancel is ignored */
    run_until(&never, 1, 200);
    CHECK(cancelled.calls == 1 && cancelled.destroyed == 1);
    gap_report("sign-in request cancelled");
    probe_clear(&cancelled);
}

#define MANY 200
void test_many_in_flight(portal_auth *auth) {
    static probe many[MANY];
    uint64_t ops[MANY];
    int done = 0;
    gap_reset();
    for (int i = 0; i < MANY; i++) {
        probe_init(&many[i]);
        CHECK(portal_auth_get_methods_async(auth, NULL, on_done, &many[i], on_destroy, &ops[i]) == PORTAL_OK);
    }
    for (int i = 0; i < MANY; i += 2) CHECK(portal_operation_cancel(ops[i]) == PORTAL_OK);
    gint64 end = g_get_monotonic_time() + 60 * 1000 * 1000;
    while (g_get_monotonic_time() < end) {
        done = 0;
        for (int i = 0; i < MANY; i++) done += many[i].destroyed;
        if (done == MANY) break;
        g_main_context_iteration(NULL, TRUE);
    }
    int once = 0, on_main = 0, ok = 0, cancelled = 0, kept_ok = 0;
    for (int i = 0; i < MANY; i++) {
        once += many[i].calls == 1 && many[i].destroyed == 1;
        on_main += many[i].same_thread;
        ok += many[i].status == PORTAL_OK && many[i].text != NULL;
        cancelled += many[i].status == PORTAL_ERR_CANCELLED;
        if (i % 2) kept_ok += many[i].status == PORTAL_OK && many[i].text != NULL;
    }
    printf("%d get_methods_async in flight, every other one cancelled: %d exactly once, %d OK, %d cancelled\n", MANY,
           once, ok, cancelled);
    CHECK(once == MANY);
    CHECK(on_main == MANY);
    CHECK(ok + cancelled == MANY);
    /* A cancel that arrives after its operation completed changes nothing (that one is OK, not
     * cancelled: 99 of 100 were cancelled in one run), so only the ones never cancelled must all
     * succeed; most of the cancelled ones are still queued behind the 4 workers when cancelled. */
    CHECK(kept_ok == MANY / 2);
    CHECK(cancelled >= MANY / 4);
    gap_report("200 sign-in calls in flight");
    for (int i = 0; i < MANY; i++) probe_clear(&many[i]);
}

/* A 429 with Retry-After: the wait is in the message, blocking and non-blocking. */
void test_rate_limited(portal_auth *auth) {
    CHECK(fault("{\"route\":\"/api/v3/auth/magic-links\",\"status\":429,\"count\":1,\"retryAfterSeconds\":42}") == 0);
    CHECK(portal_auth_send_magic_link(auth, "rate.limited@example.com") == PORTAL_ERR_RATE_LIMITED);
    const char *message = portal_last_error_message();
    if (strcmp(message, "rate limited by the Portal API; retry after 42 s") != 0)
        fprintf(stderr, "rate limited (blocking): message '%s'\n", message);
    CHECK(strcmp(message, "rate limited by the Portal API; retry after 42 s") == 0);
    CHECK(fault("{\"route\":\"/api/v3/auth/magic-links\",\"status\":429,\"count\":1,\"retryAfterSeconds\":7}") == 0);
    probe send;
    probe_init(&send);
    CHECK(portal_auth_send_magic_link_async(auth, "rate.limited@example.com", NULL, on_done, &send, on_destroy, NULL) ==
          PORTAL_OK);
    CHECK(run_until(&send.destroyed, 1, 15000));
    expect_once(&send, PORTAL_ERR_RATE_LIMITED, "rate limited by the Portal API; retry after 7 s", "send_magic_link_async (429)");
    probe_clear(&send);
    printf("429 with Retry-After: 42 -> \"%s\"\n", "rate limited by the Portal API; retry after 42 s");
}
