/*
 * end_user_test.c — the different-end-user confirmation through the GNOME API (the C ABI's
 * PORTAL_ERR_DIFFERENT_END_USER and PORTAL_REDIRECT_REPLACE_END_USER, docs/sign-in.md), against
 * the loopback fake Portal API of scripts/with-portal-api.sh and the private keyring of
 * scripts/with-keyring.sh. With one end user's session stored:
 *   - another end user's redirect, with a sign-in pending, fails handle_redirect_async and _sync
 *     with PORTAL_KEYRING_ERROR_DIFFERENT_END_USER naming both end users; nothing is stored;
 *   - the same URL on another auth with REPLACE_END_USER: the grant was spent by the first
 *     exchange (INVALID_GRANT), nothing stored;
 *   - the same URL on the same auth with REPLACE_END_USER: AUTHENTICATED without a second
 *     exchange, the new end user's session is what a restore finds;
 *   - the same end user signing in again: replaced silently, no confirmation;
 *   - verify_totp for another end user: DIFFERENT_END_USER before the code is sent; signed out,
 *     the same code signs in;
 *   - persist_session of another end user replaces silently (the app's own call, as in C).
 *
 *   PORTAL_TEST_API_URL=… PORTAL_TEST_API_HOST=… end_user_test
 *
 * Prints a line a failed check (check.h) and "end_user_test: N checks, M failed"; exits 1 on any.
 */
#define _GNU_SOURCE
#include "gobject_signin.h"

static char env_id[64], first[64], second[64], totp_user[64];

static PortalKeyringAuth *make_auth(void) { return signin_auth_new(env_id, "login@example.com", "tpl-gobject"); }

/* The end user of the stored session ("" when signed out; g_free). */
static char *stored_end_user(PortalKeyringAuth *auth) {
    g_autoptr(GError) error = NULL;
    g_autoptr(PortalKeyringSession) session = portal_keyring_auth_restore_session_sync(auth, NULL, &error);
    CHECK_MSG(error == NULL, "restore: %s", error ? error->message : "");
    return g_strdup(session ? portal_keyring_session_get_end_user_id(session) : "");
}

#define CHECK_STORED(auth, want)                                                                       \
    do {                                                                                               \
        g_autofree char *stored_ = stored_end_user(auth);                                              \
        CHECK_MSG(strcmp(stored_, (want)) == 0, "stored: \"%s\", wanted \"%s\"", stored_, (want));    \
    } while (0)

/* A redirect through handle_redirect_async on the default context: its result, or NULL with *error. */
static PortalKeyringSignInResult *redirect_async(PortalKeyringAuth *auth, const char *url,
                                                 PortalKeyringRedirectFlags flags, GError **error) {
    Wait wait = {0};
    portal_keyring_auth_handle_redirect_async(auth, url, flags, NULL, wait_callback, &wait);
    CHECK_MSG(wait.done == 0, "the callback ran inside the _async call");
    CHECK(wait_run(&wait, NULL, 20000));
    PortalKeyringSignInResult *result =
        wait.result ? portal_keyring_auth_handle_redirect_finish(auth, wait.result, error) : NULL;
    wait_clear(&wait);
    return result;
}

