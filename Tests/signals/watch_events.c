/* watch_events — a C app's session watch, printing what it hears.
 *
 *   watch_events AUTH_ENVIRONMENT_ID
 *
 * portal_auth_watch() on a GMainLoop (the thread-default context); prints "watching" once the
 * watch is live, then one line per event ("signed-in END_USER", "signed-out", "locked",
 * "resync"), flushed. SIGTERM or SIGINT ends it with exit 0. A crash of the watch is the
 * process's crash: the caller checks the exit status.
 */
#include <glib-unix.h>
#include <portal_keyring.h>
#include <stdio.h>

static void on_event(portal_watch_event event, const char *end_user_id, void *user_data) {
    (void)user_data;
    switch (event) {
    case PORTAL_WATCH_SIGNED_IN: printf("signed-in %s\n", end_user_id ? end_user_id : "(null)"); break;
    case PORTAL_WATCH_SIGNED_OUT: printf("signed-out\n"); break;
    case PORTAL_WATCH_LOCKED: printf("locked\n"); break;
    case PORTAL_WATCH_RESYNC: printf("resync\n"); break;
    default: printf("event %d\n", (int)event); break;
    }
    fflush(stdout);
}

static gboolean quit(gpointer loop) {
    g_main_loop_quit(loop);
    return G_SOURCE_REMOVE;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: watch_events AUTH_ENVIRONMENT_ID\n");
        return 2;
    }
    GMainLoop *loop = g_main_loop_new(NULL, FALSE);
    portal_auth *auth = NULL;
    portal_watch *watch = NULL;
    portal_status st = portal_auth_new(&auth, argv[1], "myapp://portal/redirect", NULL);
    if (st == PORTAL_OK) st = portal_auth_watch(auth, NULL, on_event, NULL, NULL, &watch);
    if (st != PORTAL_OK) {
        fprintf(stderr, "watch_events: %s: %s\n", portal_status_str(st), portal_last_error_message());
        return 1;
    }
    printf("watching\n");
    fflush(stdout);
    g_unix_signal_add(SIGTERM, quit, loop);
    g_unix_signal_add(SIGINT, quit, loop);
    g_main_loop_run(loop);
    portal_watch_free(watch);
    portal_auth_free(auth);
    g_main_loop_unref(loop);
    return 0;
}
