/* portal-keyring-auth-desktop.c — the desktop sign-in of PortalKeyringAuth: Google or Apple in
 * the end user's browser, waited for until the redirect comes back (to this process through
 * handle_redirect, or to the URL handler's process through the keyring). The same three forms
 * as in portal-keyring-auth-signin.c. */
#include "portal-keyring-private.h"

/* The C call checks the timeout before it returns. */
static portal_status
start_sign_in_with_google (portal_auth *auth, gpointer args, portal_sign_in_cb callback, void *bridge,
                           portal_destroy_notify destroy_notify, uint64_t *operation_out)
{
    return portal_auth_sign_in_with_google_async (auth, *(guint *) args, NULL, callback, bridge, destroy_notify,
                                                  operation_out);
}

static portal_status
start_sign_in_with_apple (portal_auth *auth, gpointer args, portal_sign_in_cb callback, void *bridge,
                          portal_destroy_notify destroy_notify, uint64_t *operation_out)
{
    return portal_auth_sign_in_with_apple_async (auth, *(guint *) args, NULL, callback, bridge, destroy_notify,
                                                 operation_out);
}

/**
 * portal_keyring_auth_sign_in_with_google_async:
 * @self: an auth
 * @timeout_ms: how long to wait for the redirect once the page is open, in milliseconds: 1 …
 *   900000 (15 minutes, the pending sign-in's lifetime), or 0 for 900000
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when the sign-in completes
 * @user_data: (closure callback): data for @callback
 *
 * Signs the end user in with Google in their browser, without blocking: fetches a fresh
 * authorize URL, opens it with the desktop's URL handler (the OpenURI portal in a Flatpak
 * sandbox), then waits for the redirect, whichever way it comes back: to this process, where the
 * app passes it to [method@PortalKeyring.Auth.handle_redirect_async] (this operation then
 * completes with that call's result); or to the URL handler's process, which persists the
 * session (this operation sees it in the keyring and completes with it). One per auth
 * environment in a process at a time. Cancelling ends the wait at once. Finish with
 * [method@PortalKeyring.Auth.sign_in_with_google_finish].
 */
void
portal_keyring_auth_sign_in_with_google_async (PortalKeyringAuth *self, guint timeout_ms, GCancellable *cancellable,
                                               GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (PORTAL_KEYRING_IS_AUTH (self));
    g_return_if_fail (cancellable == NULL || G_IS_CANCELLABLE (cancellable));
    _portal_keyring_bridge_run_sign_in (self, cancellable, callback, user_data,
                                        portal_keyring_auth_sign_in_with_google_async, start_sign_in_with_google,
                                        &timeout_ms);
}

/**
 * portal_keyring_auth_sign_in_with_google_finish:
 * @self: an auth
 * @result: the #GAsyncResult given to the callback
 * @error: return location for a #GError
 *
 * Finishes [method@PortalKeyring.Auth.sign_in_with_google_async].
 *
 * Returns: (transfer full): what the sign-in came to (authenticated with its session, or a TOTP
 *   step), or %NULL with @error set (%PORTAL_KEYRING_ERROR_SIGN_IN_IN_PROGRESS,
 *   %PORTAL_KEYRING_ERROR_SIGN_IN_UNAVAILABLE when no application could open the page,
 *   %PORTAL_KEYRING_ERROR_SIGN_IN_TIMED_OUT, %PORTAL_KEYRING_ERROR_AUTH_METHOD_UNAVAILABLE, the
 *   errors of [method@PortalKeyring.Auth.handle_redirect_finish], `G_IO_ERROR_CANCELLED`)
 */
PortalKeyringSignInResult *
portal_keyring_auth_sign_in_with_google_finish (PortalKeyringAuth *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    return _portal_keyring_sign_in_result_new_take (
        _portal_keyring_bridge_sign_in_outcome (self, result, portal_keyring_auth_sign_in_with_google_async, error));
}

