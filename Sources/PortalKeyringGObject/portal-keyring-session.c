/* portal-keyring-session.c — PortalKeyringSession over a C portal_session handle. */
#include <string.h>

#include "portal-keyring-private.h"

/**
 * PortalKeyringSession:
 *
 * A signed-in end user's session, as [method@PortalKeyring.Auth.restore_session_async] and
 * [method@PortalKeyring.Auth.persist_session_async] return it.
 *
 * Its properties are read-only and never change. The Client Session Token is not a property
 * (a property would show it to every inspector, binding and `notify` handler): ask for it with
 * [method@PortalKeyring.Session.copy_token] when a request needs it, and drop it right after.
 */
struct _PortalKeyringSession {
    GObject parent_instance;
    portal_session *handle;
};

G_DEFINE_TYPE (PortalKeyringSession, portal_keyring_session, G_TYPE_OBJECT)

G_DEFINE_ENUM_TYPE (PortalKeyringAccountAbstraction, portal_keyring_account_abstraction,
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_ACCOUNT_ABSTRACTION_DEFAULT, "default"),
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_ACCOUNT_ABSTRACTION_OFF, "off"),
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_ACCOUNT_ABSTRACTION_ON, "on"))

G_STATIC_ASSERT ((int) PORTAL_KEYRING_ACCOUNT_ABSTRACTION_DEFAULT == (int) PORTAL_ACCOUNT_ABSTRACTION_DEFAULT);
G_STATIC_ASSERT ((int) PORTAL_KEYRING_ACCOUNT_ABSTRACTION_OFF == (int) PORTAL_ACCOUNT_ABSTRACTION_OFF);
G_STATIC_ASSERT ((int) PORTAL_KEYRING_ACCOUNT_ABSTRACTION_ON == (int) PORTAL_ACCOUNT_ABSTRACTION_ON);

enum {
    PROP_0,
    PROP_END_USER_ID,
    PROP_AUTH_ENVIRONMENT_ID,
    PROP_CLIENT_ID,
    PROP_ACCOUNT_ABSTRACTION,
    N_PROPS
};

static GParamSpec *properties[N_PROPS];

static void
portal_keyring_session_finalize (GObject *object)
{
    PortalKeyringSession *self = PORTAL_KEYRING_SESSION (object);
    /* Wipes the token the handle holds. */
    portal_session_free (self->handle);
    G_OBJECT_CLASS (portal_keyring_session_parent_class)->finalize (object);
}

