/*
 * desktop_signin_test.c — portal_auth_sign_in_with_google/_apple and their _async forms with real
 * parts: GIO's URL opener launching Tests/tools/fake_browser.sh (registered here, in the XDG
 * directories scripts/with-keyring.sh made, for x-scheme-handler/http and https), the loopback
 * Portal API, the private keyring and portal-session handle-redirect as the URL handler:
 *   - no handler registered: PORTAL_ERR_SIGN_IN_UNAVAILABLE naming the scheme, nothing stored;
 *   - argument checks (timeout over 15 minutes, NULL callback): refused at once;
 *   - _async on a GMainLoop, the redirect handed to portal_auth_handle_redirect_async() on the
 *     same loop: the sign-in completes with that call's session (its client id), and the loop's
 *     10 ms timer never stalls (largest gap <= 200 ms);
 *   - single flight: a second call while one waits is PORTAL_ERR_SIGN_IN_IN_PROGRESS at once;
 *     portal_operation_cancel() completes the first with PORTAL_ERR_CANCELLED at once;
 *   - the blocking call's timeout: PORTAL_ERR_SIGN_IN_TIMED_OUT, nothing stored;
 *   - the URL handler's process completes it: the blocking call returns the restored session.
 *
 * Needs scripts/with-keyring.sh and scripts/with-portal-api.sh, and PORTAL_TEST_FAKE_BROWSER and
 * PORTAL_TEST_CLI (Tests/c/run.sh sets them). Exit 0 when every check passed.
 */
#define _DEFAULT_SOURCE 1
#include <portal_keyring.h>
#include "check.h"
#include "fake_browser.h"
#include "main_loop.h"

#include <gio/gio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DESKTOP_ID "portal-test-browser-c.desktop"
#define REDIRECT "portalkeyring://auth/callback"

static char state[1024], env_id[128];
static const char *api_host;
/* Runs the loop for up to `ms`, or until *flag >= want when flag is given. */
static void spin(int *flag, int want, int ms) {
    gint64 end = g_get_monotonic_time() + (gint64)ms * 1000;
    while ((!flag || *flag < want) && g_get_monotonic_time() < end) {
        g_main_context_iteration(NULL, FALSE);
        g_usleep(2000);
    }
}

static void put(const char *name, const char *text) {
    char *path = g_build_filename(state, name, NULL);
    CHECK(g_file_set_contents(path, text, -1, NULL));
    g_free(path);
}

/* The first line of the browser's file `name`, waiting up to 20 s (loop running); NULL if none. */
static char *await_file(const char *name) {
    char *path = g_build_filename(state, name, NULL), *text = NULL;
    for (int i = 0; i < 2000 && !g_file_get_contents(path, &text, NULL, NULL); i++) spin(NULL, 0, 10);
    g_free(path);
    if (text) text[strcspn(text, "\n")] = '\0';
    return text;
}

static int opened(void) {
    char *path = g_build_filename(state, "opened", NULL), *text = NULL;
    int lines = 0;
    if (g_file_get_contents(path, &text, NULL, NULL))
        for (char *c = text; *c; c++) lines += *c == '\n';
    g_free(text);
    g_free(path);
    return lines;
}

/* The `state` parameter of the last URL the browser opened (g_free), or NULL. */
static char *opened_state(void) {
    char *path = g_build_filename(state, "opened", NULL), *text = NULL, *found = NULL;
    if (g_file_get_contents(path, &text, NULL, NULL)) {
        char *last = NULL;
        for (char *at = strstr(text, "state="); at; at = strstr(at + 1, "state=")) last = at + 6;
        if (last) found = g_strndup(last, strcspn(last, "&#\n"));
    }
    g_free(text);
    g_free(path);
    return found;
}

