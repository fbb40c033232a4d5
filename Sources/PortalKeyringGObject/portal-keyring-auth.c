/* portal-keyring-auth.c — PortalKeyringAuth over a C portal_auth handle: the type, its
 * properties, construction through GInitable, and the handle its operations use. The property
 * getters are in portal-keyring-auth-properties.c; the operations in
 * portal-keyring-auth-operations.c (the keyring) and portal-keyring-auth-signin.c,
 * portal-keyring-auth-redirect.c, portal-keyring-auth-desktop.c (sign-in); their bridge to GIO in
 * portal-keyring-task-bridge.c. */
#include <string.h>

#include "portal-keyring-private.h"

/**
 * PortalKeyringAuth:
 *
 * Client auth for one Portal auth environment: restores, persists and clears the end user's
 * session in the user's keyring (the Secret Service, or the file keyring in a Flatpak
 * sandbox).
 *
 * Make one with [ctor@PortalKeyring.Auth.new], or with [ctor@GObject.Object.new] and the
 * construct properties followed by [method@Gio.Initable.init]: bad arguments fail there with a
 * [error@PortalKeyring.Error] of code %PORTAL_KEYRING_ERROR_INVALID_ARGUMENT. Every operation
 * of an object whose initialisation failed, or was never run, fails with that error too.
 *
 * Each operation comes in GIO's three forms: `_async` and `_finish`, which never block the
 * caller's main loop and complete on the thread-default main context of the thread that
 * called `_async`, at that call; and `_sync`, which blocks (up to the keyring deadlines,
 * [property@PortalKeyring.Auth:call-timeout-ms] and
 * [property@PortalKeyring.Auth:prompt-timeout-ms]) and so belongs on a worker thread.
 * Cancelling the #GCancellable completes the operation at once with `G_IO_ERROR_CANCELLED`.
 *
 * "Signed out" and "the keyring could not be read" are never the same answer: a restore that
 * finds nothing returns %NULL without an error, and a keyring that cannot be used now is an
 * error of code %PORTAL_KEYRING_ERROR_SESSION_STORAGE (nothing was deleted; the end user is
 * not known to be signed out).
 */
/* The instance struct is in portal-keyring-private.h, for the property getters
 * (portal-keyring-auth-properties.c). */

static void portal_keyring_auth_initable_iface_init (GInitableIface *iface);

G_DEFINE_TYPE_WITH_CODE (PortalKeyringAuth, portal_keyring_auth, G_TYPE_OBJECT,
                         G_IMPLEMENT_INTERFACE (G_TYPE_INITABLE, portal_keyring_auth_initable_iface_init))

enum {
    PROP_0,
    PROP_AUTH_ENVIRONMENT_ID,
    PROP_REDIRECT_URL,
    PROP_API_HOST,
    PROP_CALL_TIMEOUT_MS,
    PROP_PROMPT_TIMEOUT_MS,
    PROP_MAGIC_LINK_FROM_EMAIL,
    PROP_MAGIC_LINK_TEMPLATE_ID,
    PROP_ACCOUNT_ABSTRACTION,
    N_PROPS
};

static GParamSpec *properties[N_PROPS];

/* The C library's defaults (portal_auth_set_keyring_timeouts()). The C ABI has no getter, so
 * the properties start at these numbers and are always handed to the handle. */
#define DEFAULT_CALL_TIMEOUT_MS 5000
#define DEFAULT_PROMPT_TIMEOUT_MS 30000

static void
portal_keyring_auth_finalize (GObject *object)
{
    PortalKeyringAuth *self = PORTAL_KEYRING_AUTH (object);
    /* An operation cancelled a moment ago may still run on a C worker: it holds its own
     * reference to the C library's auth, so freeing the handle here does not pull it away. */
    portal_auth_free (self->handle);
    g_clear_error (&self->init_error);
    g_free (self->auth_environment_id);
    g_free (self->redirect_url);
    g_free (self->api_host);
    g_free (self->magic_link_from_email);
    g_free (self->magic_link_template_id);
    G_OBJECT_CLASS (portal_keyring_auth_parent_class)->finalize (object);
}

