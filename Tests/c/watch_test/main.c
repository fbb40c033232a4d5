/*
 * watch_test — portal_auth_watch() across processes, on the real keyring.
 *
 * This process is B: it watches auth environment ENV on a pollable completion queue. Every
 * change is made by another process, A (this binary re-executed as `watch_test act ...`), or by
 * keyringctl / scripts/keyring-restart.sh. B checks, in order:
 *   - argument checks: NULL auth / callback / watch_out fail with destroy_notify run once;
 *   - A persists u1            -> exactly one SIGNED_IN "u1";
 *   - A persists in ENV-other, keyringctl stores an item of another schema with ENV's
 *     auth_environment_id, one of our schema for another environment, and one whose
 *     auth_environment_id is ENV plus a line end (KeePassXC's search over-matches it) holding a
 *     version-1 document of another end user -> nothing (500 ms);
 *   - A clears                 -> SIGNED_OUT;
 *   - A persists u2            -> SIGNED_IN "u2";
 *   - A invalidates (restore, portal_new against the loopback Portal API, report_unauthorized)
 *                              -> SIGNED_OUT; each of these with origin OTHER_PROCESS;
 *   - B itself persists, clears, persists, invalidates by a 401, persists -> SIGNED_IN,
 *     SIGNED_OUT, SIGNED_IN, SIGNED_OUT, SIGNED_IN, each with origin THIS_PROCESS
 *     (portal_watch_current_origin()); then A clears -> SIGNED_OUT, OTHER_PROCESS;
 *   - A persists u3, keyringctl lock -> SIGNED_IN "u3", LOCKED (never SIGNED_OUT);
 *     keyringctl unlock        -> SIGNED_IN "u3";
 *   - provider restart (PORTAL_TEST_KEYRING_RESTART, scripts/keyring-restart.sh --unlocked)
 *                              -> RESYNC, then A persists u4 -> SIGNED_IN "u4";
 *   - provider SIGSTOPped: B's restore fails (1 s call deadline) -> nothing; SIGCONT
 *                              -> AVAILABLE, once, then nothing (idle again);
 *   - burst: A persists b0..b999 back to back (b0..b29 on KeePassXC, which crashes in long
 *     bursts) -> a bounded number of events (<= 2 + duration / 100 ms), every one SIGNED_IN,
 *     the last "b999";
 *   - idle: 10 s without changes -> zero voluntary context switches of the "portal-watch" thread
 *     (/proc/self/task/N/status), and no event;
 *   - portal_watch_free: destroy_notify once, no event afterwards.
 * Each expected event must arrive within 10 s; "nothing" is a poll() of the queue's fd for 500 ms.
 * Needs scripts/with-keyring.sh, scripts/with-portal-api.sh and PORTAL_TEST_KEYRINGCTL.
 */
#include "watch_test.h"

int failures_noted;

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "act") == 0) return act(argc, argv);
    if (!getenv("PORTAL_TEST_KEYRINGCTL") || !getenv("PORTAL_TEST_API_HOST")) {
        fprintf(stderr, "watch_test: needs PORTAL_TEST_KEYRINGCTL and scripts/with-portal-api.sh\n");
        return 2;
    }
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (n <= 0) return 2;
    self_path[n] = '\0';
    setvbuf(stdout, NULL, _IOLBF, 0);

    char env[64], other[80];
    snprintf(env, sizeof env, "c-watch-%d", (int)getpid());
    snprintf(other, sizeof other, "%s-other", env);
    setenv("WATCH_ENV", env, 1);
    portal_auth *auth = NULL;
    CHECK(portal_auth_new(&auth, env, "app://cb", getenv("PORTAL_TEST_API_HOST")) == PORTAL_OK);
    CHECK(portal_completion_queue_new_pollable(&queue) == PORTAL_OK);

    test_arguments(auth);
    portal_watch *watch = NULL;
    CHECK(portal_auth_watch(auth, queue, on_event, &destroyed, on_destroy, &watch) == PORTAL_OK && watch);
    test_changes_by_another_process(env, other);
    test_own_changes(auth, env);
    /* In a Flatpak sandbox (Tests/flatpak/c.sh) the host's keyring and its daemon are out of
     * reach: Tests/flatpak/run.sh locks the host's keyring and stops the portal from outside. */
    const char *provider = getenv("PORTAL_TEST_PROVIDER");
    int in_sandbox = provider && strcmp(provider, "flatpak") == 0;
    test_lock(env, in_sandbox);
    test_provider_restart(env, in_sandbox);
    test_stalled_provider(auth, in_sandbox);
    test_burst(env, provider);
    test_lookalike();
    test_idle();

    portal_watch_free(watch);
    CHECK(destroyed == 1);
    portal_watch_free(watch); /* ignored */
    CHECK(run_act("clear", env, NULL) == 0);
    expect_quiet(300, "freed watch");
    CHECK(destroyed == 1);

    portal_completion_queue_free(queue);
    portal_auth_free(auth);
    keyringctl("delete-all", "--schema", "org.example.Other", NULL, NULL);
    if (failures) {
        fprintf(stderr, "watch_test: %d of %d checks FAILED\n", failures, checks);
        return 1;
    }
    printf("watch_test: all %d checks passed\n", checks);
    return 0;
}
