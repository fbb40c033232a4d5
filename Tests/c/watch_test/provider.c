/* watch_test: a provider restart, a burst of persists, an over-matched look-alike, an idle watch. */
#include "watch_test.h"
#include "../provider_pid.h"

/* A provider restart is a RESYNC; events resume after it. */
void test_provider_restart(const char *env, int in_sandbox) {
    /* Tests/c/run.sh sets it; Tests/mutants/run.sh runs this from the tree's top directory. */
    const char *restart = getenv("PORTAL_TEST_KEYRING_RESTART");
    if (!restart && access("scripts/keyring-restart.sh", X_OK) == 0) restart = "scripts/keyring-restart.sh";
    if (restart && !in_sandbox) {
        char *rargv[] = {(char *)restart, "--unlocked", NULL};
        CHECK(run_quiet(rargv) == 0);
        /* A provider shutting down may first close (lock) its collection, as kwalletd5 did on a
         * loaded machine: LOCKED events before the RESYNC are the old provider's last state, not
         * a wrong answer. They are skipped (a SIGNED_OUT is not), then the RESYNC is required. */
        int at = nevents;
        double until = now_ms() + 10000;
        for (;;) {
            pump(until, at + 1);
            if (nevents > at && events[at].kind == PORTAL_WATCH_LOCKED) {
                printf("provider restart: a LOCKED from the provider shutting down, skipped\n");
                at++;
                continue;
            }
            break;
        }
        checks++;
        if (!(nevents > at && events[at].kind == PORTAL_WATCH_RESYNC)) {
            failures++;
            fprintf(stderr, "provider restart: expected resync, got %s\n",
                    nevents > at ? kind_name(events[at].kind) : "nothing in 10 s");
        }
        pump(now_ms() + 300, nevents + 1); /* the new provider's own signals change nothing */
        CHECK(run_act("persist", env, "u4") == 0);
        expect(PORTAL_WATCH_SIGNED_IN, "u4", "events resume after the restart");
        STEP("provider restart: resync, then signed-in u4\n");
    } else {
        STEP("skip provider restart: %s\n", in_sandbox ? "no provider daemon in a Flatpak sandbox (the file keyring)"
                                                      : "PORTAL_TEST_KEYRING_RESTART is not set");
    }
}

/* A stopped provider: this process's restore fails at the call deadline; no event while the
 * keyring cannot be read; once the provider resumes (no signal says so), AVAILABLE, once, and
 * nothing else (the state did not change). */
void test_stalled_provider(portal_auth *auth, int in_sandbox) {
    pid_t pid = in_sandbox ? 0 : test_provider_pid();
    if (pid == 0) {
        STEP("skip stalled provider: %s\n", in_sandbox ? "no provider daemon in a Flatpak sandbox" : "no provider pid");
        return;
    }
    CHECK(portal_auth_set_keyring_timeouts(auth, 1000, 30000) == PORTAL_OK);
    CHECK(kill(pid, SIGSTOP) == 0);
    portal_session *s = NULL;
    CHECK(portal_auth_restore_session(auth, &s) == PORTAL_ERR_SESSION_STORAGE);
    portal_session_free(s);
    expect_quiet(1500, "stopped provider");
    CHECK(kill(pid, SIGCONT) == 0);
    expect(PORTAL_WATCH_AVAILABLE, NULL, "provider resumed");
    expect_quiet(1500, "available once, then quiet");
    CHECK(portal_auth_set_keyring_timeouts(auth, 5000, 30000) == PORTAL_OK);
    STEP("stalled provider: restore failed, no event; resumed: available, once\n");
}

/* 1,000 persists back to back: a bounded number of events, every one SIGNED_IN, the last one's
 * end user the last persisted. */
