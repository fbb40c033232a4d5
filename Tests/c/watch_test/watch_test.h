/*
 * watch_test.h — what the files of watch_test share (main.c says what the program does): process
 * A and the other processes B starts (process_a.c), B's events and the checks on them
 * (events.c), and the steps that main() runs, by file.
 */
#ifndef PORTAL_WATCH_TEST_H
#define PORTAL_WATCH_TEST_H

#define _GNU_SOURCE 1
#include <portal_keyring.h>
#include "../check.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* A step's summary line, marked when a check failed since the previous one. */
extern int failures_noted;
#define STEP(...)                                                                                    \
    do {                                                                                             \
        printf("%s", failures > failures_noted ? "FAILED: " : "");                                   \
        printf(__VA_ARGS__);                                                                         \
        failures_noted = failures;                                                                   \
    } while (0)

static inline double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------------------------ process_a.c */

extern char self_path[4096];
int act(int argc, char **argv);
int run_quiet(char *const argv[]);
int run_act(const char *what, const char *env, const char *arg);
int keyringctl(const char *a, const char *b, const char *c, const char *d, const char *e);
portal_status invalidate_stored(portal_auth *auth);

/* ------------------------------------------------------------------------------ events.c */

typedef struct {
    portal_watch_event kind;
    char user[64];
    double at; /* now_ms() when it arrived */
    portal_watch_origin origin; /* portal_watch_current_origin() in the callback */
} event;

extern event events[4096];
extern int nevents, destroyed;
extern portal_completion_queue *queue;

void on_event(portal_watch_event kind, const char *end_user_id, void *user_data);
void on_destroy(void *user_data);
void pump(double until, int stop_at);
const char *kind_name(portal_watch_event k);
int expect(portal_watch_event kind, const char *user, const char *what);
int expect_from(portal_watch_event kind, const char *user, portal_watch_origin origin, const char *what);
void expect_quiet(int ms, const char *what);
long switches(const char *name);

/* ------------------------------------------------------------------------------ the steps */

/* changes.c: the watch's arguments; what another process changes; a lock */
void test_arguments(portal_auth *auth);
void test_changes_by_another_process(const char *env, const char *other);
void test_lock(const char *env, int in_sandbox);
void test_own_changes(portal_auth *auth, const char *env);
/* provider.c: a provider restart, a burst, an over-matched look-alike, an idle watch */
void test_provider_restart(const char *env, int in_sandbox);
void test_stalled_provider(portal_auth *auth, int in_sandbox);
void test_burst(const char *env, const char *provider);
void test_lookalike(void);
void test_idle(void);

#endif
