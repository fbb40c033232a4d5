/*
 * abi_test: the portal_* functions against the loopback stand-in (http.c): arguments, API keys,
 * requests, invalidation, validation, clear and network failures.
 */
#include "abi_test.h"

void test_portal_arguments(void) {
    begin("portal_* argument checks (NULL, blank, invalid UTF-8, bad host)");
    const char *id = new_env_id("portalargs");
    portal_auth *auth = new_auth(id);
    portal_session *session = NULL;
    CHECK_OK(portal_auth_persist_session(auth, "user-pa", "token-pa", &session));
    portal *p = (portal *)(void *)SENTINEL_STRING;

    portal_free(NULL);
    CHECK_STATUS(portal_new(NULL, session, "127.0.0.1:1"), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("out");
    CHECK_STATUS(portal_new(&p, NULL, "127.0.0.1:1"), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("session");
    const char *bad_hosts[] = {"", "   ", "\xff", "host/path", "user@host", "a b"};
    for (size_t i = 0; i < sizeof bad_hosts / sizeof bad_hosts[0]; i++) {
        CHECK_MSG(portal_new(&p, session, bad_hosts[i]) == PORTAL_ERR_INVALID_ARGUMENT, "host \"%s\"", bad_hosts[i]);
        CHECK_ERROR_MENTIONS("api_host");
        CHECK_MSG(portal_new_with_api_key(&p, "key", bad_hosts[i]) == PORTAL_ERR_INVALID_ARGUMENT, "host \"%s\"",
                  bad_hosts[i]);
        CHECK_ERROR_MENTIONS("api_host");
    }
    CHECK_STATUS(portal_new_with_api_key(NULL, "key", NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("out");
    const char *bad_keys[] = {NULL, "", " \t ", "k\xc3"};
    for (size_t i = 0; i < sizeof bad_keys / sizeof bad_keys[0]; i++) {
        CHECK_STATUS(portal_new_with_api_key(&p, bad_keys[i], NULL), PORTAL_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_MENTIONS("api_key");
    }
    CHECK(p == (portal *)(void *)SENTINEL_STRING);

    /* Registration failures call destroy_notify exactly once, before returning. */
    listener_state ls = {0, 0, 0};
    uint64_t h = 77;
    CHECK_STATUS(portal_on_session_invalidated(NULL, on_invalidated, &ls, on_destroy, &h), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("portal");
    CHECK(load(&ls.destroys) == 1 && h == 77);
    CHECK_STATUS(portal_listener_cancel(NULL, 1), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_report_unauthorized(NULL, "token-pa", NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_clear_session(NULL), PORTAL_ERR_INVALID_ARGUMENT);
    long status = -1;
    CHECK_STATUS(portal_request(NULL, "GET", "/api/v3/clients/me", NULL, &status, NULL, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(portal_session_invalidate(NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("session");

    portal *key_portal = NULL;
    char host[64];
    snprintf(host, sizeof host, "127.0.0.1:%d", closed_port());
    CHECK_OK(portal_new_with_api_key(&key_portal, "static-key", host));
    CHECK(key_portal != NULL);
    CHECK_STATUS(portal_on_session_invalidated(key_portal, NULL, &ls, on_destroy, &h), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("callback");
    CHECK(load(&ls.destroys) == 2);
    /* out is optional: a registration without it is made all the same (spent at once here: an
     * API-key portal has no session to invalidate). */
    CHECK_OK(portal_on_session_invalidated(key_portal, on_invalidated, &ls, on_destroy, NULL));
    CHECK(load(&ls.destroys) == 3);
    CHECK(load(&ls.calls) == 0);
    /* A freed (stale) queue: PORTAL_ERR_INVALID_ARGUMENT, and destroy_notify exactly once before the
     * return (the header's rule for failed registrations). */
    portal_completion_queue *stale = NULL;
    CHECK_OK(portal_completion_queue_new_pollable(&stale));
    portal_completion_queue_free(stale);
    CHECK_STATUS(portal_on_session_invalidated_queued(key_portal, stale, on_invalidated, &ls, on_destroy, &h),
                 PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("queue");
    CHECK(load(&ls.destroys) == 4);
    CHECK(load(&ls.calls) == 0);
    const char *bad_methods[] = {NULL, "", "get", "TRACE", "G\xff", "GET\r\nX-Injected: 1", "GET / HTTP/1.1\r\n\r\nGET",
                                 "GET ", "CONNECT"};
    for (size_t i = 0; i < sizeof bad_methods / sizeof bad_methods[0]; i++) {
        CHECK_STATUS(portal_request(key_portal, bad_methods[i], "/x", NULL, &status, NULL, NULL), PORTAL_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_MENTIONS("method");
    }
    /* HEAD and OPTIONS are allowed: they get as far as the (closed) port. */
    CHECK_STATUS(portal_request(key_portal, "HEAD", "/x", NULL, &status, NULL, NULL), PORTAL_ERR_NETWORK);
    CHECK_STATUS(portal_request(key_portal, "OPTIONS", "/x", NULL, &status, NULL, NULL), PORTAL_ERR_NETWORK);
    CHECK_STATUS(portal_request(key_portal, "GET", NULL, NULL, &status, NULL, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("target");
    /* status_out is optional: the request is made (and fails here on the closed port). */
    CHECK_STATUS(portal_request(key_portal, "GET", "/x", NULL, NULL, NULL, NULL), PORTAL_ERR_NETWORK);
    CHECK_STATUS(portal_request(key_portal, "POST", "/x", "{\xff}", &status, NULL, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("body");
    CHECK(status == -1);
    CHECK_STATUS(portal_report_unauthorized(key_portal, NULL, NULL), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("rejected_token");
    CHECK_STATUS(portal_report_unauthorized(key_portal, "", NULL), PORTAL_ERR_INVALID_ARGUMENT);
    portal_free(key_portal);

    CHECK_OK(portal_auth_clear_persisted_session(auth));
    portal_session_free(session);
    portal_auth_free(auth);
}

void test_api_key_portal(void) {
    begin("API-key portal: spent listener handle, never invalidates");
    char host[64];
    http_host(host, sizeof host);
    portal *p = NULL;
    CHECK_OK(portal_new_with_api_key(&p, "static-key", host));
    CHECK_NO_ERROR();
    listener_state ls = {0, 0, 0};
    uint64_t h = 99;
    CHECK_OK(portal_on_session_invalidated(p, on_invalidated, &ls, on_destroy, &h));
    CHECK_MSG(h == 0, "handle %llu, expected 0 (spent)", (unsigned long long)h);
    CHECK_MSG(load(&ls.destroys) == 1, "destroy_notify ran %d times at registration", load(&ls.destroys));
    bool invalidated = true;
    CHECK_OK(portal_report_unauthorized(p, "static-key", &invalidated));
    CHECK(!invalidated);
    CHECK_OK(portal_listener_cancel(p, 0));
    CHECK_OK(portal_listener_cancel(p, 123456));
    portal_free(p);
    pause_ms(50);
    CHECK(load(&ls.calls) == 0 && load(&ls.destroys) == 1);
}

void test_session_invalidate(void) {
    begin("portal_session_invalidate deletes only its own sign-in");
    const char *id = new_env_id("invalidate");
    portal_auth *auth = new_auth(id);
    portal_session *first = NULL, *restored = NULL;
    CHECK_OK(portal_auth_persist_session(auth, "user-inv", "token-first", &first));
    CHECK_OK(portal_auth_restore_session(auth, &restored));
    CHECK(restored != NULL);
    /* Invalidating the restored handle deletes the item and drops the token. */
    CHECK_OK(portal_session_invalidate(restored));
    CHECK_NO_ERROR();
    char *token = SENTINEL_STRING;
    CHECK_STATUS(portal_session_copy_token(restored, &token), PORTAL_ERR_SESSION_INVALIDATED);
    CHECK(token == SENTINEL_STRING);
    CHECK(strcmp(portal_session_get_end_user_id(restored), "user-inv") == 0);
    CHECK(keyring_count(SCHEMA, id) == 0);
    CHECK_OK(portal_session_invalidate(restored)); /* idempotent */
    check_restore(auth, id, NULL, NULL);
    portal_session_free(restored);
    portal_session_free(first);

    /* A newer sign-in stored meanwhile is never wiped by invalidating the older one. */
    portal_session *older = NULL;
    CHECK_OK(portal_auth_persist_session(auth, "user-old", "token-old", &older));
    portal_auth *other = new_auth(id);
    CHECK_OK(portal_auth_persist_session(other, "user-new", "token-new", NULL));
    CHECK_OK(portal_session_invalidate(older));
    CHECK_STATUS(portal_session_copy_token(older, &token), PORTAL_ERR_SESSION_INVALIDATED);
    CHECK(keyring_count(SCHEMA, id) == 1);
    check_restore(auth, id, "user-new", "token-new");
    portal_session_free(older);

    /* Invalidation while the keyring is locked: token gone, error reported, item kept. */
    portal_session *current = NULL;
    CHECK_OK(portal_auth_restore_session(auth, &current));
    if (!lock_observable("invalidation while locked")) {
        CHECK_OK(portal_session_invalidate(current));
        portal_session_free(current);
        portal_auth_free(other);
        portal_auth_free(auth);
        return;
    }
    locked_by_us = 1;
    keyring_lock();
    CHECK_STATUS(portal_session_invalidate(current), PORTAL_ERR_SESSION_STORAGE);
    CHECK_ERROR_MENTIONS("locked");
    CHECK_STATUS(portal_session_copy_token(current, &token), PORTAL_ERR_SESSION_INVALIDATED);
    keyring_unlock();
    locked_by_us = 0;
    CHECK(keyring_count(SCHEMA, id) == 1);
    /* A repeat after the failed delete retries it. */
    CHECK_OK(portal_session_invalidate(current));
    CHECK(keyring_count(SCHEMA, id) == 0);
    portal_session_free(current);
    portal_auth_free(other);
    portal_auth_free(auth);
}

void test_portal_requests(void) {
    begin("portal: validation request, portal_request, 401 invalidates once, listeners");
    char host[64];
    http_host(host, sizeof host);
    const char *id = new_env_id("portal");
    portal_auth *auth = NULL;
    CHECK_OK(portal_auth_new(&auth, id, redirect, host)); /* portal_new(NULL host) uses this one */
    portal_session *session = NULL;
    CHECK_OK(portal_auth_persist_session(auth, "user-portal", "token-portal", &session));

    http_set_status(200);
    int base = http_count();
    portal *p = NULL;
    CHECK_OK(portal_new(&p, session, NULL));
    CHECK(p != NULL);
    wait_for_request(base + 1, "GET /api/v3/clients/me ", "token-portal");
    portal_session_free(session); /* the portal keeps its own reference */
    session = NULL;

    listener_state a = {0, 0, 0}, cancelled = {0, 0, 0};
    uint64_t ha = 0, hc = 0;
    CHECK_OK(portal_on_session_invalidated(p, on_invalidated, &a, on_destroy, &ha));
    CHECK(ha != 0);
    CHECK_OK(portal_on_session_invalidated(p, on_invalidated, &cancelled, on_destroy, &hc));
    CHECK(hc != 0 && hc != ha);
    CHECK_OK(portal_listener_cancel(p, hc));
    CHECK_MSG(load(&cancelled.destroys) == 1, "destroy_notify after cancel: %d", load(&cancelled.destroys));
    CHECK_OK(portal_listener_cancel(p, hc)); /* already cancelled: ignored */

    long status = 0;
    char *body = NULL;
    size_t body_len = 0;
    CHECK_OK(portal_request(p, "GET", "/api/v3/clients/me", NULL, &status, &body, &body_len));
    CHECK(body != NULL && body_len == strlen(body));
    CHECK_MSG(status == 200, "status %ld", status);
    CHECK(body != NULL && strstr(body, "client-abi") != NULL);
    portal_string_free(body);
    wait_for_request(base + 2, "GET /api/v3/clients/me ", "token-portal");
    CHECK_OK(portal_request(p, "POST", "/api/v3/anything", "{\"a\":1}", &status, NULL, NULL));
    wait_for_request(base + 3, "POST /api/v3/anything ", "token-portal");

    /* 500 and 403 never invalidate; neither does a report with another token. */
    http_set_status(500);
    CHECK_OK(portal_request(p, "GET", "/api/v3/clients/me", NULL, &status, NULL, NULL));
    CHECK(status == 500);
    http_set_status(403);
    CHECK_OK(portal_request(p, "GET", "/api/v3/clients/me", NULL, &status, NULL, NULL));
    CHECK(status == 403);
    bool invalidated = true;
    CHECK_OK(portal_report_unauthorized(p, "some-other-token", &invalidated));
    CHECK(!invalidated);
    pause_ms(100);
    CHECK(load(&a.calls) == 0);
    CHECK(keyring_count(SCHEMA, id) == 1);

    /* 401: invalidated once; the stored item is deleted; listeners fire once. */
    http_set_status(401);
    CHECK_OK(portal_request(p, "GET", "/api/v3/clients/me", NULL, &status, NULL, NULL));
    CHECK_MSG(status == 401, "status %ld", status);
    CHECK_MSG(wait_for(&a.calls, 1, 3000), "listener calls: %d", load(&a.calls));
    CHECK_MSG(wait_for(&a.destroys, 1, 3000), "listener destroys: %d", load(&a.destroys));
    CHECK(load(&cancelled.calls) == 0);
    CHECK(keyring_count(SCHEMA, id) == 0);
    CHECK_STATUS(portal_request(p, "GET", "/api/v3/clients/me", NULL, &status, NULL, NULL), PORTAL_ERR_SESSION_INVALIDATED);
    CHECK_OK(portal_report_unauthorized(p, "token-portal", &invalidated));
    CHECK(!invalidated);
    /* A listener added afterwards gets exactly one replayed delivery. */
    listener_state late = {0, 0, 0};
    uint64_t hl = 0;
    CHECK_OK(portal_on_session_invalidated(p, on_invalidated, &late, on_destroy, &hl));
    CHECK_MSG(wait_for(&late.calls, 1, 3000), "late listener calls: %d", load(&late.calls));
    CHECK(wait_for(&late.destroys, 1, 3000));
    pause_ms(100);
    CHECK(load(&a.calls) == 1 && load(&late.calls) == 1 && load(&a.destroys) == 1);
    /* destroy_notify ran after the delivery returned, not before. */
    CHECK(!load(&a.destroyed_before_call) && !load(&late.destroyed_before_call));
    portal_free(p);
    CHECK(load(&a.destroys) == 1 && load(&late.destroys) == 1 && load(&cancelled.destroys) == 1);
    check_restore(auth, id, NULL, NULL);
    portal_auth_free(auth);
}

/* How the tests below that wait for an invalidation (or for none) begin: in a new auth
 * environment `tag`, with the loopback server answering `status`, a session of `user` persisted
 * and a portal for it on that server, with `listener` registered. listen_again() does the same
 * for another session in the same environment. */
typedef struct {
    char host[64];
    const char *id;
    portal_auth *auth;
    portal_session *session;
    portal *p;
} listened;

static void listen_again(listened *t, const char *user, const char *token, listener_state *listener) {
    CHECK_OK(portal_auth_persist_session(t->auth, user, token, &t->session));
    t->p = NULL;
    CHECK_OK(portal_new(&t->p, t->session, t->host));
    uint64_t h = 0;
    CHECK_OK(portal_on_session_invalidated(t->p, on_invalidated, listener, on_destroy, &h));
}

static void listen_on_portal(listened *t, const char *tag, int status, const char *user, const char *token,
                             listener_state *listener) {
    http_host(t->host, sizeof t->host);
    t->id = new_env_id(tag);
    t->auth = new_auth(t->id);
    t->session = NULL;
    http_set_status(status);
    listen_again(t, user, token, listener);
}

/* The session was invalidated: it hands out no token, and its item is gone. */
static void expect_invalidated(const portal_session *session, const char *id) {
    char *token = SENTINEL_STRING;
    CHECK_STATUS(portal_session_copy_token(session, &token), PORTAL_ERR_SESSION_INVALIDATED);
    CHECK(keyring_count(SCHEMA, id) == 0);
}

void test_portal_validation_401(void) {
    begin("portal: a 401 on the validation request invalidates; later listeners hear it");
    listened t;
    listener_state ls = {0, 0, 0};
    listen_on_portal(&t, "validate401", 401, "user-v", "token-v", &ls);
    CHECK_MSG(wait_for(&ls.calls, 1, 5000), "listener calls: %d", load(&ls.calls));
    CHECK(wait_for(&ls.destroys, 1, 3000));
    expect_invalidated(t.session, t.id);
    pause_ms(100);
    CHECK(load(&ls.calls) == 1 && !load(&ls.destroyed_before_call));
    portal_free(t.p);
    CHECK(load(&ls.destroys) == 1);
    portal_session_free(t.session);
    http_set_status(200);
    portal_auth_free(t.auth);
}

void test_portal_clear_and_network(void) {
    begin("portal_clear_session never fires listeners; network errors never invalidate");
    listened t;
    listener_state ls = {0, 0, 0};
    listen_on_portal(&t, "portalclear", 200, "user-c", "token-c", &ls);
    CHECK_OK(portal_clear_session(t.p));
    CHECK_NO_ERROR();
    expect_invalidated(t.session, t.id);
    /* After a clear a registration is spent: handle 0, destroy_notify at once. */
    listener_state after = {0, 0, 0};
    uint64_t h2 = 5;
    CHECK_OK(portal_on_session_invalidated(t.p, on_invalidated, &after, on_destroy, &h2));
    CHECK(h2 == 0 && load(&after.destroys) == 1);
    pause_ms(200);
    CHECK(load(&ls.calls) == 0 && load(&after.calls) == 0);
    portal_free(t.p);
    CHECK(load(&ls.calls) == 0 && load(&ls.destroys) == 1);
    portal_session_free(t.session);

    /* Nothing listening: the validation request and portal_request fail, nothing invalidates. */
    snprintf(t.host, sizeof t.host, "127.0.0.1:%d", closed_port());
    listener_state net = {0, 0, 0};
    listen_again(&t, "user-n", "token-n", &net);
    long status = 0;
    double t0 = now_ms();
    CHECK_STATUS(portal_request(t.p, "GET", "/api/v3/clients/me", NULL, &status, NULL, NULL), PORTAL_ERR_NETWORK);
    printf("    portal_request to a closed port: NETWORK after %.1f ms: %s\n", now_ms() - t0,
           portal_last_error_message());
    CHECK(portal_last_error_message()[0] != '\0');
    pause_ms(200);
    CHECK(load(&net.calls) == 0);
    check_token(t.session, "token-n", 7);
    CHECK(keyring_count(SCHEMA, t.id) == 1);
    portal_free(t.p);
    CHECK(load(&net.destroys) == 1);
    portal_session_free(t.session);
    CHECK_OK(portal_auth_clear_persisted_session(t.auth));
    portal_auth_free(t.auth);
}
