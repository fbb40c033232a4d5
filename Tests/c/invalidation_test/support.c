/* invalidation_test: the helpers every test case uses (invalidation_test.h). */
#include "invalidation_test.h"

/* POSTs JSON to an admin route with curl-free plain sockets via python3 (available in tests). */
int admin(const char *path, const char *json, char *out, size_t out_size) {
    char command[4096];
    snprintf(command, sizeof command,
             "python3 -c 'import json,sys,urllib.request as u; r=u.Request(sys.argv[1],data=sys.argv[2].encode(),"
             "headers={\"Content-Type\":\"application/json\"}); print(json.load(u.urlopen(r))[\"data\"].get(\"token\",\"\"))'"
             " '%s/_admin/%s' '%s'", api_url, path, json);
    FILE *p = popen(command, "r");
    if (!p) return -1;
    char line[1024] = "";
    if (!fgets(line, sizeof line, p)) line[0] = '\0';
    int rc = pclose(p);
    line[strcspn(line, "\n")] = '\0';
    if (out) snprintf(out, out_size, "%s", line);
    return rc == 0 ? 0 : -1;
}

void issue_token(const char *user, char *out, size_t size) {
    char json[256];
    snprintf(json, sizeof json, "{\"endUserId\":\"%s\"}", user);
    CHECK(admin("sessions", json, out, size) == 0 && out[0] != '\0');
}

void revoke_token(const char *token) {
    char json[512];
    snprintf(json, sizeof json, "{\"token\":\"%s\"}", token);
    CHECK(admin("revoke", json, NULL, 0) == 0);
}

void on_invalidated(void *data) {
    probe *p = data;
    atomic_fetch_add(&p->calls, 1);
    if (p->action == 1) portal_listener_cancel(p->portal, p->handle);
    if (p->action == 2) {
        /* Up to 120 s, not 5: under a loaded CI stress pass the test thread can lose the CPU for
         * seconds, and freeing before the gate is the use-after-free this gate exists to stop. */
        for (int i = 0; i < 24000 && !atomic_load(&p->may_free); i++) usleep(5000);
        portal_free(p->portal);
        p->portal = NULL;
    }
    if (p->action == 3) {
        portal_session *again = NULL;
        CHECK(portal_auth_restore_session(p->auth, &again) == PORTAL_OK);
        CHECK(again == NULL); /* the rejected sign-in was deleted before listeners ran */
        portal_session_free(again);
    }
}

void on_destroy(void *data) { atomic_fetch_add(&((probe *)data)->destroyed, 1); }

void wait_for(atomic_int *value, int expected) {
    for (int i = 0; i < 500 && atomic_load(value) < expected; i++) usleep(10000);
}

portal_auth *new_auth(const char *tag) {
    char id[128];
    snprintf(id, sizeof id, "c-inv-%s-%d", tag, (int)getpid());
    portal_auth *auth = NULL;
    CHECK(portal_auth_new(&auth, id, "app://cb", api_host) == PORTAL_OK);
    return auth;
}

portal_session *sign_in(portal_auth *auth, const char *user, char *token, size_t size) {
    issue_token(user, token, size);
    portal_session *session = NULL;
    CHECK(portal_auth_persist_session(auth, user, token, &session) == PORTAL_OK);
    return session;
}

/* The redirect URL of a grant minted on the loopback Portal API for end_user ("" on failure). */
void mint_grant(const char *end_user, char *redirect, size_t size) {
    char command[1024];
    snprintf(command, sizeof command,
             "python3 -c 'import json,sys,urllib.request as u; r=u.Request(sys.argv[1],data=json.dumps({\"kind\":\"magic_link\",\"endUserId\":sys.argv[2],\"redirectUrl\":\"portalkeyring://auth/callback\"}).encode(),headers={\"Content-Type\":\"application/json\"}); print(json.load(u.urlopen(r))[\"data\"][\"redirectUrl\"])' '%s/_admin/grants' '%s'",
             api_url, end_user);
    redirect[0] = '\0';
    FILE *p = popen(command, "r");
    CHECK(p && fgets(redirect, (int)size, p));
    if (p) pclose(p);
    redirect[strcspn(redirect, "\n")] = '\0';
}

/* A portal for a session on the loopback Portal API (its host is the session's). */
portal *open_portal(portal_session *session) {
    portal *client = NULL;
    CHECK(portal_new(&client, session, NULL) == PORTAL_OK);
    return client;
}

/* The rejected session's item is gone: a restore finds nothing. */
void expect_nothing_stored(portal_auth *auth) {
    portal_session *restored = NULL;
    CHECK(portal_auth_restore_session(auth, &restored) == PORTAL_OK && restored == NULL);
    portal_session_free(restored);
}

/* A test's own end user, signed in on a new handle: new_auth(tag), then sign_in(). */
void sign_in_user(signed_in *user, const char *tag, const char *end_user) {
    user->auth = new_auth(tag);
    user->session = sign_in(user->auth, end_user, user->token, sizeof user->token);
}

/* Frees what sign_in_user() made: the session, then the handle. */
void sign_out(signed_in *user) {
    portal_session_free(user->session);
    portal_auth_free(user->auth);
}
