/* fault_test: condition 11, many callers at once: 16 threads, and one process of the 8-process run. */
#include "fault_test.h"

#define THREADS 16
static pthread_barrier_t barrier;
static int rounds = 100;
long mixes, storage_errors, other_errors, sessions_seen, signed_out_seen;

/* The token is derived from the user id, so a restored pair that does not match is a mix. */
static void token_for(const char *user, char *token, size_t cap) { snprintf(token, cap, "tok:%s:%s", user, user); }

void churn(const char *env, int id, int n) {
    portal_auth *auth = NULL;
    if (portal_auth_new(&auth, env, REDIRECT, NULL) != PORTAL_OK) {
        __atomic_add_fetch(&other_errors, 1, __ATOMIC_SEQ_CST);
        return;
    }
    for (int i = 0; i < n; i++) {
        char user[64], token[160];
        snprintf(user, sizeof user, "u%d-%d", id, i);
        token_for(user, token, sizeof token);
        portal_status st = portal_auth_persist_session(auth, user, token, NULL);
        if (st == PORTAL_ERR_SESSION_STORAGE) __atomic_add_fetch(&storage_errors, 1, __ATOMIC_SEQ_CST);
        else if (st != PORTAL_OK) __atomic_add_fetch(&other_errors, 1, __ATOMIC_SEQ_CST);
        if (st != PORTAL_OK) fprintf(stderr, "persist: %s\n", portal_last_error_message());
        portal_session *s = NULL;
        st = portal_auth_restore_session(auth, &s);
        if (st == PORTAL_OK && s) {
            __atomic_add_fetch(&sessions_seen, 1, __ATOMIC_SEQ_CST);
            char *got = NULL;
            char want[160];
            token_for(portal_session_get_end_user_id(s), want, sizeof want);
            if (portal_session_copy_token(s, &got) != PORTAL_OK || strcmp(got, want) != 0)
                __atomic_add_fetch(&mixes, 1, __ATOMIC_SEQ_CST);
            portal_string_free(got);
        } else if (st == PORTAL_OK) {
            __atomic_add_fetch(&signed_out_seen, 1, __ATOMIC_SEQ_CST);
        } else {
            fprintf(stderr, "restore: %s\n", portal_last_error_message());
            __atomic_add_fetch(st == PORTAL_ERR_SESSION_STORAGE ? &storage_errors : &other_errors, 1, __ATOMIC_SEQ_CST);
        }
        portal_session_free(s);
        st = portal_auth_clear_persisted_session(auth);
        if (st != PORTAL_OK) fprintf(stderr, "clear: %s\n", portal_last_error_message());
        if (st == PORTAL_ERR_SESSION_STORAGE) __atomic_add_fetch(&storage_errors, 1, __ATOMIC_SEQ_CST);
        else if (st != PORTAL_OK) __atomic_add_fetch(&other_errors, 1, __ATOMIC_SEQ_CST);
    }
    portal_auth_free(auth);
}

static void *thread_main(void *arg) {
    int id = (int)(long)arg;
    pthread_barrier_wait(&barrier); /* the first library call of every thread, at once */
    churn("fault-threads", id, rounds);
    return NULL;
}

static void report_churn(const char *what, int calls) {
    printf("time  [%s] %s: %d calls; sessions %ld, signed out %ld, storage failures %ld, other errors %ld, mixes %ld\n",
           check_context, what, calls, sessions_seen, signed_out_seen, storage_errors, other_errors, mixes);
    CHECK_MSG(mixes == 0, "%s: never a mix of two sessions", what);
    CHECK_MSG(other_errors == 0, "%s: no unexpected status", what);
    CHECK_MSG(storage_errors == 0, "%s: no storage failure under contention", what);
}

void test_threads(int n) {
    check_context = "11 threads";
    rounds = n;
    pthread_t threads[THREADS];
    pthread_barrier_init(&barrier, NULL, THREADS);
    double t0 = now_ms();
    for (long i = 0; i < THREADS; i++) pthread_create(&threads[i], NULL, thread_main, (void *)i);
    for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
    double t1 = now_ms();
    printf("time  [%s] %d threads x %d rounds (persist, restore, clear): %.0f ms\n", check_context, THREADS, n, t1 - t0);
    report_churn("16 threads", THREADS * n * 3);
}
