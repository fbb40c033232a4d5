/* portal-keyring-portal-operations.c — PortalKeyringPortal's calls in GIO's three forms, as the
 * auth's operations are (portal-keyring-auth-operations.c): new, over the type's GAsyncInitable
 * and GInitable, and the authenticated request, whose _async starts the C
 * portal_request_async() through the task bridge, _finish reads its GTask, and _sync either
 * calls the blocking portal_request() (no cancellable) or waits on _async in a private loop. */
#include "portal-keyring-private.h"

/* ------------------------------------------------------------------------------------------
 * new
 * ------------------------------------------------------------------------------------------ */

/**
 * portal_keyring_portal_new_async:
 * @session: the session whose token the requests carry
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when the portal is made and the session validated
 * @user_data: (closure callback): data for @callback
 *
 * Makes a portal for @session and validates the session (see [class@PortalKeyring.Portal])
 * without blocking: @callback runs on the thread-default main context of this call, which is
 * also where [signal@PortalKeyring.Portal::session-invalidated] will be emitted. Finish with
 * [ctor@PortalKeyring.Portal.new_finish].
 */
void
portal_keyring_portal_new_async (PortalKeyringSession *session, GCancellable *cancellable,
                                 GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (session == NULL || PORTAL_KEYRING_IS_SESSION (session));
    g_async_initable_new_async (PORTAL_KEYRING_TYPE_PORTAL, G_PRIORITY_DEFAULT, cancellable, callback, user_data,
                                "session", session, NULL);
}

/**
 * portal_keyring_portal_new_finish:
 * @result: the #GAsyncResult given to the callback
 * @error: return location for a #GError
 *
 * Finishes [func@PortalKeyring.Portal.new_async].
 *
 * Returns: (transfer full): the portal — [property@PortalKeyring.Portal:invalidated] tells
 *   whether the Portal API rejected the session — or %NULL with @error set
 *   (`G_IO_ERROR_CANCELLED`, %PORTAL_KEYRING_ERROR_INVALID_ARGUMENT)
 */
PortalKeyringPortal *
portal_keyring_portal_new_finish (GAsyncResult *result, GError **error)
{
    g_autoptr (GObject) source = g_async_result_get_source_object (result);
    GObject *portal = g_async_initable_new_finish (G_ASYNC_INITABLE (source), result, error);
    return portal ? PORTAL_KEYRING_PORTAL (portal) : NULL;
}

/**
 * portal_keyring_portal_new_sync:
 * @session: the session whose token the requests carry
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Makes a portal for @session and validates the session, blocking the calling thread for the
 * validation request (up to 30 s, and the keyring deadlines when it deletes a rejected session).
 * [signal@PortalKeyring.Portal::session-invalidated] is emitted on the thread-default main
 * context of the calling thread: on a worker that pushed none, the global default context, so a
 * rejection is reported there when its loop runs, and the portal returned here may not show it
 * yet.
 *
 * Returns: (transfer full): as [ctor@PortalKeyring.Portal.new_finish]
 */
PortalKeyringPortal *
portal_keyring_portal_new_sync (PortalKeyringSession *session, GCancellable *cancellable, GError **error)
{
    g_return_val_if_fail (session == NULL || PORTAL_KEYRING_IS_SESSION (session), NULL);
    return g_initable_new (PORTAL_KEYRING_TYPE_PORTAL, cancellable, error, "session", session, NULL);
}

/* ------------------------------------------------------------------------------------------
 * request
 * ------------------------------------------------------------------------------------------ */


typedef struct {
    const gchar *method;
    const gchar *target;
    const gchar *body;
} RequestArgs;

static portal_status
start_request (gpointer portal, gpointer args, portal_completion_cb callback, void *bridge,
               portal_destroy_notify destroy_notify, uint64_t *operation_out)
{
    RequestArgs *request = args;
    /* The C call copies the strings before it returns. */
    return portal_request_async (portal, request->method, request->target, request->body, NULL, callback, bridge,
                                 destroy_notify, operation_out);
}

/**
 * portal_keyring_portal_request_async:
 * @self: a portal
 * @method: "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD" or "OPTIONS", exactly
 * @target: a path on the Portal API host ("/api/v3/…"), or an absolute https URL
 * @body: (nullable): a JSON body, or %NULL for none
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when the response is in
 * @user_data: (closure callback): data for @callback
 *
 * Sends a request without blocking: the session's token goes as bearer only to the Portal API
 * host (a path, or an absolute URL on that host exactly), and a 401 from that host invalidates
 * the session (see [class@PortalKeyring.Portal]). @callback runs on the thread-default main
 * context of this call. Cancelling aborts the request and completes at once with
 * `G_IO_ERROR_CANCELLED`. Finish with [method@PortalKeyring.Portal.request_finish].
 */
