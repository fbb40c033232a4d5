/* memscan_test: the paths of a portal handle (requests, a 401, bodies) and the other exports that take a secret. */
#include "memscan_test.h"

static void path_body_with_nul(portal *p, int async);

static void on_invalidated(void *user_data) { (*(int *)user_data)++; }

/* The bearer of a request to the Portal API (blocking or _async); with `invalidate` the token
 * is revoked first, so the request is answered 401 and invalidates the session, which is then
 * invalidated by the caller too (portal_session_invalidate or _async). */
void path_request(int invalidate, int async) {
    static const char *labels[2][2] = {{"request", "request-async"}, {"invalidate", "invalidate-401-async"}};
    const char *label = labels[invalidate][async];
    struct marker m;
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s-", label);
    make_marker(&m, prefix);
    char env_id[96];
    portal_auth *auth = new_auth(label, env_id, sizeof env_id);
    issue(&m, "eu-memscan");
    persist_elsewhere(&m, env_id, "eu-memscan");
    portal_session *session = NULL;
    CHECK_MSG(portal_auth_restore_session(auth, &session) == PORTAL_OK && session, "restore");
    portal *p = NULL;
    CHECK_MSG(session && portal_new(&p, session, api_host) == PORTAL_OK && p, "portal_new");
    int fired = 0;
    uint64_t listener = 0;
    CHECK_MSG(p && portal_on_session_invalidated(p, on_invalidated, &fired, NULL, &listener) == PORTAL_OK, "listener");
    if (invalidate) revoke_marker(&m);
    long status = 0;
    char *body = NULL;
    size_t body_len = 0;
    portal_status st = PORTAL_ERR_INTERNAL;
    if (p && async) {
        async_http_status = 0;
        st = finish_async(portal_request_async(p, "GET", "/api/v3/clients/me", NULL, queue, on_done, NULL, NULL, NULL));
        status = async_http_status;
        body = async_body;
        body_len = async_body_len;
        async_body = NULL;
    } else if (p) {
        st = portal_request(p, "GET", "/api/v3/clients/me", NULL, &status, &body, &body_len);
    }
    if (invalidate) {
        CHECK_MSG((st == PORTAL_OK && status == 401) || st == PORTAL_ERR_SESSION_INVALIDATED, "a revoked token gets 401 (status %d, HTTP %ld)", st, status);
        if (async)
            CHECK_MSG(finish_async(portal_session_invalidate_async(session, queue, on_done, NULL, NULL, NULL)) == PORTAL_OK,
                  "portal_session_invalidate_async");
        else
            CHECK_MSG(portal_session_invalidate(session) == PORTAL_OK, "portal_session_invalidate");
    } else {
        CHECK_MSG(st == PORTAL_OK && status == 200 && body && body_len > 0, "request (status %d, HTTP %ld)", st, status);
    }
    portal_string_free(body);
    if (!invalidate && !async && p) path_body_with_nul(p, 0);
    if (!invalidate && !async && p) path_body_with_nul(p, 1);
    /* Delivery is asynchronous (a library thread): wait for it, at most 10 s. */
    for (int i = 0; invalidate && fired == 0 && i < 1000; i++) usleep(10000);
    portal_free(p);
    if (invalidate) CHECK_MSG(fired == 1, "the listener fired once (%d)", fired);
    sign_out(auth, session);
    expect_none(label, &m);
}

/* A response body with a NUL byte before the token: portal_string_free must wipe the whole
 * body (the length recorded when it was handed out), not stop at the first NUL. The body comes
 * from a one-shot loopback HTTP server (one_shot_server.py beside this file, another process)
 * through portal_request to its absolute URL (no bearer: not the Portal API host). */
