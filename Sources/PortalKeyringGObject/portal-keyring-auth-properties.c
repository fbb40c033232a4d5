/* portal-keyring-auth-properties.c — the C getters of PortalKeyringAuth's construct properties
 * (the properties themselves, and their rules, are installed in portal-keyring-auth.c). */
#include "portal-keyring-private.h"

/**
 * portal_keyring_auth_get_auth_environment_id: (get-property auth-environment-id)
 * @self: an auth
 *
 * The auth environment id, as given at construction.
 *
 * Returns: (transfer none) (nullable): the id (%NULL only on an object whose initialisation
 *   failed for want of it)
 */
const gchar *
portal_keyring_auth_get_auth_environment_id (PortalKeyringAuth *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    return self->auth_environment_id;
}

/**
 * portal_keyring_auth_get_redirect_url: (get-property redirect-url)
 * @self: an auth
 *
 * The sign-in redirect URL, as given at construction.
 *
 * Returns: (transfer none) (nullable): the URL (%NULL only on an object whose initialisation
 *   failed for want of it)
 */
const gchar *
portal_keyring_auth_get_redirect_url (PortalKeyringAuth *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    return self->redirect_url;
}

/**
 * portal_keyring_auth_get_api_host: (get-property api-host)
 * @self: an auth
 *
 * The Portal API host, as given at construction.
 *
 * Returns: (transfer none) (nullable): the host, or %NULL for "api.portalhq.io"
 */
const gchar *
portal_keyring_auth_get_api_host (PortalKeyringAuth *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    return self->api_host;
}

/**
 * portal_keyring_auth_get_call_timeout_ms: (get-property call-timeout-ms)
 * @self: an auth
 *
 * The call deadline of the keyring operations.
 *
 * Returns: the deadline in milliseconds
 */
guint
portal_keyring_auth_get_call_timeout_ms (PortalKeyringAuth *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), 0);
    return self->call_timeout_ms;
}

/**
 * portal_keyring_auth_get_prompt_timeout_ms: (get-property prompt-timeout-ms)
 * @self: an auth
 *
 * The prompt deadline of the keyring operations.
 *
 * Returns: the deadline in milliseconds
 */
guint
portal_keyring_auth_get_prompt_timeout_ms (PortalKeyringAuth *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), 0);
    return self->prompt_timeout_ms;
}

/**
 * portal_keyring_auth_get_magic_link_from_email: (get-property magic-link-from-email)
 * @self: an auth
 *
 * The sender of the magic-link emails, as given at construction.
 *
 * Returns: (transfer none) (nullable): the address, or %NULL when no magic link is configured
 */
const gchar *
portal_keyring_auth_get_magic_link_from_email (PortalKeyringAuth *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    return self->magic_link_from_email;
}

/**
 * portal_keyring_auth_get_magic_link_template_id: (get-property magic-link-template-id)
 * @self: an auth
 *
 * The email template of the magic-link emails, as given at construction.
 *
 * Returns: (transfer none) (nullable): the template id, or %NULL when no magic link is configured
 */
const gchar *
portal_keyring_auth_get_magic_link_template_id (PortalKeyringAuth *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    return self->magic_link_template_id;
}

/**
 * portal_keyring_auth_get_account_abstraction: (get-property account-abstraction)
 * @self: an auth
 *
 * What the sign-ins ask for about account abstraction, as given at construction.
 *
 * Returns: the setting
 */
PortalKeyringAccountAbstraction
portal_keyring_auth_get_account_abstraction (PortalKeyringAuth *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), PORTAL_KEYRING_ACCOUNT_ABSTRACTION_DEFAULT);
    return self->account_abstraction;
}

