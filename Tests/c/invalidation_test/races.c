/* invalidation_test: one rejection reported at once by many threads, then by many processes. */
#include "invalidation_test.h"

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

void test_concurrent_reports_invalidate_once(void) {
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

int race_child(const char *env_id, const char *token, const char *start) {
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

void test_concurrent_reports_in_processes(void) {
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
    expect_nothing_stored(auth);
    portal_session_free(session);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);
    portal_auth_free(auth);
}
