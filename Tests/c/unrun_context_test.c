/*
 * unrun_context_test.c — a NULL completion queue where no GLib main loop runs is not silent
 * (Include/portal_keyring.h, "Completion queues"): the completion waits for the thread-default
 * GMainContext, and once it has waited over the grace period (2 s) while no thread iterates
 * that context, the process gets one line on stderr that names the problem and the fix (a
 * pollable queue); once per process. A loop that iterates the context later still runs the
 * completion. A completion that a running loop delivered gives no line.
 * Needs scripts/with-keyring.sh. Exit 0 when every check passed.
 */
#define _DEFAULT_SOURCE 1
#include <portal_keyring.h>
#include "check.h"

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int calls;

static void on_done(portal_status status, portal_result *result, const char *message, void *user_data) {
    (void)result, (void)message, (void)user_data;
    CHECK(status == PORTAL_OK);
    calls++;
}

/* How many times `needle` occurs in what was written to `log` so far. */
static int occurrences(FILE *log, const char *needle) {
    fflush(log);
    char text[8192] = "";
    size_t n = pread(fileno(log), text, sizeof text - 1, 0) > 0 ? strlen(text) : 0;
    (void)n;
    int count = 0;
    for (const char *at = text; (at = strstr(at, needle)); at++) count++;
    return count;
}

int main(void) {
    char env[64];
    snprintf(env, sizeof env, "c-unrun-%d", (int)getpid());
    portal_auth *auth = NULL;
    CHECK(portal_auth_new(&auth, env, "app://cb", NULL) == PORTAL_OK);
    FILE *log = tmpfile();
    int saved = dup(2);
    CHECK(log && saved >= 0 && dup2(fileno(log), 2) == 2);
    const char *line = "no thread iterates";

    /* A running loop delivers: no line, also after the grace period. */
    GMainLoop *loop = g_main_loop_new(NULL, FALSE);
    CHECK(portal_auth_restore_session_async(auth, NULL, on_done, NULL, NULL, NULL) == PORTAL_OK);
    gint64 end = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
    while (calls < 1 && g_get_monotonic_time() < end) g_main_context_iteration(NULL, TRUE);
    CHECK(calls == 1);
    g_usleep(2500 * 1000);
    CHECK(occurrences(log, line) == 0);

    /* Nothing iterates the default context: the completion waits, and the line comes. */
    CHECK(portal_auth_restore_session_async(auth, NULL, on_done, NULL, NULL, NULL) == PORTAL_OK);
    g_usleep(3000 * 1000);
    CHECK(calls == 1);
    CHECK(occurrences(log, line) == 1);
    CHECK(occurrences(log, "portal_completion_queue_new_pollable") == 1);
    /* Once per process. */
    CHECK(portal_auth_restore_session_async(auth, NULL, on_done, NULL, NULL, NULL) == PORTAL_OK);
    g_usleep(2500 * 1000);
    CHECK(occurrences(log, line) == 1);
    /* A loop that comes late still runs both. */
    end = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
    while (calls < 3 && g_get_monotonic_time() < end) g_main_context_iteration(NULL, TRUE);
    CHECK(calls == 3);

    dup2(saved, 2);
    close(saved);
    g_main_loop_unref(loop);
    portal_auth_free(auth);
    if (failures) {
        fprintf(stderr, "unrun_context_test: %d of %d checks FAILED\n", failures, checks);
        return 1;
    }
    printf("unrun_context_test: all %d checks passed (a completion waiting on an unrun context: one line on stderr)\n",
           checks);
    return 0;
}
