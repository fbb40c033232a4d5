/*
 * desktop_test.c — PortalKeyringAuth's desktop sign-in (sign_in_with_google / _apple) from C,
 * with real parts: GIO's URL opener launching Tests/tools/fake_browser.sh (registered here, in
 * the XDG directories of scripts/with-keyring.sh, for x-scheme-handler/http and https), the
 * loopback fake Portal API and the private keyring:
 *   - a timeout over 15 minutes: PORTAL_KEYRING_ERROR_INVALID_ARGUMENT, nothing opened;
 *   - on a main loop, the redirect the browser got handed to handle_redirect_async: the sign-in
 *     completes AUTHENTICATED with the session, which a restore then finds;
 *   - a cancel while the page is open: G_IO_ERROR_CANCELLED at once, nothing stored;
 *   - the redirect handed to the URL handler's process (portal-session handle-redirect, as the
 *     desktop's handler of the app's scheme runs it), which persists the session: the sign-in
 *     sees it in the keyring and completes AUTHENTICATED on the caller's context with the
 *     restored session (no client id: the other process had it).
 *
 *   PORTAL_TEST_API_HOST=… PORTAL_TEST_FAKE_BROWSER=Tests/tools/fake_browser.sh PORTAL_TEST_CLI=portal-session desktop_test
 *
 * Prints a line a failed check (check.h) and "desktop_test: N checks, M failed"; exits 1 on any.
 */
#define _GNU_SOURCE
#include "fake_browser.h"
#include "gobject_wait.h"

#include <portal-keyring-gobject/portal-keyring-gobject.h>

#include <unistd.h>

#define DESKTOP_ID "portal-test-browser-gobject.desktop"
#define REDIRECT "portalkeyring://auth/callback"

static char state[1024], env_id[64], end_user[64], handler_user[64];
static const char *api_host;

static void put(const char *name, const char *text) {
    g_autofree char *path = g_build_filename(state, name, NULL);
    CHECK(g_file_set_contents(path, text, -1, NULL));
}

/* The first line of the browser's file `name`, waiting up to 20 s with the loop running. */
static char *await_file(const char *name) {
    g_autofree char *path = g_build_filename(state, name, NULL);
    char *text = NULL;
    for (int i = 0; i < 2000 && !g_file_get_contents(path, &text, NULL, NULL); i++)
        g_main_context_iteration(NULL, FALSE), g_usleep(10000);
    if (text) text[strcspn(text, "\n")] = '\0';
    return text;
}

/* The browser (fake_browser.sh's mode: "deliver", "ignore" or "handler", which runs
 * $PORTAL_TEST_CLI handle-redirect with this auth's settings) as the http(s) handler; the grants
 * it fetches are `user`'s. */
static void browser(const char *mode, const char *user) {
    char text[2048];
    put("mode", mode);
    g_snprintf(text, sizeof text,
               "PORTAL_AUTH_ENVIRONMENT_ID='%s'\nPORTAL_REDIRECT_URL='%s'\nPORTAL_API_HOST='%s'\n"
               "PORTAL_TEST_END_USER='%s'\nPORTAL_TEST_CLI='%s'\n"
               "export PORTAL_AUTH_ENVIRONMENT_ID PORTAL_REDIRECT_URL PORTAL_API_HOST\n",
               env_id, REDIRECT, api_host, user, getenv("PORTAL_TEST_CLI"));
    put("env", text);
    for (const char *const *file = (const char *const[]){"opened", "redirect", "handler-status", NULL}; *file; file++) {
        g_autofree char *path = g_build_filename(state, *file, NULL);
        unlink(path);
    }
    fake_browser_register(DESKTOP_ID, "Portal test browser (GObject)", state);
}