void
portal_keyring_portal_request_async (PortalKeyringPortal *self, const gchar *method, const gchar *target,
                                     const gchar *body, GCancellable *cancellable, GAsyncReadyCallback callback,
                                     gpointer user_data)
{
    g_return_if_fail (PORTAL_KEYRING_IS_PORTAL (self));
    g_return_if_fail (cancellable == NULL || G_IS_CANCELLABLE (cancellable));
    RequestArgs args = { method, target, body };
    _portal_keyring_bridge_run (self, cancellable, callback, user_data, portal_keyring_portal_request_async,
                                RESULT_RESPONSE, start_request, &args);
}

/* The body and status of a finished request (a Response, or NULL with error). */
static GBytes *
response_take (Response *response, guint *http_status)
{
    if (response == NULL)
        return NULL;
    if (http_status)
        *http_status = response->http_status;
    GBytes *body = g_bytes_ref (response->body);
    _portal_keyring_response_free (response);
    return body;
}

/**
 * portal_keyring_portal_request_finish:
 * @self: a portal
 * @result: the #GAsyncResult given to the callback
 * @http_status: (out) (optional): the HTTP status, whatever it is
 * @error: return location for a #GError
 *
 * Finishes [method@PortalKeyring.Portal.request_async]. Any HTTP status is an answer, not an
 * error: a 401 is returned here as it came (and the session is invalidated when the token went
 * to the Portal API host).
 *
 * Returns: (transfer full): the response body (at most 4 MiB; it may contain NUL bytes), or
 *   %NULL with @error set: %PORTAL_KEYRING_ERROR_SESSION_INVALIDATED (the session was
 *   invalidated before: nothing was sent), %PORTAL_KEYRING_ERROR_NETWORK,
 *   %PORTAL_KEYRING_ERROR_INVALID_ARGUMENT (a bad method or target: nothing was sent),
 *   `G_IO_ERROR_CANCELLED`
 */
GBytes *
portal_keyring_portal_request_finish (PortalKeyringPortal *self, GAsyncResult *result, guint *http_status,
                                      GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_PORTAL (self), NULL);
    GTask *task = _portal_keyring_bridge_task (self, result, portal_keyring_portal_request_async);
    return task ? response_take (g_task_propagate_pointer (task, error), http_status) : NULL;
}

/**
 * portal_keyring_portal_request_sync:
 * @self: a portal
 * @method: as in [method@PortalKeyring.Portal.request_async]
 * @target: as in [method@PortalKeyring.Portal.request_async]
 * @body: (nullable): a JSON body, or %NULL for none
 * @http_status: (out) (optional): the HTTP status, whatever it is
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Sends a request as [method@PortalKeyring.Portal.request_async] does, blocking the calling
 * thread up to 30 s (10 s of it to connect), and the keyring deadlines when a 401 invalidates
 * the session: call it from a worker thread.
 *
 * Returns: (transfer full): as [method@PortalKeyring.Portal.request_finish]
 */
GBytes *
portal_keyring_portal_request_sync (PortalKeyringPortal *self, const gchar *method, const gchar *target,
                                    const gchar *body, guint *http_status, GCancellable *cancellable, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_PORTAL (self), NULL);
    g_return_val_if_fail (cancellable == NULL || G_IS_CANCELLABLE (cancellable), NULL);
    g_return_val_if_fail (error == NULL || *error == NULL, NULL);
    if (cancellable) {
        SyncWait wait;
        _portal_keyring_sync_wait_begin (&wait);
        portal_keyring_portal_request_async (self, method, target, body, cancellable, _portal_keyring_sync_done,
                                             &wait);
        _portal_keyring_sync_wait_end (&wait);
        GBytes *bytes = portal_keyring_portal_request_finish (self, wait.result, http_status, error);
        _portal_keyring_sync_wait_clear (&wait);
        return bytes;
    }
    portal *handle = _portal_keyring_portal_get_handle (self, error);
    if (handle == NULL)
        return NULL;
    long status_out = 0;
    char *response = NULL;
    size_t length = 0;
    portal_status status = portal_request (handle, method, target, body, &status_out, &response, &length);
    if (status != PORTAL_OK) {
        g_propagate_error (error, _portal_keyring_error_new (status, portal_last_error_message ()));
        return NULL;
    }
    return response_take (_portal_keyring_response_new_take (status_out, response, length), http_status);
}
