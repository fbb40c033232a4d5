/*
 * abi_test: the version macros and functions, the status strings, the thread-local last error, and
 * the non-blocking calls' argument checks.
 */
#include "abi_test.h"

void test_versions(void) {
    begin("version macros match the library");
    CHECK(PORTAL_KEYRING_VERSION_NUMBER == PORTAL_KEYRING_VERSION_MAJOR * 1000000 +
                                               PORTAL_KEYRING_VERSION_MINOR * 1000 +
                                               PORTAL_KEYRING_VERSION_PATCH);
    CHECK_MSG(portal_keyring_version_number() == PORTAL_KEYRING_VERSION_NUMBER, "library %u, header %d",
              (unsigned)portal_keyring_version_number(), PORTAL_KEYRING_VERSION_NUMBER);
    const char *v = portal_keyring_version();
    CHECK(v != NULL);
    CHECK_MSG(strcmp(v, PORTAL_KEYRING_VERSION_STRING) == 0, "library \"%s\", header \"%s\"", v,
              PORTAL_KEYRING_VERSION_STRING);
    char expected[64];
    snprintf(expected, sizeof expected, "%d.%d.%d", PORTAL_KEYRING_VERSION_MAJOR,
             PORTAL_KEYRING_VERSION_MINOR, PORTAL_KEYRING_VERSION_PATCH);
    CHECK_MSG(strcmp(PORTAL_KEYRING_VERSION_STRING, expected) == 0, "string macro %s vs %s",
              PORTAL_KEYRING_VERSION_STRING, expected);
    CHECK(portal_keyring_version() == v); /* static */
}

/* The non-blocking calls' argument checks (their behaviour: Tests/c/async_test/). A rejected
 * call starts nothing, runs destroy_notify before it returns and never the callback. */
static int async_destroyed, async_called;
static void async_done(portal_status st, portal_result *r, const char *m, void *d) {
    (void)st; (void)r; (void)m; (void)d;
    async_called++;
}
static void async_destroy(void *d) { (void)d; async_destroyed++; }
static void watch_event(portal_watch_event e, const char *u, void *d) { (void)e; (void)u; (void)d; async_called++; }
static void sign_in_done(portal_status st, portal_sign_in_result *r, const char *m, void *d) {
    (void)st; (void)r; (void)m; (void)d;
    async_called++;
}

