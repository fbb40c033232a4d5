/*
 * signin_contract_test.c — the Portal backend's sign-in contract through the C ABI, against the
 * strict loopback fake API (docs/sign-in.md#magic-links):
 *   - portal_auth_send_magic_link() without portal_auth_set_magic_link(): MAGIC_LINK_NOT_CONFIGURED,
 *     nothing sent; with it: the sender and template reach the API, isAccountAbstracted only
 *     when portal_auth_set_account_abstraction() set it;
 *   - account abstraction the environment does not offer: ACCOUNT_ABSTRACTION_UNAVAILABLE with
 *     the server's text, from the magic link and the OAuth URL (blocking and _async);
 *   - a provider the environment has not enabled: AUTH_METHOD_UNAVAILABLE;
 *   - HTTP 503: PORTAL_ERR_SERVER; 403: PORTAL_ERR_REQUEST_REFUSED (never AUTHENTICATION_FAILED);
 *   - a 429 without Retry-After: RATE_LIMITED whose message promises no wait.
 *
 * Needs scripts/with-keyring.sh and scripts/with-portal-api.sh. Exit 0 when every check passed.
 */
#define _DEFAULT_SOURCE 1
#include <portal_keyring.h>
#include "check.h"
#include "fake_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int post(const char *path, const char *json) {
    char ignored[256];
    return fake_api_admin("POST", path, json, "1", ignored, sizeof ignored);
}

/* The last emailed link's field, as JSON text ("null" when absent). */
static void last_link(const char *field, char *out, size_t size) {
    char pick[128];
    snprintf(pick, sizeof pick, "json.dumps(d[\"data\"][\"links\"][-1].get(\"%s\"))", field);
    if (fake_api_admin("GET", "/_admin/magic-links", NULL, pick, out, size) != 0) snprintf(out, size, "(admin failed)");
}

static int magic_link_requests(void) {
    char out[64];
    if (fake_api_admin("GET", "/_admin/stats", NULL, "d[\"data\"][\"routes\"].get(\"/api/v3/auth/magic-links\",{}).get(\"requests\",0)",
                       out, sizeof out) != 0)
        return -1;
    return atoi(out);
}

static portal_auth *new_auth(const char *tag) {
    char id[128];
    snprintf(id, sizeof id, "c-contract-%s-%d", tag, (int)getpid());
    portal_auth *auth = NULL;
    CHECK(portal_auth_new(&auth, id, "app://cb", getenv("PORTAL_TEST_API_HOST")) == PORTAL_OK);
    return auth;
}

static void restore_fake(void) {
    post("/_admin/config", "{\"accountAbstractionAvailable\":true,\"allowedMethods\":[\"EMAIL_MAGIC_LINK\",\"GOOGLE\",\"APPLE\"]}");
    char ignored[64];
    fake_api_admin("DELETE", "/_admin/faults", NULL, "1", ignored, sizeof ignored);
}

