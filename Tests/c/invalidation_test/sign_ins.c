/* invalidation_test: sign-ins: a newer one by another process survives; the magic-link flow; redirect hijacking. */
#include "invalidation_test.h"

/* Process A holds an old session; process B (a child) signs in anew; A's request is rejected:
 * B's session stays stored and restorable. */
void test_newer_sign_in_by_another_process_survives(void) {
    char old_token[256], new_token[256];
    portal_auth *auth = new_auth("procs");
    portal_session *old = sign_in(auth, "u-procs", old_token, sizeof old_token);
    portal *client = open_portal(old);
    issue_token("u-procs", new_token, sizeof new_token);

    /* Process B: a fresh process (fork alone would inherit GDBus state without its threads). */
    char command[1024];
    snprintf(command, sizeof command, "'%s' --persist c-inv-procs-%d u-procs", self_path, (int)getpid());
    FILE *b = popen(command, "w");
    CHECK(b != NULL);
    if (b) {
        fputs(new_token, b);
        CHECK(pclose(b) == 0);
    }

    revoke_token(old_token);
    long http = 0;
    portal_status st = portal_request(client, "GET", "/api/v3/clients/me", NULL, &http, NULL, NULL);
    CHECK(st == PORTAL_OK || st == PORTAL_ERR_SESSION_INVALIDATED); /* the init request may win */
    char *copy = NULL;
    CHECK(portal_session_copy_token(old, &copy) == PORTAL_ERR_SESSION_INVALIDATED);

    portal_session *restored = NULL;
    CHECK(portal_auth_restore_session(auth, &restored) == PORTAL_OK && restored != NULL);
    if (restored) {
        CHECK(portal_session_copy_token(restored, &copy) == PORTAL_OK && strcmp(copy, new_token) == 0);
        portal_string_free(copy);
    }
    portal_session_free(restored);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);
    portal_free(client);
    portal_session_free(old);
    portal_auth_free(auth);
}

/* Process B of the two-process test: persists the token read from stdin. */
int persist_from_stdin(const char *env_id, const char *user) {
    char token[1024] = "";
    if (!fgets(token, sizeof token, stdin)) return 1;
    portal_auth *auth = NULL;
    int ok = portal_auth_new(&auth, env_id, "app://cb", getenv("PORTAL_TEST_API_HOST")) == PORTAL_OK &&
             portal_auth_persist_session(auth, user, token, NULL) == PORTAL_OK;
    if (!ok) fprintf(stderr, "process B: %s\n", portal_last_error_message());
    portal_auth_free(auth);
    return ok ? 0 : 1;
}

/* Login CSRF (redirect hijacking), with eu-c's session stored and no sign-in pending: a grant is
 * refused as unsolicited (nothing stored); with a sign-in pending, another end user's grant gives
 * PORTAL_ERR_DIFFERENT_END_USER with no outputs and eu-c still stored, and the same URL with
 * PORTAL_REDIRECT_REPLACE_END_USER persists it. */
static void test_redirect_hijacking(portal_auth *auth) {
    char redirect[1024];
    portal_redirect_kind kind = PORTAL_REDIRECT_NOT_HANDLED;
    portal_session *session = (portal_session *)0x1, *restored = NULL;
    mint_grant("eu-attacker", redirect, sizeof redirect);
    CHECK(portal_auth_handle_redirect(auth, redirect, &kind, &session, NULL, NULL) == PORTAL_ERR_UNSOLICITED_REDIRECT);
    CHECK(kind == PORTAL_REDIRECT_NOT_HANDLED && session == (portal_session *)0x1);
    CHECK(portal_auth_restore_session(auth, &restored) == PORTAL_OK && restored &&
          strcmp(portal_session_get_end_user_id(restored), "eu-c") == 0);
    portal_session_free(restored);

    CHECK(portal_auth_send_magic_link(auth, "someone@example.com") == PORTAL_OK);
    CHECK(portal_auth_handle_redirect(auth, redirect, &kind, &session, NULL, NULL) == PORTAL_ERR_DIFFERENT_END_USER);
    CHECK(kind == PORTAL_REDIRECT_NOT_HANDLED && session == (portal_session *)0x1);
    CHECK(strstr(portal_last_error_message(), "eu-attacker") && strstr(portal_last_error_message(), "eu-c"));
    CHECK(portal_auth_restore_session(auth, &restored) == PORTAL_OK && restored &&
          strcmp(portal_session_get_end_user_id(restored), "eu-c") == 0);
    portal_session_free(restored);
    CHECK(portal_auth_handle_redirect_v2(auth, redirect, PORTAL_REDIRECT_REPLACE_END_USER, &kind, &session, NULL, NULL) ==
          PORTAL_OK);
    CHECK(kind == PORTAL_REDIRECT_AUTHENTICATED && session && session != (portal_session *)0x1 &&
          strcmp(portal_session_get_end_user_id(session), "eu-attacker") == 0);
    if (session != (portal_session *)0x1) portal_session_free(session);
    CHECK(portal_auth_restore_session(auth, &restored) == PORTAL_OK && restored &&
          strcmp(portal_session_get_end_user_id(restored), "eu-attacker") == 0);
    portal_session_free(restored);
}

/* A magic-link sign-in through the C ABI: the session is persisted before it is returned and a
 * repeat delivery of the same redirect gives the same session without a second exchange. */
void test_sign_in_flow(void) {
    portal_auth *auth = NULL;
    char id[128];
    snprintf(id, sizeof id, "c-signin-%d", (int)getpid());
    CHECK(portal_auth_new(&auth, id, "portalkeyring://auth/callback", api_host) == PORTAL_OK);
    CHECK(portal_auth_set_magic_link(auth, "login@example.com", "tpl-c") == PORTAL_OK);
    char *methods = NULL;
    CHECK(portal_auth_get_methods(auth, &methods, NULL) == PORTAL_OK && methods && strstr(methods, "EMAIL_MAGIC_LINK"));
    portal_string_free(methods);
    char *url = NULL;
    CHECK(portal_auth_login_with_google(auth, &url) == PORTAL_OK && url && strncmp(url, "http", 4) == 0);
    portal_string_free(url);
    CHECK(portal_auth_send_magic_link(auth, " Someone@Example.com ") == PORTAL_OK);

    /* Mint a grant: the redirect URL the email would open. */
    char redirect[1024];
    mint_grant("eu-c", redirect, sizeof redirect);

    portal_redirect_kind kind = PORTAL_REDIRECT_NOT_HANDLED;
    portal_session *first = NULL, *second = NULL;
    CHECK(portal_auth_handle_redirect(auth, redirect, &kind, &first, NULL, NULL) == PORTAL_OK);
    CHECK(kind == PORTAL_REDIRECT_AUTHENTICATED && first != NULL);
    CHECK(portal_auth_handle_redirect(auth, redirect, &kind, &second, NULL, NULL) == PORTAL_OK);
    CHECK(kind == PORTAL_REDIRECT_AUTHENTICATED && second != NULL);
    char *a = NULL, *b = NULL;
    CHECK(first && second && portal_session_copy_token(first, &a) == PORTAL_OK &&
          portal_session_copy_token(second, &b) == PORTAL_OK && strcmp(a, b) == 0);
    portal_session *restored = NULL;
    CHECK(portal_auth_restore_session(auth, &restored) == PORTAL_OK && restored &&
          strcmp(portal_session_get_end_user_id(restored), "eu-c") == 0);
    portal_string_free(a);
    portal_string_free(b);
    portal_session_free(first);
    portal_session_free(second);
    portal_session_free(restored);
    test_redirect_hijacking(auth);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);
    portal_auth_free(auth);
}
