/* portal-keyring-auth-operations.c — the keyring operations of PortalKeyringAuth (restore,
 * persist, clear), each in GIO's three forms: _async starts the C *_async operation through the
 * task bridge, _finish reads its GTask, and _sync either calls the blocking C function (no
 * cancellable: no worker thread, no extra hop) or waits on _async in a private loop (with one,
 * so that the cancel works as in _async). */
#include "portal-keyring-private.h"

/* ------------------------------------------------------------------------------------------
 * restore
 * ------------------------------------------------------------------------------------------ */

static portal_status
start_restore (gpointer auth, gpointer args, portal_completion_cb callback, void *bridge,
               portal_destroy_notify destroy_notify, uint64_t *operation_out)
{
    (void) args;
    return portal_auth_restore_session_async (auth, NULL, callback, bridge, destroy_notify, operation_out);
}

/**
 * portal_keyring_auth_restore_session_async:
 * @self: an auth
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when the restore completes
 * @user_data: (closure callback): data for @callback
 *
 * Restores the persisted session without a network call and without blocking: the keyring is
 * read on a worker thread, and @callback runs on the thread-default main context of this call.
 * Finish with [method@PortalKeyring.Auth.restore_session_finish].
 */
void
portal_keyring_auth_restore_session_async (PortalKeyringAuth *self, GCancellable *cancellable,
                                           GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (PORTAL_KEYRING_IS_AUTH (self));
    g_return_if_fail (cancellable == NULL || G_IS_CANCELLABLE (cancellable));
    _portal_keyring_bridge_run (self, cancellable, callback, user_data, portal_keyring_auth_restore_session_async, RESULT_SESSION,
                                start_restore, NULL);
}

/**
 * portal_keyring_auth_restore_session_finish:
 * @self: an auth
 * @result: the #GAsyncResult given to the callback
 * @error: return location for a #GError
 *
 * Finishes [method@PortalKeyring.Auth.restore_session_async].
 *
 * Returns: (transfer full) (nullable): the session; %NULL without an error when the end user
 *   is signed out; %NULL with @error set when the keyring could not be read
 *   (%PORTAL_KEYRING_ERROR_SESSION_STORAGE: nothing was deleted, the end user is NOT known to
 *   be signed out) or the restore was cancelled (`G_IO_ERROR_CANCELLED`)
 */
PortalKeyringSession *
portal_keyring_auth_restore_session_finish (PortalKeyringAuth *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    GTask *task = _portal_keyring_bridge_task (self, result, portal_keyring_auth_restore_session_async);
    return task ? g_task_propagate_pointer (task, error) : NULL;
}

/**
 * portal_keyring_auth_restore_session_sync:
 * @self: an auth
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Restores the persisted session without a network call, blocking the calling thread up to the
 * keyring deadlines: call it from a worker thread, or use
 * [method@PortalKeyring.Auth.restore_session_async] on a main loop.
 *
 * Returns: (transfer full) (nullable): as [method@PortalKeyring.Auth.restore_session_finish]
 */
PortalKeyringSession *
portal_keyring_auth_restore_session_sync (PortalKeyringAuth *self, GCancellable *cancellable, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    g_return_val_if_fail (cancellable == NULL || G_IS_CANCELLABLE (cancellable), NULL);
    g_return_val_if_fail (error == NULL || *error == NULL, NULL);
    if (cancellable) {
        SyncWait wait;
        _portal_keyring_sync_wait_begin (&wait);
        portal_keyring_auth_restore_session_async (self, cancellable, _portal_keyring_sync_done, &wait);
        _portal_keyring_sync_wait_end (&wait);
        PortalKeyringSession *session = portal_keyring_auth_restore_session_finish (self, wait.result, error);
        _portal_keyring_sync_wait_clear (&wait);
        return session;
    }
    portal_auth *handle = _portal_keyring_auth_get_handle (self, error);
    if (handle == NULL)
        return NULL;
    portal_session *session = NULL;
    portal_status status = portal_auth_restore_session (handle, &session);
    if (status != PORTAL_OK) {
        g_propagate_error (error, _portal_keyring_error_new (status, portal_last_error_message ()));
        return NULL;
    }
    return session ? _portal_keyring_session_new_take (session) : NULL;
}

