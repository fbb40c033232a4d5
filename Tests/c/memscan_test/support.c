/* memscan_test: the helpers of every path: the fake Portal API, another process's persist, the pollable queue. */
#include "memscan_test.h"

/* Runs a shell command; its first output line into out (if given). */
static int run(const char *command, char *out, size_t out_size) {
    FILE *p = popen(command, "r");
    if (!p) return -1;
    char line[2048] = "";
    if (!fgets(line, sizeof line, p)) line[0] = '\0';
    int rc = pclose(p);
    line[strcspn(line, "\n")] = '\0';
    if (out) snprintf(out, out_size, "%s", line);
    explicit_bzero(line, sizeof line);
    return rc;
}

/* A JSON POST to the fake Portal API's admin API; prints data[field]. The token in the command
 * (when there is one) is wiped right after. */
int admin(const char *route, const char *json, const char *field, char *out, size_t out_size) {
    char command[4096];
    snprintf(command, sizeof command,
             "python3 -c 'import json,sys,urllib.request as u; r=u.Request(sys.argv[1],data=sys.argv[2].encode(),"
             "headers={\"Content-Type\":\"application/json\"}); print(json.load(u.urlopen(r))[\"data\"].get(sys.argv[3]) or \"\")'"
             " '%s/_admin/%s' '%s' '%s'", api_url, route, json, field);
    int rc = run(command, out, out_size);
    explicit_bzero(command, sizeof command);
    return rc;
}

/* Issues the marker as a CST of end user `user` on the fake Portal API. */
void issue(const struct marker *m, const char *user) {
    char *token = marker_copy(m);
    char json[MAX_TOKEN + 128];
    snprintf(json, sizeof json, "{\"endUserId\":\"%s\",\"token\":\"%s\"}", user, token);
    drop(token);
    CHECK_MSG(admin("sessions", json, "sessionId", NULL, 0) == 0, "issue a session on the fake Portal API");
    explicit_bzero(json, sizeof json);
}

void revoke_marker(const struct marker *m) {
    char *token = marker_copy(m);
    char json[MAX_TOKEN + 64];
    snprintf(json, sizeof json, "{\"token\":\"%s\"}", token);
    drop(token);
    CHECK_MSG(admin("revoke", json, "revoked", NULL, 0) == 0, "revoke the token");
    explicit_bzero(json, sizeof json);
}

/* Stores the marker from another process: `portal-session persist` (token on stdin), so that
 * this process first meets the token when it restores it. */
void persist_elsewhere(const struct marker *m, const char *env_id, const char *user) {
    char command[1024];
    snprintf(command, sizeof command, "'%s' --env '%s' persist --end-user-id '%s' >/dev/null", cli, env_id, user);
    FILE *p = popen(command, "w");
    CHECK_MSG(p != NULL, "popen %s", command);
    if (!p) return;
    setvbuf(p, NULL, _IONBF, 0); /* no stdio buffer keeps a copy */
    char *token = marker_copy(m);
    fputs(token, p);
    drop(token);
    CHECK_MSG(pclose(p) == 0, "portal-session persist");
}

portal_auth *new_auth(const char *label, char *env_id, size_t size) {
    snprintf(env_id, size, "c-memscan-%s-%d", label, (int)getpid());
    portal_auth *auth = NULL;
    CHECK_MSG(portal_auth_new(&auth, env_id, "portalkeyring://auth/callback", api_host) == PORTAL_OK, "portal_auth_new");
    CHECK_MSG(portal_auth_set_magic_link(auth, "login@example.com", "tpl-c") == PORTAL_OK, "portal_auth_set_magic_link");
    return auth;
}

/* ---- the non-blocking exports: one pollable queue, dispatched until the callback ran */

portal_completion_queue *queue;
static int async_done;
static portal_status async_status;
long async_http_status;
portal_redirect_kind async_kind;
static portal_session *async_session;
char *async_body;
size_t async_body_len;

void on_done(portal_status status, portal_result *result, const char *message, void *user_data) {
    (void)message;
    (void)user_data;
    async_status = status;
    async_http_status = result->http_status;
    if (result->body) { /* take it: freed by the path with portal_string_free */
        async_body = result->body;
        async_body_len = result->body_len;
        result->body = NULL;
    }
    if (result->session) { /* take it: freed by the path with portal_session_free */
        async_session = result->session;
        result->session = NULL;
    }
    async_done = 1;
}

void on_sign_in_done(portal_status status, portal_sign_in_result *result, const char *message, void *user_data) {
    (void)message;
    (void)user_data;
    async_status = status;
    async_kind = result->kind;
    if (result->session) {
        async_session = result->session;
        result->session = NULL;
    }
    async_done = 1;
}

/* Dispatches the queue until the callback ran (10 s at most); returns its status. */
portal_status finish_async(portal_status started) {
    if (started != PORTAL_OK) return started;
    struct pollfd fd = {.fd = portal_completion_queue_get_fd(queue), .events = POLLIN};
    for (int i = 0; i < 1000 && !async_done; i++) {
        if (poll(&fd, 1, 10) > 0) portal_completion_queue_dispatch(queue, NULL);
    }
    CHECK_MSG(async_done, "the completion never ran");
    async_done = 0;
    return async_status;
}

/* The session the last callback delivered (NULL when none); the caller frees it. */
portal_session *take_async_session(void) {
    portal_session *session = async_session;
    async_session = NULL;
    return session;
}

/* A caller-owned copy of a session's token (the scans' control: a copy they must see). */
char *copy_of_token(portal_session *session) {
    char *copy = NULL;
    CHECK_MSG(session && portal_session_copy_token(session, &copy) == PORTAL_OK && copy, "copy_token");
    return copy;
}

/* The end of a path: its session freed, the stored one cleared, the handle freed. */
void sign_out(portal_auth *auth, portal_session *session) {
    portal_session_free(session);
    CHECK_MSG(portal_auth_clear_persisted_session(auth) == PORTAL_OK, "clear");
    portal_auth_free(auth);
}

/* Persists the marker as the session of "memscan-user"; the clear copy made for the call is
 * wiped as soon as it returns. */
portal_session *persist_marker(portal_auth *auth, const struct marker *m) {
    char *token = marker_copy(m);
    portal_session *session = NULL;
    CHECK_MSG(portal_auth_persist_session(auth, "memscan-user", token, &session) == PORTAL_OK && session, "persist");
    drop(token);
    return session;
}
