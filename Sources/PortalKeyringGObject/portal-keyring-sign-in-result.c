/* portal-keyring-sign-in-result.c — PortalKeyringSignInResult, and the registered enum and flags
 * of a sign-in redirect (PortalKeyringRedirectKind, PortalKeyringRedirectFlags). */
#include "portal-keyring-private.h"

/**
 * PortalKeyringSignInResult:
 *
 * What a sign-in redirect came to, as [method@PortalKeyring.Auth.handle_redirect_finish]
 * returns it: its [property@PortalKeyring.SignInResult:kind] says which of the rest is set.
 *
 * - %PORTAL_KEYRING_REDIRECT_KIND_AUTHENTICATED: [property@PortalKeyring.SignInResult:session]
 *   is the persisted session (it knows its client id and account abstraction).
 * - %PORTAL_KEYRING_REDIRECT_KIND_TOTP_REQUIRED: [method@PortalKeyring.SignInResult.copy_user_jwt]
 *   gives the user JWT for [method@PortalKeyring.Auth.verify_totp_async], and
 *   [method@PortalKeyring.SignInResult.copy_totp_link] the otpauth:// enrolment link when the end
 *   user has not set up TOTP yet.
 * - %PORTAL_KEYRING_REDIRECT_KIND_NOT_HANDLED: none: the URL was not this app's.
 *
 * The user JWT (a credential) and the enrolment link (it embeds the TOTP secret) are not
 * properties, for the reason the Client Session Token is not one: a property shows itself to
 * every inspector, binding and `notify` handler. The object wipes its copies when finalised.
 */
struct _PortalKeyringSignInResult {
    GObject parent_instance;
    PortalKeyringRedirectKind kind;
    PortalKeyringSession *session;
    /* The C library's strings: portal_string_free() wipes them. */
    char *user_jwt;
    char *totp_link;
};

G_DEFINE_TYPE (PortalKeyringSignInResult, portal_keyring_sign_in_result, G_TYPE_OBJECT)

G_DEFINE_ENUM_TYPE (PortalKeyringRedirectKind, portal_keyring_redirect_kind,
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_REDIRECT_KIND_NOT_HANDLED, "not-handled"),
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_REDIRECT_KIND_AUTHENTICATED, "authenticated"),
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_REDIRECT_KIND_TOTP_REQUIRED, "totp-required"))

G_DEFINE_FLAGS_TYPE (PortalKeyringRedirectFlags, portal_keyring_redirect_flags,
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_REDIRECT_FLAGS_NONE, "none"),
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_REDIRECT_FLAGS_ALLOW_UNSOLICITED, "allow-unsolicited"),
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_REDIRECT_FLAGS_REPLACE_END_USER, "replace-end-user"))

G_STATIC_ASSERT ((int) PORTAL_KEYRING_REDIRECT_KIND_NOT_HANDLED == (int) PORTAL_REDIRECT_NOT_HANDLED);
G_STATIC_ASSERT ((int) PORTAL_KEYRING_REDIRECT_KIND_AUTHENTICATED == (int) PORTAL_REDIRECT_AUTHENTICATED);
G_STATIC_ASSERT ((int) PORTAL_KEYRING_REDIRECT_KIND_TOTP_REQUIRED == (int) PORTAL_REDIRECT_TOTP_REQUIRED);
G_STATIC_ASSERT ((int) PORTAL_KEYRING_REDIRECT_FLAGS_NONE == (int) PORTAL_REDIRECT_FLAGS_NONE);
G_STATIC_ASSERT ((int) PORTAL_KEYRING_REDIRECT_FLAGS_ALLOW_UNSOLICITED == (int) PORTAL_REDIRECT_ALLOW_UNSOLICITED);
G_STATIC_ASSERT ((int) PORTAL_KEYRING_REDIRECT_FLAGS_REPLACE_END_USER == (int) PORTAL_REDIRECT_REPLACE_END_USER);

enum {
    PROP_0,
    PROP_KIND,
    PROP_SESSION,
    N_PROPS
};

static GParamSpec *properties[N_PROPS];

static void
portal_keyring_sign_in_result_finalize (GObject *object)
{
    PortalKeyringSignInResult *self = PORTAL_KEYRING_SIGN_IN_RESULT (object);
    g_clear_object (&self->session);
    portal_string_free (self->user_jwt);
    portal_string_free (self->totp_link);
    G_OBJECT_CLASS (portal_keyring_sign_in_result_parent_class)->finalize (object);
}