/**
 * portal_keyring_auth_sign_in_with_google_sync:
 * @self: an auth
 * @timeout_ms: how long to wait for the redirect, in milliseconds (0: 900000)
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Signs the end user in with Google as [method@PortalKeyring.Auth.sign_in_with_google_async]
 * does, blocking the calling thread until the redirect came back or @timeout_ms passed: call it
 * from a worker thread. A redirect to this process must then reach
 * [method@PortalKeyring.Auth.handle_redirect_async] from another thread.
 *
 * Returns: (transfer full): as [method@PortalKeyring.Auth.sign_in_with_google_finish]
 */
PortalKeyringSignInResult *
portal_keyring_auth_sign_in_with_google_sync (PortalKeyringAuth *self, guint timeout_ms, GCancellable *cancellable,
                                              GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    g_return_val_if_fail (error == NULL || *error == NULL, NULL);
    SyncWait wait;
    _portal_keyring_sync_wait_begin (&wait);
    portal_keyring_auth_sign_in_with_google_async (self, timeout_ms, cancellable, _portal_keyring_sync_done, &wait);
    _portal_keyring_sync_wait_end (&wait);
    PortalKeyringSignInResult *result = portal_keyring_auth_sign_in_with_google_finish (self, wait.result, error);
    _portal_keyring_sync_wait_clear (&wait);
    return result;
}

/**
 * portal_keyring_auth_sign_in_with_apple_async:
 * @self: an auth
 * @timeout_ms: how long to wait for the redirect once the page is open, in milliseconds (0:
 *   900000, the maximum)
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when the sign-in completes
 * @user_data: (closure callback): data for @callback
 *
 * Signs the end user in with Apple in their browser, as
 * [method@PortalKeyring.Auth.sign_in_with_google_async] does with Google. Finish with
 * [method@PortalKeyring.Auth.sign_in_with_apple_finish].
 */
void
portal_keyring_auth_sign_in_with_apple_async (PortalKeyringAuth *self, guint timeout_ms, GCancellable *cancellable,
                                              GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (PORTAL_KEYRING_IS_AUTH (self));
    g_return_if_fail (cancellable == NULL || G_IS_CANCELLABLE (cancellable));
    _portal_keyring_bridge_run_sign_in (self, cancellable, callback, user_data,
                                        portal_keyring_auth_sign_in_with_apple_async, start_sign_in_with_apple,
                                        &timeout_ms);
}

/**
 * portal_keyring_auth_sign_in_with_apple_finish:
 * @self: an auth
 * @result: the #GAsyncResult given to the callback
 * @error: return location for a #GError
 *
 * Finishes [method@PortalKeyring.Auth.sign_in_with_apple_async].
 *
 * Returns: (transfer full): as [method@PortalKeyring.Auth.sign_in_with_google_finish]
 */
PortalKeyringSignInResult *
portal_keyring_auth_sign_in_with_apple_finish (PortalKeyringAuth *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    return _portal_keyring_sign_in_result_new_take (
        _portal_keyring_bridge_sign_in_outcome (self, result, portal_keyring_auth_sign_in_with_apple_async, error));
}

/**
 * portal_keyring_auth_sign_in_with_apple_sync:
 * @self: an auth
 * @timeout_ms: how long to wait for the redirect, in milliseconds (0: 900000)
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Signs the end user in with Apple, blocking the calling thread as
 * [method@PortalKeyring.Auth.sign_in_with_google_sync] does.
 *
 * Returns: (transfer full): as [method@PortalKeyring.Auth.sign_in_with_google_finish]
 */
PortalKeyringSignInResult *
portal_keyring_auth_sign_in_with_apple_sync (PortalKeyringAuth *self, guint timeout_ms, GCancellable *cancellable,
                                             GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    g_return_val_if_fail (error == NULL || *error == NULL, NULL);
    SyncWait wait;
    _portal_keyring_sync_wait_begin (&wait);
    portal_keyring_auth_sign_in_with_apple_async (self, timeout_ms, cancellable, _portal_keyring_sync_done, &wait);
    _portal_keyring_sync_wait_end (&wait);
    PortalKeyringSignInResult *result = portal_keyring_auth_sign_in_with_apple_finish (self, wait.result, error);
    _portal_keyring_sync_wait_clear (&wait);
    return result;
}
