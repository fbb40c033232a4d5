/*
 * async_signin_test.c — the non-blocking sign-in calls against the real keyring and
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
#define _DEFAULT_SOURCE 1
#include <portal_keyring.h>
#include "check.h"
#include "main_loop.h"

#include <glib.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *api_url;
static char env_id[128];

/* One sign-in completion, with what it delivered (taken from the result). */
typedef struct {
    int calls, destroyed, same_thread;
    pthread_t thread;
    portal_status status;
    char message[512];
    portal_redirect_kind kind;
    portal_session *session;
    char *text, *user_jwt, *totp_link;
    bool auto_create_wallet;
    gint64 at;
} probe;

static void on_done(portal_status status, portal_sign_in_result *result, const char *message, void *data) {
    probe *p = data;
    p->calls++;
    p->same_thread = pthread_equal(pthread_self(), p->thread);
    p->status = status;
    snprintf(p->message, sizeof p->message, "%s", message ? message : "(null)");
    p->kind = result->kind;
    p->auto_create_wallet = result->auto_create_wallet;
    /* Take every owned field; the library frees what is left. */
    if (result->session) { portal_session_free(p->session); p->session = result->session; result->session = NULL; }
    if (result->text) { portal_string_free(p->text); p->text = result->text; result->text = NULL; }
    if (result->user_jwt) { portal_string_free(p->user_jwt); p->user_jwt = result->user_jwt; result->user_jwt = NULL; }
    if (result->totp_link) { portal_string_free(p->totp_link); p->totp_link = result->totp_link; result->totp_link = NULL; }
    p->at = g_get_monotonic_time();
}

static void on_destroy(void *data) { ((probe *)data)->destroyed++; }

static void probe_init(probe *p) {
    memset(p, 0, sizeof *p);
    p->thread = pthread_self();
    p->status = (portal_status)-1;
}

static void probe_clear(probe *p) {
    portal_session_free(p->session);
    portal_string_free(p->text);
    portal_string_free(p->user_jwt);
    portal_string_free(p->totp_link);
    probe_init(p);
}

static void expect_once(probe *p, portal_status status, const char *message_part, const char *what) {
    if (p->calls != 1 || p->destroyed != 1 || !p->same_thread || p->status != status ||
        (message_part && !strstr(p->message, message_part)))
        fprintf(stderr, "%s: calls %d destroyed %d same thread %d status %d (want %d) message '%s' (want '%s')\n", what,
                p->calls, p->destroyed, p->same_thread, p->status, status, p->message, message_part ? message_part : "");
    CHECK(p->calls == 1);
    CHECK(p->destroyed == 1);
    CHECK(p->same_thread);
    CHECK(p->status == status);
    if (message_part) CHECK(strstr(p->message, message_part) != NULL);
}

/* The fake API's admin routes: METHOD PATH [JSON]; prints the value of the Python expression
 * `pick` over the decoded answer `d` into out. */
