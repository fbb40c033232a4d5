/* invalidation_test: the HTTP side: libcurl loaded lazily, portal_free aborts a request in flight. */
#include "invalidation_test.h"

/* Whether libcurl is mapped into this process (it is loaded on the first HTTP request only). */
static int curl_loaded(void) {
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[1024];
    int found = 0;
    while (maps && fgets(line, sizeof line, maps)) found |= strstr(line, "libcurl") != NULL;
    if (maps) fclose(maps);
    return found;
}

/* Restore-only hosts never load libcurl (and its ~30 dependencies); a Portal request does. */
void test_libcurl_is_loaded_lazily(void) {
    CHECK(!curl_loaded());
    portal_auth *auth = new_auth("lazy");
    portal_session *session = NULL;
    CHECK(portal_auth_persist_session(auth, "u-lazy", "token-lazy", NULL) == PORTAL_OK);
    CHECK(portal_auth_restore_session(auth, &session) == PORTAL_OK && session != NULL);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);
    CHECK(!curl_loaded());
    portal *client = NULL;
    long http = 0;
    CHECK(portal_new_with_api_key(&client, "static-key", api_host) == PORTAL_OK);
    CHECK(portal_request(client, "GET", "/api/v3/auth/methods", NULL, &http, NULL, NULL) == PORTAL_OK);
    CHECK(curl_loaded());
    portal_free(client);
    portal_session_free(session);
    portal_auth_free(auth);
}

/* portal_free aborts the validation request still in flight and waits for it, so no library
 * thread is inside libcurl/OpenSSL when the host process exits (which crashed at exit before). */
void test_free_aborts_requests_in_flight(void) {
    signed_in user;
    sign_in_user(&user, "abort", "u-abort");
    char json[256];
    snprintf(json, sizeof json, "{\"route\":\"/api/v3/clients/me\",\"delayMs\":8000,\"count\":1}");
    CHECK(admin("faults", json, NULL, 0) == 0);
    portal *client = open_portal(user.session);
    usleep(300000); /* the validation request is now waiting on the server */
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    portal_free(client);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
    printf("portal_free with a request in flight returned after %.0f ms\n", ms);
    /* It waited for the request (which the server holds for 8 s) to be aborted: not instant, and
     * within libcurl's progress interval. */
    CHECK(ms > 20 && ms < 2500);
    char *copy = NULL;
    CHECK(portal_session_copy_token(user.session, &copy) == PORTAL_OK); /* an aborted request invalidates nothing */
    portal_string_free(copy);
    CHECK(portal_auth_clear_persisted_session(user.auth) == PORTAL_OK);
    sign_out(&user);
}