static void
portal_keyring_auth_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
    PortalKeyringAuth *self = PORTAL_KEYRING_AUTH (object);
    switch (prop_id) {
    case PROP_AUTH_ENVIRONMENT_ID:
        g_value_set_string (value, self->auth_environment_id);
        break;
    case PROP_REDIRECT_URL:
        g_value_set_string (value, self->redirect_url);
        break;
    case PROP_API_HOST:
        g_value_set_string (value, self->api_host);
        break;
    case PROP_CALL_TIMEOUT_MS:
        g_value_set_uint (value, self->call_timeout_ms);
        break;
    case PROP_PROMPT_TIMEOUT_MS:
        g_value_set_uint (value, self->prompt_timeout_ms);
        break;
    case PROP_MAGIC_LINK_FROM_EMAIL:
        g_value_set_string (value, self->magic_link_from_email);
        break;
    case PROP_MAGIC_LINK_TEMPLATE_ID:
        g_value_set_string (value, self->magic_link_template_id);
        break;
    case PROP_ACCOUNT_ABSTRACTION:
        g_value_set_enum (value, self->account_abstraction);
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
portal_keyring_auth_set_property (GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec)
{
    PortalKeyringAuth *self = PORTAL_KEYRING_AUTH (object);
    switch (prop_id) {
    case PROP_AUTH_ENVIRONMENT_ID:
        g_free (self->auth_environment_id);
        self->auth_environment_id = g_value_dup_string (value);
        break;
    case PROP_REDIRECT_URL:
        g_free (self->redirect_url);
        self->redirect_url = g_value_dup_string (value);
        break;
    case PROP_API_HOST:
        g_free (self->api_host);
        self->api_host = g_value_dup_string (value);
        break;
    case PROP_CALL_TIMEOUT_MS:
        self->call_timeout_ms = g_value_get_uint (value);
        break;
    case PROP_PROMPT_TIMEOUT_MS:
        self->prompt_timeout_ms = g_value_get_uint (value);
        break;
    case PROP_MAGIC_LINK_FROM_EMAIL:
        g_free (self->magic_link_from_email);
        self->magic_link_from_email = g_value_dup_string (value);
        break;
    case PROP_MAGIC_LINK_TEMPLATE_ID:
        g_free (self->magic_link_template_id);
        self->magic_link_template_id = g_value_dup_string (value);
        break;
    case PROP_ACCOUNT_ABSTRACTION:
        self->account_abstraction = g_value_get_enum (value);
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
portal_keyring_auth_class_init (PortalKeyringAuthClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS (klass);
    object_class->finalize = portal_keyring_auth_finalize;
    object_class->get_property = portal_keyring_auth_get_property;
    object_class->set_property = portal_keyring_auth_set_property;

    /* The strings and numbers are not checked here but by the C library at initialisation, so
     * that a bad value is a GError from g_initable_init(), never a GLib warning (which
     * G_DEBUG=fatal-warnings turns into an abort), and so that the C ABI's rules are the only
     * ones. */

    /**
     * PortalKeyringAuth:auth-environment-id: (getter get_auth_environment_id)
     *
     * The Portal auth environment id: not blank, at most 2048 bytes, no control character.
     */
    properties[PROP_AUTH_ENVIRONMENT_ID] =
        g_param_spec_string ("auth-environment-id", NULL, NULL, NULL,
                             G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    /**
     * PortalKeyringAuth:redirect-url: (getter get_redirect_url)
     *
     * The app's sign-in redirect URL: "scheme://…" (e.g. "myapp://auth") or a private-use
     * "scheme:/path"; at most 8192 bytes, no whitespace or control characters.
     */
    properties[PROP_REDIRECT_URL] =
        g_param_spec_string ("redirect-url", NULL, NULL, NULL,
                             G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    /**
     * PortalKeyringAuth:api-host: (getter get_api_host)
     *
     * The Portal API host (optionally "host:port"), or %NULL for "api.portalhq.io".
     */
    properties[PROP_API_HOST] =
        g_param_spec_string ("api-host", NULL, NULL, NULL,
                             G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    /**
     * PortalKeyringAuth:call-timeout-ms: (getter get_call_timeout_ms)
     *
     * The call deadline, in milliseconds (1 … 600000): the bound of the keyring calls of one
     * operation together, prompts not counted.
     */
    properties[PROP_CALL_TIMEOUT_MS] =
        g_param_spec_uint ("call-timeout-ms", NULL, NULL, 0, G_MAXUINT, DEFAULT_CALL_TIMEOUT_MS,
                           G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    /**
     * PortalKeyringAuth:prompt-timeout-ms: (getter get_prompt_timeout_ms)
     *
     * The prompt deadline, in milliseconds (1 … 600000): the bound of one keyring prompt (an
     * unlock). A prompt not answered in time is left open, never dismissed.
     */
    properties[PROP_PROMPT_TIMEOUT_MS] =
        g_param_spec_uint ("prompt-timeout-ms", NULL, NULL, 0, G_MAXUINT, DEFAULT_PROMPT_TIMEOUT_MS,
                           G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    /**
     * PortalKeyringAuth:magic-link-from-email: (getter get_magic_link_from_email)
     *
     * The sender of the sign-in emails of [method@PortalKeyring.Auth.send_magic_link_async]:
     * not blank, at most 2048 bytes, no control character. Set it with
     * [property@PortalKeyring.Auth:magic-link-template-id], or leave both %NULL (then sending a
     * magic link fails with %PORTAL_KEYRING_ERROR_MAGIC_LINK_NOT_CONFIGURED).
     */
    properties[PROP_MAGIC_LINK_FROM_EMAIL] =
        g_param_spec_string ("magic-link-from-email", NULL, NULL, NULL,
                             G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    /**
     * PortalKeyringAuth:magic-link-template-id: (getter get_magic_link_template_id)
     *
     * The Portal email template of the sign-in emails: set with
     * [property@PortalKeyring.Auth:magic-link-from-email], under the same rules.
     */
    properties[PROP_MAGIC_LINK_TEMPLATE_ID] =
        g_param_spec_string ("magic-link-template-id", NULL, NULL, NULL,
                             G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    /**
     * PortalKeyringAuth:account-abstraction: (getter get_account_abstraction)
     *
     * Whether the magic-link and Google / Apple sign-ins ask for an account-abstracted client:
     * %PORTAL_KEYRING_ACCOUNT_ABSTRACTION_DEFAULT (the default) asks nothing and lets the auth
     * environment decide. When Portal cannot honour it, those sign-ins fail with
     * %PORTAL_KEYRING_ERROR_ACCOUNT_ABSTRACTION_UNAVAILABLE.
     */
    properties[PROP_ACCOUNT_ABSTRACTION] =
        g_param_spec_enum ("account-abstraction", NULL, NULL, PORTAL_KEYRING_TYPE_ACCOUNT_ABSTRACTION,
                           PORTAL_KEYRING_ACCOUNT_ABSTRACTION_DEFAULT,
                           G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
portal_keyring_auth_init (PortalKeyringAuth *self)
{
    self->call_timeout_ms = DEFAULT_CALL_TIMEOUT_MS;
    self->prompt_timeout_ms = DEFAULT_PROMPT_TIMEOUT_MS;
}

/* The C library names its parameters in its messages ("call_timeout_ms: …", "template_id: must
 * not be NULL when from_email is given"); a GObject caller set properties: a refused setting's
 * error names the properties instead. */
static GError *
setting_refused (const char *message)
{
    static const char *const names[][2] = {
        { "call_timeout_ms", "call-timeout-ms" },
        { "prompt_timeout_ms", "prompt-timeout-ms" },
        { "from_email", "magic-link-from-email" },
        { "template_id", "magic-link-template-id" },
    };
    GString *text = g_string_new (message);
    for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
        g_string_replace (text, names[i][0], names[i][1], 0);
    /* portal_auth_set_account_abstraction()'s parameter is "value", a word too common to replace
     * anywhere but at the start. */
    if (g_str_has_prefix (text->str, "value:"))
        g_string_replace (text, "value:", "account-abstraction:", 1);
    GError *error = g_error_new_literal (PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT, text->str);
    g_string_free (text, TRUE);
    return error;
}

/* The sign-in configuration: the magic link when either half is set (the C library refuses one
 * half alone), and the account abstraction always (DEFAULT is the C library's own default). */
static portal_status
configure_sign_in (PortalKeyringAuth *self, portal_auth *handle)
{
    if (self->magic_link_from_email || self->magic_link_template_id) {
        portal_status status =
            portal_auth_set_magic_link (handle, self->magic_link_from_email, self->magic_link_template_id);
        if (status != PORTAL_OK)
            return status;
    }
    return portal_auth_set_account_abstraction (handle, (portal_account_abstraction) self->account_abstraction);
}

static gboolean
portal_keyring_auth_initable_init (GInitable *initable, GCancellable *cancellable, GError **error)
{
    PortalKeyringAuth *self = PORTAL_KEYRING_AUTH (initable);
    (void) cancellable; /* nothing here waits: portal_auth_new() does no I/O */
    /* GInitable: a second init gives the first one's answer. */
    if (self->init_ran) {
        if (self->init_error) {
            g_propagate_error (error, g_error_copy (self->init_error));
            return FALSE;
        }
        return TRUE;
    }
    self->init_ran = TRUE;
    portal_auth *handle = NULL;
    portal_status status = portal_auth_new (&handle, self->auth_environment_id, self->redirect_url, self->api_host);
    if (status != PORTAL_OK) {
        /* The C message names the argument: auth_environment_id, redirect_url or api_host. */
        self->init_error = _portal_keyring_error_new (status, portal_last_error_message ());
    } else if ((status = portal_auth_set_keyring_timeouts (handle, self->call_timeout_ms, self->prompt_timeout_ms)) !=
               PORTAL_OK) {
        self->init_error = setting_refused (portal_last_error_message ());
    } else if ((status = configure_sign_in (self, handle)) != PORTAL_OK) {
        self->init_error = setting_refused (portal_last_error_message ());
    }
    if (self->init_error) {
        /* Never a half-made object: the handle goes, and every later call gives this error. */
        portal_auth_free (handle);
        g_propagate_error (error, g_error_copy (self->init_error));
        return FALSE;
    }
    self->handle = handle;
    return TRUE;
}

static void
portal_keyring_auth_initable_iface_init (GInitableIface *iface)
{
    iface->init = portal_keyring_auth_initable_init;
}

/**
 * portal_keyring_auth_new:
 * @auth_environment_id: the Portal auth environment id
 * @redirect_url: the app's sign-in redirect URL, e.g. "myapp://auth"
 * @api_host: (nullable): the Portal API host ("host" or "host:port"), or %NULL for
 *   "api.portalhq.io"
 * @error: return location for a #GError
 *
 * Makes client auth for an auth environment, with the default keyring deadlines. Does no I/O.
 * For other deadlines, use [ctor@GObject.Object.new] with the construct properties, then
 * [method@Gio.Initable.init].
 *
 * Returns: (transfer full): the new auth, or %NULL with @error set
 *   (%PORTAL_KEYRING_ERROR_INVALID_ARGUMENT naming the first bad argument)
 */
PortalKeyringAuth *
portal_keyring_auth_new (const gchar *auth_environment_id, const gchar *redirect_url, const gchar *api_host,
                         GError **error)
{
    return g_initable_new (PORTAL_KEYRING_TYPE_AUTH, NULL, error, "auth-environment-id", auth_environment_id,
                           "redirect-url", redirect_url, "api-host", api_host, NULL);
}

portal_auth *
_portal_keyring_auth_get_handle (PortalKeyringAuth *self, GError **error)
{
    if (self->handle)
        return self->handle;
    if (self->init_error)
        g_propagate_error (error, g_error_copy (self->init_error));
    else
        g_set_error_literal (error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT,
                             "PortalKeyringAuth was not initialised: make it with portal_keyring_auth_new() "
                             "or call g_initable_init() after g_object_new()");
    return NULL;
}
