/*
 * abi_test: the sign-in functions' arguments and failures, and freed handles used again.
 */
#include "abi_test.h"

/* Sign-in entry points: argument checks, "not handled", and network failures (no server on the
 * host), with outputs untouched on failure. The flows themselves run in invalidation_test and
 * the Swift and CLI suites against the loopback Portal API. */
void test_sign_in_arguments(void) {
    begin("sign-in functions: arguments, not-handled URLs, unreachable API");
    portal_auth *auth = NULL;
    CHECK_OK(portal_auth_new(&auth, "signin-args", "myapp://auth/callback", "127.0.0.1:1"));
    char *text = (char *)0x1;
    bool wallet = false;
    CHECK_STATUS(portal_auth_get_methods(NULL, &text, &wallet), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_get_methods(auth, NULL, &wallet), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_get_methods(auth, &text, &wallet), PORTAL_ERR_NETWORK);
    CHECK(text == (char *)0x1);
    /* No magic-link sender and template yet: refused before anything else (docs/sign-in.md#magic-links). */
    CHECK_STATUS(portal_auth_send_magic_link(auth, "a@example.com"), PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED);
    CHECK_ERROR_MENTIONS("portal_auth_set_magic_link");
    CHECK_STATUS(portal_auth_set_magic_link(auth, NULL, "tpl"), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("from_email");
    CHECK_OK(portal_auth_set_magic_link(auth, "login@example.com", "tpl"));
    CHECK_STATUS(portal_auth_set_account_abstraction(auth, (portal_account_abstraction)7), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_OK(portal_auth_set_account_abstraction(auth, PORTAL_ACCOUNT_ABSTRACTION_DEFAULT));
    CHECK_STATUS(portal_auth_send_magic_link(auth, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_send_magic_link(auth, ""), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_send_magic_link(auth, "no-at-sign"), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_send_magic_link(auth, "a@example.com"), PORTAL_ERR_NETWORK);
    CHECK_STATUS(portal_auth_login_with_google(auth, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_login_with_apple(NULL, &text), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_login_with_google(auth, &text), PORTAL_ERR_NETWORK);
    CHECK_STATUS(portal_auth_login_with_apple(auth, &text), PORTAL_ERR_NETWORK);
    CHECK(text == (char *)0x1);
    {
        /* The desktop sign-in's argument checks come first; then it fails like login_with_*,
         * with its outputs untouched. */
        portal_redirect_kind k = PORTAL_REDIRECT_TOTP_REQUIRED;
        portal_session *s = (portal_session *)0x1;
        CHECK_STATUS(portal_auth_sign_in_with_google(NULL, 0, &k, &s, NULL, NULL), PORTAL_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(portal_auth_sign_in_with_google(auth, 900001, &k, &s, NULL, NULL), PORTAL_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_MENTIONS("timeout_ms");
        CHECK_STATUS(portal_auth_sign_in_with_apple(auth, 1000, &k, &s, NULL, NULL), PORTAL_ERR_NETWORK);
        CHECK(k == PORTAL_REDIRECT_TOTP_REQUIRED && s == (portal_session *)0x1);
        /* kind_out is optional: the call runs as far without it. */
        CHECK_STATUS(portal_auth_sign_in_with_apple(auth, 1000, NULL, &s, NULL, NULL), PORTAL_ERR_NETWORK);
        CHECK(s == (portal_session *)0x1);
    }

    portal_redirect_kind kind = PORTAL_REDIRECT_AUTHENTICATED;
    portal_session *session = (portal_session *)0x1;
    char *jwt = (char *)0x1, *link = (char *)0x1;
    CHECK_STATUS(portal_auth_handle_redirect(auth, NULL, &kind, &session, &jwt, &link), PORTAL_ERR_INVALID_ARGUMENT);
    /* kind_out is optional: a redirect that is not ours is still answered PORTAL_OK. */
    CHECK_OK(portal_auth_handle_redirect(auth, "https://example.com/?token=x", NULL, NULL, NULL, NULL));
    CHECK_OK(portal_auth_handle_redirect(auth, "https://example.com/?token=x", &kind, &session, &jwt, &link));
    CHECK(kind == PORTAL_REDIRECT_NOT_HANDLED && session == NULL && jwt == NULL && link == NULL);
    CHECK_STATUS(portal_auth_handle_redirect(auth, "myapp://auth/callback?error=access_denied", &kind, NULL, NULL, NULL),
                 PORTAL_ERR_AUTHENTICATION_FAILED);
    CHECK(strstr(portal_last_error_message(), "access_denied") != NULL);
    {
        /* An attacker's error parameter reaches the last-error message without control
         * characters (ESC, BEL, CR, C1 CSI) and cut to 100 characters; URLs over 8192 bytes are
         * refused before parsing, and 8192 bytes of slashes are handled at once. */
        static char url[8300];
        int n = snprintf(url, sizeof url, "myapp://auth/callback?error=x%%1B%%5B2J%%07%%0D%%0A%%C2%%9B%%7F");
        memset(url + n, 'A', 7000);
        url[n + 7000] = '\0';
        CHECK_STATUS(portal_auth_handle_redirect(auth, url, &kind, NULL, NULL, NULL), PORTAL_ERR_AUTHENTICATION_FAILED);
        const char *message = portal_last_error_message();
        size_t as = 0;
        bool control = false;
        for (const unsigned char *p = (const unsigned char *)message; *p; p++) {
            if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)) control = true;
            if (*p == 'A') as++;
        }
        CHECK_MSG(!control, "control characters in the last error \"%s\"", message);
        /* 100 visible characters of the value are kept: "x", "[2J" and 96 A's. */
        CHECK_MSG(as == 96, "%zu A's of the error value in the last error, want 96", as);
        memcpy(url, "myapp:", 6);
        memset(url + 6, '/', 8192 - 6);
        url[8192] = '\0';
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        CHECK_OK(portal_auth_handle_redirect(auth, url, &kind, NULL, NULL, NULL));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        CHECK(kind == PORTAL_REDIRECT_NOT_HANDLED);
        double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        CHECK_MSG(seconds < 0.25, "an 8192-byte URL of slashes took %.3f s", seconds);
        url[8192] = '/';
        url[8193] = '\0';
        kind = PORTAL_REDIRECT_AUTHENTICATED;
        CHECK_OK(portal_auth_handle_redirect(auth, url, &kind, NULL, NULL, NULL));
        CHECK_MSG(kind == PORTAL_REDIRECT_NOT_HANDLED, "8193 characters: kind %d, want not handled", (int)kind);
    }
    {
        /* Not this app's, as PortalSwift decides: not handled, nothing done, no error. Blank, no
         * or an empty token, an unknown or wrongly cased method, over 8192 UTF-16 code units (a
         * C string of more than 24576 bytes is not even read to its end). */
        static char huge[30000];
        snprintf(huge, sizeof huge, "myapp://auth/callback?token=g&authMethod=EMAIL_MAGIC_LINK&pad=");
        size_t used = strlen(huge);
        memset(huge + used, 'x', sizeof huge - used - 1);
        huge[sizeof huge - 1] = '\0';
        const char *not_ours[] = {"", "  ", "myapp://auth/callback?authMethod=EMAIL_MAGIC_LINK",
                                  "myapp://auth/callback?token=&authMethod=EMAIL_MAGIC_LINK",
                                  "myapp://auth/callback?token=g&authMethod=email_magic_link",
                                  "myapp://auth/callback?token=g&login_type=GOOGLE&token=", huge};
        for (size_t i = 0; i < sizeof not_ours / sizeof not_ours[0]; i++) {
            kind = PORTAL_REDIRECT_AUTHENTICATED;
            CHECK_OK(portal_auth_handle_redirect(auth, not_ours[i], &kind, NULL, NULL, NULL));
            CHECK_MSG(kind == PORTAL_REDIRECT_NOT_HANDLED, "\"%.60s\": kind %d, want not handled", not_ours[i], (int)kind);
        }
        CHECK_STATUS(portal_auth_handle_redirect(auth, NULL, &kind, NULL, NULL, NULL), PORTAL_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_MENTIONS("url");
    }
    /* send_magic_link above recorded the pending sign-in before its request failed, so the grant
     * goes to the (unreachable) API. Login CSRF: without a pending sign-in it does not, and
     * PORTAL_REDIRECT_ALLOW_UNSOLICITED is the opt-out; unknown flag bits are refused. */
    CHECK_STATUS(portal_auth_handle_redirect(auth, "myapp://auth/callback?token=x&authMethod=EMAIL_MAGIC_LINK", &kind,
                                             NULL, NULL, NULL), PORTAL_ERR_NETWORK);
    {
        portal_auth *fresh = NULL;
        char id[64];
        snprintf(id, sizeof id, "signin-unsolicited-%d", (int)getpid());
        CHECK_OK(portal_auth_new(&fresh, id, "myapp://auth/callback", "127.0.0.1:1"));
        const char *grant = "myapp://auth/callback?token=x&authMethod=EMAIL_MAGIC_LINK";
        CHECK_STATUS(portal_auth_handle_redirect(fresh, grant, &kind, &session, &jwt, &link), PORTAL_ERR_UNSOLICITED_REDIRECT);
        CHECK(session == NULL && jwt == NULL && link == NULL); /* from the not-handled call above: untouched */
        CHECK(strcmp(portal_status_str(PORTAL_ERR_UNSOLICITED_REDIRECT), "unsolicited redirect") == 0);
        CHECK_ERROR_MENTIONS("unsolicited");
        CHECK_STATUS(portal_auth_handle_redirect_v2(fresh, grant, PORTAL_REDIRECT_ALLOW_UNSOLICITED, &kind, NULL, NULL, NULL),
                     PORTAL_ERR_NETWORK);
        CHECK_STATUS(portal_auth_handle_redirect_v2(fresh, grant, 4, &kind, NULL, NULL, NULL), PORTAL_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_MENTIONS("flags");
        CHECK_STATUS(portal_auth_handle_redirect_v2(NULL, grant, 0, &kind, NULL, NULL, NULL), PORTAL_ERR_INVALID_ARGUMENT);
        /* kind_out is optional: the same answer without it. */
        CHECK_STATUS(portal_auth_handle_redirect_v2(fresh, grant, 0, NULL, NULL, NULL, NULL), PORTAL_ERR_UNSOLICITED_REDIRECT);
        portal_auth_free(fresh);
    }
    CHECK_STATUS(portal_auth_verify_totp(auth, NULL, "jwt", NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_verify_totp(auth, "12ab56", "jwt", NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_auth_verify_totp(auth, "123456", NULL, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    /* The JWT's endUserId claim is read before anything is sent: without one, nothing is. */
    CHECK_STATUS(portal_auth_verify_totp(auth, "123456", "a.b.c", NULL), PORTAL_ERR_INVALID_USER_JWT);
    CHECK_STATUS(portal_auth_verify_totp(auth, "123456", "h.eyJlbmRVc2VySWQiOiJldS1hYmkifQ.s", NULL), PORTAL_ERR_NETWORK);
    portal_auth_free(auth);
}

void test_double_free(void) {
    begin("freed handles and strings: a second free is ignored, a freed handle is an invalid argument");
    portal_auth *auth = NULL;
    CHECK_OK(portal_auth_new(&auth, "double-free", "myapp://auth/callback", "127.0.0.1:1"));
    portal_session *session = NULL;
    CHECK_OK(portal_auth_persist_session(auth, "df-user", "df-token", &session));
    char *token = NULL;
    CHECK_OK(portal_session_copy_token(session, &token));
    portal *key_portal = NULL;
    CHECK_OK(portal_new_with_api_key(&key_portal, "df-key", "127.0.0.1:1"));

    /* A handle of another kind is refused, not reinterpreted. */
    CHECK_STATUS(portal_session_invalidate((portal_session *)auth), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("handle");
    CHECK_STATUS(portal_auth_clear_persisted_session((portal_auth *)session), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(portal_session_get_end_user_id((portal_session *)key_portal) == NULL);
    char local[] = "not from the library";
    portal_string_free(local); /* ignored: never handed out (and on the stack) */
    CHECK(strcmp(local, "not from the library") == 0);

    CHECK_OK(portal_auth_clear_persisted_session(auth));
    portal_string_free(token);
    portal_string_free(token); /* ignored */
    portal_session_free(session);
    portal_session_free(session); /* ignored */
    CHECK_STATUS(portal_session_invalidate(session), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("session");
    CHECK(portal_session_get_end_user_id(session) == NULL);
    CHECK_ERROR_MENTIONS("session");
    portal_free(key_portal);
    portal_free(key_portal); /* ignored */
    long status = -1;
    CHECK_STATUS(portal_request(key_portal, "GET", "/x", NULL, &status, NULL, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("portal");
    portal_auth_free(auth);
    portal_auth_free(auth); /* ignored */
    CHECK_STATUS(portal_auth_clear_persisted_session(auth), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("auth");
}