/* ------------------------------------------------------------------------------------------
 * persist
 * ------------------------------------------------------------------------------------------ */

typedef struct {
    const gchar *end_user_id;
    const gchar *client_session_token;
} PersistArgs;

static portal_status
start_persist (gpointer auth, gpointer args, portal_completion_cb callback, void *bridge,
               portal_destroy_notify destroy_notify, uint64_t *operation_out)
{
    PersistArgs *persist = args;
    /* The C call copies both strings before it returns: the caller's memory is not kept. */
    return portal_auth_persist_session_async (auth, persist->end_user_id, persist->client_session_token, NULL,
                                              callback, bridge, destroy_notify, operation_out);
}

/**
 * portal_keyring_auth_persist_session_async:
 * @self: an auth
 * @end_user_id: the Portal end user id
 * @client_session_token: the Client Session Token that the app's backend issued (copied before
 *   this returns; the library keeps its own copy, wiped when released)
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when the persist completes
 * @user_data: (closure callback): data for @callback
 *
 * Stores a session, replacing any stored session of this auth environment, without blocking.
 * The new item is written before older ones are removed, so a failure leaves the previously
 * stored session intact, and a cancel never half-applies it: either the new session was stored
 * (a restore returns it) or the previous one is intact. Bad arguments (a blank end user id, a token with
 * whitespace) fail the operation with %PORTAL_KEYRING_ERROR_INVALID_ARGUMENT. Finish with
 * [method@PortalKeyring.Auth.persist_session_finish].
 */
void
portal_keyring_auth_persist_session_async (PortalKeyringAuth *self, const gchar *end_user_id,
                                           const gchar *client_session_token, GCancellable *cancellable,
                                           GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (PORTAL_KEYRING_IS_AUTH (self));
    g_return_if_fail (cancellable == NULL || G_IS_CANCELLABLE (cancellable));
    PersistArgs args = { end_user_id, client_session_token };
    _portal_keyring_bridge_run (self, cancellable, callback, user_data, portal_keyring_auth_persist_session_async,
                                RESULT_SESSION, start_persist, &args);
}

/**
 * portal_keyring_auth_persist_session_finish:
 * @self: an auth
 * @result: the #GAsyncResult given to the callback
 * @error: return location for a #GError
 *
 * Finishes [method@PortalKeyring.Auth.persist_session_async].
 *
 * Returns: (transfer full): the stored session, or %NULL with @error set
 *   (%PORTAL_KEYRING_ERROR_SESSION_STORAGE, %PORTAL_KEYRING_ERROR_INVALID_ARGUMENT,
 *   `G_IO_ERROR_CANCELLED`)
 */
PortalKeyringSession *
portal_keyring_auth_persist_session_finish (PortalKeyringAuth *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    GTask *task = _portal_keyring_bridge_task (self, result, portal_keyring_auth_persist_session_async);
    return task ? g_task_propagate_pointer (task, error) : NULL;
}

/**
 * portal_keyring_auth_persist_session_sync:
 * @self: an auth
 * @end_user_id: the Portal end user id
 * @client_session_token: the Client Session Token that the app's backend issued
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Stores a session as [method@PortalKeyring.Auth.persist_session_async] does, blocking the
 * calling thread up to two call deadlines plus the prompt deadline for each prompt shown.
 *
 * Returns: (transfer full): the stored session, or %NULL with @error set
 */
PortalKeyringSession *
portal_keyring_auth_persist_session_sync (PortalKeyringAuth *self, const gchar *end_user_id,
                                          const gchar *client_session_token, GCancellable *cancellable,
                                          GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), NULL);
    g_return_val_if_fail (cancellable == NULL || G_IS_CANCELLABLE (cancellable), NULL);
    g_return_val_if_fail (error == NULL || *error == NULL, NULL);
    if (cancellable) {
        SyncWait wait;
        _portal_keyring_sync_wait_begin (&wait);
        portal_keyring_auth_persist_session_async (self, end_user_id, client_session_token, cancellable,
                                                   _portal_keyring_sync_done, &wait);
        _portal_keyring_sync_wait_end (&wait);
        PortalKeyringSession *session = portal_keyring_auth_persist_session_finish (self, wait.result, error);
        _portal_keyring_sync_wait_clear (&wait);
        return session;
    }
    portal_auth *handle = _portal_keyring_auth_get_handle (self, error);
    if (handle == NULL)
        return NULL;
    portal_session *session = NULL;
    portal_status status = portal_auth_persist_session (handle, end_user_id, client_session_token, &session);
    if (status != PORTAL_OK) {
        g_propagate_error (error, _portal_keyring_error_new (status, portal_last_error_message ()));
        return NULL;
    }
    return _portal_keyring_session_new_take (session);
}

