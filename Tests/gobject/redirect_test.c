/*
 * redirect_test.c — the sign-ins that complete through the GNOME API (PortalKeyringAuth's
 * handle_redirect and verify_totp), against the loopback fake Portal API of
 * scripts/with-portal-api.sh and the private keyring of scripts/with-keyring.sh:
 *   - a magic link end to end: sent (a refused address, no configuration), the emailed link
 *     through handle_redirect_async, the session it persisted found by a restore; a URL not the
 *     app's: NOT_HANDLED; unknown flag bits refused;
 *   - a TOTP sign-in: TOTP_REQUIRED with the user JWT and enrolment link (its end user, secret
 *     and QR code through the helpers), a wrong code (AUTHENTICATION_FAILED), the right one (the
 *     session, restored after).
 * Another end user's sign-in over a stored one is end_user_test.c's.
 *
 *   PORTAL_TEST_API_URL=… PORTAL_TEST_API_HOST=… redirect_test
 *
 * Prints a line a failed check (check.h) and "redirect_test: N checks, M failed"; exits 1 on any.
 */
#define _GNU_SOURCE
#include "gobject_signin.h"

static char env_id[64], totp_user[64];

static void test_magic_link(void) {
    check_context = "magic link";
    GError *error = NULL;
    /* Without a magic-link configuration: nothing sent. */
    PortalKeyringAuth *bare = signin_auth_new(env_id, NULL, NULL);
    CHECK(!portal_keyring_auth_send_magic_link_sync(bare, "someone@example.com", NULL, &error));
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_MAGIC_LINK_NOT_CONFIGURED);
    CHECK_MSG(error && strstr(error->message, "magic-link-from-email"), "message: %s", error ? error->message : "");
    g_clear_error(&error);
    g_object_unref(bare);

    PortalKeyringAuth *auth = signin_auth_new(env_id, "login@example.com", "tpl-gobject");
    CHECK(portal_keyring_auth_clear_persisted_session_sync(auth, NULL, &error));
    g_clear_error(&error);
    /* A refused address is the operation's error, at its completion. */
    Wait wait = {0};
    portal_keyring_auth_send_magic_link_async(auth, NULL, NULL, wait_callback, &wait);
    CHECK(wait_run(&wait, NULL, 5000));
    CHECK(!portal_keyring_auth_send_magic_link_finish(auth, wait.result, &error));
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);
    wait_clear(&wait);

    portal_keyring_auth_send_magic_link_async(auth, "GObject.User@Example.com", NULL, wait_callback, &wait);
    CHECK(wait_run(&wait, NULL, 15000));
    CHECK_MSG(portal_keyring_auth_send_magic_link_finish(auth, wait.result, &error), "send: %s",
              error ? error->message : "");
    g_clear_error(&error);
    wait_clear(&wait);
    char link[2048] = "", end_user[256] = "", template_id[64] = "";
    const char *pick = "[l for l in d[\"data\"][\"links\"] if l[\"email\"]==\"gobject.user@example.com\"][-1]";
    char expression[512];
    g_snprintf(expression, sizeof expression, "%s[\"link\"]", pick);
    CHECK(fake_api_admin("GET", "/_admin/magic-links", NULL, expression, link, sizeof link) == 0);
    g_snprintf(expression, sizeof expression, "%s[\"endUserId\"]", pick);
    CHECK(fake_api_admin("GET", "/_admin/magic-links", NULL, expression, end_user, sizeof end_user) == 0);
    g_snprintf(expression, sizeof expression, "%s[\"templateId\"]", pick);
    CHECK(fake_api_admin("GET", "/_admin/magic-links", NULL, expression, template_id, sizeof template_id) == 0);
    CHECK_MSG(strcmp(template_id, "tpl-gobject") == 0, "the email's template: %s", template_id);

    /* Another app's URL: NOT_HANDLED, nothing done. */
    PortalKeyringSignInResult *result =
        portal_keyring_auth_handle_redirect_sync(auth, "otherapp://auth?token=x", 0, NULL, &error);
    CHECK(result && portal_keyring_sign_in_result_get_kind(result) == PORTAL_KEYRING_REDIRECT_KIND_NOT_HANDLED &&
          portal_keyring_sign_in_result_get_session(result) == NULL);
    g_clear_error(&error);
    g_clear_object(&result);
    /* Unknown flag bits: refused. */
    CHECK(portal_keyring_auth_handle_redirect_sync(auth, link, 1 << 5, NULL, &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);

    portal_keyring_auth_handle_redirect_async(auth, link, PORTAL_KEYRING_REDIRECT_FLAGS_NONE, NULL, wait_callback,
                                              &wait);
    CHECK(wait_run(&wait, NULL, 15000));
    result = portal_keyring_auth_handle_redirect_finish(auth, wait.result, &error);
    CHECK_MSG(result != NULL, "handle_redirect: %s", error ? error->message : "");
    g_clear_error(&error);
    wait_clear(&wait);
    if (result) {
        PortalKeyringRedirectKind kind = PORTAL_KEYRING_REDIRECT_KIND_NOT_HANDLED;
        PortalKeyringSession *session = NULL;
        g_object_get(result, "kind", &kind, "session", &session, NULL);
        CHECK(kind == PORTAL_KEYRING_REDIRECT_KIND_AUTHENTICATED);
        CHECK(session && g_strcmp0(portal_keyring_session_get_end_user_id(session), end_user) == 0);
        CHECK(session && portal_keyring_session_get_client_id(session) != NULL);
        CHECK(portal_keyring_sign_in_result_copy_user_jwt(result) == NULL);
        g_clear_object(&session);
        g_object_unref(result);
    }
    /* The restore finds what the sign-in persisted. */
    PortalKeyringSession *restored = portal_keyring_auth_restore_session_sync(auth, NULL, &error);
    CHECK_MSG(restored && g_strcmp0(portal_keyring_session_get_end_user_id(restored), end_user) == 0,
              "restore after the sign-in: %s", error ? error->message : "no session");
    g_clear_error(&error);
    g_clear_object(&restored);
    CHECK(portal_keyring_auth_clear_persisted_session_sync(auth, NULL, &error));
    g_clear_error(&error);
    g_object_unref(auth);
}

