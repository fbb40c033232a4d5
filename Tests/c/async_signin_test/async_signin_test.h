/*
 * async_signin_test.h — what the files of async_signin_test share (main.c says what the program
 * does): the probe of one completion (Tests/c/probe.h), the main-loop timer
 * (Tests/c/main_loop.h), the fake API's admin routes (Tests/c/fake_api.h), the helpers of
 * support.c and the test cases that main() runs, by file.
 */
#ifndef PORTAL_ASYNC_SIGNIN_TEST_H
#define PORTAL_ASYNC_SIGNIN_TEST_H

#define _DEFAULT_SOURCE 1
#include <portal_keyring.h>
#include "../check.h"
#include "../fake_api.h"
#include "../main_loop.h"
#include "../probe.h"

#include <glib.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char env_id[128];

/* ------------------------------------------------------------------------------ support.c */

void on_done(portal_status status, portal_sign_in_result *result, const char *message, void *data);
int fault(const char *json);
portal_auth *new_auth(void);

/* ------------------------------------------------------------------------------ test cases */

/* sign_ins.c: each way to sign in, to the session it persists */
void test_methods_and_urls(portal_auth *auth);
void test_magic_link(portal_auth *auth);
void test_totp(portal_auth *auth);
void test_private_use_redirect(void);
/* calls.c: how the calls complete: refused arguments, a cancel, 200 in flight, a 429 */
void test_argument_checks(portal_auth *auth);
void test_cancel_mid_request(portal_auth *auth);
void test_many_in_flight(portal_auth *auth);
void test_rate_limited(portal_auth *auth);

#endif
