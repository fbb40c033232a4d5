/* portal-keyring-auth-signin.c — the sign-in operations of PortalKeyringAuth that start a
 * sign-in: the methods the auth environment allows, the magic link, and the Google / Apple
 * authorize URLs. Each in GIO's three forms: _async starts the C *_async call through the task
 * bridge (portal-keyring-task-bridge.c), _finish reads what it returned, and _sync waits on
 * _async in a private main loop (the network call runs on the C library's worker either way).
 * Completing a sign-in (the redirect, TOTP, the desktop sign-in) is in
 * portal-keyring-auth-redirect.c. */
#include "portal-keyring-private.h"

/* ------------------------------------------------------------------------------------------
 * get_methods
 * ------------------------------------------------------------------------------------------ */

static portal_status
start_get_methods (portal_auth *auth, gpointer args, portal_sign_in_cb callback, void *bridge,
                   portal_destroy_notify destroy_notify, uint64_t *operation_out)
{
    (void) args;
    return portal_auth_get_methods_async (auth, NULL, callback, bridge, destroy_notify, operation_out);
}

/**
 * portal_keyring_auth_get_methods_async:
 * @self: an auth
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when the request completes
 * @user_data: (closure callback): data for @callback
 *
 * Asks the Portal API which sign-in methods the auth environment allows, without blocking
 * (one HTTP request: at most 30 s). Finish with [method@PortalKeyring.Auth.get_methods_finish].
 */
void
portal_keyring_auth_get_methods_async (PortalKeyringAuth *self, GCancellable *cancellable,
                                       GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (PORTAL_KEYRING_IS_AUTH (self));
    g_return_if_fail (cancellable == NULL || G_IS_CANCELLABLE (cancellable));
    _portal_keyring_bridge_run_sign_in (self, cancellable, callback, user_data, portal_keyring_auth_get_methods_async,
                                        start_get_methods, NULL);
}

/**
 * portal_keyring_auth_get_methods_finish:
 * @self: an auth
 * @result: the #GAsyncResult given to the callback
 * @auto_create_wallet: (out) (optional): whether Portal creates wallets automatically
 * @error: return location for a #GError
 *
 * Finishes [method@PortalKeyring.Auth.get_methods_async].
 *
 * Returns: (transfer full) (array zero-terminated=1): the methods, e.g. "EMAIL_MAGIC_LINK",
 *   "GOOGLE", "APPLE"; or %NULL with @error set (%PORTAL_KEYRING_ERROR_NETWORK,
 *   %PORTAL_KEYRING_ERROR_RATE_LIMITED, %PORTAL_KEYRING_ERROR_UNAUTHORIZED, …,
 *   `G_IO_ERROR_CANCELLED`)
 */
gchar **
portal_keyring_auth_get_methods_finish (PortalKeyringAuth *self, GAsyncResult *result, gboolean *auto_create_wallet,
                                        GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    SignInOutcome *outcome =
        _portal_keyring_bridge_sign_in_outcome (self, result, portal_keyring_auth_get_methods_async, error);
    if (outcome == NULL)
        return NULL;
    /* "" (no method allowed) is an empty list, not a list of one empty name. */
    gchar **methods = outcome->text && *outcome->text ? g_strsplit (outcome->text, ",", -1) : g_new0 (gchar *, 1);
    if (auto_create_wallet)
        *auto_create_wallet = outcome->auto_create_wallet;
    _portal_keyring_sign_in_outcome_free (outcome);
    return methods;
}

/**
 * portal_keyring_auth_get_methods_sync:
 * @self: an auth
 * @auto_create_wallet: (out) (optional): whether Portal creates wallets automatically
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Asks for the sign-in methods as [method@PortalKeyring.Auth.get_methods_async] does, blocking
 * the calling thread (at most 30 s): call it from a worker thread.
 *
 * Returns: (transfer full) (array zero-terminated=1): as
 *   [method@PortalKeyring.Auth.get_methods_finish]
 */
