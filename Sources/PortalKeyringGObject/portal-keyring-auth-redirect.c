/* portal-keyring-auth-redirect.c — the sign-in operations of PortalKeyringAuth that complete a
 * sign-in and persist its session: the redirect URL and the TOTP step (the desktop sign-in, which
 * waits for a redirect, is in portal-keyring-auth-desktop.c). The same three forms as in
 * portal-keyring-auth-signin.c. */
#include "portal-keyring-private.h"

/* ------------------------------------------------------------------------------------------
 * handle_redirect
 * ------------------------------------------------------------------------------------------ */

typedef struct {
    const gchar *url;
    PortalKeyringRedirectFlags flags;
} RedirectArgs;

static portal_status
start_handle_redirect (portal_auth *auth, gpointer args, portal_sign_in_cb callback, void *bridge,
                       portal_destroy_notify destroy_notify, uint64_t *operation_out)
{
    RedirectArgs *redirect = args;
    /* The C call checks the flags and copies the URL before it returns. */
    return portal_auth_handle_redirect_async (auth, redirect->url, (uint32_t) redirect->flags, NULL, callback, bridge,
                                              destroy_notify, operation_out);
}

/**
 * portal_keyring_auth_handle_redirect_async:
 * @self: an auth
 * @url: the URL the browser opened (the app's URL handler received it)
 * @flags: %PORTAL_KEYRING_REDIRECT_FLAGS_NONE, or the opt-outs of #PortalKeyringRedirectFlags
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when the sign-in completes
 * @user_data: (closure callback): data for @callback
 *
 * Completes a sign-in from its redirect URL without blocking: exchanges the grant in it with
 * the Portal API and persists the session (network, then keyring). A URL that is not the app's
 * redirect URL is %PORTAL_KEYRING_REDIRECT_KIND_NOT_HANDLED, with nothing done.
 *
 * Login CSRF defences: the grant is exchanged only while a sign-in that
 * [method@PortalKeyring.Auth.send_magic_link_async] or
 * [method@PortalKeyring.Auth.login_with_google_async] started is pending (any process of this
 * user, 15 minutes), else %PORTAL_KEYRING_ERROR_UNSOLICITED_REDIRECT; and a session of another
 * end user in the keyring is never replaced silently (%PORTAL_KEYRING_ERROR_DIFFERENT_END_USER:
 * nothing stored; to confirm, deliver the same URL again on this auth with
 * %PORTAL_KEYRING_REDIRECT_FLAGS_REPLACE_END_USER, which persists the remembered exchange; on
 * another auth the grant is spent).
 * The same URL delivered again on this auth returns the same result without a second exchange.
 * A cancel after the exchange leaves the session persisted or not, never half. Finish with
 * [method@PortalKeyring.Auth.handle_redirect_finish].
 */
void
portal_keyring_auth_handle_redirect_async (PortalKeyringAuth *self, const gchar *url, PortalKeyringRedirectFlags flags,
                                           GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (PORTAL_KEYRING_IS_AUTH (self));
    g_return_if_fail (cancellable == NULL || G_IS_CANCELLABLE (cancellable));
    RedirectArgs args = { url, flags };
    _portal_keyring_bridge_run_sign_in (self, cancellable, callback, user_data,
                                        portal_keyring_auth_handle_redirect_async, start_handle_redirect, &args);
}

/**
 * portal_keyring_auth_handle_redirect_finish:
 * @self: an auth
 * @result: the #GAsyncResult given to the callback
 * @error: return location for a #GError
 *
 * Finishes [method@PortalKeyring.Auth.handle_redirect_async].
 *
 * Returns: (transfer full): what the redirect came to (its kind says what else it holds), or
 *   %NULL with @error set (%PORTAL_KEYRING_ERROR_AUTHENTICATION_FAILED for an error redirect,
 *   %PORTAL_KEYRING_ERROR_INVALID_GRANT, %PORTAL_KEYRING_ERROR_UNSOLICITED_REDIRECT,
 *   %PORTAL_KEYRING_ERROR_DIFFERENT_END_USER, %PORTAL_KEYRING_ERROR_SESSION_STORAGE,
 *   %PORTAL_KEYRING_ERROR_NETWORK, …, `G_IO_ERROR_CANCELLED`)
 */
PortalKeyringSignInResult *
portal_keyring_auth_handle_redirect_finish (PortalKeyringAuth *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    return _portal_keyring_sign_in_result_new_take (
        _portal_keyring_bridge_sign_in_outcome (self, result, portal_keyring_auth_handle_redirect_async, error));
}

/**
 * portal_keyring_auth_handle_redirect_sync:
 * @self: an auth
 * @url: the URL the browser opened
 * @flags: %PORTAL_KEYRING_REDIRECT_FLAGS_NONE, or the opt-outs of #PortalKeyringRedirectFlags
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Completes a sign-in as [method@PortalKeyring.Auth.handle_redirect_async] does, blocking the
 * calling thread (one HTTP request and the keyring: 45 s with the default deadlines, plus the
 * prompt deadline for each prompt shown): call it from a worker thread.
 *
 * Returns: (transfer full): as [method@PortalKeyring.Auth.handle_redirect_finish]
 */