void test_async_arguments(void) {
    begin("non-blocking calls: argument checks, destroy_notify on rejection, queues");
    portal_completion_queue *q = NULL;
    CHECK_STATUS(portal_completion_queue_new_for_main_context(NULL, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_completion_queue_new_pollable(NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(portal_completion_queue_get_fd(NULL) == -1);
    CHECK_STATUS(portal_completion_queue_dispatch(NULL, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    portal_completion_queue_free(NULL);
    CHECK_OK(portal_completion_queue_new_pollable(&q));
    CHECK(portal_completion_queue_get_fd(q) >= 0);
    size_t ran = 7;
    CHECK_OK(portal_completion_queue_dispatch(q, &ran));
    CHECK(ran == 0);
    CHECK_OK(portal_operation_cancel(0));
    CHECK_OK(portal_operation_cancel(UINT64_MAX));
    async_destroyed = 0;
    CHECK_STATUS(portal_auth_restore_session_async(NULL, q, async_done, NULL, async_destroy, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_persist_session_async(NULL, "u", "t", q, async_done, NULL, async_destroy, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_clear_persisted_session_async(NULL, q, async_done, NULL, async_destroy, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_session_invalidate_async(NULL, q, async_done, NULL, async_destroy, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_request_async(NULL, "GET", "/x", NULL, q, async_done, NULL, async_destroy, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_report_unauthorized_async(NULL, "t", q, async_done, NULL, async_destroy, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_clear_session_async(NULL, q, async_done, NULL, async_destroy, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    uint64_t handle = 0;
    CHECK_STATUS(portal_on_session_invalidated_queued(NULL, q, async_destroy, NULL, async_destroy, &handle),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_free_async(NULL, q, async_done, NULL, async_destroy), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(async_destroyed == 9);
    /* The sign-in calls: a NULL auth, then each call's own argument checks on a live auth. */
    CHECK_STATUS(portal_auth_get_methods_async(NULL, q, sign_in_done, NULL, async_destroy, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_send_magic_link_async(NULL, "a@example.com", q, sign_in_done, NULL, async_destroy, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_login_with_google_async(NULL, q, sign_in_done, NULL, async_destroy, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_login_with_apple_async(NULL, q, sign_in_done, NULL, async_destroy, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_handle_redirect_async(NULL, "app://cb?token=x", 0, q, sign_in_done, NULL, async_destroy,
                                                   NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_verify_totp_async(NULL, "123456", "jwt", q, sign_in_done, NULL, async_destroy, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    portal_auth *auth = NULL;
    CHECK_OK(portal_auth_new(&auth, "abi-async-env", "app://cb", "127.0.0.1:9"));
    CHECK_STATUS(portal_auth_get_methods_async(auth, q, NULL, NULL, async_destroy, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_send_magic_link_async(auth, NULL, q, sign_in_done, NULL, async_destroy, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_handle_redirect_async(auth, NULL, 0, q, sign_in_done, NULL, async_destroy, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_handle_redirect_async(auth, "app://cb?token=x", 4, q, sign_in_done, NULL, async_destroy,
                                                   NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_verify_totp_async(auth, NULL, "jwt", q, sign_in_done, NULL, async_destroy, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_verify_totp_async(auth, "123456", NULL, q, sign_in_done, NULL, async_destroy, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    /* The desktop sign-in: a NULL auth or callback, a timeout over 15 minutes, refused at once
     * (Tests/c/desktop_signin_test.c runs it with a browser). */
    CHECK_STATUS(portal_auth_sign_in_with_google_async(NULL, 0, q, sign_in_done, NULL, async_destroy, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_sign_in_with_apple_async(auth, 0, q, NULL, NULL, async_destroy, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_sign_in_with_google_async(auth, 900001, q, sign_in_done, NULL, async_destroy, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(portal_last_error_message(), "timeout_ms") != NULL);
    /* portal_auth_watch: NULL auth, callback and watch_out, and a freed queue. */
    portal_watch *watch = NULL;
    CHECK_STATUS(portal_auth_watch(NULL, q, watch_event, NULL, async_destroy, &watch), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_watch(auth, q, NULL, NULL, async_destroy, &watch), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_watch(auth, q, watch_event, NULL, async_destroy, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_watch(auth, (portal_completion_queue *)auth, watch_event, NULL, async_destroy, &watch),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(watch == NULL);
    /* portal_auth_watch_async checks the same arguments, at once, in the same order. */
    CHECK_STATUS(portal_auth_watch_async(NULL, q, watch_event, NULL, async_destroy, &watch), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_watch_async(auth, q, NULL, NULL, async_destroy, &watch), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_watch_async(auth, q, watch_event, NULL, async_destroy, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_watch_async(auth, (portal_completion_queue *)auth, watch_event, NULL, async_destroy, &watch),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(watch == NULL);
    portal_watch_free(NULL);
    portal_watch_free((portal_watch *)auth); /* another kind of handle: ignored */
    /* Outside a watch callback no event is being delivered (watch_test checks it inside). */
    CHECK(portal_watch_current_origin() == PORTAL_WATCH_ORIGIN_UNKNOWN);
    portal_auth_free(auth);
    CHECK(async_destroyed == 32);
    /* A queue handle where another kind is expected, and the other way round. */
    CHECK_STATUS(portal_auth_restore_session_async((portal_auth *)q, q, async_done, NULL, NULL, NULL),
                 PORTAL_ERR_INVALID_ARGUMENT);
    portal_completion_queue_free(q);
    CHECK(portal_completion_queue_get_fd(q) == -1); /* freed */
    portal_completion_queue_free(q);                /* a second free is ignored */
    CHECK(async_called == 0);
}

void test_status_str(void) {
    begin("portal_status_str for every code and unknown ones");
    const portal_status codes[] = {PORTAL_OK, PORTAL_ERR_INVALID_ARGUMENT, PORTAL_ERR_SESSION_STORAGE,
                                   PORTAL_ERR_SESSION_INVALIDATED, PORTAL_ERR_UNAUTHORIZED,
                                   PORTAL_ERR_NETWORK, PORTAL_ERR_INTERNAL, PORTAL_ERR_RATE_LIMITED,
                                   PORTAL_ERR_MALFORMED_RESPONSE, PORTAL_ERR_INVALID_GRANT,
                                   PORTAL_ERR_INVALID_USER_JWT, PORTAL_ERR_AUTHENTICATION_FAILED,
                                   PORTAL_ERR_UNSOLICITED_REDIRECT, PORTAL_ERR_DIFFERENT_END_USER,
                                   PORTAL_ERR_CANCELLED, PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED,
                                   PORTAL_ERR_AUTH_METHOD_UNAVAILABLE, PORTAL_ERR_ACCOUNT_ABSTRACTION_UNAVAILABLE,
                                   PORTAL_ERR_SERVER, PORTAL_ERR_REQUEST_REFUSED, PORTAL_ERR_TOTP_QR_UNAVAILABLE,
                                   PORTAL_ERR_SIGN_IN_IN_PROGRESS, PORTAL_ERR_SIGN_IN_UNAVAILABLE,
                                   PORTAL_ERR_SIGN_IN_TIMED_OUT};
    const size_t n = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < n; i++) {
        const char *s = portal_status_str(codes[i]);
        CHECK_MSG(s != NULL && s[0] != '\0', "code %d", (int)codes[i]);
        CHECK_MSG(strcmp(s, "unknown status") != 0, "code %d is unknown", (int)codes[i]);
        CHECK(portal_status_str(codes[i]) == s); /* static */
        for (size_t j = 0; j < i; j++)
            CHECK_MSG(strcmp(s, portal_status_str(codes[j])) != 0, "codes %d and %d share \"%s\"",
                      (int)codes[i], (int)codes[j], s);
    }
    CHECK(strcmp(portal_status_str(PORTAL_OK), "ok") == 0);
    CHECK(strcmp(portal_status_str(PORTAL_ERR_INVALID_ARGUMENT), "invalid argument") == 0);
    CHECK(PORTAL_ERR_UNSOLICITED_REDIRECT == 12 && PORTAL_ERR_DIFFERENT_END_USER == 13); /* appended (docs/ABI.md) */
    CHECK(PORTAL_ERR_CANCELLED == 14); /* appended (docs/ABI.md) */
    CHECK(PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED == 15 && PORTAL_ERR_AUTH_METHOD_UNAVAILABLE == 16 &&
          PORTAL_ERR_ACCOUNT_ABSTRACTION_UNAVAILABLE == 17 && PORTAL_ERR_SERVER == 18 &&
          PORTAL_ERR_REQUEST_REFUSED == 19 && PORTAL_ERR_TOTP_QR_UNAVAILABLE == 20); /* appended (docs/ABI.md) */
    CHECK(PORTAL_ERR_SIGN_IN_IN_PROGRESS == 21 && PORTAL_ERR_SIGN_IN_UNAVAILABLE == 22 &&
          PORTAL_ERR_SIGN_IN_TIMED_OUT == 23); /* appended (docs/ABI.md) */
    const int unknown[] = {24, 42, 1000, -1, INT32_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *s = portal_status_str((portal_status)unknown[i]);
        CHECK_MSG(s != NULL && strcmp(s, "unknown status") == 0, "code %d gave \"%s\"", unknown[i],
                  s ? s : "(null)");
    }
}

/* Thread-locality of the last error: each thread sees only its own. */
static pthread_mutex_t step_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t step_cond = PTHREAD_COND_INITIALIZER;
static int step;

static void wait_step(int s) {
    pthread_mutex_lock(&step_lock);
    while (step < s) pthread_cond_wait(&step_cond, &step_lock);
    pthread_mutex_unlock(&step_lock);
}

static void set_step(int s) {
    pthread_mutex_lock(&step_lock);
    step = s;
    pthread_cond_broadcast(&step_cond);
    pthread_mutex_unlock(&step_lock);
}

static void *error_thread(void *arg) {
    (void)arg;
    wait_step(1);
    /* A new thread has no error, although the main thread's last call failed. */
    CHECK_NO_ERROR();
    portal_auth *auth = SENTINEL_AUTH;
    CHECK_STATUS(portal_auth_new(&auth, "thread-env", NULL, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("redirect_url");
    set_step(2);
    wait_step(3);
    /* The main thread has meanwhile succeeded; this thread's error is untouched. */
    CHECK_ERROR_MENTIONS("redirect_url");
    return NULL;
}

void test_last_error(void) {
    begin("last error: \"\" after success, detail after failure, per thread");
    CHECK(portal_last_error_message() != NULL);
    portal_auth *auth = new_auth(new_env_id("lasterr"));
    CHECK_NO_ERROR();
    CHECK_STATUS(portal_auth_set_keyring_timeouts(auth, 0, 1000), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(portal_last_error_message()[0] != '\0');
    CHECK_ERROR_MENTIONS("call_timeout_ms");
    CHECK_OK(portal_auth_set_keyring_timeouts(auth, 5000, 30000));
    CHECK_NO_ERROR();
    /* A failure then a successful accessor call resets it, too. */
    CHECK(portal_session_get_end_user_id(NULL) == NULL);
    CHECK(portal_last_error_message()[0] != '\0');
    CHECK_OK(portal_auth_set_keyring_timeouts(auth, 5000, 30000));
    CHECK_NO_ERROR();

    portal_auth *other = SENTINEL_AUTH;
    CHECK_STATUS(portal_auth_new(&other, NULL, redirect, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("auth_environment_id");
    pthread_t thread;
    step = 0;
    CHECK(pthread_create(&thread, NULL, error_thread, NULL) == 0);
    set_step(1);
    wait_step(2);
    /* The other thread's failure did not change ours. */
    CHECK_ERROR_MENTIONS("auth_environment_id");
    CHECK_MSG(strcasestr(portal_last_error_message(), "redirect_url") == NULL, "saw the other thread's error");
    CHECK_OK(portal_auth_set_keyring_timeouts(auth, 5000, 30000));
    CHECK_NO_ERROR();
    set_step(3);
    CHECK(pthread_join(thread, NULL) == 0);
    CHECK_NO_ERROR();
    portal_auth_free(auth);
}
