/* fault_test: condition 14, callbacks that call back into the library. */
#include "fault_test.h"

static pthread_mutex_t re_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t re_cond = PTHREAD_COND_INITIALIZER;
static int re_done, re_replayed, re_destroyed, re_l3_called;
static portal_auth *re_auth;
static portal *re_portal;
static uint64_t re_handle[4];

static void re_signal(int *counter) {
    pthread_mutex_lock(&re_lock);
    (*counter)++;
    pthread_cond_broadcast(&re_cond);
    pthread_mutex_unlock(&re_lock);
}

static void re_replay_cb(void *d) { (void)d; re_signal(&re_replayed); }
static void re_destroy(void *d) { (void)d; re_signal(&re_destroyed); }

/* Listener 0: keyring I/O from the delivery thread (restore, clear, restore). */
static void re_keyring_cb(void *d) {
    (void)d;
    portal_session *s = NULL;
    portal_status a = portal_auth_restore_session(re_auth, &s);
    portal_session_free(s);
    portal_status b = portal_auth_clear_persisted_session(re_auth);
    portal_status c = portal_auth_restore_session(re_auth, &s);
    portal_session_free(s);
    if (a != PORTAL_OK || b != PORTAL_OK || c != PORTAL_OK) fail("keyring calls inside a callback: %d %d %d", a, b, c);
    else ok("restore, clear, restore inside a callback");
    re_signal(&re_done);
}

/* Listener 1: cancels itself and listener 2, reports again, registers a new listener. */
static void re_cancel_cb(void *d) {
    (void)d;
    portal_status a = portal_listener_cancel(re_portal, re_handle[1]);
    portal_status b = portal_listener_cancel(re_portal, re_handle[2]);
    bool inv = true;
    portal_status c = portal_report_unauthorized(re_portal, "whatever", &inv);
    uint64_t h = 0;
    portal_status e = portal_on_session_invalidated(re_portal, re_replay_cb, NULL, re_destroy, &h);
    if (a || b || c || e || inv) fail("cancel/report/register inside a callback: %d %d %d %d inv=%d", a, b, c, e, inv);
    else ok("cancel own and another handle, report again, register a listener inside a callback");
    re_signal(&re_done);
}

static void re_l2_cb(void *d) {
    (void)d;
    re_signal(&re_l3_called); /* may run before listener 1 cancels it: callbacks of one portal run in turn */
}

/* Listener 3: frees the portal from inside its own callback. */
static void re_free_cb(void *d) {
    (void)d;
    portal_free(re_portal);
    ok("portal_free inside a callback returned");
    re_signal(&re_done);
}

void test_reentry(void) {
    check_context = "14 reentrant callbacks";
    re_auth = new_auth("fault-reentry");
    portal_session *session = NULL;
    if (portal_auth_persist_session(re_auth, "user-14", "token-14", &session) != PORTAL_OK ||
        portal_new(&re_portal, session, "127.0.0.1:9") != PORTAL_OK) {
        fail("set-up");
        return;
    }
    portal_on_session_invalidated(re_portal, re_keyring_cb, NULL, re_destroy, &re_handle[0]);
    portal_on_session_invalidated(re_portal, re_cancel_cb, NULL, re_destroy, &re_handle[1]);
    portal_on_session_invalidated(re_portal, re_l2_cb, NULL, re_destroy, &re_handle[2]);
    portal_on_session_invalidated(re_portal, re_free_cb, NULL, re_destroy, &re_handle[3]);
    bool invalidated = false;
    double t0 = now_ms();
    portal_status st = portal_report_unauthorized(re_portal, "token-14", &invalidated);
    CHECK_MSG(st == PORTAL_OK && invalidated, "the 401 report invalidated the session");
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 15;
    pthread_mutex_lock(&re_lock);
    while (re_done < 3 || re_destroyed < 4) {
        if (pthread_cond_timedwait(&re_cond, &re_lock, &until) == ETIMEDOUT) break;
    }
    int done = re_done, destroyed_n = re_destroyed;
    pthread_mutex_unlock(&re_lock);
    double t1 = now_ms();
    CHECK_MSG(done == 3, "all three reentrant callbacks returned (%d), no deadlock", done);
    CHECK_MSG(destroyed_n >= 4, "every destroy_notify ran (%d)", destroyed_n);
    printf("time  [%s] deliveries with reentrant calls finished in %.0f ms\n", check_context, t1 - t0);
    CHECK_MSG(re_l3_called <= 1, "the cancelled listener ran at most once (%d)", re_l3_called);
    char *tok = NULL;
    CHECK_MSG(portal_session_copy_token(session, &tok) == PORTAL_ERR_SESSION_INVALIDATED, "the session is invalidated");
    portal_session_free(session);
    portal_auth_free(re_auth);
}