static void test_magic_link_configuration(void) {
    portal_auth *auth = new_auth("magic");
    int before = magic_link_requests();
    CHECK(portal_auth_send_magic_link(auth, "c.user@example.com") == PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED);
    CHECK(strstr(portal_last_error_message(), "portal_auth_set_magic_link") != NULL);
    CHECK(strcmp(portal_status_str(PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED), "magic link not configured") == 0);
    CHECK(magic_link_requests() == before);

    /* Refused values leave the handle unchanged. */
    CHECK(portal_auth_set_magic_link(NULL, "a@b.c", "t") == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(portal_auth_set_magic_link(auth, "a@b.c", NULL) == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(portal_last_error_message(), "template_id") != NULL);
    CHECK(portal_auth_set_magic_link(auth, " ", "t") == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(portal_last_error_message(), "from_email") != NULL);
    CHECK(portal_auth_set_magic_link(auth, "a@b.c", "t\r\nX: y") == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(portal_last_error_message(), "template_id") != NULL);
    CHECK(portal_auth_send_magic_link(auth, "c.user@example.com") == PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED);

    CHECK(portal_auth_set_magic_link(auth, "login@example.com", "tpl-c") == PORTAL_OK);
    CHECK(portal_auth_send_magic_link(auth, " C.User@Example.com ") == PORTAL_OK);
    char value[256];
    last_link("fromEmail", value, sizeof value);
    CHECK(strcmp(value, "\"login@example.com\"") == 0);
    last_link("templateId", value, sizeof value);
    CHECK(strcmp(value, "\"tpl-c\"") == 0);
    last_link("isAccountAbstracted", value, sizeof value);
    CHECK(strcmp(value, "null") == 0); /* not set: not sent */

    CHECK(portal_auth_set_account_abstraction(NULL, PORTAL_ACCOUNT_ABSTRACTION_ON) == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(portal_auth_set_account_abstraction(auth, (portal_account_abstraction)3) == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(portal_auth_set_account_abstraction(auth, PORTAL_ACCOUNT_ABSTRACTION_OFF) == PORTAL_OK);
    CHECK(portal_auth_send_magic_link(auth, "c.user@example.com") == PORTAL_OK);
    last_link("isAccountAbstracted", value, sizeof value);
    CHECK(strcmp(value, "false") == 0);
    CHECK(portal_auth_set_account_abstraction(auth, PORTAL_ACCOUNT_ABSTRACTION_ON) == PORTAL_OK);
    CHECK(portal_auth_send_magic_link(auth, "c.user@example.com") == PORTAL_OK);
    last_link("isAccountAbstracted", value, sizeof value);
    CHECK(strcmp(value, "true") == 0);

    /* NULL, NULL clears the configuration. */
    CHECK(portal_auth_set_magic_link(auth, NULL, NULL) == PORTAL_OK);
    CHECK(portal_auth_send_magic_link(auth, "c.user@example.com") == PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED);
    portal_auth_free(auth);
}

static void test_account_abstraction_unavailable(void) {
    portal_auth *auth = new_auth("aa");
    CHECK(portal_auth_set_magic_link(auth, "login@example.com", "tpl-c") == PORTAL_OK);
    CHECK(portal_auth_set_account_abstraction(auth, PORTAL_ACCOUNT_ABSTRACTION_ON) == PORTAL_OK);
    CHECK(post("/_admin/config", "{\"accountAbstractionAvailable\":false}") == 0);
    CHECK(portal_auth_send_magic_link(auth, "aa@example.com") == PORTAL_ERR_ACCOUNT_ABSTRACTION_UNAVAILABLE);
    CHECK(strcmp(portal_last_error_message(), "Account abstraction is not enabled for this environment") == 0);
    char *url = (char *)0x1;
    CHECK(portal_auth_login_with_google(auth, &url) == PORTAL_ERR_ACCOUNT_ABSTRACTION_UNAVAILABLE);
    CHECK(url == (char *)0x1); /* outputs only on success */
    /* The environment's default: nothing asked for, both succeed. */
    CHECK(portal_auth_set_account_abstraction(auth, PORTAL_ACCOUNT_ABSTRACTION_DEFAULT) == PORTAL_OK);
    CHECK(portal_auth_login_with_google(auth, &url) == PORTAL_OK);
    if (url != (char *)0x1) portal_string_free(url);
    CHECK(portal_auth_send_magic_link(auth, "aa@example.com") == PORTAL_OK);
    restore_fake();
    portal_auth_free(auth);
}

static void test_providers_and_statuses(void) {
    portal_auth *auth = new_auth("status");
    CHECK(portal_auth_set_magic_link(auth, "login@example.com", "tpl-c") == PORTAL_OK);
    char *url = NULL;
    CHECK(post("/_admin/config", "{\"allowedMethods\":[\"EMAIL_MAGIC_LINK\",\"APPLE\"]}") == 0);
    CHECK(portal_auth_login_with_google(auth, &url) == PORTAL_ERR_AUTH_METHOD_UNAVAILABLE);
    CHECK(strstr(portal_last_error_message(), "GOOGLE") != NULL);
    CHECK(url == NULL);
    CHECK(portal_auth_login_with_apple(auth, &url) == PORTAL_OK && url != NULL);
    portal_string_free(url);
    restore_fake();

    CHECK(post("/_admin/faults", "{\"route\":\"/api/v3/auth/magic-links\",\"status\":503,\"count\":1}") == 0);
    CHECK(portal_auth_send_magic_link(auth, "s@example.com") == PORTAL_ERR_SERVER);
    CHECK(strstr(portal_last_error_message(), "503") != NULL);
    CHECK(post("/_admin/faults", "{\"route\":\"/api/v3/auth/magic-links/validations\",\"status\":500,\"count\":1}") == 0);
    portal_redirect_kind kind;
    CHECK(portal_auth_handle_redirect_v2(auth, "app://cb?token=t&authMethod=EMAIL_MAGIC_LINK",
                                         PORTAL_REDIRECT_ALLOW_UNSOLICITED, &kind, NULL, NULL, NULL) == PORTAL_ERR_SERVER);
    CHECK(post("/_admin/faults", "{\"route\":\"/api/v3/auth/oauth/urls\",\"status\":403,\"count\":1}") == 0);
    CHECK(portal_auth_login_with_apple(auth, &url) == PORTAL_ERR_REQUEST_REFUSED);
    CHECK(strstr(portal_last_error_message(), "403") != NULL);
    CHECK(strcmp(portal_status_str(PORTAL_ERR_SERVER), "server error") == 0);
    CHECK(strcmp(portal_status_str(PORTAL_ERR_REQUEST_REFUSED), "request refused") == 0);

    CHECK(post("/_admin/faults", "{\"route\":\"/api/v3/auth/magic-links\",\"status\":429,\"count\":1}") == 0);
    CHECK(portal_auth_send_magic_link(auth, "rl@example.com") == PORTAL_ERR_RATE_LIMITED);
    CHECK(strcmp(portal_last_error_message(), "rate limited by the Portal API; retry later") == 0);
    restore_fake();
    portal_auth_free(auth);
}

int main(void) {
    const char *api_url = getenv("PORTAL_TEST_API_URL");
    if (!api_url || !getenv("PORTAL_TEST_API_HOST")) {
        fprintf(stderr, "signin_contract_test: needs PORTAL_TEST_API_URL and PORTAL_TEST_API_HOST (scripts/with-portal-api.sh)\n");
        return 2;
    }
    test_magic_link_configuration();
    test_account_abstraction_unavailable();
    test_providers_and_statuses();
    if (failures) {
        fprintf(stderr, "signin_contract_test: %d of %d checks FAILED\n", failures, checks);
        return 1;
    }
    printf("signin_contract_test: all %d checks passed\n", checks);
    return 0;
}
