/*
 * async_signin_test — the non-blocking sign-in calls against the real keyring and
 * the loopback Portal API, on a real GMainLoop with a 10 ms timer whose largest gap must stay
 * <= MAX_GAP_MS (200 ms; a blocking call would stall it 900 ms or more):
 *   - get_methods, login_with_google/_apple, send_magic_link, handle_redirect (with the magic
 *     link the fake API "emailed"; again: the remembered exchange), a TOTP sign-in
 *     (handle_redirect with PORTAL_REDIRECT_ALLOW_UNSOLICITED, then verify_totp);
 *   - a slow Portal API (1.5 s) during send_magic_link: the loop keeps ticking;
 *   - a cancel in the middle of a request (8 s delay): CANCELLED at once, exactly once;
 *   - 200 calls in flight, every other one cancelled: each completes exactly once, on the main
 *     thread, with destroy_notify once;
 *   - the argument checks (NULL callback, unknown flags): refused at once, destroy_notify ran.
 *
 * Needs scripts/with-keyring.sh and scripts/with-portal-api.sh. Exit 0 when every check passed.
 */
#include "async_signin_test.h"

char env_id[128];

int main(void) {
    const char *api_url = getenv("PORTAL_TEST_API_URL");
    if (!api_url || !getenv("PORTAL_TEST_API_HOST")) {
        fprintf(stderr, "async_signin_test: needs PORTAL_TEST_API_URL and PORTAL_TEST_API_HOST (scripts/with-portal-api.sh)\n");
        return 2;
    }
    snprintf(env_id, sizeof env_id, "c-async-signin-%d", (int)getpid());
    GSource *timer = g_timeout_source_new(10);
    g_source_set_callback(timer, tick, NULL, NULL);
    g_source_attach(timer, NULL);

    portal_auth *auth = new_auth();
    test_argument_checks(auth);
    test_methods_and_urls(auth);
    test_magic_link(auth);
    test_totp(auth);
    test_cancel_mid_request(auth);
    test_many_in_flight(auth);
    test_rate_limited(auth);
    portal_auth_free(auth);
    test_private_use_redirect();

    g_source_destroy(timer);
    g_source_unref(timer);
    if (failures) {
        fprintf(stderr, "async_signin_test: %d of %d checks FAILED\n", failures, checks);
        return 1;
    }
    printf("async_signin_test: all %d checks passed\n", checks);
    return 0;
}