gchar **
portal_keyring_auth_get_methods_sync (PortalKeyringAuth *self, gboolean *auto_create_wallet,
                                      GCancellable *cancellable, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    g_return_val_if_fail (error == NULL || *error == NULL, NULL);
    SyncWait wait;
    _portal_keyring_sync_wait_begin (&wait);
    portal_keyring_auth_get_methods_async (self, cancellable, _portal_keyring_sync_done, &wait);
    _portal_keyring_sync_wait_end (&wait);
    gchar **methods = portal_keyring_auth_get_methods_finish (self, wait.result, auto_create_wallet, error);
    _portal_keyring_sync_wait_clear (&wait);
    return methods;
}

/* ------------------------------------------------------------------------------------------
 * send_magic_link
 * ------------------------------------------------------------------------------------------ */

static portal_status
start_send_magic_link (portal_auth *auth, gpointer args, portal_sign_in_cb callback, void *bridge,
                       portal_destroy_notify destroy_notify, uint64_t *operation_out)
{
    /* The C call copies the address before it returns. */
    return portal_auth_send_magic_link_async (auth, args, NULL, callback, bridge, destroy_notify, operation_out);
}

/**
 * portal_keyring_auth_send_magic_link_async:
 * @self: an auth
 * @email: the end user's email address (trimmed and lower-cased before it is sent)
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when the request completes
 * @user_data: (closure callback): data for @callback
 *
 * Asks Portal to email the end user a sign-in link to the app's redirect URL, from
 * [property@PortalKeyring.Auth:magic-link-from-email] with
 * [property@PortalKeyring.Auth:magic-link-template-id], without blocking. Records the pending
 * sign-in that [method@PortalKeyring.Auth.handle_redirect_async] requires first. Never retried
 * (a retry could send a second email), and a cancelled request may still have reached Portal.
 * Finish with [method@PortalKeyring.Auth.send_magic_link_finish].
 */
void
portal_keyring_auth_send_magic_link_async (PortalKeyringAuth *self, const gchar *email, GCancellable *cancellable,
                                           GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (PORTAL_KEYRING_IS_AUTH (self));
    g_return_if_fail (cancellable == NULL || G_IS_CANCELLABLE (cancellable));
    _portal_keyring_bridge_run_sign_in (self, cancellable, callback, user_data,
                                        portal_keyring_auth_send_magic_link_async, start_send_magic_link,
                                        (gpointer) email);
}

/**
 * portal_keyring_auth_send_magic_link_finish:
 * @self: an auth
 * @result: the #GAsyncResult given to the callback
 * @error: return location for a #GError
 *
 * Finishes [method@PortalKeyring.Auth.send_magic_link_async].
 *
 * Returns: %TRUE when Portal accepted the request; %FALSE with @error set
 *   (%PORTAL_KEYRING_ERROR_MAGIC_LINK_NOT_CONFIGURED: nothing sent;
 *   %PORTAL_KEYRING_ERROR_INVALID_ARGUMENT for a missing or malformed address;
 *   %PORTAL_KEYRING_ERROR_ACCOUNT_ABSTRACTION_UNAVAILABLE, %PORTAL_KEYRING_ERROR_RATE_LIMITED,
 *   %PORTAL_KEYRING_ERROR_NETWORK, …, `G_IO_ERROR_CANCELLED`)
 */
gboolean
portal_keyring_auth_send_magic_link_finish (PortalKeyringAuth *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), FALSE);
    GError *failure = NULL;
    SignInOutcome *outcome =
        _portal_keyring_bridge_sign_in_outcome (self, result, portal_keyring_auth_send_magic_link_async, &failure);
    if (outcome == NULL) {
        /* The C message tells a C caller which function to call; a GObject caller sets properties. */
        if (g_error_matches (failure, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_MAGIC_LINK_NOT_CONFIGURED)) {
            g_free (failure->message);
            failure->message = g_strdup ("no magic-link sender and template: set the magic-link-from-email and "
                                         "magic-link-template-id properties; nothing sent");
        }
        g_propagate_error (error, failure);
        return FALSE;
    }
    _portal_keyring_sign_in_outcome_free (outcome);
    return TRUE;
}