int main(void) {
    api_host = getenv("PORTAL_TEST_API_HOST");
    if (!api_host || !getenv("PORTAL_TEST_FAKE_BROWSER") || !getenv("PORTAL_TEST_CLI")) {
        fprintf(stderr, "desktop_test: run through Tests/gobject/run.sh inside scripts/with-portal-api.sh\n");
        return 2;
    }
    g_snprintf(env_id, sizeof env_id, "gobject-desktop-%d", (int)getpid());
    g_snprintf(end_user, sizeof end_user, "eu-gobject-desktop-%d", (int)getpid());
    g_snprintf(handler_user, sizeof handler_user, "eu-gobject-handler-%d", (int)getpid());
    g_snprintf(state, sizeof state, "%s/portal-test-browser-gobject", g_get_user_data_dir());
    g_mkdir_with_parents(state, 0700);
    GError *error = NULL;
    PortalKeyringAuth *auth = g_initable_new(PORTAL_KEYRING_TYPE_AUTH, NULL, &error, "auth-environment-id", env_id,
                                             "redirect-url", REDIRECT, "api-host", api_host, NULL);
    CHECK_MSG(auth != NULL, "construction: %s", error ? error->message : "");
    if (!auth) return 1;

    check_context = "bad timeout";
    CHECK(portal_keyring_auth_sign_in_with_google_sync(auth, 900001, NULL, &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
    CHECK_MSG(error && strstr(error->message, "timeout_ms"), "message: %s", error ? error->message : "");
    g_clear_error(&error);

    check_context = "in process";
    browser("deliver", end_user);
    Wait signin = {0}, delivery = {0};
    portal_keyring_auth_sign_in_with_google_async(auth, 30000, NULL, wait_callback, &signin);
    g_autofree char *redirect = await_file("redirect");
    CHECK_MSG(redirect != NULL, "the browser brought no redirect back");
    if (redirect) {
        portal_keyring_auth_handle_redirect_async(auth, redirect, PORTAL_KEYRING_REDIRECT_FLAGS_NONE, NULL,
                                                  wait_callback, &delivery);
        CHECK(wait_run(&delivery, NULL, 20000));
        CHECK(wait_run(&signin, NULL, 20000));
        PortalKeyringSignInResult *delivered = portal_keyring_auth_handle_redirect_finish(auth, delivery.result, &error);
        CHECK_MSG(delivered != NULL, "handle_redirect: %s", error ? error->message : "");
        g_clear_error(&error);
        g_clear_object(&delivered);
        PortalKeyringSignInResult *result = portal_keyring_auth_sign_in_with_google_finish(auth, signin.result, &error);
        CHECK_MSG(result && portal_keyring_sign_in_result_get_kind(result) == PORTAL_KEYRING_REDIRECT_KIND_AUTHENTICATED,
                  "sign_in_with_google: %s", error ? error->message : "another kind");
        PortalKeyringSession *session = result ? portal_keyring_sign_in_result_get_session(result) : NULL;
        CHECK(session && g_strcmp0(portal_keyring_session_get_end_user_id(session), end_user) == 0);
        g_clear_error(&error);
        g_clear_object(&result);
    }
    wait_clear(&signin);
    wait_clear(&delivery);
    PortalKeyringSession *restored = portal_keyring_auth_restore_session_sync(auth, NULL, &error);
    CHECK_MSG(restored && g_strcmp0(portal_keyring_session_get_end_user_id(restored), end_user) == 0,
              "restore after the desktop sign-in: %s", error ? error->message : "no session");
    g_clear_error(&error);
    g_clear_object(&restored);
    CHECK(portal_keyring_auth_clear_persisted_session_sync(auth, NULL, &error));
    g_clear_error(&error);

    check_context = "cancel";
    browser("ignore", end_user);
    GCancellable *cancellable = g_cancellable_new();
    portal_keyring_auth_sign_in_with_apple_async(auth, 30000, cancellable, wait_callback, &signin);
    g_autofree char *opened = await_file("opened");
    CHECK_MSG(opened && strstr(opened, "apple"), "the page opened: %s", opened ? opened : "none");
    gint64 at = g_get_monotonic_time();
    g_cancellable_cancel(cancellable);
    CHECK(wait_run(&signin, NULL, 5000));
    gint64 took_ms = (g_get_monotonic_time() - at) / 1000;
    CHECK(portal_keyring_auth_sign_in_with_apple_finish(auth, signin.result, &error) == NULL);
    CHECK_GERROR(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
    CHECK_MSG(took_ms < 1000, "the cancelled sign-in completed %lld ms after the cancel", (long long)took_ms);
    printf("cancelled desktop sign-in completed %lld ms after the cancel\n", (long long)took_ms);
    g_clear_error(&error);
    wait_clear(&signin);
    g_object_unref(cancellable);
    restored = portal_keyring_auth_restore_session_sync(auth, NULL, &error);
    CHECK_MSG(restored == NULL && error == NULL, "something stored after the cancel");
    g_clear_error(&error);
    g_clear_object(&restored);

    check_context = "handler process";
    browser("handler", handler_user);
    portal_keyring_auth_sign_in_with_google_async(auth, 30000, NULL, wait_callback, &signin);
    CHECK(wait_run(&signin, NULL, 45000));
    CHECK(signin.thread == g_thread_self() && signin.context == g_main_context_default());
    PortalKeyringSignInResult *result =
        signin.result ? portal_keyring_auth_sign_in_with_google_finish(auth, signin.result, &error) : NULL;
    CHECK_MSG(result && portal_keyring_sign_in_result_get_kind(result) == PORTAL_KEYRING_REDIRECT_KIND_AUTHENTICATED,
              "sign_in_with_google completed by the handler: %s", error ? error->message : "another kind");
    g_clear_error(&error);
    PortalKeyringSession *session = result ? portal_keyring_sign_in_result_get_session(result) : NULL;
    CHECK(session && g_strcmp0(portal_keyring_session_get_end_user_id(session), handler_user) == 0);
    CHECK(session && portal_keyring_session_get_client_id(session) == NULL);
    g_clear_object(&result);
    wait_clear(&signin);
    g_autofree char *status = await_file("handler-status");
    CHECK_MSG(g_strcmp0(status, "0") == 0, "portal-session handle-redirect exited %s", status ? status : "never");
    restored = portal_keyring_auth_restore_session_sync(auth, NULL, &error);
    CHECK_MSG(restored && g_strcmp0(portal_keyring_session_get_end_user_id(restored), handler_user) == 0,
              "restore after the handler's sign-in: %s", error ? error->message : "no session");
    g_clear_error(&error);
    g_clear_object(&restored);
    CHECK(portal_keyring_auth_clear_persisted_session_sync(auth, NULL, &error));
    g_clear_error(&error);
    g_object_unref(auth);
    printf("desktop_test: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