/* ------------------------------------------------------------------------------------------
 * clear
 * ------------------------------------------------------------------------------------------ */

static portal_status
start_clear (gpointer auth, gpointer args, portal_completion_cb callback, void *bridge,
             portal_destroy_notify destroy_notify, uint64_t *operation_out)
{
    (void) args;
    return portal_auth_clear_persisted_session_async (auth, NULL, callback, bridge, destroy_notify, operation_out);
}

/**
 * portal_keyring_auth_clear_persisted_session_async:
 * @self: an auth
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when the clear completes
 * @user_data: (closure callback): data for @callback
 *
 * Deletes every stored session of this auth environment (sign-out), without blocking.
 * Succeeds when nothing is stored. Finish with
 * [method@PortalKeyring.Auth.clear_persisted_session_finish].
 */
void
portal_keyring_auth_clear_persisted_session_async (PortalKeyringAuth *self, GCancellable *cancellable,
                                                   GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (PORTAL_KEYRING_IS_AUTH (self));
    g_return_if_fail (cancellable == NULL || G_IS_CANCELLABLE (cancellable));
    _portal_keyring_bridge_run (self, cancellable, callback, user_data, portal_keyring_auth_clear_persisted_session_async, RESULT_BOOLEAN,
                                start_clear, NULL);
}

/**
 * portal_keyring_auth_clear_persisted_session_finish:
 * @self: an auth
 * @result: the #GAsyncResult given to the callback
 * @error: return location for a #GError
 *
 * Finishes [method@PortalKeyring.Auth.clear_persisted_session_async].
 *
 * Returns: %TRUE when nothing is stored any more; %FALSE with @error set
 *   (%PORTAL_KEYRING_ERROR_SESSION_STORAGE, `G_IO_ERROR_CANCELLED`)
 */
gboolean
portal_keyring_auth_clear_persisted_session_finish (PortalKeyringAuth *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), FALSE);
    GTask *task = _portal_keyring_bridge_task (self, result, portal_keyring_auth_clear_persisted_session_async);
    return task ? g_task_propagate_boolean (task, error) : FALSE;
}

/**
 * portal_keyring_auth_clear_persisted_session_sync:
 * @self: an auth
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Deletes every stored session of this auth environment, blocking the calling thread up to the
 * keyring deadlines.
 *
 * Returns: %TRUE when nothing is stored any more; %FALSE with @error set
 */
gboolean
portal_keyring_auth_clear_persisted_session_sync (PortalKeyringAuth *self, GCancellable *cancellable, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (self), FALSE);
    g_return_val_if_fail (cancellable == NULL || G_IS_CANCELLABLE (cancellable), FALSE);
    g_return_val_if_fail (error == NULL || *error == NULL, FALSE);
    if (cancellable) {
        SyncWait wait;
        _portal_keyring_sync_wait_begin (&wait);
        portal_keyring_auth_clear_persisted_session_async (self, cancellable, _portal_keyring_sync_done, &wait);
        _portal_keyring_sync_wait_end (&wait);
        gboolean cleared = portal_keyring_auth_clear_persisted_session_finish (self, wait.result, error);
        _portal_keyring_sync_wait_clear (&wait);
        return cleared;
    }
    portal_auth *handle = _portal_keyring_auth_get_handle (self, error);
    if (handle == NULL)
        return FALSE;
    portal_status status = portal_auth_clear_persisted_session (handle);
    if (status != PORTAL_OK) {
        g_propagate_error (error, _portal_keyring_error_new (status, portal_last_error_message ()));
        return FALSE;
    }
    return TRUE;
}