/* What the browser does next (fake_browser.sh's modes), and the browser as the http(s) handler. */
static void browser(const char *mode, const char *end_user) {
    char text[2048];
    put("mode", mode);
    snprintf(text, sizeof text,
             "PORTAL_AUTH_ENVIRONMENT_ID='%s'\nPORTAL_REDIRECT_URL='%s'\nPORTAL_API_HOST='%s'\n"
             "PORTAL_TEST_END_USER='%s'\nPORTAL_TEST_CLI='%s'\n"
             "export PORTAL_AUTH_ENVIRONMENT_ID PORTAL_REDIRECT_URL PORTAL_API_HOST\n",
             env_id, REDIRECT, api_host, end_user, getenv("PORTAL_TEST_CLI"));
    put("env", text);
    const char *files[] = {"opened", "redirect", "handler-status"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *path = g_build_filename(state, files[i], NULL);
        unlink(path);
        g_free(path);
    }
    fake_browser_register(DESKTOP_ID, "Portal test browser (C)", state);
}

typedef struct {
    int calls, destroyed;
    portal_status status;
    char message[512];
    portal_redirect_kind kind;
    portal_session *session;
    gint64 at;
} probe;

static void on_done(portal_status status, portal_sign_in_result *result, const char *message, void *data) {
    probe *p = data;
    p->calls++;
    p->status = status;
    snprintf(p->message, sizeof p->message, "%s", message);
    p->kind = result->kind;
    if (result->session) {
        p->session = result->session;
        result->session = NULL;
    }
    p->at = g_get_monotonic_time();
}

static void on_destroy(void *data) { ((probe *)data)->destroyed++; }

static int stored(portal_auth *auth) {
    portal_session *session = NULL;
    CHECK(portal_auth_restore_session(auth, &session) == PORTAL_OK);
    int found = session != NULL;
    portal_session_free(session);
    return found;
}

