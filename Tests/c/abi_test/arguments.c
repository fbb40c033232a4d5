/*
 * abi_test: every argument check of portal_auth_new, the free functions, the timeouts, the NULL
 * arguments, the TOTP step accessors and portal_auth_persist_session.
 */
#include "abi_test.h"

/* portal_auth_new rejects each bad argument, names it, and leaves out untouched. */
static void check_auth_new_rejects(const char *id, const char *url, const char *host, const char *name,
                                   const char *what) {
    portal_auth *auth = SENTINEL_AUTH;
    CHECK_MSG(portal_auth_new(&auth, id, url, host) == PORTAL_ERR_INVALID_ARGUMENT, "%s %s accepted", name, what);
    CHECK_MSG(auth == SENTINEL_AUTH, "out written for %s %s", name, what);
    CHECK_MSG(strstr(portal_last_error_message(), name) != NULL, "message \"%s\" does not name %s (%s)",
              portal_last_error_message(), name, what);
}

void test_auth_new_arguments(void) {
    begin("portal_auth_new argument checks");
    const char *id = new_env_id("args");
    const char *host = "api.portalhq.io";

    /* out is checked first of all. */
    CHECK_STATUS(portal_auth_new(NULL, id, redirect, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("out");
    CHECK_STATUS(portal_auth_new(NULL, NULL, NULL, ""), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("out");

    const size_t big_len = 1024 * 1024;
    char *big = malloc(big_len + 1);
    CHECK(big != NULL);
    memset(big, 'a', big_len);
    big[big_len] = '\0';
    char *over = malloc(2050);
    CHECK(over != NULL);
    memset(over, 'b', 2049);
    over[2049] = '\0'; /* 2049 bytes: one more than allowed */

    struct {
        const char *value;
        const char *what;
    } bad[] = {
        {"", "empty"},
        {"   ", "blank"},
        {" \t\r\n ", "whitespace"},
        {"\xff\xfe", "invalid UTF-8"},
        {"ok\xc0\xaf", "overlong UTF-8"},
        {"abc\xed\xa0\x80", "UTF-16 surrogate"},
        {"abc\xe2\x82", "truncated UTF-8"},
        {big, "1 MiB"},
        {over, "2049 bytes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        check_auth_new_rejects(bad[i].value, redirect, NULL, "auth_environment_id", bad[i].what);
        check_auth_new_rejects(id, bad[i].value, NULL, "redirect_url", bad[i].what);
        check_auth_new_rejects(id, redirect, bad[i].value, "api_host", bad[i].what);
    }
    check_auth_new_rejects(NULL, redirect, host, "auth_environment_id", "NULL");
    check_auth_new_rejects(id, NULL, host, "redirect_url", "NULL");
    /* The first bad argument is named: auth_environment_id, redirect_url, api_host. */
    check_auth_new_rejects(NULL, NULL, "", "auth_environment_id", "NULL before other bad ones");
    check_auth_new_rejects(id, "", "", "redirect_url", "empty before a bad host");
    /* Redirect URLs are absolute scheme://… URLs, or private-use scheme:/path ones (RFC 8252
     * §7.1), without whitespace or controls, not javascript:/vbscript:/data:, <= 8192 bytes; the
     * message says what is expected. */
    const char *bad_urls[] = {"not a url", "noscheme", "myapp:no-slash", "://x", ":/x", "1app://x", "my app://x",
                              "myapp://a b", "myapp://a\tb", "myapp://a\x7f", "myapp://a\xc2\x85" "b",
                              "myapp:/a b", "javascript:alert(1)", "javascript:/alert(1)", "DATA:/x"};
    for (size_t i = 0; i < sizeof bad_urls / sizeof bad_urls[0]; i++) {
        check_auth_new_rejects(id, bad_urls[i], NULL, "redirect_url", bad_urls[i]);
        CHECK_ERROR_MENTIONS("scheme://");
        CHECK_ERROR_MENTIONS("scheme:/path");
    }
    const char *private_use[] = {"myapp:/one-slash", "com.example.app:/oauth2redirect"};
    for (size_t i = 0; i < sizeof private_use / sizeof private_use[0]; i++) {
        portal_auth *accepted = NULL;
        CHECK_OK(portal_auth_new(&accepted, id, private_use[i], NULL));
        portal_auth_free(accepted);
    }
    char *long_url = malloc(8194);
    CHECK(long_url != NULL);
    memcpy(long_url, "myapp://", 8);
    memset(long_url + 8, 'u', 8192 - 8);
    long_url[8192] = '\0';
    portal_auth *ok_auth = NULL;
    CHECK_OK(portal_auth_new(&ok_auth, id, long_url, NULL)); /* 8192 bytes: the cap itself */
    portal_auth_free(ok_auth);
    long_url[8192] = 'u';
    long_url[8193] = '\0';
    check_auth_new_rejects(id, long_url, NULL, "redirect_url", "8193 bytes");
    free(long_url);
    /* An API host with a scheme: the message says a host name is expected, without a scheme. */
    check_auth_new_rejects(id, redirect, "https://api.portalhq.io", "api_host", "with a scheme");
    CHECK_ERROR_MENTIONS("without a scheme");
    portal_auth *a = SENTINEL_AUTH;
    CHECK_STATUS(portal_auth_new(&a, "", NULL, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(portal_last_error_message(), "redirect_url") == NULL, "named a later argument: %s",
              portal_last_error_message());

    /* NULL api_host means the default host; explicit hosts, with or without a port, are fine. */
    portal_auth *auth = NULL;
    CHECK_OK(portal_auth_new(&auth, id, redirect, NULL));
    CHECK(auth != NULL);
    portal_auth_free(auth);
    auth = NULL;
    CHECK_OK(portal_auth_new(&auth, id, redirect, "127.0.0.1:8443"));
    portal_auth_free(auth);
    /* Limits: 2048 bytes is accepted, non-ASCII identifiers too. */
    over[2048] = '\0';
    auth = NULL;
    CHECK_OK(portal_auth_new(&auth, over, redirect, NULL));
    CHECK_NO_ERROR();
    portal_auth_free(auth);
    auth = NULL;
    CHECK_OK(portal_auth_new(&auth, "env-\xc3\xa9\xe6\xbc\xa2", "app://r\xc3\xa9", NULL));
    portal_auth_free(auth);
    free(big);
    free(over);
}

void test_free_null(void) {
    begin("*_free(NULL) are no-ops");
    portal_auth_free(NULL);
    portal_session_free(NULL);
    portal_string_free(NULL);
    CHECK(1); /* reached */
}

void test_timeouts(void) {
    begin("portal_auth_set_keyring_timeouts bounds");
    portal_auth *auth = new_auth(new_env_id("timeouts"));
    CHECK_STATUS(portal_auth_set_keyring_timeouts(NULL, 5000, 30000), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("auth");
    const uint32_t bad[] = {0, 600001, 1000000, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_STATUS(portal_auth_set_keyring_timeouts(auth, bad[i], 30000), PORTAL_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_MENTIONS("call_timeout_ms");
        CHECK_STATUS(portal_auth_set_keyring_timeouts(auth, 5000, bad[i]), PORTAL_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_MENTIONS("prompt_timeout_ms");
    }
    const uint32_t good[][2] = {{1, 1}, {600000, 600000}, {1, 600000}, {5000, 30000}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        CHECK_OK(portal_auth_set_keyring_timeouts(auth, good[i][0], good[i][1]));
        CHECK_NO_ERROR();
    }
    /* The handle still works after the change. */
    check_restore(auth, NULL, NULL, NULL);
    portal_auth_free(auth);
}

void test_null_arguments(void) {
    begin("NULL handles and outputs");
    const char *id = new_env_id("nulls");
    portal_auth *auth = new_auth(id);
    portal_session *session = SENTINEL_SESSION;
    CHECK_STATUS(portal_auth_restore_session(NULL, &session), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("auth");
    CHECK(session == SENTINEL_SESSION);
    CHECK_STATUS(portal_auth_restore_session(auth, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("out");
    CHECK_STATUS(portal_auth_clear_persisted_session(NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("auth");
    CHECK_STATUS(portal_auth_persist_session(NULL, "user", "token", &session), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("auth");
    CHECK(session == SENTINEL_SESSION);

    CHECK(portal_session_get_end_user_id(NULL) == NULL);
    CHECK_ERROR_MENTIONS("session");
    CHECK(portal_session_get_auth_environment_id(NULL) == NULL);
    CHECK_ERROR_MENTIONS("session");
    char *token = SENTINEL_STRING;
    CHECK_STATUS(portal_session_copy_token(NULL, &token), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("session");
    CHECK(token == SENTINEL_STRING);

    /* copy_token with a NULL out, on a real session. */
    portal_session *real = NULL;
    CHECK_OK(portal_auth_persist_session(auth, "user-nulls", "token-nulls", &real));
    CHECK(real != NULL);
    CHECK_STATUS(portal_session_copy_token(real, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("out");
    check_token(real, "token-nulls", 11);
    /* A persisted (not signed-in) session: the sign-in's client is unknown. */
    CHECK(portal_session_get_client_id(real) == NULL);
    CHECK_NO_ERROR();
    CHECK(portal_session_get_is_account_abstracted(real) == -1);
    portal_session_free(real);
    CHECK(portal_session_get_client_id(NULL) == NULL);
    CHECK_ERROR_MENTIONS("session");
    CHECK(portal_session_get_is_account_abstracted(NULL) == -1);
    CHECK_ERROR_MENTIONS("session");
    CHECK_STATUS(portal_user_jwt_get_end_user_id(NULL, &token), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("user_jwt");
    CHECK_STATUS(portal_user_jwt_get_end_user_id("h.eyJlbmRVc2VySWQiOiJldS1hYmkifQ.s", NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_totp_link_get_secret(NULL, &token), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("totp_link");
    CHECK(token == SENTINEL_STRING);
    CHECK_OK(portal_auth_clear_persisted_session(auth));
    portal_auth_free(auth);
}

void test_totp_step_accessors(void) {
    begin("TOTP step: the JWT's end user, the enrolment link's secret (no I/O)");
    char *out = SENTINEL_STRING;
    CHECK_OK(portal_user_jwt_get_end_user_id("h.eyJlbmRVc2VySWQiOiJldS1hYmkifQ.s", &out));
    CHECK(out != SENTINEL_STRING && strcmp(out, "eu-abi") == 0);
    portal_string_free(out);
    out = SENTINEL_STRING;
    /* {"sub":"eu-abi"}: no endUserId claim. */
    CHECK_STATUS(portal_user_jwt_get_end_user_id("h.eyJzdWIiOiJldS1hYmkifQ.s", &out), PORTAL_ERR_INVALID_USER_JWT);
    CHECK(out == SENTINEL_STRING);
    CHECK_STATUS(portal_user_jwt_get_end_user_id("not-a-jwt", &out), PORTAL_ERR_INVALID_USER_JWT);
    CHECK_OK(portal_totp_link_get_secret("otpauth://totp/Portal:a?secret=jbswy3dp&issuer=Portal", &out));
    CHECK(out != SENTINEL_STRING && out && strcmp(out, "JBSWY3DP") == 0);
    portal_string_free(out);
    out = SENTINEL_STRING;
    CHECK_OK(portal_totp_link_get_secret("otpauth://totp/a?secret=JBSW1", &out));
    CHECK(out == NULL);
    out = SENTINEL_STRING;
    CHECK_OK(portal_totp_link_get_secret("https://example.com/?secret=JBSWY3DP", &out));
    CHECK(out == NULL);

    /* The link as a QR code: size * size modules of '1'/'0' with a light quiet zone and the
     * top-left finder pattern; the SVG of the same code; no code without a valid secret. */
    size_t size = 0;
    out = SENTINEL_STRING;
    CHECK_OK(portal_totp_qr_code("otpauth://totp/Portal:a?secret=JBSWY3DP&issuer=Portal", &size, &out));
    CHECK(out != SENTINEL_STRING && size >= 29 && strlen(out) == size * size);
    CHECK(strspn(out, "01") == size * size && strspn(out, "0") >= 4 * size);
    CHECK(out[4 * size + 4] == '1' && out[4 * size + 10] == '1' && out[5 * size + 5] == '0');
    portal_string_free(out);
    out = SENTINEL_STRING;
    CHECK_OK(portal_totp_qr_svg("otpauth://totp/Portal:a?secret=JBSWY3DP&issuer=Portal", &out));
    CHECK(out != SENTINEL_STRING && strncmp(out, "<svg ", 5) == 0 && strstr(out, "</svg>") != NULL);
    portal_string_free(out);
    out = SENTINEL_STRING;
    size = 7;
    CHECK_STATUS(portal_totp_qr_code("otpauth://totp/a?secret=JBSW1", &size, &out), PORTAL_ERR_TOTP_QR_UNAVAILABLE);
    CHECK(out == SENTINEL_STRING && size == 7);
    CHECK_STATUS(portal_totp_qr_svg("https://example.com/?secret=JBSWY3DP", &out), PORTAL_ERR_TOTP_QR_UNAVAILABLE);
    CHECK_STATUS(portal_totp_qr_code(NULL, &size, &out), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_OK(portal_totp_qr_code("otpauth://totp/a?secret=JBSWY3DP", NULL, &out)); /* size_out is optional */
    CHECK(out != SENTINEL_STRING && strlen(out) >= 29 * 29);
    portal_string_free(out);
    out = SENTINEL_STRING;
    CHECK_STATUS(portal_totp_qr_svg("otpauth://totp/a?secret=JBSWY3DP", NULL), PORTAL_ERR_INVALID_ARGUMENT);
}

void test_persist_arguments(void) {
    begin("portal_auth_persist_session argument checks; a rejected call changes nothing");
    const char *id = new_env_id("persistargs");
    portal_auth *auth = new_auth(id);
    CHECK_OK(portal_auth_persist_session(auth, "user-before", "token-before", NULL));

    char *over_id = malloc(2050);
    CHECK(over_id != NULL);
    memset(over_id, 'u', 2049);
    over_id[2049] = '\0';
    char *long_token = make_token(65537);
    memcpy(long_token, "MARKER-65537", 12);
    const struct {
        const char *user, *token, *name, *what;
    } bad[] = {
        {NULL, "tok", "end_user_id", "NULL"},
        {"", "tok", "end_user_id", "empty"},
        {"  \t", "tok", "end_user_id", "blank"},
        {"u\xff", "tok", "end_user_id", "invalid UTF-8"},
        {over_id, "tok", "end_user_id", "2049 bytes"},
        {"user", NULL, "client_session_token", "NULL"},
        {"user", "", "client_session_token", "empty"},
        {"user", " \n\t\r ", "client_session_token", "blank"},
        {"user", "MARKER-UTF8\xc3", "client_session_token", "invalid UTF-8"},
        {"user", "MARKER-UTF8\xed\xbf\xbf", "client_session_token", "surrogate"},
        {"user", long_token, "client_session_token", "65537 bytes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        portal_session *session = SENTINEL_SESSION;
        portal_status st = portal_auth_persist_session(auth, bad[i].user, bad[i].token, &session);
        CHECK_MSG(st == PORTAL_ERR_INVALID_ARGUMENT, "%s %s: status %d", bad[i].name, bad[i].what, (int)st);
        CHECK_MSG(session == SENTINEL_SESSION, "out written for %s %s", bad[i].name, bad[i].what);
        CHECK_MSG(strstr(portal_last_error_message(), bad[i].name) != NULL, "message \"%s\" does not name %s",
                  portal_last_error_message(), bad[i].name);
        CHECK_MSG(strstr(portal_last_error_message(), "MARKER") == NULL, "message contains the token: %s",
                  portal_last_error_message());
    }
    /* Nothing was stored or deleted by the rejected calls. */
    CHECK(keyring_count(SCHEMA, id) == 1);
    check_restore(auth, id, "user-before", "token-before");
    CHECK_OK(portal_auth_clear_persisted_session(auth));
    free(over_id);
    free(long_token);
    portal_auth_free(auth);
}
