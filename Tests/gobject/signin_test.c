/*
 * signin_test.c — the start of a sign-in through the GNOME API (PortalKeyringAuth's sign-in
 * configuration and the operations before the redirect), against the loopback fake Portal API
 * of scripts/with-portal-api.sh:
 *   - the construct properties magic-link-from-email, magic-link-template-id and the registered
 *     enum account-abstraction read back; a half or blank magic link fails g_initable_init()
 *     with PORTAL_KEYRING_ERROR_INVALID_ARGUMENT naming the property, and the failed object's
 *     sign-ins give that error;
 *   - get_methods, login_with_google / _apple in their forms, with what the fake API serves;
 *     account-abstraction ON refused where the API cannot honour it;
 *   - the Portal API's 401 / 429 as their error codes;
 *   - cancels: before the start, and mid-request in _async and _sync (G_IO_ERROR_CANCELLED at
 *     once while the API holds the request for 8 s).
 * The sign-ins that complete are redirect_test.c's and end_user_test.c's.
 *
 *   PORTAL_TEST_API_URL=… PORTAL_TEST_API_HOST=… signin_test
 *
 * Prints a line a failed check (check.h) and "signin_test: N checks, M failed"; exits 1 on any.
 */
#define _GNU_SOURCE
#include "gobject_signin.h"

static char env_id[64];
static const char *api_host;

static int fault(const char *json) {
    char ignored[256];
    return fake_api_admin("POST", "/_admin/faults", json, "1", ignored, sizeof ignored);
}

static void clear_faults(void) {
    char ignored[256];
    CHECK(fake_api_admin("DELETE", "/_admin/faults", NULL, "1", ignored, sizeof ignored) == 0);
}

static void test_properties(void) {
    check_context = "properties";
    GError *error = NULL;
    PortalKeyringAuth *auth = g_initable_new(PORTAL_KEYRING_TYPE_AUTH, NULL, &error, "auth-environment-id", env_id,
                                             "redirect-url", REDIRECT, "magic-link-from-email", "login@example.com",
                                             "magic-link-template-id", "tpl-gobject", "account-abstraction",
                                             PORTAL_KEYRING_ACCOUNT_ABSTRACTION_OFF, NULL);
    CHECK_MSG(auth != NULL, "construction failed: %s", error ? error->message : "");
    g_clear_error(&error);
    if (auth) {
        g_autofree char *from = NULL, *template_id = NULL;
        PortalKeyringAccountAbstraction abstraction = PORTAL_KEYRING_ACCOUNT_ABSTRACTION_DEFAULT;
        g_object_get(auth, "magic-link-from-email", &from, "magic-link-template-id", &template_id,
                     "account-abstraction", &abstraction, NULL);
        CHECK(g_strcmp0(from, "login@example.com") == 0 && g_strcmp0(template_id, "tpl-gobject") == 0);
        CHECK(abstraction == PORTAL_KEYRING_ACCOUNT_ABSTRACTION_OFF);
        CHECK(g_strcmp0(portal_keyring_auth_get_magic_link_from_email(auth), "login@example.com") == 0);
        CHECK(g_strcmp0(portal_keyring_auth_get_magic_link_template_id(auth), "tpl-gobject") == 0);
        CHECK(portal_keyring_auth_get_account_abstraction(auth) == PORTAL_KEYRING_ACCOUNT_ABSTRACTION_OFF);
        /* A registered enum with the C ABI's three values, not a boolean. */
        GParamSpec *pspec = g_object_class_find_property(G_OBJECT_GET_CLASS(auth), "account-abstraction");
        CHECK(pspec && G_IS_PARAM_SPEC_ENUM(pspec) &&
              pspec->value_type == PORTAL_KEYRING_TYPE_ACCOUNT_ABSTRACTION);
        CHECK(pspec && G_PARAM_SPEC_ENUM(pspec)->enum_class->n_values == 3 &&
              G_PARAM_SPEC_ENUM(pspec)->default_value == PORTAL_KEYRING_ACCOUNT_ABSTRACTION_DEFAULT);
        CHECK(pspec && (pspec->flags & G_PARAM_CONSTRUCT_ONLY));
        g_object_unref(auth);
    }
    /* The defaults: no magic link, DEFAULT. */
    auth = portal_keyring_auth_new(env_id, REDIRECT, NULL, &error);
    CHECK(auth && portal_keyring_auth_get_magic_link_from_email(auth) == NULL &&
          portal_keyring_auth_get_account_abstraction(auth) == PORTAL_KEYRING_ACCOUNT_ABSTRACTION_DEFAULT);
    g_clear_object(&auth);

    /* Half a magic link, or a blank half: g_initable_init() fails naming the property, and the
     * object is never half made: its sign-ins fail with the same error. */
    const struct {
        const char *from, *template_id, *named;
    } bad[] = {
        { "login@example.com", NULL, "magic-link-template-id" },
        { NULL, "tpl", "magic-link-from-email" },
        { "   ", "tpl", "magic-link-from-email" },
        { "login@example.com", "", "magic-link-template-id" },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        PortalKeyringAuth *half = g_object_new(PORTAL_KEYRING_TYPE_AUTH, "auth-environment-id", env_id, "redirect-url",
                                               REDIRECT, "api-host", api_host, "magic-link-from-email", bad[i].from,
                                               "magic-link-template-id", bad[i].template_id, NULL);
        CHECK(!g_initable_init(G_INITABLE(half), NULL, &error));
        CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
        CHECK_MSG(error && g_str_has_prefix(error->message, bad[i].named), "case %zu: message %s", i,
                  error ? error->message : "");
        CHECK_MSG(error && !strstr(error->message, "from_email") && !strstr(error->message, "template_id"),
                  "case %zu: the message names a C parameter: %s", i, error ? error->message : "");
        g_clear_error(&error);
        Wait wait = {0};
        portal_keyring_auth_send_magic_link_async(half, "someone@example.com", NULL, wait_callback, &wait);
        CHECK(wait_run(&wait, NULL, 1000));
        CHECK(!portal_keyring_auth_send_magic_link_finish(half, wait.result, &error));
        CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT);
        CHECK_MSG(error && g_str_has_prefix(error->message, bad[i].named), "case %zu: operation's message %s", i,
                  error ? error->message : "");
        g_clear_error(&error);
        wait_clear(&wait);
        g_object_unref(half);
    }
}

