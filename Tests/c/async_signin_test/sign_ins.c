/* async_signin_test: each way to sign in, through the non-blocking calls, to the session it persists. */
#include "async_signin_test.h"

void test_methods_and_urls(portal_auth *auth) {
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
void test_magic_link(portal_auth *auth) {
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
    CHECK(fake_api_admin("GET", "/_admin/magic-links", NULL, "[l for l in d[\"data\"][\"links\"] if l[\"email\"]==\"async.user@example.com\"][-1][\"link\"]",
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
void test_totp(portal_auth *auth) {
    char url[2048], code[64];
    CHECK(fake_api_admin("POST", "/_admin/grants",
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
    CHECK(fake_api_admin("GET", "/_admin/totp?endUserId=user-totp-async", NULL, "d[\"data\"][\"secret\"]", expected_secret,
                         sizeof expected_secret) == 0);
    CHECK(secret && strcmp(secret, expected_secret) == 0);
    portal_string_free(secret);
    CHECK(fake_api_admin("GET", "/_admin/totp?endUserId=user-totp-async", NULL, "d[\"data\"][\"code\"]", code, sizeof code) == 0);
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
    CHECK(fake_api_admin("POST", "/_admin/end-users", "{\"endUserId\":\"user-totp-async\"}", "d[\"data\"][\"clientId\"]",
                         client_id, sizeof client_id) == 0);
    CHECK(verify.session && portal_session_get_client_id(verify.session) &&
          strcmp(portal_session_get_client_id(verify.session), client_id) == 0);
    CHECK(verify.session && portal_session_get_is_account_abstracted(verify.session) == 0);
    gap_report("verify_totp_async");
    probe_clear(&redirect);
    probe_clear(&verify);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);
}

/* A private-use-scheme redirect URL without an authority (RFC 8252 §7.1) completes a sign-in. */
void test_private_use_redirect(void) {
    const char *base = "com.example.app:/oauth2redirect";
    portal_auth *auth = NULL;
    CHECK(portal_auth_new(&auth, env_id, base, getenv("PORTAL_TEST_API_HOST")) == PORTAL_OK);
    if (!auth) return;
    char url[2048], json[256];
    snprintf(json, sizeof json, "{\"kind\":\"magic_link\",\"endUserId\":\"user-private-use\",\"redirectUrl\":\"%s\"}", base);
    CHECK(fake_api_admin("POST", "/_admin/grants", json, "d[\"data\"][\"redirectUrl\"]", url, sizeof url) == 0);
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
