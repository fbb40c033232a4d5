/*
 * invalidate.c — invalidation under load: THREADS threads call portal_report_unauthorized() with
 * the session's token at the same moment (released by one barrier); the listener must run
 * exactly once per round.
 *
 *   invalidate ROUNDS THREADS
 *
 * Each round persists a fresh session, creates a portal for it (its validation request goes to a
 * closed loopback port, 127.0.0.1:9: a network error, which never invalidates), registers one
 * listener (callback + destroy-notify), releases the threads, joins them, and waits for the
 * destroy-notify (which the library runs after the only delivery returns). Prints one line per
 * round: "report_to_callback_ns report_call_ns callbacks invalidated_true" where
 * report_to_callback is from the winning call's entry (the one that got invalidated_out = true)
 * to the callback's entry, and report_call is how long that winning call took (it deletes the
 * stored item before it returns).
 * Exit 3 if a round saw the callback other than exactly once, or other than exactly one call
 * reporting invalidated_out = true; 2 on any other failure.
 */
#define _GNU_SOURCE
#include "bench_common.h"

#include <portal_keyring.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENV "bench-invalidate"

static pthread_barrier_t barrier;
static portal *current;
static atomic_int callbacks, winners, errors;
static _Atomic uint64_t callback_at, winner_start, winner_end;
static sem_t released;

static void on_invalidated(void *user_data) {
    (void)user_data;
    uint64_t now = bench_now_ns();
    if (atomic_fetch_add(&callbacks, 1) == 0) atomic_store(&callback_at, now);
}

static void on_destroy(void *user_data) {
    (void)user_data;
    sem_post(&released);
}

static void *reporter(void *arg) {
    (void)arg;
    pthread_barrier_wait(&barrier);
    bool invalidated = false;
    uint64_t t0 = bench_now_ns();
    portal_status st = portal_report_unauthorized(current, BENCH_TOKEN, &invalidated);
    uint64_t t1 = bench_now_ns();
    if (st != PORTAL_OK) {
        if (atomic_fetch_add(&errors, 1) == 0)
            fprintf(stderr, "invalidate: portal_report_unauthorized: %s: %s\n", portal_status_str(st),
                    portal_last_error_message());
    }
    if (invalidated) {
        atomic_fetch_add(&winners, 1);
        atomic_store(&winner_start, t0);
        atomic_store(&winner_end, t1);
    }
    return NULL;
}

static void die(const char *what, portal_status st) {
    fprintf(stderr, "invalidate: %s: %s: %s\n", what, portal_status_str(st), portal_last_error_message());
    exit(2);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s ROUNDS THREADS\n", argv[0]);
        return 2;
    }
    int rounds = atoi(argv[1]), nthreads = atoi(argv[2]);
    if (rounds < 1 || nthreads < 1) return 2;
    portal_auth *auth = NULL;
    portal_status st = portal_auth_new(&auth, ENV, BENCH_REDIRECT_URL, "127.0.0.1:9");
    if (st != PORTAL_OK) die("portal_auth_new", st);
    pthread_t *threads = calloc((size_t)nthreads, sizeof *threads);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    sem_init(&released, 0, 0);
    int violations = 0;

    for (int r = 0; r < rounds; r++) {
        portal_session *session = NULL;
        st = portal_auth_persist_session(auth, BENCH_END_USER_ID, BENCH_TOKEN, &session);
        if (st != PORTAL_OK) die("portal_auth_persist_session", st);
        st = portal_new(&current, session, NULL);
        if (st != PORTAL_OK) die("portal_new", st);
        atomic_store(&callbacks, 0);
        atomic_store(&winners, 0);
        atomic_store(&errors, 0);
        uint64_t handle = 0;
        st = portal_on_session_invalidated(current, on_invalidated, NULL, on_destroy, &handle);
        if (st != PORTAL_OK) die("portal_on_session_invalidated", st);

        pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
        for (int i = 0; i < nthreads; i++) {
            int err = pthread_create(&threads[i], &attr, reporter, NULL);
            if (err) {
                fprintf(stderr, "invalidate: pthread_create: %s\n", strerror(err));
                return 2;
            }
        }
        for (int i = 0; i < nthreads; i++) pthread_join(threads[i], NULL);
        pthread_barrier_destroy(&barrier);

        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 10;
        while (sem_timedwait(&released, &deadline) != 0) {
            if (errno == EINTR) continue;
            fprintf(stderr, "invalidate: round %d: the listener was not released within 10 s\n", r);
            return 3;
        }
        int n_cb = atomic_load(&callbacks), n_win = atomic_load(&winners);
        if (n_cb != 1 || n_win != 1) {
            fprintf(stderr, "invalidate: round %d: callback ran %d times, %d calls reported invalidated_out\n",
                    r, n_cb, n_win);
            violations++;
        }
        if (atomic_load(&errors)) return 2;
        printf("%llu %llu %d %d\n",
               (unsigned long long)(n_win ? atomic_load(&callback_at) - atomic_load(&winner_start) : 0),
               (unsigned long long)(n_win ? atomic_load(&winner_end) - atomic_load(&winner_start) : 0), n_cb, n_win);
        fflush(stdout);
        /* The token is gone: the session reports PORTAL_ERR_SESSION_INVALIDATED. */
        char *token = NULL;
        if (portal_session_copy_token(session, &token) != PORTAL_ERR_SESSION_INVALIDATED) {
            fprintf(stderr, "invalidate: round %d: the session still hands out its token\n", r);
            portal_string_free(token);
            violations++;
        }
        portal_free(current);
        portal_session_free(session);
    }
    portal_auth_clear_persisted_session(auth);
    portal_auth_free(auth);
    free(threads);
    return violations ? 3 : 0;
}