/**
 * portal_keyring_auth_send_magic_link_sync:
 * @self: an auth
 * @email: the end user's email address
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Sends a magic link as [method@PortalKeyring.Auth.send_magic_link_async] does, blocking the
 * calling thread (at most 30 s): call it from a worker thread.
 *
 * Returns: as [method@PortalKeyring.Auth.send_magic_link_finish]
 */
gboolean
portal_keyring_auth_send_magic_link_sync (PortalKeyringAuth *self, const gchar *email, GCancellable *cancellable,
                                          GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), FALSE);
    g_return_val_if_fail (error == NULL || *error == NULL, FALSE);
    SyncWait wait;
    _portal_keyring_sync_wait_begin (&wait);
    portal_keyring_auth_send_magic_link_async (self, email, cancellable, _portal_keyring_sync_done, &wait);
    _portal_keyring_sync_wait_end (&wait);
    gboolean sent = portal_keyring_auth_send_magic_link_finish (self, wait.result, error);
    _portal_keyring_sync_wait_clear (&wait);
    return sent;
}

/* ------------------------------------------------------------------------------------------
 * login_with_google, login_with_apple: one C call each, the same forms around them
 * ------------------------------------------------------------------------------------------ */

static portal_status
start_login_with_google (portal_auth *auth, gpointer args, portal_sign_in_cb callback, void *bridge,
                         portal_destroy_notify destroy_notify, uint64_t *operation_out)
{
    (void) args;
    return portal_auth_login_with_google_async (auth, NULL, callback, bridge, destroy_notify, operation_out);
}

static portal_status
start_login_with_apple (portal_auth *auth, gpointer args, portal_sign_in_cb callback, void *bridge,
                        portal_destroy_notify destroy_notify, uint64_t *operation_out)
{
    (void) args;
    return portal_auth_login_with_apple_async (auth, NULL, callback, bridge, destroy_notify, operation_out);
}

/* The authorize URL an outcome carries, in GLib's memory (bindings free it with g_free()). */
static gchar *
authorize_url (SignInOutcome *outcome)
{
    if (outcome == NULL)
        return NULL;
    gchar *url = g_strdup (outcome->text);
    _portal_keyring_sign_in_outcome_free (outcome);
    return url;
}

/**
 * portal_keyring_auth_login_with_google_async:
 * @self: an auth
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when the request completes
 * @user_data: (closure callback): data for @callback
 *
 * Fetches a fresh Google authorize URL to open in the end user's browser, without blocking;
 * Portal then redirects to the app's redirect URL with a grant for
 * [method@PortalKeyring.Auth.handle_redirect_async]. Records the pending sign-in first. The URL
 * is single-use: fetch a new one for each sign-in. Finish with
 * [method@PortalKeyring.Auth.login_with_google_finish].
 */
void
portal_keyring_auth_login_with_google_async (PortalKeyringAuth *self, GCancellable *cancellable,
                                             GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (PORTAL_KEYRING_IS_AUTH (self));
    g_return_if_fail (cancellable == NULL || G_IS_CANCELLABLE (cancellable));
    _portal_keyring_bridge_run_sign_in (self, cancellable, callback, user_data,
                                        portal_keyring_auth_login_with_google_async, start_login_with_google, NULL);
}

/**
 * portal_keyring_auth_login_with_google_finish:
 * @self: an auth
 * @result: the #GAsyncResult given to the callback
 * @error: return location for a #GError
 *
 * Finishes [method@PortalKeyring.Auth.login_with_google_async].
 *
 * Returns: (transfer full): the authorize URL, or %NULL with @error set
 *   (%PORTAL_KEYRING_ERROR_AUTH_METHOD_UNAVAILABLE when the auth environment has not enabled
 *   Google; %PORTAL_KEYRING_ERROR_UNAUTHORIZED for an unknown auth environment or a redirect URL
 *   Portal does not allow; %PORTAL_KEYRING_ERROR_NETWORK, …, `G_IO_ERROR_CANCELLED`)
 */