static int admin(const char *method, const char *path, const char *json, const char *pick, char *out, size_t size) {
    char command[4096];
    snprintf(command, sizeof command,
             "python3 -c 'import json,sys,urllib.request as u; b=sys.argv[3]; "
             "r=u.Request(sys.argv[1]+sys.argv[2],data=b.encode() if b else None,method=sys.argv[4],"
             "headers={\"Content-Type\":\"application/json\"}); d=json.load(u.urlopen(r)); print(%s)' "
             "'%s' '%s' '%s' '%s'",
             pick, api_url, path, json ? json : "", method);
    FILE *p = popen(command, "r");
    if (!p) return -1;
    out[0] = '\0';
    if (!fgets(out, (int)size, p)) out[0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    return pclose(p) == 0 ? 0 : -1;
}

static int fault(const char *json) {
    char ignored[256];
    return admin("POST", "/_admin/faults", json, "1", ignored, sizeof ignored);
}

static portal_auth *new_auth(void) {
    portal_auth *auth = NULL;
    CHECK(portal_auth_new(&auth, env_id, "app://cb", getenv("PORTAL_TEST_API_HOST")) == PORTAL_OK);
    CHECK(portal_auth_set_magic_link(auth, "login@example.com", "tpl-c") == PORTAL_OK);
    return auth;
}

static void test_methods_and_urls(portal_auth *auth) {
    probe methods, google, apple;
    probe_init(&methods);
    probe_init(&google);
    probe_init(&apple);
    gap_reset();
    CHECK(portal_auth_get_methods_async(auth, NULL, on_done, &methods, on_destroy, NULL) == PORTAL_OK);
    CHECK(portal_auth_login_with_google_async(auth, NULL, on_done, &google, on_destroy, NULL) == PORTAL_OK);
    CHECK(portal_auth_login_with_apple_async(auth, NULL, on_done, &apple, on_destroy, NULL) == PORTAL_OK);
    CHECK(methods.calls == 0); /* never before the call returned */
    CHECK(run_until(&methods.destroyed, 1, 15000));
    CHECK(run_until(&google.destroyed, 1, 15000));
    CHECK(run_until(&apple.destroyed, 1, 15000));
    expect_once(&methods, PORTAL_OK, "", "get_methods_async");
    CHECK(methods.text && strstr(methods.text, "EMAIL_MAGIC_LINK"));
    CHECK(methods.auto_create_wallet);
    expect_once(&google, PORTAL_OK, "", "login_with_google_async");
    CHECK(google.text && strstr(google.text, "oauth/authorize") && strstr(google.text, "google"));
    expect_once(&apple, PORTAL_OK, "", "login_with_apple_async");
    CHECK(apple.text && strstr(apple.text, "apple"));
    printf("get_methods_async: %s (autoCreateWallet %d)\n", methods.text ? methods.text : "(null)",
           methods.auto_create_wallet);
    gap_report("get_methods / login_with_google / login_with_apple");
    probe_clear(&methods);
    probe_clear(&google);
    probe_clear(&apple);
}

/* send_magic_link through a slow API, then the emailed link through handle_redirect, twice. */
static void test_magic_link(portal_auth *auth) {
    CHECK(fault("{\"route\":\"/api/v3/auth/magic-links\",\"delayMs\":1500,\"count\":1}") == 0);
    probe send;
    probe_init(&send);
    gap_reset();
    gint64 start = g_get_monotonic_time();
    CHECK(portal_auth_send_magic_link_async(auth, "Async.User@Example.com", NULL, on_done, &send, on_destroy, NULL) ==
          PORTAL_OK);
    CHECK(g_get_monotonic_time() - start < 20 * 1000); /* returned at once */
    CHECK(run_until(&send.destroyed, 1, 15000));
    expect_once(&send, PORTAL_OK, "", "send_magic_link_async (slow API)");
    CHECK(send.at - start >= 1400 * 1000);
    printf("send_magic_link_async through a 1.5 s API completed after %.0f ms\n", (send.at - start) / 1000.0);
    gap_report("send_magic_link_async, slow Portal API");
    probe_clear(&send);

    char link[2048];
    CHECK(admin("GET", "/_admin/magic-links", NULL, "[l for l in d[\"data\"][\"links\"] if l[\"email\"]==\"async.user@example.com\"][-1][\"link\"]",
                link, sizeof link) == 0);
    probe first, again;
    probe_init(&first);
    probe_init(&again);
    gap_reset();
    CHECK(portal_auth_handle_redirect_async(auth, link, PORTAL_REDIRECT_FLAGS_NONE, NULL, on_done, &first, on_destroy,
                                            NULL) == PORTAL_OK);
    CHECK(run_until(&first.destroyed, 1, 15000));
    expect_once(&first, PORTAL_OK, "", "handle_redirect_async (magic link)");
    CHECK(first.kind == PORTAL_REDIRECT_AUTHENTICATED);
    CHECK(first.session != NULL);
    CHECK(first.user_jwt == NULL && first.totp_link == NULL);
    /* The same URL again on this handle: the remembered exchange, the same end user. */
    CHECK(portal_auth_handle_redirect_async(auth, link, 0, NULL, on_done, &again, on_destroy, NULL) == PORTAL_OK);
    CHECK(run_until(&again.destroyed, 1, 15000));
    expect_once(&again, PORTAL_OK, "", "handle_redirect_async (same URL again)");
    CHECK(again.kind == PORTAL_REDIRECT_AUTHENTICATED);
    if (first.session && again.session)
        CHECK(strcmp(portal_session_get_end_user_id(first.session), portal_session_get_end_user_id(again.session)) == 0);
    gap_report("handle_redirect_async");
    /* The restore finds what the redirect persisted. */
    portal_session *restored = NULL;
    CHECK(portal_auth_restore_session(auth, &restored) == PORTAL_OK && restored != NULL);
    if (restored && first.session)
        CHECK(strcmp(portal_session_get_end_user_id(restored), portal_session_get_end_user_id(first.session)) == 0);
    portal_session_free(restored);
    probe_clear(&first);
    probe_clear(&again);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);
}

