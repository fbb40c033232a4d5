/*
 * memscan_test.h — what the files of memscan_test share (main.c says what the program does): the
 * masked marker token (marker.c), the memory scan (scan.c), the helpers of support.c (the fake
 * Portal API, another process's persist, the pollable queue of the _async paths) and the paths
 * that main() runs, by file.
 */
#ifndef PORTAL_MEMSCAN_TEST_H
#define PORTAL_MEMSCAN_TEST_H

#define _GNU_SOURCE
#include <portal_keyring.h>
#include "../check.h"

#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_TOKEN 4096
#define SKIP 16 /* malloc's free-list links overwrite a freed block's first 16 bytes */
#define MASK 0x3C

extern int report_only;
extern const char *api_url, *api_host, *cli;

/* ------------------------------------------------------------------------------ marker.c */

/* A token this program knows only masked. */
struct marker {
    unsigned char masked[MAX_TOKEN];
    size_t len;
};

void make_marker_of(struct marker *m, const char *label, size_t len);
void make_marker(struct marker *m, const char *label);
void adopt_marker(struct marker *m, char *clear, size_t len);
char *marker_copy(const struct marker *m);
void drop(char *plain);
void stored_form(const struct marker *m, struct marker *out);

/* ------------------------------------------------------------------------------ scan.c */

long scan_buffer(const struct marker *m, const unsigned char *p, size_t len);
long count_copies(const struct marker *m);
void expect_none(const char *path, const struct marker *m);

/* ------------------------------------------------------------------------------ support.c */

void issue(const struct marker *m, const char *user);
void revoke_marker(const struct marker *m);
void persist_elsewhere(const struct marker *m, const char *env_id, const char *user);
int admin(const char *route, const char *json, const char *field, char *out, size_t out_size);
portal_auth *new_auth(const char *label, char *env_id, size_t size);
portal_session *persist_marker(portal_auth *auth, const struct marker *m);
char *copy_of_token(portal_session *session);
void sign_out(portal_auth *auth, portal_session *session);

/* The non-blocking exports: one pollable queue, dispatched until the callback ran; what the
 * last callback delivered. */
extern portal_completion_queue *queue;
extern long async_http_status;
extern portal_redirect_kind async_kind;
extern char *async_body;
extern size_t async_body_len;
void on_done(portal_status status, portal_result *result, const char *message, void *user_data);
void on_sign_in_done(portal_status status, portal_sign_in_result *result, const char *message, void *user_data);
portal_status finish_async(portal_status started);
portal_session *take_async_session(void);

/* ------------------------------------------------------------------------------ the paths */

/* keyring_paths.c: what stores, restores and signs in */
void path_persist(void);
void path_persist_file(void);
void path_restore(int async);
void path_sign_in(int async);
void path_persist_async(void);
void path_invalidate_async(void);
/* portal_paths.c: the calls of a portal handle and the other exports that take a secret */
void path_request(int invalidate, int async);
void path_report(void);
void path_api_key(void);
void path_totp_jwt(void);
/* core_dump.c */
void path_core_dump(void);

#endif