gchar *
portal_keyring_auth_login_with_google_finish (PortalKeyringAuth *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    return authorize_url (
        _portal_keyring_bridge_sign_in_outcome (self, result, portal_keyring_auth_login_with_google_async, error));
}

/**
 * portal_keyring_auth_login_with_google_sync:
 * @self: an auth
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Fetches a Google authorize URL as [method@PortalKeyring.Auth.login_with_google_async] does,
 * blocking the calling thread (at most 30 s): call it from a worker thread.
 *
 * Returns: (transfer full): as [method@PortalKeyring.Auth.login_with_google_finish]
 */
gchar *
portal_keyring_auth_login_with_google_sync (PortalKeyringAuth *self, GCancellable *cancellable, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    g_return_val_if_fail (error == NULL || *error == NULL, NULL);
    SyncWait wait;
    _portal_keyring_sync_wait_begin (&wait);
    portal_keyring_auth_login_with_google_async (self, cancellable, _portal_keyring_sync_done, &wait);
    _portal_keyring_sync_wait_end (&wait);
    gchar *url = portal_keyring_auth_login_with_google_finish (self, wait.result, error);
    _portal_keyring_sync_wait_clear (&wait);
    return url;
}

/**
 * portal_keyring_auth_login_with_apple_async:
 * @self: an auth
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when the request completes
 * @user_data: (closure callback): data for @callback
 *
 * Fetches a fresh Apple authorize URL, as [method@PortalKeyring.Auth.login_with_google_async]
 * does for Google. Finish with [method@PortalKeyring.Auth.login_with_apple_finish].
 */
void
portal_keyring_auth_login_with_apple_async (PortalKeyringAuth *self, GCancellable *cancellable,
                                            GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (PORTAL_KEYRING_IS_AUTH (self));
    g_return_if_fail (cancellable == NULL || G_IS_CANCELLABLE (cancellable));
    _portal_keyring_bridge_run_sign_in (self, cancellable, callback, user_data,
                                        portal_keyring_auth_login_with_apple_async, start_login_with_apple, NULL);
}

/**
 * portal_keyring_auth_login_with_apple_finish:
 * @self: an auth
 * @result: the #GAsyncResult given to the callback
 * @error: return location for a #GError
 *
 * Finishes [method@PortalKeyring.Auth.login_with_apple_async].
 *
 * Returns: (transfer full): the authorize URL, or %NULL with @error set, as
 *   [method@PortalKeyring.Auth.login_with_google_finish]
 */
gchar *
portal_keyring_auth_login_with_apple_finish (PortalKeyringAuth *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    return authorize_url (
        _portal_keyring_bridge_sign_in_outcome (self, result, portal_keyring_auth_login_with_apple_async, error));
}

/**
 * portal_keyring_auth_login_with_apple_sync:
 * @self: an auth
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Fetches an Apple authorize URL, blocking the calling thread (at most 30 s).
 *
 * Returns: (transfer full): as [method@PortalKeyring.Auth.login_with_apple_finish]
 */
gchar *
portal_keyring_auth_login_with_apple_sync (PortalKeyringAuth *self, GCancellable *cancellable, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    g_return_val_if_fail (error == NULL || *error == NULL, NULL);
    SyncWait wait;
    _portal_keyring_sync_wait_begin (&wait);
    portal_keyring_auth_login_with_apple_async (self, cancellable, _portal_keyring_sync_done, &wait);
    _portal_keyring_sync_wait_end (&wait);
    gchar *url = portal_keyring_auth_login_with_apple_finish (self, wait.result, error);
    _portal_keyring_sync_wait_clear (&wait);
    return url;
}
