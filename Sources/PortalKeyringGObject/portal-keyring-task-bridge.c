/* portal-keyring-task-bridge.c — how the operations of PortalKeyringAuth and PortalKeyringPortal
 * meet GIO: a C *_async operation's completion callback turned into a GTask's return, and the
 * private main loop the _sync forms with a GCancellable wait on. Apart from the types, so that
 * the threading rules (which thread and context each step runs on, who holds the last reference) are read in
 * one place. */
#include "portal-keyring-private.h"

/* ------------------------------------------------------------------------------------------
 * The bridge from a C *_async operation to a GTask.
 *
 * The C ABI completes each operation exactly once, on the thread-default GMainContext of the
 * thread that started it (queue NULL): the context GTask captured in g_task_new() a moment
 * before, so the task returns on its own context without another hop. Cancelling the
 * GCancellable cancels the C operation, which then completes at once with PORTAL_ERR_CANCELLED
 * (G_IO_ERROR_CANCELLED here) while its worker winds down on its own.
 *
 * The bridge is shared between the starting thread, the C completion and the cancel handler
 * (which may run on any thread): reference-counted, so none of them outlives it.
 * ------------------------------------------------------------------------------------------ */

typedef struct {
    GTask *task;
    ResultKind kind;
    GCancellable *cancellable;
    gulong cancelled_id;
    guint64 operation;
} Bridge;

static void
bridge_clear (gpointer data)
{
    Bridge *bridge = data;
    /* Not inside the cancel handler: the C library never runs a destroy_notify from
     * portal_operation_cancel(), so this cannot wait on itself. */
    if (bridge->cancelled_id)
        g_cancellable_disconnect (bridge->cancellable, bridge->cancelled_id);
    g_clear_object (&bridge->cancellable);
    g_clear_object (&bridge->task);
}

static void
bridge_release (gpointer data)
{
    g_atomic_rc_box_release_full (data, bridge_clear);
}

static void
bridge_cancelled (GCancellable *cancellable, gpointer data)
{
    (void) cancellable;
    Bridge *bridge = data;
    portal_operation_cancel (bridge->operation);
}

/* The first step of each completion: TRUE when the operation failed, its error returned. */
static gboolean
bridge_failed (Bridge *bridge, portal_status status, const char *message)
{
    /* Stop cancels reaching an operation that is over before the task returns (a late cancel
     * still turns the result into G_IO_ERROR_CANCELLED: GTask checks the cancellable). */
    if (bridge->cancelled_id) {
        g_cancellable_disconnect (bridge->cancellable, bridge->cancelled_id);
        bridge->cancelled_id = 0;
    }
    if (status == PORTAL_OK)
        return FALSE;
    g_task_return_error (bridge->task, _portal_keyring_error_new (status, message));
    return TRUE;
}

static void
bridge_completed (portal_status status, portal_result *result, const char *message, void *data)
{
    Bridge *bridge = data;
    if (bridge_failed (bridge, status, message))
        return;
    switch (bridge->kind) {
    case RESULT_SESSION: {
        /* Taken from the result, so that the C library does not free it after this returns. */
        portal_session *handle = result->session;
        result->session = NULL;
        g_task_return_pointer (bridge->task, handle ? _portal_keyring_session_new_take (handle) : NULL,
                               g_object_unref);
        break;
    }
    case RESULT_BOOLEAN:
        g_task_return_boolean (bridge->task, TRUE);
        break;
    case RESULT_RESPONSE: {
        /* Taken from the result, so that the C library does not free it after this returns. */
        Response *response = _portal_keyring_response_new_take (result->http_status, result->body, result->body_len);
        result->body = NULL;
        g_task_return_pointer (bridge->task, response, _portal_keyring_response_free);
        break;
    }
    case RESULT_SIGN_IN:
        /* Never here: a sign-in operation's C call completes through bridge_sign_in_completed. */
        g_assert_not_reached ();
    }
}

Response *
_portal_keyring_response_new_take (long http_status, char *body, size_t length)
{
    Response *response = g_new0 (Response, 1);
    response->http_status = (guint) http_status;
    /* Not copied: the GBytes wipes and frees the C body with portal_string_free() when its last
     * reference goes. */
    response->body = g_bytes_new_with_free_func (body, length, (GDestroyNotify) portal_string_free, body);
    return response;
}

void
_portal_keyring_response_free (gpointer data)
{
    Response *response = data;
    g_bytes_unref (response->body);
    g_free (response);
}

/* The C handle that self's operations start on, or NULL with the error saying why. */
static gpointer
bridge_handle (gpointer self, GError **error)
{
    if (PORTAL_KEYRING_IS_PORTAL (self))
        return _portal_keyring_portal_get_handle (self, error);
    return _portal_keyring_auth_get_handle (self, error);
}

void
_portal_keyring_sign_in_outcome_free (SignInOutcome *outcome)
{
    portal_session_free (outcome->session);
    portal_string_free (outcome->text);
    portal_string_free (outcome->user_jwt);
    portal_string_free (outcome->totp_link);
    g_free (outcome);
}

