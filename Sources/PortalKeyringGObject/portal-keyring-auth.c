/* portal-keyring-auth.c — PortalKeyringAuth over a C portal_auth handle: construction through
 * GInitable, and the keyring operations in GIO's three forms. */
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
struct _PortalKeyringAuth {
    GObject parent_instance;
    gchar *auth_environment_id;
    gchar *redirect_url;
    gchar *api_host;
    guint call_timeout_ms;
    guint prompt_timeout_ms;
    /* Set by a successful initialisation; NULL before it and after a failed one. */
    portal_auth *handle;
    /* The failed initialisation's error, given again by every later call. */
    GError *init_error;
    gboolean init_ran;
};

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
    g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
portal_keyring_auth_init (PortalKeyringAuth *self)
{
    self->call_timeout_ms = DEFAULT_CALL_TIMEOUT_MS;
    self->prompt_timeout_ms = DEFAULT_PROMPT_TIMEOUT_MS;
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
        /* The C message starts with the C parameter's name ("call_timeout_ms: …"): name the
         * property instead, which is what a GObject caller set. */
        gchar *message = g_strdup (portal_last_error_message ());
        for (gchar *c = message; *c && *c != ':' && *c != ' '; c++)
            if (*c == '_')
                *c = '-';
        self->init_error = g_error_new_literal (PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT, message);
        g_free (message);
        portal_auth_free (handle);
    }
    if (self->init_error) {
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

/* The handle, or NULL with the error that says why there is none. */
static portal_auth *
auth_handle (PortalKeyringAuth *self, GError **error)
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

typedef enum { RESULT_SESSION, RESULT_BOOLEAN } ResultKind;

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

static void
bridge_completed (portal_status status, portal_result *result, const char *message, void *data)
{
    Bridge *bridge = data;
    /* Stop cancels reaching an operation that is over before the task returns (a late cancel
     * still turns the result into G_IO_ERROR_CANCELLED: GTask checks the cancellable). */
    if (bridge->cancelled_id) {
        g_cancellable_disconnect (bridge->cancellable, bridge->cancelled_id);
        bridge->cancelled_id = 0;
    }
    if (status != PORTAL_OK) {
        g_task_return_error (bridge->task, _portal_keyring_error_new (status, message));
        return;
    }
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
    }
}

typedef portal_status (*StartFunc) (portal_auth *auth, gpointer args, portal_completion_cb callback, void *bridge,
                                    portal_destroy_notify destroy_notify, uint64_t *operation_out);

/* Starts the C operation for task (which the caller keeps its own reference to). */
static void
bridge_start (PortalKeyringAuth *self, GTask *task, ResultKind kind, StartFunc start, gpointer args)
{
    GError *error = NULL;
    portal_auth *handle = auth_handle (self, &error);
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
    portal_status status = start (handle, args, bridge_completed, bridge, bridge_release, &operation);
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

/* ------------------------------------------------------------------------------------------
 * _sync with a GCancellable: the _async form on a private main context, iterated here until it
 * completes (libsecret's pattern), so that the cancel works as in _async. Without a cancellable
 * the _sync forms call the blocking C function directly: no worker thread, no extra hop.
 * ------------------------------------------------------------------------------------------ */

typedef struct {
    GMainContext *context;
    GAsyncResult *result;
} SyncWait;

static void
sync_done (GObject *source, GAsyncResult *result, gpointer data)
{
    (void) source;
    SyncWait *wait = data;
    wait->result = g_object_ref (result);
    g_main_context_wakeup (wait->context);
}

static void
sync_wait_begin (SyncWait *wait)
{
    wait->context = g_main_context_new ();
    wait->result = NULL;
    g_main_context_push_thread_default (wait->context);
}

static void
sync_wait_end (SyncWait *wait)
{
    while (wait->result == NULL)
        g_main_context_iteration (wait->context, TRUE);
    g_main_context_pop_thread_default (wait->context);
}

static void
sync_wait_clear (SyncWait *wait)
{
    g_clear_object (&wait->result);
    g_main_context_unref (wait->context);
}

/* ------------------------------------------------------------------------------------------
 * restore
 * ------------------------------------------------------------------------------------------ */

static portal_status
start_restore (portal_auth *auth, gpointer args, portal_completion_cb callback, void *bridge,
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
    GTask *task = g_task_new (self, cancellable, callback, user_data);
    g_task_set_source_tag (task, portal_keyring_auth_restore_session_async);
    bridge_start (self, task, RESULT_SESSION, start_restore, NULL);
    g_object_unref (task);
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
    g_return_val_if_fail (g_task_is_valid (result, self), NULL);
    g_return_val_if_fail (g_task_get_source_tag (G_TASK (result)) == portal_keyring_auth_restore_session_async,
                          NULL);
    return g_task_propagate_pointer (G_TASK (result), error);
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
        sync_wait_begin (&wait);
        portal_keyring_auth_restore_session_async (self, cancellable, sync_done, &wait);
        sync_wait_end (&wait);
        PortalKeyringSession *session = portal_keyring_auth_restore_session_finish (self, wait.result, error);
        sync_wait_clear (&wait);
        return session;
    }
    portal_auth *handle = auth_handle (self, error);
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
start_persist (portal_auth *auth, gpointer args, portal_completion_cb callback, void *bridge,
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
    GTask *task = g_task_new (self, cancellable, callback, user_data);
    g_task_set_source_tag (task, portal_keyring_auth_persist_session_async);
    PersistArgs args = { end_user_id, client_session_token };
    bridge_start (self, task, RESULT_SESSION, start_persist, &args);
    g_object_unref (task);
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
    g_return_val_if_fail (g_task_is_valid (result, self), NULL);
    g_return_val_if_fail (g_task_get_source_tag (G_TASK (result)) == portal_keyring_auth_persist_session_async,
                          NULL);
    return g_task_propagate_pointer (G_TASK (result), error);
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
        sync_wait_begin (&wait);
        portal_keyring_auth_persist_session_async (self, end_user_id, client_session_token, cancellable, sync_done,
                                                   &wait);
        sync_wait_end (&wait);
        PortalKeyringSession *session = portal_keyring_auth_persist_session_finish (self, wait.result, error);
        sync_wait_clear (&wait);
        return session;
    }
    portal_auth *handle = auth_handle (self, error);
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
start_clear (portal_auth *auth, gpointer args, portal_completion_cb callback, void *bridge,
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
    GTask *task = g_task_new (self, cancellable, callback, user_data);
    g_task_set_source_tag (task, portal_keyring_auth_clear_persisted_session_async);
    bridge_start (self, task, RESULT_BOOLEAN, start_clear, NULL);
    g_object_unref (task);
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
    g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
    g_return_val_if_fail (
        g_task_get_source_tag (G_TASK (result)) == portal_keyring_auth_clear_persisted_session_async, FALSE);
    return g_task_propagate_boolean (G_TASK (result), error);
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
        sync_wait_begin (&wait);
        portal_keyring_auth_clear_persisted_session_async (self, cancellable, sync_done, &wait);
        sync_wait_end (&wait);
        gboolean cleared = portal_keyring_auth_clear_persisted_session_finish (self, wait.result, error);
        sync_wait_clear (&wait);
        return cleared;
    }
    portal_auth *handle = auth_handle (self, error);
    if (handle == NULL)
        return FALSE;
    portal_status status = portal_auth_clear_persisted_session (handle);
    if (status != PORTAL_OK) {
        g_propagate_error (error, _portal_keyring_error_new (status, portal_last_error_message ()));
        return FALSE;
    }
    return TRUE;
}
