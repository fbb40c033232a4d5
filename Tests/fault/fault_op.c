/*
 * fault_op.c — a scriptable client of libportal-keyring.so for the fault-injection suite
 * (Tests/fault/run.sh). One process, one portal_auth handle, a sequence of actions; each keyring
 * action prints one result line with its status, its wall-clock time and the thread's last error
 * message, so that the shell can change the environment between two calls of one long-lived
 * process (stop or restart the daemon, lock the collection) and assert the outcome.
 *
 *   fault_op ENV_ID ACTION...
 *
 * Actions:
 *   restore                 portal_auth_restore_session
 *   persist:USER:TOKEN      portal_auth_persist_session (TOKEN is printable ASCII here;
 *                           Tests/fault/fault_test/tokens.c covers arbitrary bytes)
 *   clear                   portal_auth_clear_persisted_session
 *   timeouts:CALL:PROMPT    portal_auth_set_keyring_timeouts (milliseconds)
 *   pause:TAG               prints "PAUSE TAG", then waits for one line on stdin (the script
 *                           changes the environment meanwhile)
 *   sleep:MS                sleeps
 *
 * Result lines (one per keyring action, on stdout, flushed):
 *   R <action> status=<n> ms=<elapsed> out=<none|signed-out|user:<id>:token:<token>> msg=<last error>
 * The process exits 0 when every action ran (whatever the statuses), 2 on a usage error.
 */
#define _GNU_SOURCE
#include "portal_keyring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void report(const char *action, portal_status st, double ms, portal_session *session, int with_session) {
    printf("R %s status=%d ms=%.1f out=", action, (int)st, ms);
    if (st != PORTAL_OK || !with_session) {
        printf("none");
    } else if (!session) {
        printf("signed-out");
    } else {
        char *token = NULL;
        portal_status tst = portal_session_copy_token(session, &token);
        printf("user:%s:token:%s", portal_session_get_end_user_id(session), tst == PORTAL_OK ? token : "<error>");
        portal_string_free(token);
    }
    /* The message of the action itself (copy_token above succeeded or printed <error>). */
    printf(" msg=%s\n", st == PORTAL_OK ? "" : portal_last_error_message());
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: fault_op ENV_ID ACTION...\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    portal_auth *auth = NULL;
    if (portal_auth_new(&auth, argv[1], "fault-test://redirect", NULL) != PORTAL_OK) {
        fprintf(stderr, "fault_op: portal_auth_new: %s\n", portal_last_error_message());
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        char *action = argv[i];
        if (strcmp(action, "restore") == 0) {
            portal_session *session = NULL;
            double t0 = now_ms();
            portal_status st = portal_auth_restore_session(auth, &session);
            double t1 = now_ms();
            /* Save the message before report() calls into the library again. */
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", portal_last_error_message());
            printf("R restore status=%d ms=%.1f out=", (int)st, t1 - t0);
            if (st != PORTAL_OK) {
                printf("none");
            } else if (!session) {
                printf("signed-out");
            } else {
                char *token = NULL;
                portal_status tst = portal_session_copy_token(session, &token);
                printf("user:%s:token:%s", portal_session_get_end_user_id(session),
                       tst == PORTAL_OK ? token : "<error>");
                portal_string_free(token);
            }
            printf(" msg=%s\n", st == PORTAL_OK ? "" : msg);
            portal_session_free(session);
        } else if (strncmp(action, "persist:", 8) == 0) {
            char *spec = strdup(action + 8);
            char *colon = strchr(spec, ':');
            if (!colon) {
                fprintf(stderr, "fault_op: persist:USER:TOKEN expected, got %s\n", action);
                return 2;
            }
            *colon = '\0';
            double t0 = now_ms();
            portal_status st = portal_auth_persist_session(auth, spec, colon + 1, NULL);
            double t1 = now_ms();
            report("persist", st, t1 - t0, NULL, 0);
            free(spec);
        } else if (strcmp(action, "clear") == 0) {
            double t0 = now_ms();
            portal_status st = portal_auth_clear_persisted_session(auth);
            double t1 = now_ms();
            report("clear", st, t1 - t0, NULL, 0);
        } else if (strncmp(action, "timeouts:", 9) == 0) {
            unsigned call_ms = 0, prompt_ms = 0;
            if (sscanf(action + 9, "%u:%u", &call_ms, &prompt_ms) != 2) {
                fprintf(stderr, "fault_op: timeouts:CALL:PROMPT expected, got %s\n", action);
                return 2;
            }
            portal_status st = portal_auth_set_keyring_timeouts(auth, call_ms, prompt_ms);
            if (st != PORTAL_OK) {
                fprintf(stderr, "fault_op: set_keyring_timeouts: %s\n", portal_last_error_message());
                return 2;
            }
        } else if (strncmp(action, "pause:", 6) == 0) {
            printf("PAUSE %s\n", action + 6);
            fflush(stdout);
            char line[256];
            if (!fgets(line, sizeof line, stdin)) {
                fprintf(stderr, "fault_op: stdin closed during %s\n", action);
                return 2;
            }
        } else if (strncmp(action, "sleep:", 6) == 0) {
            usleep((useconds_t)strtoul(action + 6, NULL, 10) * 1000u);
        } else {
            fprintf(stderr, "fault_op: unknown action %s\n", action);
            return 2;
        }
    }
    portal_auth_free(auth);
    return 0;
}