/* A TOTP sign-in: an unsolicited grant (flag), TOTP_REQUIRED with the user JWT, verify_totp. */
static void test_totp(portal_auth *auth) {
    char url[2048], code[64];
    CHECK(admin("POST", "/_admin/grants",
                "{\"kind\":\"magic_link\",\"endUserId\":\"user-totp-async\",\"totpRequired\":true,\"redirectUrl\":\"app://cb\"}",
                "d[\"data\"][\"redirectUrl\"]", url, sizeof url) == 0);
    probe redirect;
    probe_init(&redirect);
    CHECK(portal_auth_handle_redirect_async(auth, url, PORTAL_REDIRECT_ALLOW_UNSOLICITED, NULL, on_done, &redirect,
                                            on_destroy, NULL) == PORTAL_OK);
    CHECK(run_until(&redirect.destroyed, 1, 15000));
    expect_once(&redirect, PORTAL_OK, "", "handle_redirect_async (TOTP grant)");
    CHECK(redirect.kind == PORTAL_REDIRECT_TOTP_REQUIRED);
    CHECK(redirect.user_jwt != NULL && redirect.session == NULL);
    CHECK(redirect.totp_link != NULL && strncmp(redirect.totp_link, "otpauth://", 10) == 0);
    /* The step's end user (the JWT's claim) and the enrolment secret (the link's, validated). */
    char *end_user = NULL, *secret = NULL, expected_secret[128], client_id[128];
    CHECK(portal_user_jwt_get_end_user_id(redirect.user_jwt ? redirect.user_jwt : "x", &end_user) == PORTAL_OK);
    CHECK(end_user && strcmp(end_user, "user-totp-async") == 0);
    portal_string_free(end_user);
    CHECK(portal_totp_link_get_secret(redirect.totp_link ? redirect.totp_link : "x", &secret) == PORTAL_OK);
    CHECK(admin("GET", "/_admin/totp?endUserId=user-totp-async", NULL, "d[\"data\"][\"secret\"]", expected_secret,
                sizeof expected_secret) == 0);
    CHECK(secret && strcmp(secret, expected_secret) == 0);
    portal_string_free(secret);
    CHECK(admin("GET", "/_admin/totp?endUserId=user-totp-async", NULL, "d[\"data\"][\"code\"]", code, sizeof code) == 0);
    /* A mistyped code: Portal's bare 401 is a rejected code, and the same JWT stays usable. */
    portal_session *none = NULL;
    CHECK(portal_auth_verify_totp(auth, strcmp(code, "000000") ? "000000" : "111111",
                                  redirect.user_jwt ? redirect.user_jwt : "x", &none) == PORTAL_ERR_AUTHENTICATION_FAILED);
    CHECK(none == NULL);
    probe verify;
    probe_init(&verify);
    gap_reset();
    CHECK(portal_auth_verify_totp_async(auth, code, redirect.user_jwt ? redirect.user_jwt : "x", NULL, on_done, &verify,
                                        on_destroy, NULL) == PORTAL_OK);
    CHECK(run_until(&verify.destroyed, 1, 15000));
    expect_once(&verify, PORTAL_OK, "", "verify_totp_async");
    CHECK(verify.session && strcmp(portal_session_get_end_user_id(verify.session), "user-totp-async") == 0);
    /* The client the answer named, on the session handle the sign-in returned. */
    CHECK(admin("POST", "/_admin/end-users", "{\"endUserId\":\"user-totp-async\"}", "d[\"data\"][\"clientId\"]",
                client_id, sizeof client_id) == 0);
    CHECK(verify.session && portal_session_get_client_id(verify.session) &&
          strcmp(portal_session_get_client_id(verify.session), client_id) == 0);
    CHECK(verify.session && portal_session_get_is_account_abstracted(verify.session) == 0);
    gap_report("verify_totp_async");
    probe_clear(&redirect);
    probe_clear(&verify);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);
}

/* A cancel during a request the API holds for 8 s: CANCELLED at once, exactly once. */
static void test_cancel_mid_request(portal_auth *auth) {
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
static void test_many_in_flight(portal_auth *auth) {
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

static void test_argument_checks(portal_auth *auth) {
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

/* A 429 with Retry-After: the wait is in the message, blocking and non-blocking. */
static void test_rate_limited(portal_auth *auth) {
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

/* A private-use-scheme redirect URL without an authority (RFC 8252 §7.1) completes a sign-in. */
static void test_private_use_redirect(void) {
    const char *base = "com.example.app:/oauth2redirect";
    portal_auth *auth = NULL;
    CHECK(portal_auth_new(&auth, env_id, base, getenv("PORTAL_TEST_API_HOST")) == PORTAL_OK);
    if (!auth) return;
    char url[2048], json[256];
    snprintf(json, sizeof json, "{\"kind\":\"magic_link\",\"endUserId\":\"user-private-use\",\"redirectUrl\":\"%s\"}", base);
    CHECK(admin("POST", "/_admin/grants", json, "d[\"data\"][\"redirectUrl\"]", url, sizeof url) == 0);
    CHECK(strncmp(url, "com.example.app:/oauth2redirect?token=", 38) == 0);
    portal_redirect_kind kind = PORTAL_REDIRECT_NOT_HANDLED;
    portal_session *session = NULL;
    CHECK(portal_auth_handle_redirect_v2(auth, url, PORTAL_REDIRECT_ALLOW_UNSOLICITED, &kind, &session, NULL, NULL) ==
          PORTAL_OK);
    CHECK(kind == PORTAL_REDIRECT_AUTHENTICATED);
    CHECK(session && strcmp(portal_session_get_end_user_id(session), "user-private-use") == 0);
    portal_session_free(session);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);
    portal_auth_free(auth);
}

int main(void) {
    api_url = getenv("PORTAL_TEST_API_URL");
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