static void
portal_keyring_sign_in_result_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
    PortalKeyringSignInResult *self = PORTAL_KEYRING_SIGN_IN_RESULT (object);
    switch (prop_id) {
    case PROP_KIND:
        g_value_set_enum (value, self->kind);
        break;
    case PROP_SESSION:
        g_value_set_object (value, self->session);
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
portal_keyring_sign_in_result_class_init (PortalKeyringSignInResultClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS (klass);
    object_class->finalize = portal_keyring_sign_in_result_finalize;
    object_class->get_property = portal_keyring_sign_in_result_get_property;

    /**
     * PortalKeyringSignInResult:kind: (getter get_kind)
     *
     * What the redirect came to.
     */
    properties[PROP_KIND] =
        g_param_spec_enum ("kind", NULL, NULL, PORTAL_KEYRING_TYPE_REDIRECT_KIND,
                           PORTAL_KEYRING_REDIRECT_KIND_NOT_HANDLED, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    /**
     * PortalKeyringSignInResult:session: (getter get_session)
     *
     * The persisted session when [property@PortalKeyring.SignInResult:kind] is
     * %PORTAL_KEYRING_REDIRECT_KIND_AUTHENTICATED, else %NULL.
     */
    properties[PROP_SESSION] = g_param_spec_object ("session", NULL, NULL, PORTAL_KEYRING_TYPE_SESSION,
                                                    G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
portal_keyring_sign_in_result_init (PortalKeyringSignInResult *self)
{
    (void) self;
}

PortalKeyringSignInResult *
_portal_keyring_sign_in_result_new_take (SignInOutcome *outcome)
{
    if (outcome == NULL)
        return NULL;
    PortalKeyringSignInResult *self = g_object_new (PORTAL_KEYRING_TYPE_SIGN_IN_RESULT, NULL);
    self->kind = (PortalKeyringRedirectKind) outcome->kind;
    portal_session *session = g_steal_pointer (&outcome->session);
    self->session = session ? _portal_keyring_session_new_take (session) : NULL;
    self->user_jwt = g_steal_pointer (&outcome->user_jwt);
    self->totp_link = g_steal_pointer (&outcome->totp_link);
    _portal_keyring_sign_in_outcome_free (outcome);
    return self;
}

/**
 * portal_keyring_sign_in_result_get_kind: (get-property kind)
 * @self: a sign-in result
 *
 * What the redirect came to.
 *
 * Returns: the kind
 */
PortalKeyringRedirectKind
portal_keyring_sign_in_result_get_kind (PortalKeyringSignInResult *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_SIGN_IN_RESULT (self), PORTAL_KEYRING_REDIRECT_KIND_NOT_HANDLED);
    return self->kind;
}

/**
 * portal_keyring_sign_in_result_get_session: (get-property session)
 * @self: a sign-in result
 *
 * The persisted session of an authenticated redirect.
 *
 * Returns: (transfer none) (nullable): the session, valid as long as @self; %NULL unless the kind
 *   is %PORTAL_KEYRING_REDIRECT_KIND_AUTHENTICATED
 */
PortalKeyringSession *
portal_keyring_sign_in_result_get_session (PortalKeyringSignInResult *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_SIGN_IN_RESULT (self), NULL);
    return self->session;
}

/**
 * portal_keyring_sign_in_result_copy_user_jwt:
 * @self: a sign-in result
 *
 * Copies the user JWT of a TOTP step, for [method@PortalKeyring.Auth.verify_totp_async]. It is
 * a credential: keep it no longer than the step, and in C release it with
 * [func@PortalKeyring.token_free], which wipes it.
 *
 * Returns: (transfer full) (nullable): the user JWT; %NULL unless the kind is
 *   %PORTAL_KEYRING_REDIRECT_KIND_TOTP_REQUIRED
 */
gchar *
portal_keyring_sign_in_result_copy_user_jwt (PortalKeyringSignInResult *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_SIGN_IN_RESULT (self), NULL);
    return g_strdup (self->user_jwt);
}

/**
 * portal_keyring_sign_in_result_copy_totp_link:
 * @self: a sign-in result
 *
 * Copies the otpauth:// enrolment link of a TOTP step, for an authenticator app (as a QR code,
 * or its secret typed in). It embeds the TOTP secret: show it, never log or store it; in C
 * release it with [func@PortalKeyring.token_free], which wipes it.
 *
 * Returns: (transfer full) (nullable): the link; %NULL unless the kind is
 *   %PORTAL_KEYRING_REDIRECT_KIND_TOTP_REQUIRED and the end user has not set up TOTP yet
 */
gchar *
portal_keyring_sign_in_result_copy_totp_link (PortalKeyringSignInResult *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_SIGN_IN_RESULT (self), NULL);
    return g_strdup (self->totp_link);
}
