/*
 * probe.h — one completion of a non-blocking call, as the main-loop C test programs (async_test,
 * async_signin_test) record and check it. A probe is the call's user_data: the program's own
 * callback records what it was given with probe_seen() and takes the owned outputs of its result
 * type; on_destroy counts destroy_notify.
 *
 *   probe_init(p)        before the call: nothing seen, to run on this thread
 *   probe_seen(p, status, message)   in the callback
 *   expect_once(p, status, message_part, what)   called once, destroy_notify once, on the probe's
 *                        thread, with that status (and a message containing message_part)
 *   probe_clear(p)       frees what the probe took, then probe_init
 */
#ifndef PORTAL_TEST_PROBE_H
#define PORTAL_TEST_PROBE_H

#include "main_loop.h"

#include <pthread.h>
#include <stdbool.h>

typedef struct {
    int calls, destroyed, same_thread;
    pthread_t thread;          /* the thread the callback must run on */
    portal_status status;
    char message[512];
    gint64 at;                 /* when the callback ran */
    /* What the completion delivered, taken from its result. */
    portal_session *session;
    long http_status;          /* a portal_result's */
    portal_redirect_kind kind; /* a portal_sign_in_result's, with the fields below */
    char *text, *user_jwt, *totp_link;
    bool auto_create_wallet;
} probe;

static inline void probe_init(probe *p) {
    memset(p, 0, sizeof *p);
    p->thread = pthread_self();
    p->status = (portal_status)-1;
}

static inline void probe_seen(probe *p, portal_status status, const char *message) {
    p->calls++;
    p->same_thread = pthread_equal(pthread_self(), p->thread);
    p->status = status;
    snprintf(p->message, sizeof p->message, "%s", message ? message : "(null)");
    p->at = g_get_monotonic_time();
}

/* Takes an owned string of a result: the probe frees the one it held. */
static inline void probe_take_string(char **held, char **given) {
    if (!*given) return;
    portal_string_free(*held);
    *held = *given;
    *given = NULL;
}

static inline void probe_take_session(probe *p, portal_session **given) {
    if (!*given) return;
    portal_session_free(p->session);
    p->session = *given;
    *given = NULL;
}

static inline void on_destroy(void *data) { ((probe *)data)->destroyed++; }

static inline void probe_clear(probe *p) {
    portal_session_free(p->session);
    portal_string_free(p->text);
    portal_string_free(p->user_jwt);
    portal_string_free(p->totp_link);
    probe_init(p);
}

static inline void expect_once(probe *p, portal_status status, const char *message_part, const char *what) {
    if (p->calls != 1 || p->destroyed != 1 || !p->same_thread || p->status != status ||
        (message_part && !strstr(p->message, message_part)))
        fprintf(stderr, "%s: calls %d destroyed %d same thread %d status %d (want %d) message '%s' (want '%s')\n", what,
                p->calls, p->destroyed, p->same_thread, p->status, status, p->message, message_part ? message_part : "");
    CHECK(p->calls == 1);
    CHECK(p->destroyed == 1);
    CHECK(p->same_thread);
    CHECK(p->status == status);
    if (message_part) CHECK(strstr(p->message, message_part) != NULL);
}

#endif
