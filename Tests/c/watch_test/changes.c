/* watch_test: the watch's arguments, the changes another process makes, a lock. */
#include "watch_test.h"

/* Argument checks: destroy_notify runs once before the failure returns. */
void test_arguments(portal_auth *auth) {
    int early = 0;
    portal_watch *watch = NULL;
    CHECK(portal_auth_watch(NULL, queue, on_event, &early, on_destroy, &watch) == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(portal_auth_watch(auth, queue, NULL, &early, on_destroy, &watch) == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(portal_auth_watch(auth, queue, on_event, &early, on_destroy, NULL) == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(early == 3 && watch == NULL);
    portal_watch_free(NULL);
}

/* Persist, clear and invalidate by process A, and items the watch must not hear: another
 * environment's, another schema's, and a look-alike of ours. */
void test_changes_by_another_process(const char *env, const char *other) {
    CHECK(run_act("persist", env, "u1") == 0);
    expect_from(PORTAL_WATCH_SIGNED_IN, "u1", PORTAL_WATCH_ORIGIN_OTHER_PROCESS, "persist by another process");
    expect_quiet(500, "one persist, one event");
    STEP("persist in A: B saw signed-in u1, once\n");

    CHECK(run_act("persist", other, "someone") == 0);
    CHECK(system("printf foreign | \"$PORTAL_TEST_KEYRINGCTL\" store --schema org.example.Other "
                 "auth_environment_id=\"$WATCH_ENV\" >/dev/null") >= 0);
    CHECK(system("printf look-alike | \"$PORTAL_TEST_KEYRINGCTL\" store --schema io.portalhq.PortalKeyring.Session "
                 "auth_environment_id=\"$WATCH_ENV\"x session_generation=0 persisted_at=1 >/dev/null") >= 0);
    expect_quiet(500, "other environment and foreign items");
    STEP("another environment's persist and foreign items: no event\n");

    CHECK(run_act("clear", env, NULL) == 0);
    expect_from(PORTAL_WATCH_SIGNED_OUT, NULL, PORTAL_WATCH_ORIGIN_OTHER_PROCESS, "clear by another process");
    CHECK(run_act("persist", env, "u2") == 0);
    expect_from(PORTAL_WATCH_SIGNED_IN, "u2", PORTAL_WATCH_ORIGIN_OTHER_PROCESS, "second sign-in");
    CHECK(run_act("invalidate", env, NULL) == 0);
    expect_from(PORTAL_WATCH_SIGNED_OUT, NULL, PORTAL_WATCH_ORIGIN_OTHER_PROCESS, "invalidation by another process");
    expect_quiet(500, "clear, persist, invalidate: one event each");
    STEP("clear, persist, invalidate in A: signed-out, signed-in u2, signed-out, in order, once each\n");
}

/* The watching process's own persist, clear and 401 are reported as its own; another process's
 * sign-out of a session this process stored is another's. */
void test_own_changes(portal_auth *auth, const char *env) {
    portal_session *s = NULL;
    CHECK(portal_auth_persist_session(auth, "own1", "token-own", &s) == PORTAL_OK);
    portal_session_free(s);
    expect_from(PORTAL_WATCH_SIGNED_IN, "own1", PORTAL_WATCH_ORIGIN_THIS_PROCESS, "own persist");
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);
    expect_from(PORTAL_WATCH_SIGNED_OUT, NULL, PORTAL_WATCH_ORIGIN_THIS_PROCESS, "own clear");
    CHECK(portal_auth_persist_session(auth, "own2", "token-own", &s) == PORTAL_OK);
    portal_session_free(s);
    expect_from(PORTAL_WATCH_SIGNED_IN, "own2", PORTAL_WATCH_ORIGIN_THIS_PROCESS, "own second persist");
    CHECK(invalidate_stored(auth) == PORTAL_OK);
    expect_from(PORTAL_WATCH_SIGNED_OUT, NULL, PORTAL_WATCH_ORIGIN_THIS_PROCESS, "own 401");
    CHECK(portal_auth_persist_session(auth, "own3", "token-own", &s) == PORTAL_OK);
    portal_session_free(s);
    expect_from(PORTAL_WATCH_SIGNED_IN, "own3", PORTAL_WATCH_ORIGIN_THIS_PROCESS, "own third persist");
    CHECK(run_act("clear", env, NULL) == 0);
    expect_from(PORTAL_WATCH_SIGNED_OUT, NULL, PORTAL_WATCH_ORIGIN_OTHER_PROCESS, "another's clear of our sign-in");
    expect_quiet(500, "own changes: one event each");
    STEP("own persist, clear and 401: this process; another's clear of our sign-in: another process\n");
}

/* A lock is LOCKED, never SIGNED_OUT; the unlock gives the end user back. */
void test_lock(const char *env, int in_sandbox) {
    CHECK(run_act("persist", env, "u3") == 0);
    expect(PORTAL_WATCH_SIGNED_IN, "u3", "sign-in before the lock");
    if (in_sandbox) {
        printf("skip lock and unlock: the host's keyring, out of reach in a Flatpak sandbox\n");
    } else {
        CHECK(keyringctl("lock", NULL, NULL, NULL, NULL) == 0);
        expect(PORTAL_WATCH_LOCKED, NULL, "locked collection");
        expect_quiet(500, "locked is not signed out");
        CHECK(keyringctl("unlock", NULL, NULL, NULL, NULL) == 0);
        expect(PORTAL_WATCH_SIGNED_IN, "u3", "unlocked again");
        STEP("lock: locked (not signed-out); unlock: signed-in u3\n");
    }
}