PortalKeyringSignInResult *
portal_keyring_auth_handle_redirect_sync (PortalKeyringAuth *self, const gchar *url, PortalKeyringRedirectFlags flags,
                                          GCancellable *cancellable, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    g_return_val_if_fail (error == NULL || *error == NULL, NULL);
    SyncWait wait;
    _portal_keyring_sync_wait_begin (&wait);
    portal_keyring_auth_handle_redirect_async (self, url, flags, cancellable, _portal_keyring_sync_done, &wait);
    _portal_keyring_sync_wait_end (&wait);
    PortalKeyringSignInResult *result = portal_keyring_auth_handle_redirect_finish (self, wait.result, error);
    _portal_keyring_sync_wait_clear (&wait);
    return result;
}

/* ------------------------------------------------------------------------------------------
 * verify_totp
 * ------------------------------------------------------------------------------------------ */

typedef struct {
    const gchar *code;
    const gchar *user_jwt;
} TotpArgs;

static portal_status
start_verify_totp (portal_auth *auth, gpointer args, portal_sign_in_cb callback, void *bridge,
                   portal_destroy_notify destroy_notify, uint64_t *operation_out)
{
    TotpArgs *totp = args;
    /* The C call checks and copies both before it returns. */
    return portal_auth_verify_totp_async (auth, totp->code, totp->user_jwt, NULL, callback, bridge, destroy_notify,
                                          operation_out);
}

/**
 * portal_keyring_auth_verify_totp_async:
 * @self: an auth
 * @code: the TOTP code the end user typed (1 … 16 ASCII digits)
 * @user_jwt: the user JWT of the TOTP step ([method@PortalKeyring.SignInResult.copy_user_jwt])
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when the sign-in completes
 * @user_data: (closure callback): data for @callback
 *
 * Completes a TOTP sign-in without blocking: exchanges the code with the user JWT and persists
 * the session of the JWT's end user. A wrong code is
 * %PORTAL_KEYRING_ERROR_AUTHENTICATION_FAILED: ask for a new code and call again with the same
 * JWT. When the keyring holds a session of an end user other than the JWT's, nothing is sent
 * and the operation fails with %PORTAL_KEYRING_ERROR_DIFFERENT_END_USER: the code stays unused,
 * and after [method@PortalKeyring.Auth.clear_persisted_session_async] the same code and JWT sign
 * in. When the keyring write fails after Portal accepted the code, calling again with the same
 * JWT on this auth retries only the write. Finish with
 * [method@PortalKeyring.Auth.verify_totp_finish].
 */
void
portal_keyring_auth_verify_totp_async (PortalKeyringAuth *self, const gchar *code, const gchar *user_jwt,
                                       GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (PORTAL_KEYRING_IS_AUTH (self));
    g_return_if_fail (cancellable == NULL || G_IS_CANCELLABLE (cancellable));
    TotpArgs args = { code, user_jwt };
    _portal_keyring_bridge_run_sign_in (self, cancellable, callback, user_data, portal_keyring_auth_verify_totp_async,
                                        start_verify_totp, &args);
}

/**
 * portal_keyring_auth_verify_totp_finish:
 * @self: an auth
 * @result: the #GAsyncResult given to the callback
 * @error: return location for a #GError
 *
 * Finishes [method@PortalKeyring.Auth.verify_totp_async].
 *
 * Returns: (transfer full): the persisted session (it knows its client id and account
 *   abstraction), or %NULL with @error set (%PORTAL_KEYRING_ERROR_AUTHENTICATION_FAILED,
 *   %PORTAL_KEYRING_ERROR_INVALID_USER_JWT, %PORTAL_KEYRING_ERROR_INVALID_ARGUMENT for a code that
 *   is not digits, %PORTAL_KEYRING_ERROR_DIFFERENT_END_USER, %PORTAL_KEYRING_ERROR_SESSION_STORAGE,
 *   …, `G_IO_ERROR_CANCELLED`)
 */
PortalKeyringSession *
portal_keyring_auth_verify_totp_finish (PortalKeyringAuth *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    SignInOutcome *outcome =
        _portal_keyring_bridge_sign_in_outcome (self, result, portal_keyring_auth_verify_totp_async, error);
    if (outcome == NULL)
        return NULL;
    portal_session *session = g_steal_pointer (&outcome->session);
    _portal_keyring_sign_in_outcome_free (outcome);
    return _portal_keyring_session_new_take (session);
}

/**
 * portal_keyring_auth_verify_totp_sync:
 * @self: an auth
 * @code: the TOTP code the end user typed
 * @user_jwt: the user JWT of the TOTP step
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Completes a TOTP sign-in as [method@PortalKeyring.Auth.verify_totp_async] does, blocking the
 * calling thread (45 s with the default deadlines, plus the prompt deadline for each prompt
 * shown): call it from a worker thread.
 *
 * Returns: (transfer full): as [method@PortalKeyring.Auth.verify_totp_finish]
 */
PortalKeyringSession *
portal_keyring_auth_verify_totp_sync (PortalKeyringAuth *self, const gchar *code, const gchar *user_jwt,
                                      GCancellable *cancellable, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    g_return_val_if_fail (error == NULL || *error == NULL, NULL);
    SyncWait wait;
    _portal_keyring_sync_wait_begin (&wait);
    portal_keyring_auth_verify_totp_async (self, code, user_jwt, cancellable, _portal_keyring_sync_done, &wait);
    _portal_keyring_sync_wait_end (&wait);
    PortalKeyringSession *session = portal_keyring_auth_verify_totp_finish (self, wait.result, error);
    _portal_keyring_sync_wait_clear (&wait);
    return session;
}
