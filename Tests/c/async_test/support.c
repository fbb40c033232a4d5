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

/* A signed-in end user: a token from the fake Portal API, persisted, and a portal for it. */
portal *signed_in_portal(portal_auth *auth, const char *user, char *token, size_t token_size, portal_session **session) {
    CHECK(admin_token(user, token, token_size) == 0);
    *session = NULL;
    CHECK(portal_auth_persist_session(auth, user, token, session) == PORTAL_OK);
    portal *client = NULL;
    CHECK(portal_new(&client, *session, NULL) == PORTAL_OK);
    return client;
}

/* The end of a signed-in scenario: its session freed, the stored one cleared, the handle freed. */
void sign_out(portal_auth *auth, portal_session *session) {
    portal_session_free(session);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);
    portal_auth_free(auth);
}