static void test_methods_and_urls(void) {
    check_context = "methods and authorize URLs";
    GError *error = NULL;
    PortalKeyringAuth *auth = signin_auth_new(env_id, NULL, NULL);
    Wait wait = {0};
    portal_keyring_auth_get_methods_async(auth, NULL, wait_callback, &wait);
    CHECK_MSG(wait.done == 0, "the callback ran inside the _async call");
    CHECK(wait_run(&wait, NULL, 15000));
    gboolean wallet = FALSE;
    g_auto(GStrv) methods = portal_keyring_auth_get_methods_finish(auth, wait.result, &wallet, &error);
    CHECK_MSG(methods != NULL, "get_methods: %s", error ? error->message : "");
    CHECK(methods && g_strv_length(methods) == 3 && g_strv_contains((const char *const *)methods, "EMAIL_MAGIC_LINK") &&
          g_strv_contains((const char *const *)methods, "GOOGLE") && g_strv_contains((const char *const *)methods, "APPLE"));
    CHECK(wallet);
    g_clear_error(&error);
    wait_clear(&wait);
    g_auto(GStrv) again = portal_keyring_auth_get_methods_sync(auth, NULL, NULL, &error);
    CHECK_MSG(again && g_strv_length(again) == 3, "get_methods_sync: %s", error ? error->message : "");
    g_clear_error(&error);

    portal_keyring_auth_login_with_google_async(auth, NULL, wait_callback, &wait);
    CHECK(wait_run(&wait, NULL, 15000));
    g_autofree char *google = portal_keyring_auth_login_with_google_finish(auth, wait.result, &error);
    CHECK_MSG(google && strstr(google, "/_admin/oauth/authorize") && strstr(google, "google"), "google: %s",
              google ? google : error ? error->message : "");
    g_clear_error(&error);
    wait_clear(&wait);
    g_autofree char *apple = portal_keyring_auth_login_with_apple_sync(auth, NULL, &error);
    CHECK_MSG(apple && strstr(apple, "apple"), "apple: %s", apple ? apple : error ? error->message : "");
    g_clear_error(&error);

    /* The Portal API's answers as their codes: a 401 and a 429. */
    CHECK(fault("{\"route\":\"/api/v3/auth/methods\",\"status\":401,\"count\":1}") == 0);
    CHECK(portal_keyring_auth_get_methods_sync(auth, NULL, NULL, &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_UNAUTHORIZED);
    g_clear_error(&error);
    CHECK(fault("{\"route\":\"/api/v3/auth/oauth/urls\",\"status\":429,\"count\":1}") == 0);
    CHECK(portal_keyring_auth_login_with_google_sync(auth, NULL, &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_RATE_LIMITED);
    g_clear_error(&error);
    clear_faults();
    g_object_unref(auth);

    /* account-abstraction reaches the requests: ON where Portal cannot honour it is refused. */
    char ignored[64];
    CHECK(fake_api_admin("POST", "/_admin/config", "{\"accountAbstractionAvailable\":false}", "1", ignored,
                         sizeof ignored) == 0);
    auth = g_initable_new(PORTAL_KEYRING_TYPE_AUTH, NULL, &error, "auth-environment-id", env_id, "redirect-url", REDIRECT,
                          "api-host", api_host, "account-abstraction", PORTAL_KEYRING_ACCOUNT_ABSTRACTION_ON, NULL);
    CHECK(auth && portal_keyring_auth_login_with_google_sync(auth, NULL, &error) == NULL);
    CHECK_GERROR(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_ACCOUNT_ABSTRACTION_UNAVAILABLE);
    g_clear_error(&error);
    g_clear_object(&auth);
    CHECK(fake_api_admin("POST", "/_admin/config", "{\"accountAbstractionAvailable\":true}", "1", ignored,
                         sizeof ignored) == 0);
}

static gpointer cancel_after_100ms(gpointer cancellable) {
    g_usleep(100 * 1000);
    g_cancellable_cancel(cancellable);
    return NULL;
}

static gboolean cancel_later(gpointer cancellable) {
    g_cancellable_cancel(cancellable);
    return G_SOURCE_REMOVE;
}

static void test_cancel(void) {
    check_context = "cancel";
    GError *error = NULL;
    PortalKeyringAuth *auth = signin_auth_new(env_id, NULL, NULL);
    Wait wait = {0};
    GCancellable *cancelled = g_cancellable_new();
    g_cancellable_cancel(cancelled);
    portal_keyring_auth_login_with_google_async(auth, cancelled, wait_callback, &wait);
    CHECK_MSG(wait.done == 0, "the callback ran inside the _async call");
    CHECK(wait_run(&wait, NULL, 1000));
    CHECK(portal_keyring_auth_login_with_google_finish(auth, wait.result, &error) == NULL);
    CHECK_GERROR(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
    g_clear_error(&error);
    wait_clear(&wait);
    g_object_unref(cancelled);

    /* The API holds the request for 8 s: a cancel 100 ms in completes the operation at once. */
    CHECK(fault("{\"route\":\"/api/v3/auth/methods\",\"delayMs\":8000,\"count\":2}") == 0);
    GCancellable *cancellable = g_cancellable_new();
    gint64 start = g_get_monotonic_time();
    portal_keyring_auth_get_methods_async(auth, cancellable, wait_callback, &wait);
    g_timeout_add(100, cancel_later, cancellable);
    CHECK(wait_run(&wait, NULL, 6000));
    gint64 took_ms = (g_get_monotonic_time() - start) / 1000;
    CHECK(portal_keyring_auth_get_methods_finish(auth, wait.result, NULL, &error) == NULL);
    CHECK_GERROR(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
    CHECK_MSG(took_ms < 1500, "the cancelled get_methods completed after %lld ms (API delay 8000 ms)",
              (long long)took_ms);
    printf("cancelled get_methods completed after %lld ms\n", (long long)took_ms);
    g_clear_error(&error);
    wait_clear(&wait);
    g_object_unref(cancellable);

    cancellable = g_cancellable_new();
    GThread *canceller = g_thread_new("canceller", cancel_after_100ms, cancellable);
    start = g_get_monotonic_time();
    CHECK(portal_keyring_auth_get_methods_sync(auth, NULL, cancellable, &error) == NULL);
    took_ms = (g_get_monotonic_time() - start) / 1000;
    CHECK_GERROR(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
    CHECK_MSG(took_ms < 1500, "the cancelled get_methods_sync returned after %lld ms (API delay 8000 ms)",
              (long long)took_ms);
    g_clear_error(&error);
    g_thread_join(canceller);
    g_object_unref(cancellable);
    clear_faults();
    g_object_unref(auth);
}

int main(void) {
    g_snprintf(env_id, sizeof env_id, "gobject-signin-%d", (int)getpid());
    api_host = getenv("PORTAL_TEST_API_HOST");
    if (!api_host || !getenv("PORTAL_TEST_API_URL")) {
        fprintf(stderr, "signin_test: run inside scripts/with-portal-api.sh\n");
        return 2;
    }
    test_properties();
    test_methods_and_urls();
    test_cancel();
    printf("signin_test: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