static void
bridge_sign_in_completed (portal_status status, portal_sign_in_result *result, const char *message, void *data)
{
    Bridge *bridge = data;
    if (bridge_failed (bridge, status, message))
        return;
    /* Every owned field taken, so that the C library does not free it after this returns. */
    SignInOutcome *outcome = g_new0 (SignInOutcome, 1);
    outcome->kind = result->kind;
    outcome->session = g_steal_pointer (&result->session);
    outcome->text = g_steal_pointer (&result->text);
    outcome->auto_create_wallet = result->auto_create_wallet;
    outcome->user_jwt = g_steal_pointer (&result->user_jwt);
    outcome->totp_link = g_steal_pointer (&result->totp_link);
    g_task_return_pointer (bridge->task, outcome, (GDestroyNotify) _portal_keyring_sign_in_outcome_free);
}

/* Starts the C operation for task (which the caller keeps its own reference to): start, or
 * sign_in_start for a sign-in operation (the other is NULL). */
static void
bridge_start (gpointer self, GTask *task, ResultKind kind, StartFunc start, SignInStartFunc sign_in_start,
              gpointer args)
{
    GError *error = NULL;
    gpointer handle = bridge_handle (self, &error);
    if (handle == NULL) {
        g_task_return_error (task, error);
        return;
    }
    if (g_task_return_error_if_cancelled (task))
        return;
    Bridge *bridge = g_atomic_rc_box_new0 (Bridge);
    bridge->task = g_object_ref (task);
    bridge->kind = kind;
    GCancellable *cancellable = g_task_get_cancellable (task);
    bridge->cancellable = cancellable ? g_object_ref (cancellable) : NULL;
    /* One reference for the C operation, released by its destroy_notify (which has run already
     * when the start fails); this function keeps its own until it is done with the bridge. */
    g_atomic_rc_box_acquire (bridge);
    uint64_t operation = 0;
    portal_status status = start ? start (handle, args, bridge_completed, bridge, bridge_release, &operation)
                                 : sign_in_start (handle, args, bridge_sign_in_completed, bridge, bridge_release,
                                                  &operation);
    if (status != PORTAL_OK) {
        g_task_return_error (task, _portal_keyring_error_new (status, portal_last_error_message ()));
        bridge_release (bridge);
        return;
    }
    bridge->operation = operation;
    /* Connected after the start, so that the handler has an operation to cancel; a cancellable
     * cancelled meanwhile runs the handler at once, here. */
    if (cancellable)
        bridge->cancelled_id = g_cancellable_connect (cancellable, G_CALLBACK (bridge_cancelled), bridge, NULL);
    bridge_release (bridge);
}

static void
bridge_run (gpointer self, GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data,
            gpointer source_tag, ResultKind kind, StartFunc start, SignInStartFunc sign_in_start, gpointer args)
{
    GTask *task = g_task_new (self, cancellable, callback, user_data);
    g_task_set_source_tag (task, source_tag);
    bridge_start (self, task, kind, start, sign_in_start, args);
    g_object_unref (task);
}

void
_portal_keyring_bridge_run (gpointer self, GCancellable *cancellable, GAsyncReadyCallback callback,
                            gpointer user_data, gpointer source_tag, ResultKind kind, StartFunc start, gpointer args)
{
    bridge_run (self, cancellable, callback, user_data, source_tag, kind, start, NULL, args);
}

void
_portal_keyring_bridge_run_sign_in (PortalKeyringAuth *self, GCancellable *cancellable, GAsyncReadyCallback callback,
                                    gpointer user_data, gpointer source_tag, SignInStartFunc start, gpointer args)
{
    bridge_run (self, cancellable, callback, user_data, source_tag, RESULT_SIGN_IN, NULL, start, args);
}

GTask *
_portal_keyring_bridge_task (gpointer self, GAsyncResult *result, gpointer source_tag)
{
    g_return_val_if_fail (g_task_is_valid (result, self), NULL);
    g_return_val_if_fail (g_task_get_source_tag (G_TASK (result)) == source_tag, NULL);
    return G_TASK (result);
}

SignInOutcome *
_portal_keyring_bridge_sign_in_outcome (PortalKeyringAuth *self, GAsyncResult *result, gpointer source_tag,
                                        GError **error)
{
    GTask *task = _portal_keyring_bridge_task (self, result, source_tag);
    return task ? g_task_propagate_pointer (task, error) : NULL;
}

/* ------------------------------------------------------------------------------------------
 * _sync with a GCancellable: the _async form on a private main context, iterated here until it
 * completes (libsecret's pattern), so that the cancel works as in _async. Without a cancellable
 * the _sync forms call the blocking C function directly: no worker thread, no extra hop.
 * ------------------------------------------------------------------------------------------ */

void
_portal_keyring_sync_done (GObject *source, GAsyncResult *result, gpointer data)
{
    (void) source;
    SyncWait *wait = data;
    wait->result = g_object_ref (result);
    g_main_context_wakeup (wait->context);
}

void
_portal_keyring_sync_wait_begin (SyncWait *wait)
{
    wait->context = g_main_context_new ();
    wait->result = NULL;
    g_main_context_push_thread_default (wait->context);
}

void
_portal_keyring_sync_wait_end (SyncWait *wait)
{
    while (wait->result == NULL)
        g_main_context_iteration (wait->context, TRUE);
    g_main_context_pop_thread_default (wait->context);
}

void
_portal_keyring_sync_wait_clear (SyncWait *wait)
{
    g_clear_object (&wait->result);
    g_main_context_unref (wait->context);
}