static void path_body_with_nul(portal *p, int async) {
    struct marker m;
    make_marker(&m, async ? "nul-body-async-" : "nul-body-");
    char dir[512], port_file[600], command[1400];
    snprintf(dir, sizeof dir, "%s", __FILE__);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0'; else snprintf(dir, sizeof dir, ".");
    snprintf(port_file, sizeof port_file, "/tmp/memscan-port.%d", (int)getpid());
    unlink(port_file);
    snprintf(command, sizeof command, "python3 '%s/one_shot_server.py' '%s'", dir, port_file);
    FILE *server = popen(command, "w");
    CHECK_MSG(server != NULL, "start %s", command);
    if (!server) return;
    setvbuf(server, NULL, _IONBF, 0);
    char *token = marker_copy(&m);
    fputs(token, server);
    fputs("\n", server);
    drop(token);
    char port[16] = "";
    for (int i = 0; i < 1000 && !port[0]; i++) { /* the server writes its port at once; 10 s at most */
        FILE *f = fopen(port_file, "r");
        if (f) {
            if (!fgets(port, sizeof port, f)) port[0] = '\0';
            fclose(f);
        }
        if (!port[0]) usleep(10000);
    }
    unlink(port_file);
    CHECK_MSG(port[0] != '\0', "the one-shot server did not start");
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%s/body", port);
    long status = 0;
    char *body = NULL;
    size_t body_len = 0;
    if (async) {
        status = 200;
        CHECK_MSG(port[0] && finish_async(portal_request_async(p, "GET", url, NULL, queue, on_done, NULL, NULL, NULL)) == PORTAL_OK,
              "request_async to the one-shot server");
        body = async_body;
        body_len = async_body_len;
        async_body = NULL;
    } else {
        CHECK_MSG(port[0] && portal_request(p, "GET", url, NULL, &status, &body, &body_len) == PORTAL_OK, "request");
    }
    CHECK_MSG(status == 200 && body && body_len == 3 + m.len && memcmp(body, "ok", 3) == 0,
          "request to the one-shot server (HTTP %ld, %zu bytes)", status, body_len);
    portal_string_free(body);
    pclose(server);
    expect_none(async ? "nul-body-async" : "nul-body", &m);
}

/* The rejected token of report_unauthorized (another token than the session's: nothing is
 * invalidated, only the argument's copies count). */
void path_report(void) {
    struct marker session_token, rejected;
    make_marker(&session_token, "report-session-");
    make_marker(&rejected, "report-rejected-");
    char env_id[96];
    portal_auth *auth = new_auth("report", env_id, sizeof env_id);
    portal_session *session = persist_marker(auth, &session_token);
    portal *p = NULL;
    CHECK_MSG(session && portal_new(&p, session, "127.0.0.1:1") == PORTAL_OK && p, "portal_new");
    bool invalidated = true;
    char *copy = marker_copy(&rejected);
    CHECK_MSG(p && portal_report_unauthorized(p, copy, &invalidated) == PORTAL_OK && !invalidated, "report_unauthorized");
    drop(copy);
    expect_none("report", &rejected);
    make_marker(&rejected, "report-rejected-async-");
    copy = marker_copy(&rejected);
    portal_status st = portal_report_unauthorized_async(p, copy, queue, on_done, NULL, NULL, NULL);
    drop(copy);
    CHECK_MSG(finish_async(st) == PORTAL_OK, "report_unauthorized_async");
    expect_none("report-async", &rejected);
    portal_free(p);
    sign_out(auth, session);
}

void path_api_key(void) {
    struct marker m;
    make_marker(&m, "api-key-");
    char *key = marker_copy(&m);
    portal *p = NULL;
    CHECK_MSG(portal_new_with_api_key(&p, key, "127.0.0.1:1") == PORTAL_OK && p, "portal_new_with_api_key");
    drop(key);
    portal_free(p);
    expect_none("api-key", &m);
}

/* A user JWT the fake API does not know: the verification fails (401) after the argument was read.
 * The marker is a JWT with an endUserId claim (read before anything is sent), so it reaches the API. */
#define TOTP_JWT_PREFIX "eyJhbGciOiJIUzI1NiJ9.eyJlbmRVc2VySWQiOiJldS1tZW1zY2FuIn0."
void path_totp_jwt(void) {
    struct marker m;
    make_marker(&m, TOTP_JWT_PREFIX "totp-jwt-");
    char env_id[96];
    portal_auth *auth = new_auth("totp-jwt", env_id, sizeof env_id);
    char *jwt = marker_copy(&m);
    portal_session *session = NULL;
    CHECK_MSG(portal_auth_verify_totp(auth, "123456", jwt, &session) != PORTAL_OK && !session, "verify_totp fails");
    drop(jwt);
    expect_none("totp-jwt", &m);
    make_marker(&m, TOTP_JWT_PREFIX "totp-jwt-async-");
    jwt = marker_copy(&m);
    portal_status st = portal_auth_verify_totp_async(auth, "123456", jwt, queue, on_sign_in_done, NULL, NULL, NULL);
    drop(jwt);
    CHECK_MSG(finish_async(st) != PORTAL_OK, "verify_totp_async fails");
    portal_auth_free(auth);
    expect_none("totp-jwt-async", &m);
}
