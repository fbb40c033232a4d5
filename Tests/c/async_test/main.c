/*
 * async_test — the non-blocking C calls against the real keyring and the loopback
 * Portal API, driven by a real GMainLoop with a 10 ms timer whose largest gap is measured: it
 * must never exceed MAX_GAP_MS (200 ms; a blocking call would stall it 900 ms or more) while
 *   (a) a restore waits on an unlock prompt nobody answers (keyringctl stuck-prompter), until the
 *       prompt deadline, and while such a prompt is cancelled (restore and persist);
 *   (b) the provider is SIGSTOPped (the call deadline ends the restore);
 *   (c) the Portal API is slow (a request, its cancellation, portal_free_async).
 * Every completion must arrive on the thread of its queue with the right status and message, and
 * exactly once (1,000 restores in flight at once), with destroy_notify once. The pollable-fd
 * queue is driven from a plain poll() loop.
 *
 * Needs scripts/with-keyring.sh (gnome-keyring; PORTAL_TEST_KEYRING_PID, PORTAL_TEST_KEYRINGCTL)
 * and scripts/with-portal-api.sh. Build: gcc ... $(pkg-config --cflags --libs glib-2.0).
 * Prints the largest timer gap per scenario; exit 0 when every check passed.
 */
#include "async_test.h"

pthread_t main_thread;
const char *kctl, *api_url;
char env_id[128];

int main(void) {
    main_thread = pthread_self();
    kctl = getenv("PORTAL_TEST_KEYRINGCTL");
    api_url = getenv("PORTAL_TEST_API_URL");
    if (!kctl || !api_url) {
        fprintf(stderr, "async_test: needs PORTAL_TEST_KEYRINGCTL and PORTAL_TEST_API_URL "
                        "(scripts/with-keyring.sh scripts/with-portal-api.sh)\n");
        return 2;
    }
    snprintf(env_id, sizeof env_id, "c-async-%d", (int)getpid());
    GSource *timer = g_timeout_source_new(10);
    g_source_set_callback(timer, tick, NULL, NULL);
    g_source_attach(timer, NULL);

    portal_auth *auth = new_auth(5000, 1500);
    test_basic_on_main_thread(auth);
    portal_session *seeded = NULL;
    CHECK(portal_auth_persist_session(auth, "user-many", "token-many", &seeded) == PORTAL_OK);
    portal_session_free(seeded);
    test_named_context(auth);
    test_thousand_in_flight(auth);
    test_pollable_queue(auth);
    test_pollable_queue_freed_by_its_callback(auth);
    portal_auth_free(auth);
    test_listener_and_portal_calls();
    test_slow_api();
    test_free_async_with_a_listener_running();
    test_provider_stopped();
    test_unanswered_prompt();

    g_source_destroy(timer);
    g_source_unref(timer);
    if (failures) {
        fprintf(stderr, "async_test: %d of %d checks FAILED\n", failures, checks);
        return 1;
    }
    printf("async_test: all %d checks passed\n", checks);
    return 0;
}