static void test_redirect(PortalKeyringAuth *auth) {
    check_context = "redirect";
    GError *error = NULL;
    char url[2048] = "", again[2048] = "";
    PortalKeyringSession *session = portal_keyring_auth_persist_session_sync(auth, first, "cst-first", NULL, &error);
    CHECK_MSG(session != NULL, "persist: %s", error ? error->message : "");
    g_clear_error(&error);
    g_clear_object(&session);

    /* Another end user's grant, with a sign-in pending: refused, both named, nothing stored. */
    CHECK(portal_keyring_auth_send_magic_link_sync(auth, "someone@example.com", NULL, &error));
    g_clear_error(&error);
    mint_grant(second, 0, url, sizeof url);
    PortalKeyringSignInResult *result = redirect_async(auth, url, PORTAL_KEYRING_REDIRECT_FLAGS_NONE, &error);
    CHECK(result == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_DIFFERENT_END_USER);
    CHECK_MSG(error && strstr(error->message, first) && strstr(error->message, second), "message: %s",
              error ? error->message : "");
    g_clear_error(&error);
    g_clear_object(&result);
    CHECK_STORED(auth, first);
    /* Again, in the _sync form: still refused (the remembered exchange), still nothing stored. */
    CHECK(portal_keyring_auth_handle_redirect_sync(auth, url, PORTAL_KEYRING_REDIRECT_FLAGS_NONE, NULL, &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_DIFFERENT_END_USER);
    g_clear_error(&error);
    CHECK_STORED(auth, first);

    /* Another auth cannot confirm: the grant was spent by the first exchange. */
    PortalKeyringAuth *other = make_auth();
    CHECK(portal_keyring_auth_handle_redirect_sync(other, url, PORTAL_KEYRING_REDIRECT_FLAGS_REPLACE_END_USER, NULL,
                                                   &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_GRANT);
    g_clear_error(&error);
    g_clear_object(&other);
    CHECK_STORED(auth, first);

    /* The confirmation: the same URL on the same auth replaces the stored end user. */
    result = redirect_async(auth, url, PORTAL_KEYRING_REDIRECT_FLAGS_REPLACE_END_USER, &error);
    CHECK_MSG(result && portal_keyring_sign_in_result_get_kind(result) == PORTAL_KEYRING_REDIRECT_KIND_AUTHENTICATED,
              "confirmed: %s", error ? error->message : "another kind");
    session = result ? portal_keyring_sign_in_result_get_session(result) : NULL;
    CHECK(session && g_strcmp0(portal_keyring_session_get_end_user_id(session), second) == 0);
    g_clear_error(&error);
    g_clear_object(&result);
    CHECK_STORED(auth, second);

    /* The same end user signing in again: no confirmation asked. */
    CHECK(portal_keyring_auth_send_magic_link_sync(auth, "someone@example.com", NULL, &error));
    g_clear_error(&error);
    mint_grant(second, 0, again, sizeof again);
    result = redirect_async(auth, again, PORTAL_KEYRING_REDIRECT_FLAGS_NONE, &error);
    CHECK_MSG(result && portal_keyring_sign_in_result_get_kind(result) == PORTAL_KEYRING_REDIRECT_KIND_AUTHENTICATED,
              "the same end user again: %s", error ? error->message : "another kind");
    g_clear_error(&error);
    g_clear_object(&result);
    CHECK_STORED(auth, second);
}

/* verify_totp checks the JWT's end user before it sends the code: refused, the code unused;
 * signed out, the same code signs in. */
static void test_totp(PortalKeyringAuth *auth) {
    check_context = "totp";
    GError *error = NULL;
    char url[2048] = "", code[64] = "", path[128];
    mint_grant(totp_user, 1, url, sizeof url);
    PortalKeyringSignInResult *result =
        portal_keyring_auth_handle_redirect_sync(auth, url, PORTAL_KEYRING_REDIRECT_FLAGS_ALLOW_UNSOLICITED, NULL, &error);
    CHECK_MSG(result && portal_keyring_sign_in_result_get_kind(result) == PORTAL_KEYRING_REDIRECT_KIND_TOTP_REQUIRED,
              "TOTP grant: %s", error ? error->message : "another kind");
    g_clear_error(&error);
    char *jwt = result ? portal_keyring_sign_in_result_copy_user_jwt(result) : NULL;
    g_clear_object(&result);
    g_snprintf(path, sizeof path, "/_admin/totp?endUserId=%s", totp_user);
    CHECK(fake_api_admin("GET", path, NULL, "d[\"data\"][\"code\"]", code, sizeof code) == 0);

    Wait wait = {0};
    portal_keyring_auth_verify_totp_async(auth, code, jwt ? jwt : "x", NULL, wait_callback, &wait);
    CHECK(wait_run(&wait, NULL, 20000));
    CHECK(wait.result && portal_keyring_auth_verify_totp_finish(auth, wait.result, &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_DIFFERENT_END_USER);
    CHECK_MSG(error && strstr(error->message, totp_user) && strstr(error->message, second), "message: %s",
              error ? error->message : "");
    g_clear_error(&error);
    wait_clear(&wait);
    CHECK_STORED(auth, second);

    CHECK(portal_keyring_auth_clear_persisted_session_sync(auth, NULL, &error));
    g_clear_error(&error);
    PortalKeyringSession *session = portal_keyring_auth_verify_totp_sync(auth, code, jwt ? jwt : "x", NULL, &error);
    CHECK_MSG(session && g_strcmp0(portal_keyring_session_get_end_user_id(session), totp_user) == 0,
              "verify_totp signed out: %s", error ? error->message : "another end user");
    g_clear_error(&error);
    g_clear_object(&session);
    portal_keyring_token_free(jwt);
    CHECK_STORED(auth, totp_user);
}

int main(void) {
    g_snprintf(env_id, sizeof env_id, "gobject-end-user-%d", (int)getpid());
    g_snprintf(first, sizeof first, "eu-gobject-first-%d", (int)getpid());
    g_snprintf(second, sizeof second, "eu-gobject-second-%d", (int)getpid());
    g_snprintf(totp_user, sizeof totp_user, "eu-gobject-totp-%d", (int)getpid());
    if (!getenv("PORTAL_TEST_API_HOST") || !getenv("PORTAL_TEST_API_URL")) {
        fprintf(stderr, "end_user_test: run inside scripts/with-portal-api.sh\n");
        return 2;
    }
    PortalKeyringAuth *auth = make_auth();
    if (!auth) return 1;
    GError *error = NULL;
    CHECK(portal_keyring_auth_clear_persisted_session_sync(auth, NULL, &error));
    g_clear_error(&error);
    test_redirect(auth);
    test_totp(auth);

    check_context = "persist";
    PortalKeyringSession *session = portal_keyring_auth_persist_session_sync(auth, first, "cst-first", NULL, &error);
    CHECK_MSG(session != NULL, "persist over another end user: %s", error ? error->message : "");
    g_clear_error(&error);
    g_clear_object(&session);
    CHECK_STORED(auth, first);
    CHECK(portal_keyring_auth_clear_persisted_session_sync(auth, NULL, &error));
    g_clear_error(&error);
    g_object_unref(auth);
    printf("end_user_test: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
