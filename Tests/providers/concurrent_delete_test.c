/*
 * concurrent_delete_test — processes (and threads) clearing the same session at once never run two
 * delete prompts for one item in a row (KeePassXC 2.7.4 crashes then), and the provider survives.
 *
 * KeePassXC answers every Item.Delete with a prompt. Two Item.Delete calls on one item give two
 * prompts; running the second after the first deleted the item makes KeePassXC 2.7.4 dereference
 * the entry it already released (SIGSEGV; reproduced with two gdbus Item.Delete calls and their
 * two Prompt.Prompt calls, docs/providers.md). The library runs prompts one at a time per
 * process, and a delete prompt whose item is gone by its turn is not run (Prompts.run): that
 * check and the prompt are one round trip apart, so across processes the window is narrowed,
 * not closed.
 *
 * Each round: 8 child processes (forked before this process uses D-Bus; each warms its own
 * connection with a restore) wait on a pipe; the parent persists the session and releases them;
 * each clears it; then 8 threads of the parent do the same. Checks: every clear succeeds, nothing
 * is left, and the provider process is the same, alive one afterwards.
 * Usage: concurrent_delete_test [ROUNDS] (default 10). Runs inside scripts/with-keyring.sh;
 * needs PORTAL_TEST_KEYRINGCTL. Exit 0 when every check passed.
 */
#define _GNU_SOURCE
#include <portal_keyring.h>
#include "../c/check.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 8

static portal_auth *auth;
static pthread_barrier_t barrier;

static void *clear(void *unused) {
    (void)unused;
    pthread_barrier_wait(&barrier);
    portal_status st = portal_auth_clear_persisted_session(auth);
    CHECK_MSG(st == PORTAL_OK, "concurrent clear: %s: %s", portal_status_str(st), portal_last_error_message());
    return NULL;
}

static long provider_pid(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/keyring.pid", getenv("PORTAL_TEST_KEYRING_DIR"));
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1) pid = 0;
        fclose(f);
    }
    return pid ? pid : atol(getenv("PORTAL_TEST_KEYRING_PID"));
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    alarm(60 + 10 * rounds);
    if (!getenv("PORTAL_TEST_KEYRING_DIR") || !getenv("PORTAL_TEST_KEYRING_PID")) {
        fprintf(stderr, "concurrent_delete_test: run inside scripts/with-keyring.sh\n");
        return 2;
    }
    long pid = provider_pid();
    char env[64];
    snprintf(env, sizeof env, "concurrent-%ld", (long)getpid());
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* Processes first: they must fork before this process uses D-Bus. */
    int children_failed = 0;
    for (int round = 0; round < rounds && kill((pid_t)pid, 0) == 0; round++) {
        int gate[2];
        if (pipe(gate) != 0) return 2;
        pid_t kids[THREADS];
        for (int i = 0; i < THREADS; i++) {
            kids[i] = fork();
            if (kids[i] == 0) {
                close(gate[1]);
                portal_auth *mine = NULL;
                if (portal_auth_new(&mine, env, "concurrent://cb", NULL) != PORTAL_OK) _exit(3);
                portal_auth_set_keyring_timeouts(mine, 10000, 5000);
                portal_session *none = NULL;
                portal_auth_restore_session(mine, &none); /* warm connection */
                portal_session_free(none);
                char go;
                if (read(gate[0], &go, 1) != 1) _exit(4);
                _exit(portal_auth_clear_persisted_session(mine) == PORTAL_OK ? 0 : 1);
            }
        }
        close(gate[0]);
        pid_t persister = fork();
        if (persister == 0) {
            portal_auth *mine = NULL;
            if (portal_auth_new(&mine, env, "concurrent://cb", NULL) != PORTAL_OK) _exit(3);
            _exit(portal_auth_persist_session(mine, "eu", "token", NULL) == PORTAL_OK ? 0 : 1);
        }
        int status = 0;
        waitpid(persister, &status, 0);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "round %d: persist", round);
        usleep(200000); /* the children's warm-up restores are done */
        char go[THREADS] = {0};
        if (write(gate[1], go, THREADS) != THREADS) return 2;
        close(gate[1]);
        for (int i = 0; i < THREADS; i++) {
            waitpid(kids[i], &status, 0);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) children_failed++;
        }
    }
    CHECK_MSG(children_failed == 0, "%d concurrent clears in child processes failed", children_failed);
    CHECK_MSG(kill((pid_t)pid, 0) == 0, "the provider (pid %ld) survived the processes' clears", pid);
    CHECK_MSG(portal_auth_new(&auth, env, "concurrent://cb", NULL) == PORTAL_OK, "portal_auth_new");
    portal_auth_set_keyring_timeouts(auth, 10000, 5000);

    for (int round = 0; round < rounds && kill((pid_t)pid, 0) == 0; round++) {
        CHECK_MSG(portal_auth_persist_session(auth, "eu", "token", NULL) == PORTAL_OK, "persist: %s",
              portal_last_error_message());
        pthread_t threads[THREADS];
        pthread_barrier_init(&barrier, NULL, THREADS);
        for (int i = 0; i < THREADS; i++) pthread_create(&threads[i], NULL, clear, NULL);
        for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
        pthread_barrier_destroy(&barrier);
        portal_session *session = NULL;
        portal_status st = portal_auth_restore_session(auth, &session);
        CHECK_MSG(st == PORTAL_OK && !session, "round %d: after the clears: %s, %s", round, portal_status_str(st),
              session ? "a session" : "signed out");
        portal_session_free(session);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK_MSG(kill((pid_t)pid, 0) == 0 && provider_pid() == pid, "the provider (pid %ld) is still running", pid);
    printf("  %d rounds of %d concurrent clears by processes, then by threads: %.0f ms per round; provider pid %ld %s\n", rounds, THREADS,
           ((t1.tv_sec - t0.tv_sec) * 1000.0 + (t1.tv_nsec - t0.tv_nsec) / 1e6) / rounds, pid,
           kill((pid_t)pid, 0) == 0 ? "alive" : "GONE (crashed)");
    portal_auth_free(auth);
    printf("concurrent_delete_test: %d of %d checks passed\n", checks - failures, checks);
    return failures ? 1 : 0;
}