void test_burst(const char *env, const char *provider) {
    /* KeePassXC 2.7.4 segfaults within a few hundred persists in a row from one process, with or
     * without a watch (seen at the 104th to the 496th): 30 there. */
    int rounds = provider && strncmp(provider, "keepassxc", 9) == 0 ? 30 : 1000;
    char rounds_text[16], last_user[32];
    snprintf(rounds_text, sizeof rounds_text, "%d", rounds);
    snprintf(last_user, sizeof last_user, "b%d", rounds - 1);
    int burst_start = nevents;
    double t0 = now_ms();
    char *bargv[] = {self_path, "act", "burst", (char *)env, rounds_text, NULL};
    pid_t pid;
    CHECK(posix_spawn(&pid, self_path, NULL, NULL, bargv, environ) == 0);
    int status = -1;
    while (waitpid(pid, &status, WNOHANG) == 0) pump(now_ms() + 50, 1 << 30);
    double duration = now_ms() - t0;
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The final state arrives: wait until the last event names b999. */
    double until = now_ms() + 10000;
    while (now_ms() < until && !(nevents > burst_start && strcmp(events[nevents - 1].user, last_user) == 0))
        pump(now_ms() + 100, nevents + 1);
    int burst = nevents - burst_start;
    int bound = 2 + (int)((now_ms() - t0) / 100);
    CHECK(burst >= 1 && nevents <= (int)(sizeof events / sizeof events[0]));
    CHECK(nevents > burst_start && strcmp(events[nevents - 1].user, last_user) == 0);
    /* The promise is a rate (one read per 100 ms), not a count: a loaded machine persists more
     * slowly and so sees more events (CI: 1,000 persists in 30 s gave 258, against 53-109 quiet). */
    CHECK(burst <= bound);
    for (int i = burst_start; i < nevents; i++) {
        /* On one line that CI's excerpt keeps (it greps for "check failed"): which kind, where. */
        if (events[i].kind != PORTAL_WATCH_SIGNED_IN)
            fprintf(stderr, "check failed: burst event %d of %d is %s, not signed-in, %.0f ms after the burst began (%.0f ms in all; the event before: %s %s)\n",
                    i - burst_start, burst, kind_name(events[i].kind), events[i].at - t0, duration,
                    i > 0 ? kind_name(events[i - 1].kind) : "-", i > 0 ? events[i - 1].user : "");
        CHECK(events[i].kind == PORTAL_WATCH_SIGNED_IN);
    }
    expect_quiet(500, "after the burst");
    STEP("burst: %d persists in %.0f ms -> %d events (bound %d), last signed-in %s\n", rounds, duration, burst, bound,
           nevents > burst_start ? events[nevents - 1].user : "-");
}

void test_lookalike(void) {
    /* Our schema and environment plus a final line end, holding a version-1 document (which
     * names no auth environment) of another end user: KeePassXC's search returns it for ours
     * (docs/providers.md, "Searches that over-match"); only the exact attribute check keeps it
     * out. Stored after the burst: KeePassXC 2.7.4 crashed during the burst with it stored. */
    CHECK(system("printf '%s' '{\"clientSessionToken\":\"t\",\"endUserId\":\"intruder\",\"g\":\"ffff\","
                 "\"t\":9999999999999999,\"v\":1}' | \"$PORTAL_TEST_KEYRINGCTL\" store "
                 "--schema io.portalhq.PortalKeyring.Session --content-type application/octet-stream "
                 "auth_environment_id=\"$WATCH_ENV\n\" session_generation=ffff persisted_at=9999999999999999 "
                 ">/dev/null") == 0);
    expect_quiet(500, "an over-matched look-alike item");
    STEP("a look-alike item that KeePassXC's search over-matches: no event\n");
}

/* An idle watch sleeps: its thread is not woken in 10 s, and nothing is delivered. */
void test_idle(void) {
    long watcher = switches("portal-watch"), all = switches(NULL);
    int idle_before = nevents;
    pump(now_ms() + 10000, 1 << 30);
    long watcher_after = switches("portal-watch"), all_after = switches(NULL);
    CHECK(watcher >= 0 && watcher_after == watcher);
    CHECK(nevents == idle_before);
    STEP("idle 10 s: portal-watch thread %ld wake-ups, whole process %ld\n", watcher_after - watcher,
           all_after - all);
}
