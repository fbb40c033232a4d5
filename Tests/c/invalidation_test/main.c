/*
 * invalidation_test — the listener C ABI against the real keyring and the loopback Portal API:
 * registration, replay to a late listener, cancel (before, and from inside the callback), free from
 * inside the callback, destroy_notify exactly once, API-key portals, and a newer sign-in by another
 * process surviving the old session's rejection.
 *
 * Needs PORTAL_TEST_API_URL / PORTAL_TEST_API_HOST (scripts/with-portal-api.sh) inside
 * scripts/with-keyring.sh. Exit 0 when every check passed.
 */
#include "invalidation_test.h"

const char *api_url, *api_host, *self_path;

int main(int argc, char **argv) {
    self_path = argv[0];
    if (argc == 4 && strcmp(argv[1], "--persist") == 0) return persist_from_stdin(argv[2], argv[3]);
    if (argc == 5 && strcmp(argv[1], "--race-child") == 0) {
        api_host = getenv("PORTAL_TEST_API_HOST");
        return race_child(argv[2], argv[3], argv[4]);
    }
    api_url = getenv("PORTAL_TEST_API_URL");
    api_host = getenv("PORTAL_TEST_API_HOST");
    if (!api_url || !api_host || !getenv("PORTAL_TEST_KEYRING_PID")) {
        fprintf(stderr, "invalidation_test: run inside scripts/with-keyring.sh scripts/with-portal-api.sh\n");
        return 2;
    }
    test_libcurl_is_loaded_lazily(); /* first: nothing has made a request yet */
    test_replay_cancel_destroy();
    test_cancel_and_free_inside_callback();
    test_concurrent_reports_invalidate_once();
    test_concurrent_reports_in_processes();
    test_clear_session_and_api_key();
    test_newer_sign_in_by_another_process_survives();
    test_sign_in_flow();
    test_free_aborts_requests_in_flight(); /* last: it leaves nothing running at exit */
    printf("invalidation_test: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
