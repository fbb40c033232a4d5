/*
 * invalidation_test.h — what the files of invalidation_test share (main.c says what the program
 * does): the listener probe and the helpers of support.c, and the test cases that main() runs
 * (and the child modes of the processes it starts), by file.
 */
#ifndef PORTAL_INVALIDATION_TEST_H
#define PORTAL_INVALIDATION_TEST_H

#define _DEFAULT_SOURCE 1
#include <portal_keyring.h>
#include "../check.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern const char *api_url, *api_host, *self_path;

/* ------------------------------------------------------------------------------ support.c */

/* One listener: what it was told, and what it does when called. */
typedef struct {
    atomic_int calls;
    atomic_int destroyed;
    portal *portal;       /* for re-entrant tests */
    uint64_t handle;
    int action;           /* 0 nothing, 1 cancel own handle, 2 free portal, 3 restore again */
    portal_auth *auth;
    atomic_int may_free;  /* action 2 waits for it: the test still uses the portal meanwhile */
} probe;

void on_invalidated(void *data);
void on_destroy(void *data);
void wait_for(atomic_int *value, int expected);
int admin(const char *path, const char *json, char *out, size_t out_size);
void issue_token(const char *user, char *out, size_t size);
void revoke_token(const char *token);
portal_auth *new_auth(const char *tag);
portal_session *sign_in(portal_auth *auth, const char *user, char *token, size_t size);
/* A test's own end user: sign_in_user() makes it, sign_out() frees it. */
typedef struct {
    portal_auth *auth;
    portal_session *session;
    char token[256];
} signed_in;
void sign_in_user(signed_in *user, const char *tag, const char *end_user);
void sign_out(signed_in *user);
portal *open_portal(portal_session *session);
void expect_nothing_stored(portal_auth *auth);
void mint_grant(const char *end_user, char *redirect, size_t size);

/* ------------------------------------------------------------------------------ test cases */

/* listeners.c: registration, replay, cancel and free from inside a callback, destroy_notify */
void test_replay_cancel_destroy(void);
void test_cancel_and_free_inside_callback(void);
void test_clear_session_and_api_key(void);
/* races.c: many threads, then many processes, report one rejection at once */
void test_concurrent_reports_invalidate_once(void);
void test_concurrent_reports_in_processes(void);
int race_child(const char *env_id, const char *token, const char *start);
/* sign_ins.c: a newer sign-in by another process survives; the magic-link flow; hijacking */
void test_newer_sign_in_by_another_process_survives(void);
int persist_from_stdin(const char *env_id, const char *user);
void test_sign_in_flow(void);
/* http.c: libcurl loaded lazily; portal_free aborts a request in flight */
void test_libcurl_is_loaded_lazily(void);
void test_free_aborts_requests_in_flight(void);

#endif
