/*
 * glib_app.c — a GLib/GTK-style app with portal-keyring's non-blocking calls: it restores the
 * session on launch, validates it against the Portal API, and reacts to invalidation, all from
 * its main loop; the library never blocks that loop and every callback below runs on the main
 * thread. Build with pkg-config only:
 *
 *   cc glib_app.c -o glib_app $(pkg-config --cflags --libs portal-keyring glib-2.0)
 *   glib_app AUTH_ENVIRONMENT_ID [API_HOST]
 *
 * Exit status: 0 session restored and valid, 1 signed out (show sign-in), 2 error (the keyring
 * could not be read this time: NOT signed out), 3 the session was invalidated (show sign-in).
 * The Client Session Token is never printed.
 */
#include <portal_keyring.h>

#include <glib.h>
#include <stdio.h>

typedef struct {
    GMainLoop *loop;
    GThread *main_thread; /* to show where callbacks run */
    portal *client;
    const char *api_host;
    int exit_status;
} app;

static const char *where(app *a) { return g_thread_self() == a->main_thread ? "main thread" : "OTHER THREAD"; }

/* The backend rejected the session: its token and stored item are gone already. */
static void on_invalidated(void *data) {
    app *a = data;
    printf("session invalidated (%s) — show sign-in\n", where(a));
    a->exit_status = 3;
    g_main_loop_quit(a->loop);
}

static void on_validated(portal_status status, portal_result *result, const char *message, void *data) {
    app *a = data;
    if (status == PORTAL_ERR_SESSION_INVALIDATED) {
        /* The portal's own validation (portal_new) got the 401 first: the listener runs next. */
        return;
    }
    if (status != PORTAL_OK) {
        /* A network error is not a sign-out: keep the session, retry later. */
        printf("could not validate the session now: %s\n", message);
        g_main_loop_quit(a->loop);
        return;
    }
    printf("validation answered HTTP %ld (%s)\n", result->http_status, where(a));
    /* A 401 invalidates the session and the listener runs next; otherwise the session is valid. */
    if (result->http_status != 401) g_main_loop_quit(a->loop);
}

static void on_restored(portal_status status, portal_result *result, const char *message, void *data) {
    app *a = data;
    if (status != PORTAL_OK) {
        fprintf(stderr, "error: %s (%d): %s\n", portal_status_str(status), (int)status, message);
        a->exit_status = 2;
        g_main_loop_quit(a->loop);
        return;
    }
    if (!result->session) {
        printf("signed out — show sign-in\n");
        a->exit_status = 1;
        g_main_loop_quit(a->loop);
        return;
    }
    printf("restored session for end user %s (%s)\n", portal_session_get_end_user_id(result->session), where(a));
    portal_status st = portal_new(&a->client, result->session, a->api_host);
    uint64_t listener = 0; /* for portal_listener_cancel(); portal_free() ends it too */
    if (st == PORTAL_OK)
        st = portal_on_session_invalidated_queued(a->client, NULL, on_invalidated, a, NULL, &listener);
    if (st == PORTAL_OK)
        st = portal_request_async(a->client, "GET", "/api/v3/clients/me", NULL, NULL, on_validated, a, NULL, NULL);
    if (st != PORTAL_OK) {
        fprintf(stderr, "error: %s (%d): %s\n", portal_status_str(st), (int)st, portal_last_error_message());
        a->exit_status = 2;
        g_main_loop_quit(a->loop);
    }
    /* result->session is left in the struct: the library frees it; the portal keeps its own reference. */
}

static gboolean give_up(gpointer data) {
    app *a = data;
    fprintf(stderr, "error: no answer within 30 s\n");
    a->exit_status = 2;
    g_main_loop_quit(a->loop);
    return G_SOURCE_REMOVE;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s AUTH_ENVIRONMENT_ID [API_HOST]\n", argv[0]);
        return 2;
    }
    app a = {g_main_loop_new(NULL, FALSE), g_thread_self(), NULL, argc == 3 ? argv[2] : NULL, 0};
    portal_auth *auth = NULL;
    portal_status st = portal_auth_new(&auth, argv[1], "myapp://auth/callback", a.api_host);
    /* queue NULL: completions run on this thread's default GMainContext, the one the loop runs. */
    if (st == PORTAL_OK) st = portal_auth_restore_session_async(auth, NULL, on_restored, &a, NULL, NULL);
    if (st != PORTAL_OK) {
        fprintf(stderr, "error: %s (%d): %s\n", portal_status_str(st), (int)st, portal_last_error_message());
        portal_auth_free(auth);
        return 2;
    }
    g_timeout_add_seconds(30, give_up, &a);
    g_main_loop_run(a.loop);
    /* portal_free waits for requests in flight; the loop is over, so that blocks nobody. */
    portal_free(a.client);
    portal_auth_free(auth);
    g_main_loop_unref(a.loop);
    return a.exit_status;
}
