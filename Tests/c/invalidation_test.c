/*
 * invalidation_test.c — the listener C ABI against the real keyring and the loopback Portal API:
 * registration, replay to a late listener, cancel (before, and from inside the callback), free from
 * inside the callback, destroy_notify exactly once, API-key portals, and a newer sign-in by another
 * process surviving the old session's rejection.
 *
 * Needs PORTAL_TEST_API_URL / PORTAL_TEST_API_HOST (scripts/with-portal-api.sh) inside
 * scripts/with-keyring.sh. Exit 0 when every check passed.
 */
#define _DEFAULT_SOURCE 1
#include <portal_keyring.h>
#include "check.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *api_url, *api_host, *self_path;

/* POSTs JSON to an admin route with curl-free plain sockets via python3 (available in tests). */
static int admin(const char *path, const char *json, char *out, size_t out_size) {
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

static void issue_token(const char *user, char *out, size_t size) {
    char json[256];
    snprintf(json, sizeof json, "{\"endUserId\":\"%s\"}", user);
    CHECK(admin("sessions", json, out, size) == 0 && out[0] != '\0');
}

static void revoke_token(const char *token) {
    char json[512];
    snprintf(json, sizeof json, "{\"token\":\"%s\"}", token);
    CHECK(admin("revoke", json, NULL, 0) == 0);
}

typedef struct {
    atomic_int calls;
    atomic_int destroyed;
    portal *portal;       /* for re-entrant tests */
    uint64_t handle;
    int action;           /* 0 nothing, 1 cancel own handle, 2 free portal, 3 restore again */
    portal_auth *auth;
    atomic_int may_free;  /* action 2 waits for it: the test still uses the portal meanwhile */
} probe;

static void on_invalidated(void *data) {
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

static void on_destroy(void *data) { atomic_fetch_add(&((probe *)data)->destroyed, 1); }

static void wait_for(atomic_int *value, int expected) {
    for (int i = 0; i < 500 && atomic_load(value) < expected; i++) usleep(10000);
}

static portal_auth *new_auth(const char *tag) {
    char id[128];
    snprintf(id, sizeof id, "c-inv-%s-%d", tag, (int)getpid());
    portal_auth *auth = NULL;
    CHECK(portal_auth_new(&auth, id, "app://cb", api_host) == PORTAL_OK);
    return auth;
}

static portal_session *sign_in(portal_auth *auth, const char *user, char *token, size_t size) {
    issue_token(user, token, size);
    portal_session *session = NULL;
    CHECK(portal_auth_persist_session(auth, user, token, &session) == PORTAL_OK);
    return session;
}

static void test_replay_cancel_destroy(void) {
    char token[256];
    portal_auth *auth = new_auth("replay");
    portal_session *session = sign_in(auth, "u-replay", token, sizeof token);
    revoke_token(token);

    portal *client = NULL;
    CHECK(portal_new(&client, session, NULL) == PORTAL_OK);
    probe cancelled = {0}, late = {0}, reentrant = {0};
    uint64_t h = 0;
    /* Registered before the init request's answer can arrive, then cancelled: never called. */
    CHECK(portal_on_session_invalidated(client, on_invalidated, &cancelled, on_destroy, &h) == PORTAL_OK);
    CHECK(h != 0);
    CHECK(portal_listener_cancel(client, h) == PORTAL_OK);
    CHECK(atomic_load(&cancelled.destroyed) == 1);
    /* Wait for the init request's rejection, then register late: exactly one replay. */
    char *copy = NULL;
    for (int i = 0; i < 500; i++) {
        portal_status st = portal_session_copy_token(session, &copy);
        portal_string_free(copy);
        copy = NULL;
        if (st == PORTAL_ERR_SESSION_INVALIDATED) break;
        usleep(10000);
    }
    CHECK(portal_session_copy_token(session, &copy) == PORTAL_ERR_SESSION_INVALIDATED);
    CHECK(portal_on_session_invalidated(client, on_invalidated, &late, on_destroy, &h) == PORTAL_OK);
    wait_for(&late.calls, 1);
    CHECK(atomic_load(&late.calls) == 1);
    wait_for(&late.destroyed, 1);
    CHECK(atomic_load(&late.destroyed) == 1);
    /* A late listener that re-enters the library and cancels its own handle. */
    reentrant.portal = client;
    reentrant.auth = auth;
    reentrant.action = 3;
    CHECK(portal_on_session_invalidated(client, on_invalidated, &reentrant, on_destroy, &reentrant.handle) == PORTAL_OK);
    wait_for(&reentrant.destroyed, 1);
    CHECK(atomic_load(&reentrant.calls) == 1 && atomic_load(&reentrant.destroyed) == 1);
    CHECK(atomic_load(&cancelled.calls) == 0);

    portal_session *restored = NULL;
    CHECK(portal_auth_restore_session(auth, &restored) == PORTAL_OK && restored == NULL);
    portal_free(client);
    CHECK(atomic_load(&cancelled.destroyed) == 1 && atomic_load(&late.destroyed) == 1);
    portal_session_free(session);
    portal_auth_free(auth);
}

static void test_cancel_and_free_inside_callback(void) {
    char token[256];
    portal_auth *auth = new_auth("inside");
    portal_session *session = sign_in(auth, "u-inside", token, sizeof token);
    portal *client = NULL;
    /* The real loopback API host and a token it accepts (never revoked): the init request gets
     * 200 and cannot invalidate, so the rejections below are the ones we report ourselves. */
    CHECK(portal_new(&client, session, NULL) == PORTAL_OK);
    probe self_cancel = {0}, freer = {0}, pending = {0};
    self_cancel.portal = client;
    self_cancel.action = 1;
    CHECK(portal_on_session_invalidated(client, on_invalidated, &self_cancel, on_destroy, &self_cancel.handle) == PORTAL_OK);
    freer.portal = client;
    freer.action = 2;
    CHECK(portal_on_session_invalidated(client, on_invalidated, &freer, on_destroy, &freer.handle) == PORTAL_OK);
    uint64_t h = 0;
    CHECK(portal_on_session_invalidated(client, on_invalidated, &pending, on_destroy, &h) == PORTAL_OK);

    bool invalidated = false;
    CHECK(portal_report_unauthorized(client, "not-the-current-token", &invalidated) == PORTAL_OK);
    CHECK(!invalidated);
    CHECK(portal_report_unauthorized(client, token, &invalidated) == PORTAL_OK);
    CHECK(invalidated);
    CHECK(portal_report_unauthorized(client, token, &invalidated) == PORTAL_OK);
    CHECK(!invalidated); /* at most once */
    /* Only now may the second listener free the portal: before this gate, a delivery that ran
     * ahead of the report above freed the portal under it (a use-after-free in this test that
     * crashed about 1 run in 12 on a loaded 2-core machine). */
    atomic_store(&freer.may_free, 1);
    wait_for(&pending.destroyed, 1);
    CHECK(atomic_load(&self_cancel.calls) == 1 && atomic_load(&self_cancel.destroyed) == 1);
    CHECK(atomic_load(&freer.calls) == 1 && atomic_load(&freer.destroyed) == 1);
    /* The portal was freed inside the second callback before the third ran: cancelled. */
    CHECK(atomic_load(&pending.calls) == 0 && atomic_load(&pending.destroyed) == 1);
    portal_session_free(session);
    portal_auth_free(auth);
}

static void test_clear_session_and_api_key(void) {
    char token[256];
    portal_auth *auth = new_auth("clear");
    portal_session *session = sign_in(auth, "u-clear", token, sizeof token);
    portal *client = NULL;
    CHECK(portal_new(&client, session, NULL) == PORTAL_OK);
    probe never = {0}, spent = {0};
    uint64_t h = 0;
    CHECK(portal_on_session_invalidated(client, on_invalidated, &never, on_destroy, &h) == PORTAL_OK);
    CHECK(portal_clear_session(client) == PORTAL_OK);
    CHECK(portal_on_session_invalidated(client, on_invalidated, &spent, on_destroy, &h) == PORTAL_OK);
    CHECK(h == 0 && atomic_load(&spent.destroyed) == 1);
    portal_session *restored = NULL;
    CHECK(portal_auth_restore_session(auth, &restored) == PORTAL_OK && restored == NULL);
    portal_free(client);
    CHECK(atomic_load(&never.calls) == 0 && atomic_load(&never.destroyed) == 1);

    portal *keyed = NULL;
    probe key_probe = {0};
    CHECK(portal_new_with_api_key(&keyed, "static-api-key", api_host) == PORTAL_OK);
    CHECK(portal_on_session_invalidated(keyed, on_invalidated, &key_probe, on_destroy, &h) == PORTAL_OK);
    CHECK(h == 0 && atomic_load(&key_probe.destroyed) == 1);
    portal_free(keyed);

    /* Failed registration: destroy_notify still runs once. */
    probe failed = {0};
    CHECK(portal_on_session_invalidated(NULL, on_invalidated, &failed, on_destroy, &h) == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(atomic_load(&failed.destroyed) == 1);
    CHECK(portal_on_session_invalidated(keyed == NULL ? NULL : NULL, NULL, &failed, on_destroy, &h) == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(portal_listener_cancel(NULL, 1) == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(portal_new(NULL, session, NULL) == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(portal_new(&client, NULL, NULL) == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(portal_report_unauthorized(NULL, "x", NULL) == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(portal_clear_session(NULL) == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(portal_session_invalidate(NULL) == PORTAL_ERR_INVALID_ARGUMENT);
    long status = 0;
    CHECK(portal_request(NULL, "GET", "/", NULL, &status, NULL, NULL) == PORTAL_ERR_INVALID_ARGUMENT);
    portal_free(NULL);
    portal_session_free(session);
    portal_auth_free(auth);
}

/* Process A holds an old session; process B (a child) signs in anew; A's request is rejected:
 * B's session stays stored and restorable. */
static void test_newer_sign_in_by_another_process_survives(void) {
    char old_token[256], new_token[256];
    portal_auth *auth = new_auth("procs");
    portal_session *old = sign_in(auth, "u-procs", old_token, sizeof old_token);
    portal *client = NULL;
    CHECK(portal_new(&client, old, NULL) == PORTAL_OK);
    issue_token("u-procs", new_token, sizeof new_token);

    /* Process B: a fresh process (fork alone would inherit GDBus state without its threads). */
    char command[1024];
    snprintf(command, sizeof command, "'%s' --persist c-inv-procs-%d u-procs", self_path, (int)getpid());
    FILE *b = popen(command, "w");
    CHECK(b != NULL);
    if (b) {
        fputs(new_token, b);
        CHECK(pclose(b) == 0);
    }

    revoke_token(old_token);
    long http = 0;
    portal_status st = portal_request(client, "GET", "/api/v3/clients/me", NULL, &http, NULL, NULL);
    CHECK(st == PORTAL_OK || st == PORTAL_ERR_SESSION_INVALIDATED); /* the init request may win */
    char *copy = NULL;
    CHECK(portal_session_copy_token(old, &copy) == PORTAL_ERR_SESSION_INVALIDATED);

    portal_session *restored = NULL;
    CHECK(portal_auth_restore_session(auth, &restored) == PORTAL_OK && restored != NULL);
    if (restored) {
        CHECK(portal_session_copy_token(restored, &copy) == PORTAL_OK && strcmp(copy, new_token) == 0);
        portal_string_free(copy);
    }
    portal_session_free(restored);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);
    portal_free(client);
    portal_session_free(old);
    portal_auth_free(auth);
}

/* The redirect URL of a grant minted on the loopback Portal API for end_user ("" on failure). */
static void mint_grant(const char *end_user, char *redirect, size_t size) {
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

/* Login CSRF (redirect hijacking), with eu-c's session stored and no sign-in pending: a grant is
 * refused as unsolicited (nothing stored); with a sign-in pending, another end user's grant gives
 * PORTAL_ERR_DIFFERENT_END_USER with no outputs and eu-c still stored, and the same URL with
 * PORTAL_REDIRECT_REPLACE_END_USER persists it. */
static void test_redirect_hijacking(portal_auth *auth) {
    char redirect[1024];
    portal_redirect_kind kind = PORTAL_REDIRECT_NOT_HANDLED;
    portal_session *session = (portal_session *)0x1, *restored = NULL;
    mint_grant("eu-attacker", redirect, sizeof redirect);
    CHECK(portal_auth_handle_redirect(auth, redirect, &kind, &session, NULL, NULL) == PORTAL_ERR_UNSOLICITED_REDIRECT);
    CHECK(kind == PORTAL_REDIRECT_NOT_HANDLED && session == (portal_session *)0x1);
    CHECK(portal_auth_restore_session(auth, &restored) == PORTAL_OK && restored &&
          strcmp(portal_session_get_end_user_id(restored), "eu-c") == 0);
    portal_session_free(restored);

    CHECK(portal_auth_send_magic_link(auth, "someone@example.com") == PORTAL_OK);
    CHECK(portal_auth_handle_redirect(auth, redirect, &kind, &session, NULL, NULL) == PORTAL_ERR_DIFFERENT_END_USER);
    CHECK(kind == PORTAL_REDIRECT_NOT_HANDLED && session == (portal_session *)0x1);
    CHECK(strstr(portal_last_error_message(), "eu-attacker") && strstr(portal_last_error_message(), "eu-c"));
    CHECK(portal_auth_restore_session(auth, &restored) == PORTAL_OK && restored &&
          strcmp(portal_session_get_end_user_id(restored), "eu-c") == 0);
    portal_session_free(restored);
    CHECK(portal_auth_handle_redirect_v2(auth, redirect, PORTAL_REDIRECT_REPLACE_END_USER, &kind, &session, NULL, NULL) ==
          PORTAL_OK);
    CHECK(kind == PORTAL_REDIRECT_AUTHENTICATED && session && session != (portal_session *)0x1 &&
          strcmp(portal_session_get_end_user_id(session), "eu-attacker") == 0);
    if (session != (portal_session *)0x1) portal_session_free(session);
    CHECK(portal_auth_restore_session(auth, &restored) == PORTAL_OK && restored &&
          strcmp(portal_session_get_end_user_id(restored), "eu-attacker") == 0);
    portal_session_free(restored);
}

/* A magic-link sign-in through the C ABI: the session is persisted before it is returned and a
 * repeat delivery of the same redirect gives the same session without a second exchange. */
static void test_sign_in_flow(void) {
    portal_auth *auth = NULL;
    char id[128];
    snprintf(id, sizeof id, "c-signin-%d", (int)getpid());
    CHECK(portal_auth_new(&auth, id, "portalkeyring://auth/callback", api_host) == PORTAL_OK);
    CHECK(portal_auth_set_magic_link(auth, "login@example.com", "tpl-c") == PORTAL_OK);
    char *methods = NULL;
    CHECK(portal_auth_get_methods(auth, &methods, NULL) == PORTAL_OK && methods && strstr(methods, "EMAIL_MAGIC_LINK"));
    portal_string_free(methods);
    char *url = NULL;
    CHECK(portal_auth_login_with_google(auth, &url) == PORTAL_OK && url && strncmp(url, "http", 4) == 0);
    portal_string_free(url);
    CHECK(portal_auth_send_magic_link(auth, " Someone@Example.com ") == PORTAL_OK);

    /* Mint a grant: the redirect URL the email would open. */
    char command[1024], redirect[1024] = "";
    snprintf(command, sizeof command,
             "python3 -c 'import json,sys,urllib.request as u; r=u.Request(sys.argv[1],data=b\"{\\\"kind\\\":\\\"magic_link\\\",\\\"endUserId\\\":\\\"eu-c\\\",\\\"redirectUrl\\\":\\\"portalkeyring://auth/callback\\\"}\",headers={\"Content-Type\":\"application/json\"}); print(json.load(u.urlopen(r))[\"data\"][\"redirectUrl\"])' '%s/_admin/grants'",
             api_url);
    FILE *p = popen(command, "r");
    CHECK(p && fgets(redirect, sizeof redirect, p));
    if (p) pclose(p);
    redirect[strcspn(redirect, "\n")] = '\0';

    portal_redirect_kind kind = PORTAL_REDIRECT_NOT_HANDLED;
    portal_session *first = NULL, *second = NULL;
    CHECK(portal_auth_handle_redirect(auth, redirect, &kind, &first, NULL, NULL) == PORTAL_OK);
    CHECK(kind == PORTAL_REDIRECT_AUTHENTICATED && first != NULL);
    CHECK(portal_auth_handle_redirect(auth, redirect, &kind, &second, NULL, NULL) == PORTAL_OK);
    CHECK(kind == PORTAL_REDIRECT_AUTHENTICATED && second != NULL);
    char *a = NULL, *b = NULL;
    CHECK(first && second && portal_session_copy_token(first, &a) == PORTAL_OK &&
          portal_session_copy_token(second, &b) == PORTAL_OK && strcmp(a, b) == 0);
    portal_session *restored = NULL;
    CHECK(portal_auth_restore_session(auth, &restored) == PORTAL_OK && restored &&
          strcmp(portal_session_get_end_user_id(restored), "eu-c") == 0);
    portal_string_free(a);
    portal_string_free(b);
    portal_session_free(first);
    portal_session_free(second);
    portal_session_free(restored);
    test_redirect_hijacking(auth);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);
    portal_auth_free(auth);
}

/* 16 threads, released together by a spin barrier, report the same rejected token through the
 * C ABI, 150 rounds with a fresh credential each: exactly one report per round says
 * "invalidated" and each listener is called once (at most once per credential, however many
 * requests are rejected at once). On KeePassXC, 30 rounds: each round's persist runs its
 * provider's prompts (about 2 s there), and 150 made this test the test command's long pole
 * (past 900 s beside other lanes); the race itself is in the library, and the other providers
 * run all 150. */
#define RACE_THREADS 16
#define RACE_ROUNDS 150
static int race_rounds = RACE_ROUNDS;
static struct {
    portal *client[RACE_ROUNDS];
    atomic_int wins[RACE_ROUNDS];
    atomic_int arrived;
    const char *token;
} race;

static void *race_worker(void *unused) {
    (void)unused;
    for (int round = 0; round < race_rounds; round++) {
        int target = RACE_THREADS * (round + 1), spins = 0;
        atomic_fetch_add(&race.arrived, 1);
        while (atomic_load(&race.arrived) < target)
            if (++spins % 64 == 0) sched_yield();
        bool invalidated = false;
        if (portal_report_unauthorized(race.client[round], race.token, &invalidated) == PORTAL_OK && invalidated)
            atomic_fetch_add(&race.wins[round], 1);
    }
    return NULL;
}

static void test_concurrent_reports_invalidate_once(void) {
    char token[256];
    portal_auth *auth = new_auth("race");
    issue_token("u-race", token, sizeof token); /* valid: the init requests get 200 */
    race.token = token;
    portal_session *sessions[RACE_ROUNDS] = {0};
    probe heard[RACE_ROUNDS][2];
    memset(heard, 0, sizeof heard);
    const char *provider = getenv("PORTAL_TEST_PROVIDER");
    race_rounds = provider && strncmp(provider, "keepassxc", 9) == 0 ? 30 : RACE_ROUNDS;
    for (int r = 0; r < race_rounds; r++) {
        atomic_init(&race.wins[r], 0);
        CHECK(portal_auth_persist_session(auth, "u-race", token, &sessions[r]) == PORTAL_OK);
        CHECK(portal_new(&race.client[r], sessions[r], NULL) == PORTAL_OK);
        for (int l = 0; l < 2; l++) {
            uint64_t h = 0;
            CHECK(portal_on_session_invalidated(race.client[r], on_invalidated, &heard[r][l], on_destroy, &h) == PORTAL_OK);
        }
    }
    atomic_init(&race.arrived, 0);
    pthread_t threads[RACE_THREADS];
    for (int t = 0; t < RACE_THREADS; t++) CHECK(pthread_create(&threads[t], NULL, race_worker, NULL) == 0);
    for (int t = 0; t < RACE_THREADS; t++) pthread_join(threads[t], NULL);
    int multiple = 0, none = 0, overheard = 0, unheard = 0;
    for (int r = 0; r < race_rounds; r++) {
        for (int l = 0; l < 2; l++) wait_for(&heard[r][l].calls, 1);
        portal_free(race.client[r]); /* waits for deliveries; destroy_notify runs */
        int wins = atomic_load(&race.wins[r]);
        multiple += wins > 1;
        none += wins == 0;
        for (int l = 0; l < 2; l++) {
            overheard += atomic_load(&heard[r][l].calls) > 1;
            unheard += atomic_load(&heard[r][l].calls) == 0;
        }
        portal_session_free(sessions[r]);
    }
    if (multiple || none || overheard || unheard)
        fprintf(stderr, "race: %d rounds invalidated more than once, %d never; listeners called twice: %d, never: %d\n",
                multiple, none, overheard, unheard);
    CHECK(multiple == 0);
    CHECK(none == 0);
    CHECK(overheard == 0);
    CHECK(unheard == 0);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);
    portal_auth_free(auth);
}

/* 8 processes restore the same stored session and report its rejection at the same moment (a
 * start time on CLOCK_REALTIME): in each, the report invalidates exactly once and the listener
 * runs once; no process sees a storage failure (another process deleting the same item first
 * is not an error); the item is gone afterwards. */
#define RACE_PROCESSES 8
static double now_realtime(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int race_child(const char *env_id, const char *token, const char *start) {
    portal_auth *auth = NULL;
    portal_session *session = NULL;
    portal *client = NULL;
    probe heard = {0};
    uint64_t h = 0;
    if (portal_auth_new(&auth, env_id, "app://cb", getenv("PORTAL_TEST_API_HOST")) != PORTAL_OK ||
        portal_auth_restore_session(auth, &session) != PORTAL_OK || !session ||
        portal_new(&client, session, NULL) != PORTAL_OK ||
        portal_on_session_invalidated(client, on_invalidated, &heard, on_destroy, &h) != PORTAL_OK) {
        printf("setup failed: %s\n", portal_last_error_message());
        return 1;
    }
    double at = strtod(start, NULL);
    while (now_realtime() < at) { /* spin: every process leaves at the same instant */ }
    bool invalidated = false, again = true;
    portal_status first = portal_report_unauthorized(client, token, &invalidated);
    portal_status second = portal_report_unauthorized(client, token, &again);
    wait_for(&heard.calls, 1);
    usleep(50000);
    int calls = atomic_load(&heard.calls);
    printf("status=%d invalidated=%d repeat=%d/%d listener=%d%s%s\n", first, invalidated, second, again, calls,
           first == PORTAL_OK ? "" : " error: ", first == PORTAL_OK ? "" : portal_last_error_message());
    portal_free(client);
    portal_session_free(session);
    portal_auth_free(auth);
    return first == PORTAL_OK && invalidated && second == PORTAL_OK && !again && calls == 1 ? 0 : 1;
}

static void test_concurrent_reports_in_processes(void) {
    char token[256], env_id[128], command[1024];
    snprintf(env_id, sizeof env_id, "c-inv-procrace-%d", (int)getpid());
    portal_auth *auth = NULL;
    CHECK(portal_auth_new(&auth, env_id, "app://cb", api_host) == PORTAL_OK);
    portal_session *session = sign_in(auth, "u-procrace", token, sizeof token);
    FILE *children[RACE_PROCESSES];
    double start = now_realtime() + 2.0; /* time to start, restore and connect */
    for (int i = 0; i < RACE_PROCESSES; i++) {
        snprintf(command, sizeof command, "'%s' --race-child '%s' '%s' %.6f 2>&1", self_path, env_id, token, start);
        children[i] = popen(command, "r");
        CHECK(children[i] != NULL);
    }
    int failed_children = 0;
    for (int i = 0; i < RACE_PROCESSES; i++) {
        if (!children[i]) continue;
        char line[512] = "";
        if (!fgets(line, sizeof line, children[i])) snprintf(line, sizeof line, "(no output)\n");
        if (pclose(children[i]) != 0) {
            failed_children++;
            fprintf(stderr, "race process %d: %s", i, line);
        }
    }
    CHECK(failed_children == 0);
    portal_session *restored = NULL;
    CHECK(portal_auth_restore_session(auth, &restored) == PORTAL_OK && restored == NULL);
    portal_session_free(restored);
    portal_session_free(session);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);
    portal_auth_free(auth);
}

/* Process B of the two-process test: persists the token read from stdin. */
static int persist_from_stdin(const char *env_id, const char *user) {
    char token[1024] = "";
    if (!fgets(token, sizeof token, stdin)) return 1;
    portal_auth *auth = NULL;
    int ok = portal_auth_new(&auth, env_id, "app://cb", getenv("PORTAL_TEST_API_HOST")) == PORTAL_OK &&
             portal_auth_persist_session(auth, user, token, NULL) == PORTAL_OK;
    if (!ok) fprintf(stderr, "process B: %s\n", portal_last_error_message());
    portal_auth_free(auth);
    return ok ? 0 : 1;
}

/* portal_free aborts the validation request still in flight and waits for it, so no library
 * thread is inside libcurl/OpenSSL when the host process exits (which crashed at exit before). */
static void test_free_aborts_requests_in_flight(void) {
    char token[256];
    portal_auth *auth = new_auth("abort");
    portal_session *session = sign_in(auth, "u-abort", token, sizeof token);
    char json[256];
    snprintf(json, sizeof json, "{\"route\":\"/api/v3/clients/me\",\"delayMs\":8000,\"count\":1}");
    CHECK(admin("faults", json, NULL, 0) == 0);
    portal *client = NULL;
    CHECK(portal_new(&client, session, NULL) == PORTAL_OK);
    usleep(300000); /* the validation request is now waiting on the server */
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    portal_free(client);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
    printf("portal_free with a request in flight returned after %.0f ms\n", ms);
    /* It waited for the request (which the server holds for 8 s) to be aborted: not instant, and
     * within libcurl's progress interval. */
    CHECK(ms > 20 && ms < 2500);
    char *copy = NULL;
    CHECK(portal_session_copy_token(session, &copy) == PORTAL_OK); /* an aborted request invalidates nothing */
    portal_string_free(copy);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);
    portal_session_free(session);
    portal_auth_free(auth);
}

/* Whether libcurl is mapped into this process (it is loaded on the first HTTP request only). */
static int curl_loaded(void) {
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[1024];
    int found = 0;
    while (maps && fgets(line, sizeof line, maps)) found |= strstr(line, "libcurl") != NULL;
    if (maps) fclose(maps);
    return found;
}

/* Restore-only hosts never load libcurl (and its ~30 dependencies); a Portal request does. */
static void test_libcurl_is_loaded_lazily(void) {
    CHECK(!curl_loaded());
    portal_auth *auth = new_auth("lazy");
    portal_session *session = NULL;
    CHECK(portal_auth_persist_session(auth, "u-lazy", "token-lazy", NULL) == PORTAL_OK);
    CHECK(portal_auth_restore_session(auth, &session) == PORTAL_OK && session != NULL);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);
    CHECK(!curl_loaded());
    portal *client = NULL;
    long http = 0;
    CHECK(portal_new_with_api_key(&client, "static-key", api_host) == PORTAL_OK);
    CHECK(portal_request(client, "GET", "/api/v3/auth/methods", NULL, &http, NULL, NULL) == PORTAL_OK);
    CHECK(curl_loaded());
    portal_free(client);
    portal_session_free(session);
    portal_auth_free(auth);
}

int main(int argc, char **argv) {
    self_path = argv[0];
    if (argc == 4 && strcmp(argv[1], "--persist") == 0) return persist_from_stdin(argv[2], argv[3]);
    if (argc == 5 && strcmp(argv[1], "--race-child") == 0) {
        api_host = getenv("PORTAL_TEST_API_HOST");
        return race_child(argv[2], argv[3], argv[4]);
    }
    api_url = getenv("PORTAL_TEST_API_URL");
    api_host = getenv("PORTAL_TEST_API_HOST");
    if (!api_url || !api_host || !getenv("PORTAL_TEST_KEYRING_PID")) {
        fprintf(stderr, "invalidation_test: run inside scripts/with-keyring.sh scripts/with-portal-api.sh\n");
        return 2;
    }
    test_libcurl_is_loaded_lazily(); /* first: nothing has made a request yet */
    test_replay_cancel_destroy();
    test_cancel_and_free_inside_callback();
    test_concurrent_reports_invalidate_once();
    test_concurrent_reports_in_processes();
    test_clear_session_and_api_key();
    test_newer_sign_in_by_another_process_survives();
    test_sign_in_flow();
    test_free_aborts_requests_in_flight(); /* last: it leaves nothing running at exit */
    printf("invalidation_test: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
