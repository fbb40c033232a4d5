/*
 * async_test.h — what the files of async_test share (main.c says what the program does): the
 * probe of one completion (Tests/c/probe.h), the main-loop timer (Tests/c/main_loop.h), the
 * helpers of support.c and the scenarios that main() runs, by file.
 */
#ifndef PORTAL_ASYNC_TEST_H
#define PORTAL_ASYNC_TEST_H

#define _DEFAULT_SOURCE 1
#include <portal_keyring.h>
#include "../check.h"
#include "../main_loop.h"
#include "../probe.h"

#include <glib.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern pthread_t main_thread;
extern const char *kctl, *api_url;
extern char env_id[128];

/* ------------------------------------------------------------------------------ support.c */

void on_done(portal_status status, portal_result *result, const char *message, void *data);
int sh(const char *command);
portal_auth *new_auth(uint32_t call_ms, uint32_t prompt_ms);
int admin_fault(const char *json);
/* A signed-in end user: sign_in() makes it, sign_out() ends it (the client is the caller's to free). */
typedef struct {
    portal_auth *auth;
    portal_session *session;
    portal *client;
    char token[512];
} signed_in;
portal *sign_in(signed_in *user, const char *end_user);
void sign_out(signed_in *user);

/* ------------------------------------------------------------------------------ scenarios */

/* completions.c: on the main thread, a named context, 1,000 in flight */
void test_basic_on_main_thread(portal_auth *auth);
void test_named_context(portal_auth *auth);
void test_thousand_in_flight(portal_auth *auth);
/* queues.c: the pollable queue from a plain poll() loop */
void test_pollable_queue(portal_auth *auth);
void test_pollable_queue_freed_by_its_callback(portal_auth *auth);
/* keyring_stalls.c: (a) and (b), the keyring does not answer */
void test_provider_stopped(void);
void test_unanswered_prompt(void);
/* portal_calls.c: (c), the Portal API calls, listeners and portal_free_async */
void test_slow_api(void);
void test_listener_and_portal_calls(void);
void test_free_async_with_a_listener_running(void);

#endif
