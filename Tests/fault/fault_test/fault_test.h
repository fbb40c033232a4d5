/*
 * fault_test.h — what the files of fault_test share (main.c says what the program does and lists
 * its conditions): the checks (Tests/c/check.h), the keyring helpers of support.c, and the
 * conditions that main() runs, one file each (or two that belong together).
 */
#ifndef PORTAL_FAULT_TEST_H
#define PORTAL_FAULT_TEST_H

#define _GNU_SOURCE
#include "portal_keyring.h"

#include "../../c/check.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SCHEMA "io.portalhq.PortalKeyring.Session"
#define REDIRECT "fault-test://redirect"

/* A line for what passed or failed without one condition to check. */
#define ok(...) CHECK_MSG(1, __VA_ARGS__)
#define fail(...) CHECK_MSG(0, __VA_ARGS__)

static inline double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------------------------ support.c */

void watchdog(unsigned seconds);
const char *kctl(void);
int sh_io(const char *input, size_t len, char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
long count_items(const char *schema, const char *env);
int store_raw(const char *schema, const char *env, const char *secret, size_t len);
int keyring_lock(void);
int keyring_unlock(void);
portal_auth *new_auth(const char *env);
portal_status expect_restore(portal_auth *auth, const char *user, const char *token, size_t token_len,
                             const char *what);

/* ------------------------------------------------------------------------------ conditions */

/* keyring_states.c: 5 absent secret, 6 locked restore, 9 look-alikes */
void test_absent_secret(void);
void test_locked_app(void);
void test_lookalike(void);
/* tokens.c: 10 */
void test_tokens(void);
/* threads.c: 11, in threads and in processes (churn: one process of the 8) */
extern long mixes, storage_errors, other_errors, sessions_seen, signed_out_seen;
void churn(const char *env, int id, int n);
void test_threads(int n);
/* memory.c: 12 */
void test_memory(const char *env, int first, int second);
/* bad_input.c: 13 */
void test_bad_input(void);
/* reentry.c: 14 */
void test_reentry(void);

#endif