static void test_totp(void) {
    check_context = "totp";
    GError *error = NULL;
    PortalKeyringAuth *auth = signin_auth_new(env_id, NULL, NULL);
    char url[2048] = "", code[64] = "", path[128];
    mint_grant(totp_user, 1, url, sizeof url);
    PortalKeyringSignInResult *result =
        portal_keyring_auth_handle_redirect_sync(auth, url, PORTAL_KEYRING_REDIRECT_FLAGS_ALLOW_UNSOLICITED, NULL, &error);
    CHECK_MSG(result && portal_keyring_sign_in_result_get_kind(result) == PORTAL_KEYRING_REDIRECT_KIND_TOTP_REQUIRED,
              "TOTP grant: %s", error ? error->message : "another kind");
    g_clear_error(&error);
    char *jwt = result ? portal_keyring_sign_in_result_copy_user_jwt(result) : NULL;
    char *totp_link = result ? portal_keyring_sign_in_result_copy_totp_link(result) : NULL;
    CHECK(jwt != NULL && result && portal_keyring_sign_in_result_get_session(result) == NULL);
    CHECK(totp_link && g_str_has_prefix(totp_link, "otpauth://"));
    g_clear_object(&result);
    /* The step's helpers: its end user, the enrolment secret (the fake API's), the QR code. */
    g_autofree char *who = portal_keyring_user_jwt_get_end_user_id(jwt ? jwt : "x", &error);
    CHECK_MSG(g_strcmp0(who, totp_user) == 0, "end user of the JWT: %s", who ? who : error ? error->message : "");
    g_clear_error(&error);
    CHECK(portal_keyring_user_jwt_get_end_user_id("not-a-jwt", &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_USER_JWT);
    g_clear_error(&error);
    char secret[128] = "";
    g_snprintf(path, sizeof path, "/_admin/totp?endUserId=%s", totp_user);
    CHECK(fake_api_admin("GET", path, NULL, "d[\"data\"][\"secret\"]", secret, sizeof secret) == 0);
    char *link_secret = portal_keyring_totp_link_get_secret(totp_link ? totp_link : "x", &error);
    CHECK(link_secret && strcmp(link_secret, secret) == 0);
    portal_keyring_token_free(link_secret);
    guint size = 0;
    char *modules = portal_keyring_totp_qr_code(totp_link ? totp_link : "x", &size, &error);
    CHECK_MSG(modules && size >= 29 && strlen(modules) == (size_t)size * size && strspn(modules, "01") == strlen(modules),
              "QR code: %s", modules ? "wrong shape" : error ? error->message : "");
    g_clear_error(&error);
    portal_keyring_token_free(modules);
    char *svg = portal_keyring_totp_qr_svg(totp_link ? totp_link : "x", &error);
    CHECK_MSG(svg && strstr(svg, "<svg"), "QR SVG: %s", error ? error->message : "no <svg");
    g_clear_error(&error);
    portal_keyring_token_free(svg);

    CHECK(portal_keyring_auth_verify_totp_sync(auth, "12a456", jwt ? jwt : "x", NULL, &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);
    CHECK(fake_api_admin("GET", path, NULL, "d[\"data\"][\"code\"]", code, sizeof code) == 0);
    CHECK(portal_keyring_auth_verify_totp_sync(auth, strcmp(code, "000000") ? "000000" : "111111", jwt ? jwt : "x",
                                               NULL, &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_AUTHENTICATION_FAILED);
    g_clear_error(&error);

    Wait wait = {0};
    portal_keyring_auth_verify_totp_async(auth, code, jwt ? jwt : "x", NULL, wait_callback, &wait);
    CHECK(wait_run(&wait, NULL, 15000));
    PortalKeyringSession *session = portal_keyring_auth_verify_totp_finish(auth, wait.result, &error);
    CHECK_MSG(session && g_strcmp0(portal_keyring_session_get_end_user_id(session), totp_user) == 0,
              "verify_totp: %s", error ? error->message : "another end user");
    CHECK(session && portal_keyring_session_get_account_abstraction(session) == PORTAL_KEYRING_ACCOUNT_ABSTRACTION_OFF);
    g_clear_error(&error);
    g_clear_object(&session);
    wait_clear(&wait);
    portal_keyring_token_free(jwt);
    portal_keyring_token_free(totp_link);
    session = portal_keyring_auth_restore_session_sync(auth, NULL, &error);
    CHECK(session && g_strcmp0(portal_keyring_session_get_end_user_id(session), totp_user) == 0);
    g_clear_error(&error);
    g_clear_object(&session);
    CHECK(portal_keyring_auth_clear_persisted_session_sync(auth, NULL, &error));
    g_clear_error(&error);
    g_object_unref(auth);
}

int main(void) {
    g_snprintf(env_id, sizeof env_id, "gobject-redirect-%d", (int)getpid());
    /* The fake API sends the enrolment link until an end user's first TOTP validation: one end
     * user per run, so that a second run on the same server (valgrind's) gets it too. */
    g_snprintf(totp_user, sizeof totp_user, "user-totp-gobject-%d", (int)getpid());
    if (!getenv("PORTAL_TEST_API_HOST") || !getenv("PORTAL_TEST_API_URL")) {
        fprintf(stderr, "redirect_test: run inside scripts/with-portal-api.sh\n");
        return 2;
    }
    test_magic_link();
    test_totp();
    printf("redirect_test: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