static void
portal_keyring_session_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
    PortalKeyringSession *self = PORTAL_KEYRING_SESSION (object);
    switch (prop_id) {
    case PROP_END_USER_ID:
        g_value_set_string (value, portal_keyring_session_get_end_user_id (self));
        break;
    case PROP_AUTH_ENVIRONMENT_ID:
        g_value_set_string (value, portal_keyring_session_get_auth_environment_id (self));
        break;
    case PROP_CLIENT_ID:
        g_value_set_string (value, portal_keyring_session_get_client_id (self));
        break;
    case PROP_ACCOUNT_ABSTRACTION:
        g_value_set_enum (value, portal_keyring_session_get_account_abstraction (self));
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
portal_keyring_session_class_init (PortalKeyringSessionClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS (klass);
    object_class->finalize = portal_keyring_session_finalize;
    object_class->get_property = portal_keyring_session_get_property;

    /**
     * PortalKeyringSession:end-user-id: (getter get_end_user_id)
     *
     * The Portal end user id of the session.
     */
    properties[PROP_END_USER_ID] = g_param_spec_string ("end-user-id", NULL, NULL, NULL,
                                                        G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    /**
     * PortalKeyringSession:auth-environment-id: (getter get_auth_environment_id)
     *
     * The auth environment the session belongs to.
     */
    properties[PROP_AUTH_ENVIRONMENT_ID] = g_param_spec_string ("auth-environment-id", NULL, NULL, NULL,
                                                                G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    /**
     * PortalKeyringSession:client-id: (getter get_client_id)
     *
     * The Portal client that the sign-in which returned this session named, or %NULL: a
     * restored or persisted session never knows it.
     */
    properties[PROP_CLIENT_ID] = g_param_spec_string ("client-id", NULL, NULL, NULL,
                                                      G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    /**
     * PortalKeyringSession:account-abstraction: (getter get_account_abstraction)
     *
     * Whether the sign-in that returned this session reported an account-abstracted client;
     * %PORTAL_KEYRING_ACCOUNT_ABSTRACTION_DEFAULT when it was not reported.
     */
    properties[PROP_ACCOUNT_ABSTRACTION] =
        g_param_spec_enum ("account-abstraction", NULL, NULL, PORTAL_KEYRING_TYPE_ACCOUNT_ABSTRACTION,
                           PORTAL_KEYRING_ACCOUNT_ABSTRACTION_DEFAULT, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
portal_keyring_session_init (PortalKeyringSession *self)
{
    (void) self;
}

PortalKeyringSession *
_portal_keyring_session_new_take (portal_session *handle)
{
    PortalKeyringSession *self = g_object_new (PORTAL_KEYRING_TYPE_SESSION, NULL);
    self->handle = handle;
    return self;
}

portal_session *
_portal_keyring_session_get_handle (PortalKeyringSession *self)
{
    return self->handle;
}

/**
 * portal_keyring_session_get_end_user_id: (get-property end-user-id)
 * @self: a session
 *
 * The session's end user id.
 *
 * Returns: (transfer none): the end user id, valid as long as @self
 */
const gchar *
portal_keyring_session_get_end_user_id (PortalKeyringSession *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_SESSION (self), NULL);
    return portal_session_get_end_user_id (self->handle);
}

/**
 * portal_keyring_session_get_auth_environment_id: (get-property auth-environment-id)
 * @self: a session
 *
 * The auth environment the session belongs to.
 *
 * Returns: (transfer none): the auth environment id, valid as long as @self
 */
const gchar *
portal_keyring_session_get_auth_environment_id (PortalKeyringSession *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_SESSION (self), NULL);
    return portal_session_get_auth_environment_id (self->handle);
}

/**
 * portal_keyring_session_get_client_id: (get-property client-id)
 * @self: a session
 *
 * The Portal client that the sign-in which returned this session named.
 *
 * Returns: (transfer none) (nullable): the client id, or %NULL when it is not known (a restored
 *   or persisted session, or a sign-in whose answer named none)
 */
const gchar *
portal_keyring_session_get_client_id (PortalKeyringSession *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_SESSION (self), NULL);
    return portal_session_get_client_id (self->handle);
}

/**
 * portal_keyring_session_get_account_abstraction: (get-property account-abstraction)
 * @self: a session
 *
 * Whether the sign-in that returned this session reported an account-abstracted client.
 *
 * Returns: %PORTAL_KEYRING_ACCOUNT_ABSTRACTION_ON or %PORTAL_KEYRING_ACCOUNT_ABSTRACTION_OFF as
 *   reported; %PORTAL_KEYRING_ACCOUNT_ABSTRACTION_DEFAULT when not reported
 */
PortalKeyringAccountAbstraction
portal_keyring_session_get_account_abstraction (PortalKeyringSession *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_SESSION (self), PORTAL_KEYRING_ACCOUNT_ABSTRACTION_DEFAULT);
    switch (portal_session_get_is_account_abstracted (self->handle)) {
    case 1:
        return PORTAL_KEYRING_ACCOUNT_ABSTRACTION_ON;
    case 0:
        return PORTAL_KEYRING_ACCOUNT_ABSTRACTION_OFF;
    default:
        return PORTAL_KEYRING_ACCOUNT_ABSTRACTION_DEFAULT;
    }
}

/**
 * portal_keyring_session_copy_token:
 * @self: a session
 * @error: return location for a #GError
 *
 * Copies the session's Client Session Token, for a request that needs it. Keep the copy as
 * briefly as possible; in C release it with [func@PortalKeyring.token_free], which wipes it.
 *
 * Returns: (transfer full): the token, or %NULL with @error set
 *   (%PORTAL_KEYRING_ERROR_SESSION_INVALIDATED when the session was invalidated)
 */
gchar *
portal_keyring_session_copy_token (PortalKeyringSession *self, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_SESSION (self), NULL);
    g_return_val_if_fail (error == NULL || *error == NULL, NULL);
    char *copy = NULL;
    portal_status status = portal_session_copy_token (self->handle, &copy);
    if (status != PORTAL_OK) {
        g_propagate_error (error, _portal_keyring_error_new (status, portal_last_error_message ()));
        return NULL;
    }
    /* Handed out in GLib's memory, so that bindings free it with g_free() as they free every
     * (transfer full) string; the C library's copy is wiped at once. */
    gchar *token = g_strdup (copy);
    portal_string_free (copy);
    return token;
}

/**
 * portal_keyring_token_free:
 * @token: (nullable) (transfer full): a token from [method@PortalKeyring.Session.copy_token]
 *
 * Wipes (overwrites with zeros) and frees a token. %NULL is a no-op. Bindings free tokens
 * themselves, without the wipe.
 */
void
portal_keyring_token_free (gchar *token)
{
    if (token == NULL)
        return;
    explicit_bzero (token, strlen (token));
    g_free (token);
}
