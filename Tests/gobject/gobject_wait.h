/*
 * gobject_wait.h — what the C test programs of the GNOME API in Tests/gobject/ share: one
 * asynchronous call's outcome, filled by its GAsyncReadyCallback, and the check of a GError.
 *
 *   Wait wait = {0}; portal_keyring_auth_X_async(..., wait_callback, &wait);
 *   wait_run(&wait, context, timeout_ms)   iterates context until the callback ran; true if it did
 *   wait_clear(&wait)                      drops the result, for the next call
 *   CHECK_GERROR(error, domain, code)      error is set, of that domain and code
 */
#ifndef PORTAL_TEST_GOBJECT_WAIT_H
#define PORTAL_TEST_GOBJECT_WAIT_H

#include "check.h"

#include <gio/gio.h>

typedef struct {
    int done;
    GObject *source;
    GAsyncResult *result;
    GThread *thread;
    GMainContext *context;
} Wait;

static inline void wait_callback(GObject *source, GAsyncResult *result, gpointer data) {
    Wait *wait = data;
    wait->done++;
    wait->source = source;
    wait->result = g_object_ref(result);
    wait->thread = g_thread_self();
    wait->context = g_main_context_ref_thread_default();
    g_main_context_unref(wait->context); /* kept only for comparison */
}

static inline int wait_run(Wait *wait, GMainContext *context, int timeout_ms) {
    gint64 end = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    while (!wait->done && g_get_monotonic_time() < end) g_main_context_iteration(context, FALSE), g_usleep(1000);
    return wait->done;
}

static inline void wait_clear(Wait *wait) {
    g_clear_object(&wait->result);
    memset(wait, 0, sizeof *wait);
}

#define CHECK_GERROR(err, want_domain, want_code)                                                              \
    CHECK_MSG((err) != NULL && g_error_matches((err), (want_domain), (want_code)), "wanted %s %d, got %s %d: %s", \
              g_quark_to_string(want_domain), (int)(want_code), (err) ? g_quark_to_string((err)->domain) : "no error", \
              (err) ? (err)->code : 0, (err) ? (err)->message : "")

#endif
