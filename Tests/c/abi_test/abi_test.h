/*
 * abi_test.h — what the files of abi_test share (main.c says what the program does): the checks
 * (Tests/c/check.h), the test cases that main() runs, and the helpers of support.c and http.c.
 */
#ifndef PORTAL_ABI_TEST_H
#define PORTAL_ABI_TEST_H

#define _GNU_SOURCE
#include "portal_keyring.h"

#include "../check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SCHEMA "io.portalhq.PortalKeyring.Session"
#define FOREIGN_SCHEMA "org.example.Other"

/* Starts a test case: its name is printed and named by every failed check. */
static inline void begin(const char *name) {
    check_context = name;
    printf("- %s\n", name);
    fflush(stdout);
}

static inline double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------------------------ support.c */

extern const char *const redirect;
extern int locked_by_us; /* the keyring was locked by a test case: unlocked at exit */

/* A sentinel to prove that outputs are not written on failure. */
extern char sentinel_storage[2];
#define SENTINEL_AUTH ((portal_auth *)(void *)&sentinel_storage[0])
#define SENTINEL_SESSION ((portal_session *)(void *)&sentinel_storage[0])
#define SENTINEL_STRING (&sentinel_storage[1])

const char *new_env_id(const char *tag);
portal_auth *new_auth(const char *env_id);
const char *keyringctl_path(void);
int keyringctl_io(const char *input, size_t len, char *output, size_t cap, const char *fmt, ...);
long keyring_count(const char *schema, const char *id);
void keyring_store_bytes(const char *schema, const char *id, const char *extra_attrs,
                         const char *secret, size_t len);
void keyring_store(const char *schema, const char *id, const char *extra_attrs, const char *secret);
const char *provider(void);
int provider_is(const char *name);
int unlocks_without_user(void);
int lock_observable(const char *what);
void keyring_restart(const char *how);
void keyring_lock(void);
void keyring_unlock(void);
void unlock_at_exit(void);
void check_token(const portal_session *session, const char *token, size_t len);
void check_session(const portal_session *session, const char *env_id, const char *user, const char *token);
void check_restore(portal_auth *auth, const char *env_id, const char *user, const char *token);
char *make_token(size_t n);

/* ------------------------------------------------------------------------------ http.c */

extern int http_port;

typedef struct {
    int calls;
    int destroys;
    int destroyed_before_call; /* destroy_notify ran while the callback had not (yet) run */
} listener_state;

void http_start(void);
void http_host(char *host, size_t size);
void http_set_status(int status);
int http_count(void);
int closed_port(void);
void on_invalidated(void *user_data);
void on_destroy(void *user_data);
int load(const int *p);
int wait_for(const int *p, int want, int timeout_ms);
void pause_ms(int ms);
void wait_for_request(int count, const char *line, const char *token);

/* ------------------------------------------------------------------------------ test cases */

/* basics.c */
void test_versions(void);
void test_async_arguments(void);
void test_status_str(void);
void test_last_error(void);
/* arguments.c */
void test_auth_new_arguments(void);
void test_free_null(void);
void test_timeouts(void);
void test_null_arguments(void);
void test_totp_step_accessors(void);
void test_persist_arguments(void);
/* storage.c */
void test_round_trip(void);
void test_clear(void);
void test_shared_and_independent(void);
void test_stored_format(void);
void test_unusable_items(void);
void test_embedded_nul(void);
void test_foreign_items(void);
/* keyring_state.c */
void test_locked(void);
void test_restart(void);
void test_threads(void);
int no_bus_child(int fd);
void test_no_bus(void);
/* portal.c */
void test_portal_arguments(void);
void test_api_key_portal(void);
void test_session_invalidate(void);
void test_portal_requests(void);
void test_portal_validation_401(void);
void test_portal_clear_and_network(void);
/* sign_in.c */
void test_sign_in_arguments(void);
void test_double_free(void);

#endif