int main(void) {
    api_host = getenv("PORTAL_TEST_API_HOST");
    if (!api_host || !getenv("PORTAL_TEST_FAKE_BROWSER") || !getenv("PORTAL_TEST_CLI") || !getenv("XDG_DATA_HOME")) {
        fprintf(stderr, "desktop_signin_test: run through Tests/c/run.sh inside scripts/with-portal-api.sh\n");
        return 2;
    }
    snprintf(state, sizeof state, "%s/portal-test-browser-c", getenv("XDG_DATA_HOME"));
    g_mkdir_with_parents(state, 0700);
    snprintf(env_id, sizeof env_id, "c-desktop-%d", (int)getpid());
    portal_auth *auth = NULL;
    CHECK(portal_auth_new(&auth, env_id, REDIRECT, api_host) == PORTAL_OK);
    CHECK(portal_auth_set_keyring_timeouts(auth, 5000, 2000) == PORTAL_OK);
    portal_redirect_kind kind = PORTAL_REDIRECT_NOT_HANDLED;
    portal_session *session = NULL;

    /* No handler: nothing registered for http in this fresh XDG environment. */
    CHECK(fake_browser_handler_is(NULL));
    CHECK(portal_auth_sign_in_with_google(auth, 5000, &kind, &session, NULL, NULL) == PORTAL_ERR_SIGN_IN_UNAVAILABLE);
    CHECK(strstr(portal_last_error_message(), "x-scheme-handler/http") != NULL);
    CHECK(strstr(portal_last_error_message(), "state=") == NULL);
    CHECK(session == NULL && !stored(auth));

    /* Argument checks, before anything starts. */
    CHECK(portal_auth_sign_in_with_google(auth, 900001, &kind, NULL, NULL, NULL) == PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(portal_last_error_message(), "timeout_ms") != NULL);
    probe refused = {0};
    uint64_t op = 0;
    CHECK(portal_auth_sign_in_with_google_async(auth, 900001, NULL, on_done, &refused, on_destroy, &op) ==
          PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(refused.calls == 0 && refused.destroyed == 1);
    CHECK(portal_auth_sign_in_with_apple_async(auth, 0, NULL, NULL, NULL, NULL, &op) == PORTAL_ERR_INVALID_ARGUMENT);

    /* In process, on a GMainLoop: the redirect goes to portal_auth_handle_redirect_async(). */
    browser("deliver", "eu-c-desktop");
    g_timeout_add(10, tick, NULL);
    gap_reset();
    probe signin = {0}, delivery = {0};
    CHECK(portal_auth_sign_in_with_google_async(auth, 30000, NULL, on_done, &signin, on_destroy, &op) == PORTAL_OK);
    char *redirect = await_file("redirect");
    CHECK(redirect != NULL);
    if (redirect) {
        uint64_t op2 = 0;
        CHECK(portal_auth_handle_redirect_async(auth, redirect, 0, NULL, on_done, &delivery, on_destroy, &op2) == PORTAL_OK);
        spin(&signin.calls, 1, 20000);
        spin(&delivery.calls, 1, 20000);
    }
    g_free(redirect);
    CHECK(signin.calls == 1 && signin.destroyed == 1 && signin.status == PORTAL_OK);
    CHECK(signin.kind == PORTAL_REDIRECT_AUTHENTICATED && signin.session != NULL);
    CHECK(delivery.status == PORTAL_OK && delivery.session != NULL);
    if (signin.session && delivery.session) {
        CHECK(strcmp(portal_session_get_end_user_id(signin.session), "eu-c-desktop") == 0);
        CHECK(portal_session_get_client_id(signin.session) != NULL); /* handle_redirect's, not a restore */
        CHECK(g_strcmp0(portal_session_get_client_id(signin.session), portal_session_get_client_id(delivery.session)) == 0);
    }
    gap_report("in-process delivery");
    portal_session_free(signin.session);
    portal_session_free(delivery.session);
    CHECK(stored(auth));
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);

    /* docs/security.md "A web page ends a desktop sign-in": an error redirect without the sign-in's state (any web page can send the
     * app's scheme one) fails that handle_redirect call alone; the waiting sign-in goes on, and
     * the real redirect completes it. */
    browser("deliver", "eu-c-desktop-forged");
    probe waiting = {0};
    CHECK(portal_auth_sign_in_with_google_async(auth, 30000, NULL, on_done, &waiting, on_destroy, &op) == PORTAL_OK);
    redirect = await_file("redirect");
    CHECK(redirect != NULL);
    char *real_state = opened_state();
    CHECK(real_state != NULL);
    char *other = g_strdup_printf(REDIRECT "?error=access_denied&login_type=GOOGLE&state=%sx", real_state ? real_state : "");
    CHECK(portal_auth_handle_redirect(auth, REDIRECT "?error=access_denied&login_type=GOOGLE", &kind, NULL, NULL, NULL) ==
          PORTAL_ERR_AUTHENTICATION_FAILED);
    CHECK(portal_auth_handle_redirect(auth, other, &kind, NULL, NULL, NULL) == PORTAL_ERR_AUTHENTICATION_FAILED);
    g_free(other);
    g_free(real_state);
    spin(&waiting.calls, 1, 300);
    CHECK(waiting.calls == 0);
    if (redirect) {
        session = NULL;
        CHECK(portal_auth_handle_redirect(auth, redirect, &kind, &session, NULL, NULL) == PORTAL_OK);
        portal_session_free(session);
        session = NULL;
        spin(&waiting.calls, 1, 20000);
    }
    g_free(redirect);
    CHECK(waiting.calls == 1 && waiting.status == PORTAL_OK && waiting.kind == PORTAL_REDIRECT_AUTHENTICATED);
    portal_session_free(waiting.session);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);

    /* One that carries the sign-in's state (the end user declined) ends the wait with its error. */
    browser("ignore", "");
    probe declined = {0};
    CHECK(portal_auth_sign_in_with_google_async(auth, 30000, NULL, on_done, &declined, on_destroy, &op) == PORTAL_OK);
    for (int i = 0; i < 1000 && opened() < 1; i++) spin(NULL, 0, 20);
    char *declined_state = opened_state();
    CHECK(declined_state != NULL);
    if (declined_state) {
        char *url = g_strdup_printf(REDIRECT "?error=access_denied&login_type=GOOGLE&state=%s", declined_state);
        CHECK(portal_auth_handle_redirect(auth, url, &kind, NULL, NULL, NULL) == PORTAL_ERR_AUTHENTICATION_FAILED);
        g_free(url);
        spin(&declined.calls, 1, 5000);
    } else {
        CHECK(portal_operation_cancel(op) == PORTAL_OK);
        spin(&declined.calls, 1, 5000);
    }
    g_free(declined_state);
    CHECK(declined.calls == 1 && declined.status == PORTAL_ERR_AUTHENTICATION_FAILED);
    CHECK(strstr(declined.message, "access_denied") != NULL);
    CHECK(!stored(auth));

    /* Single flight, then cancel. */
    browser("ignore", "");
    probe first = {0};
    CHECK(portal_auth_sign_in_with_google_async(auth, 30000, NULL, on_done, &first, on_destroy, &op) == PORTAL_OK);
    for (int i = 0; i < 1000 && opened() < 1; i++) spin(NULL, 0, 20);
    CHECK(opened() == 1);
    gint64 before = g_get_monotonic_time();
    CHECK(portal_auth_sign_in_with_apple(auth, 5000, &kind, NULL, NULL, NULL) == PORTAL_ERR_SIGN_IN_IN_PROGRESS);
    CHECK(g_get_monotonic_time() - before < 1000 * 1000);
    CHECK(portal_operation_cancel(op) == PORTAL_OK);
    spin(&first.calls, 1, 5000);
    CHECK(first.calls == 1 && first.status == PORTAL_ERR_CANCELLED && first.at - before < 2000 * 1000);
    CHECK(opened() == 1 && !stored(auth));

    /* Blocking, bounded. */
    before = g_get_monotonic_time();
    CHECK(portal_auth_sign_in_with_google(auth, 300, &kind, NULL, NULL, NULL) == PORTAL_ERR_SIGN_IN_TIMED_OUT);
    CHECK(g_get_monotonic_time() - before >= 300 * 1000);
    CHECK(opened() == 2 && !stored(auth));

    /* The URL handler's process completes it; the blocking call sees it through the watch. On
     * KeePassXC with ConfirmAccessItem the new item is locked to this process: the call restores,
     * nobody answers the access prompt here, and it fails at the prompt deadline. */
    browser("handler", "eu-c-desktop-handler");
    session = NULL;
    const char *provider = getenv("PORTAL_TEST_PROVIDER");
    if (provider && strcmp(provider, "keepassxc-confirm") == 0) {
        CHECK(portal_auth_sign_in_with_apple(auth, 30000, &kind, &session, NULL, NULL) == PORTAL_ERR_SESSION_STORAGE);
        CHECK(strstr(portal_last_error_message(), "locked") != NULL && session == NULL);
        char *status = await_file("handler-status");
        CHECK(status && strcmp(status, "0") == 0);
        g_free(status);
        portal_auth_free(auth);
        printf("desktop_signin_test: %d checks, %d failed\n", checks, failures);
        return failures ? 1 : 0;
    }
    CHECK(portal_auth_sign_in_with_apple(auth, 30000, &kind, &session, NULL, NULL) == PORTAL_OK);
    CHECK(kind == PORTAL_REDIRECT_AUTHENTICATED && session != NULL);
    if (session) {
        CHECK(strcmp(portal_session_get_end_user_id(session), "eu-c-desktop-handler") == 0);
        CHECK(portal_session_get_client_id(session) == NULL); /* restored: the other process had it */
    }
    char *status = await_file("handler-status");
    CHECK(status && strcmp(status, "0") == 0);
    g_free(status);
    portal_session_free(session);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);

    portal_auth_free(auth);
    printf("desktop_signin_test: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
