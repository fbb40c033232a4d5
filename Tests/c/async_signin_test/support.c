/* async_signin_test: the helpers every test case uses (async_signin_test.h). */
#include "async_signin_test.h"

/* Records one sign-in completion and takes every owned field; the library frees what is left. */
void on_done(portal_status status, portal_sign_in_result *result, const char *message, void *data) {
    probe *p = data;
    probe_seen(p, status, message);
    p->kind = result->kind;
    p->auto_create_wallet = result->auto_create_wallet;
    probe_take_session(p, &result->session);
    probe_take_string(&p->text, &result->text);
    probe_take_string(&p->user_jwt, &result->user_jwt);
    probe_take_string(&p->totp_link, &result->totp_link);
}

int fault(const char *json) {
    char ignored[256];
    return fake_api_admin("POST", "/_admin/faults", json, "1", ignored, sizeof ignored);
}

portal_auth *new_auth(void) {
    portal_auth *auth = NULL;
    CHECK(portal_auth_new(&auth, env_id, "app://cb", getenv("PORTAL_TEST_API_HOST")) == PORTAL_OK);
    CHECK(portal_auth_set_magic_link(auth, "login@example.com", "tpl-c") == PORTAL_OK);
    return auth;
}
