/*
 * listener_lifetime_test.c — the listener-lifetime rule (docs/threading.md "Listener lifetime")
 * in C, against the real keyring and the loopback Portal API:
 *   (a) a live portal handle is the reference that keeps listeners: a rejection detected by the
 *       validation request after registration deletes the item *and* reaches both a plain and a
 *       queued listener (on the main context), each once, destroy_notify once — both registered
 *       without a handle (out is optional);
 *   (b) portal_free is the explicit close: it cancels every registration (destroy_notify once, no
 *       callback; a registration made without a handle too) and, from the moment it starts, nothing invalidates: the validation request's
 *       late 401 deletes nothing, so there is never "item deleted, nobody told";
 *   (c) portal_free_async, the same.
 * Needs scripts/with-keyring.sh and scripts/with-portal-api.sh. Exit 0 when every check passed.
 */
#define _DEFAULT_SOURCE 1
#include <portal_keyring.h>
#include "check.h"

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *api_url;
static char env_id[128];

static int admin(const char *path, const char *json, char *out, size_t size) {
    char command[2048];
    snprintf(command, sizeof command,
             "python3 -c 'import json,sys,urllib.request as u; r=u.Request(sys.argv[1],data=sys.argv[2].encode(),"
             "headers={\"Content-Type\":\"application/json\"}); d=json.load(u.urlopen(r)); "
             "print(d[\"data\"].get(\"token\", \"\") if isinstance(d.get(\"data\"), dict) else \"\")' '%s%s' '%s'",
             api_url, path, json);
    FILE *p = popen(command, "r");
    if (!p) return -1;
    char ignored[8];
    if (!out) { out = ignored; size = sizeof ignored; }
    out[0] = '\0';
    if (!fgets(out, (int)size, p)) out[0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    return pclose(p) == 0 ? 0 : -1;
}

typedef struct {
    int calls, destroyed;
} counts;
static void on_invalidated(void *data) { __atomic_add_fetch(&((counts *)data)->calls, 1, __ATOMIC_SEQ_CST); }
static void on_destroy(void *data) { __atomic_add_fetch(&((counts *)data)->destroyed, 1, __ATOMIC_SEQ_CST); }
static int load(int *v) { return __atomic_load_n(v, __ATOMIC_SEQ_CST); }

/* Signs in user with a token the API has already revoked; the next validation answers 401 late. */
static portal_session *revoked_session(portal_auth *auth, const char *user, int delay_ms) {
    char token[512], json[1024];
    snprintf(json, sizeof json, "{\"endUserId\":\"%s\"}", user);
    CHECK(admin("/_admin/sessions", json, token, sizeof token) == 0 && token[0]);
    portal_session *session = NULL;
    CHECK(portal_auth_persist_session(auth, user, token, &session) == PORTAL_OK);
    snprintf(json, sizeof json, "{\"token\":\"%s\"}", token);
    CHECK(admin("/_admin/revoke", json, NULL, 0) == 0);
    snprintf(json, sizeof json, "{\"route\":\"/api/v3/clients/me\",\"delayMs\":%d,\"count\":1}", delay_ms);
    CHECK(admin("/_admin/faults", json, NULL, 0) == 0);
    return session;
}

static int stored(portal_auth *auth) {
    portal_session *s = NULL;
    CHECK(portal_auth_restore_session(auth, &s) == PORTAL_OK);
    int present = s != NULL;
    portal_session_free(s);
    return present;
}

static void test_live_handle_delivers(portal_auth *auth) {
    portal_session *session = revoked_session(auth, "u-live", 300);
    portal *client = NULL;
    CHECK(portal_new(&client, session, NULL) == PORTAL_OK);
    counts plain = {0, 0}, queued = {0, 0};
    /* out is optional: registrations without a handle are made and delivered all the same. */
    CHECK(portal_on_session_invalidated(client, on_invalidated, &plain, on_destroy, NULL) == PORTAL_OK);
    CHECK(portal_on_session_invalidated_queued(client, NULL, on_invalidated, &queued, on_destroy, NULL) == PORTAL_OK);
    gint64 end = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
    while ((load(&plain.destroyed) < 1 || load(&queued.destroyed) < 1) && g_get_monotonic_time() < end)
        g_main_context_iteration(NULL, FALSE), g_usleep(5000);
    CHECK(load(&plain.calls) == 1 && load(&plain.destroyed) == 1);
    CHECK(load(&queued.calls) == 1 && load(&queued.destroyed) == 1);
    CHECK(!stored(auth));
    portal_free(client);
    CHECK(load(&plain.calls) == 1 && load(&plain.destroyed) == 1);
    portal_session_free(session);
    printf("live handle: the late 401 deleted the item and told both listeners once\n");
}

static void test_free_closes(portal_auth *auth, int use_async) {
    portal_session *session = revoked_session(auth, use_async ? "u-free-async" : "u-free", 300);
    portal *client = NULL;
    CHECK(portal_new(&client, session, NULL) == PORTAL_OK);
    counts plain = {0, 0}, queued = {0, 0};
    uint64_t h1 = 0;
    CHECK(portal_on_session_invalidated(client, on_invalidated, &plain, on_destroy, &h1) == PORTAL_OK);
    /* Without out the registration is the portal's: its free ends it like a cancel. */
    CHECK(portal_on_session_invalidated_queued(client, NULL, on_invalidated, &queued, on_destroy, NULL) == PORTAL_OK);
    usleep(100000); /* the validation request is waiting for its late 401 */
    if (use_async)
        CHECK(portal_free_async(client, NULL, NULL, NULL, NULL) == PORTAL_OK);
    else
        portal_free(client);
    CHECK(load(&plain.destroyed) == 1 && load(&queued.destroyed) == 1); /* cancelled before it returned */
    usleep(1500000); /* the late 401 (at 300 ms) has arrived and been handled by now */
    for (int i = 0; i < 20; i++) g_main_context_iteration(NULL, FALSE);
    CHECK(load(&plain.calls) == 0 && load(&queued.calls) == 0);
    CHECK(load(&plain.destroyed) == 1 && load(&queued.destroyed) == 1);
    CHECK(stored(auth)); /* closed: nothing was deleted that nobody was told about */
    char *token = NULL;
    CHECK(portal_session_copy_token(session, &token) == PORTAL_OK);
    portal_string_free(token);
    portal_session_free(session);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);
    printf("%s: listeners cancelled, the late 401 deleted nothing\n", use_async ? "portal_free_async" : "portal_free");
}

int main(void) {
    api_url = getenv("PORTAL_TEST_API_URL");
    if (!api_url || !getenv("PORTAL_TEST_API_HOST")) {
        fprintf(stderr, "listener_lifetime_test: needs scripts/with-portal-api.sh\n");
        return 2;
    }
    snprintf(env_id, sizeof env_id, "c-lifetime-%d", (int)getpid());
    portal_auth *auth = NULL;
    CHECK(portal_auth_new(&auth, env_id, "app://cb", getenv("PORTAL_TEST_API_HOST")) == PORTAL_OK);
    test_live_handle_delivers(auth);
    test_free_closes(auth, 0);
    test_free_closes(auth, 1);
    portal_auth_free(auth);
    if (failures) {
        fprintf(stderr, "listener_lifetime_test: %d of %d checks FAILED\n", failures, checks);
        return 1;
    }
    printf("listener_lifetime_test: all %d checks passed\n", checks);
    return 0;
}
