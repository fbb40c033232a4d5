/* async_test: the helpers every scenario uses (async_test.h). */
#include "async_test.h"

#include "../fake_api.h"

void on_done(portal_status status, portal_result *result, const char *message, void *data) {
    probe *p = data;
    probe_seen(p, status, message);
    p->http_status = result->http_status;
    probe_take_session(p, &result->session);
}

int sh(const char *command) {
    int rc = system(command);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

portal_auth *new_auth(uint32_t call_ms, uint32_t prompt_ms) {
    portal_auth *auth = NULL;
    CHECK(portal_auth_new(&auth, env_id, "app://cb", getenv("PORTAL_TEST_API_HOST")) == PORTAL_OK);
    CHECK(portal_auth_set_keyring_timeouts(auth, call_ms, prompt_ms) == PORTAL_OK);
    return auth;
}

int admin_fault(const char *json) {
    char ignored[256];
    return fake_api_admin("POST", "/_admin/faults", json, "1", ignored, sizeof ignored);
}

static int admin_token(const char *user, char *out, size_t size) {
    char json[256];
    snprintf(json, sizeof json, "{\"endUserId\":\"%s\"}", user);
    return fake_api_admin("POST", "/_admin/sessions", json, "d[\"data\"][\"token\"]", out, size) == 0 && out[0] ? 0 : -1;
}

/* A signed-in end user on a new handle: a token from the fake Portal API, persisted, and a
 * portal for it (returned, and kept in `user`). */
portal *sign_in(signed_in *user, const char *end_user) {
    user->auth = new_auth(5000, 1500);
    CHECK(admin_token(end_user, user->token, sizeof user->token) == 0);
    user->session = NULL;
    CHECK(portal_auth_persist_session(user->auth, end_user, user->token, &user->session) == PORTAL_OK);
    user->client = NULL;
    CHECK(portal_new(&user->client, user->session, NULL) == PORTAL_OK);
    return user->client;
}

/* The end of a signed-in scenario: its session freed, the stored one cleared, the handle freed. */
void sign_out(signed_in *user) {
    portal_session_free(user->session);
    CHECK(portal_auth_clear_persisted_session(user->auth) == PORTAL_OK);
    portal_auth_free(user->auth);
}
