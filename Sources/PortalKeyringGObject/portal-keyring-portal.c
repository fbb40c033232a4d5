/* portal-keyring-portal.c — PortalKeyringPortal over a C portal handle: the type and its
 * initialisation (GInitable, GAsyncInitable: the C portal and the session's validation). How the
 * session's invalidation becomes the PortalKeyringPortal::session-invalidated signal and the
 * PortalKeyringPortal:invalidated property is in portal-keyring-portal-invalidation.c; its calls
 * (new, request) are in portal-keyring-portal-operations.c. */
#include "portal-keyring-private.h"

/**
 * PortalKeyringPortal:
 *
 * The Portal client for one session (PortalSwift's `Portal`): authenticated requests to the
 * Portal API, and the news that the Portal API rejected the session.
 *
 * Make one with [func@PortalKeyring.Portal.new_async] (or
 * [ctor@PortalKeyring.Portal.new_sync] on a worker thread), or with [ctor@GObject.Object.new]
 * and [property@PortalKeyring.Portal:session] followed by [method@Gio.AsyncInitable.init_async]
 * or [method@Gio.Initable.init]. Construction validates the session: it completes when the
 * Portal API has answered `GET /api/v3/clients/me` with the session's token. A rejected
 * session (HTTP 401) does not fail the construction: the portal is made with
 * [property@PortalKeyring.Portal:invalidated] already %TRUE, so that the app learns it the
 * same way as a later rejection. An API that cannot be reached, or answers 5xx, leaves the
 * session as it was. Construction fails only on a missing session, or with
 * `G_IO_ERROR_CANCELLED`.
 *
 * Invalidation: when a request that carried the session's token to the Portal API host gets
 * HTTP 401 — the validation, [method@PortalKeyring.Portal.request_async], or any other portal
 * or process-wide user of the same sign-in — the C library drops the token and deletes the
 * stored session, and this portal then sets [property@PortalKeyring.Portal:invalidated] to
 * %TRUE and emits [signal@PortalKeyring.Portal::session-invalidated], exactly once, on the
 * thread-default main context of the thread that constructed it (at construction).
 *
 * A handler connected after the rejection is not called: the signal is emitted once and not
 * replayed. Read [property@PortalKeyring.Portal:invalidated] right after connecting — the
 * idiom of [method@Gio.Cancellable.connect] — or connect before initialising (with
 * [ctor@GObject.Object.new]). The portal holds no reference to its handlers' data, and its
 * session does not hold the portal: it is finalised with its last unref.
 */
static void portal_keyring_portal_initable_iface_init (GInitableIface *iface);
static void portal_keyring_portal_async_initable_iface_init (GAsyncInitableIface *iface);

G_DEFINE_TYPE_WITH_CODE (PortalKeyringPortal, portal_keyring_portal, G_TYPE_OBJECT,
                         G_IMPLEMENT_INTERFACE (G_TYPE_INITABLE, portal_keyring_portal_initable_iface_init)
                         G_IMPLEMENT_INTERFACE (G_TYPE_ASYNC_INITABLE,
                                                portal_keyring_portal_async_initable_iface_init))

enum {
    PROP_0,
    PROP_SESSION,
    PROP_INVALIDATED
};

static GParamSpec *session_property;

/* The validation: what the C library's portal_new() also sends, asked again here so that the
 * construction can wait for its answer (the C ABI reports only a rejection, to listeners). */
#define VALIDATION_TARGET "/api/v3/clients/me"

static void
portal_keyring_portal_finalize (GObject *object)
{
    PortalKeyringPortal *self = PORTAL_KEYRING_PORTAL (object);
    /* portal_free() may wait up to a second for requests in flight to abort; the async form
     * cancels the listener before it returns and does the waiting on a worker. */
    if (self->handle)
        portal_free_async (self->handle, self->queue, NULL, NULL, NULL);
    portal_completion_queue_free (self->queue);
    g_clear_pointer (&self->context, g_main_context_unref);
    g_clear_object (&self->session);
    g_clear_error (&self->init_error);
    G_OBJECT_CLASS (portal_keyring_portal_parent_class)->finalize (object);
}

static void
portal_keyring_portal_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
    PortalKeyringPortal *self = PORTAL_KEYRING_PORTAL (object);
    switch (prop_id) {
    case PROP_SESSION:
        g_value_set_object (value, self->session);
        break;
    case PROP_INVALIDATED:
        g_value_set_boolean (value, self->invalidated);
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
portal_keyring_portal_set_property (GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec)
{
    PortalKeyringPortal *self = PORTAL_KEYRING_PORTAL (object);
    switch (prop_id) {
    case PROP_SESSION:
        g_set_object (&self->session, g_value_get_object (value));
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
portal_keyring_portal_class_init (PortalKeyringPortalClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS (klass);
    object_class->finalize = portal_keyring_portal_finalize;
    object_class->get_property = portal_keyring_portal_get_property;
    object_class->set_property = portal_keyring_portal_set_property;

    /**
     * PortalKeyringPortal:session: (getter get_session)
     *
     * The session whose token the requests carry. A missing session fails the initialisation
     * with %PORTAL_KEYRING_ERROR_INVALID_ARGUMENT. The portal and the session share the token:
     * after invalidation [method@PortalKeyring.Session.copy_token] fails with
     * %PORTAL_KEYRING_ERROR_SESSION_INVALIDATED.
     */
    session_property =
        g_param_spec_object ("session", NULL, NULL, PORTAL_KEYRING_TYPE_SESSION,
                             G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    g_object_class_install_property (object_class, PROP_SESSION, session_property);
    _portal_keyring_portal_class_init_invalidation (object_class, PROP_INVALIDATED);
}

static void
portal_keyring_portal_init (PortalKeyringPortal *self)
{
    (void) self;
}

/* The C portal and its invalidation listener, made once, on the thread-default context of this
 * call (which the listener's deliveries use). The C portal_new() sends its own validation at once. */
static gboolean
portal_setup (PortalKeyringPortal *self, GError **error)
{
    if (!self->setup_ran) {
        self->setup_ran = TRUE;
        portal *handle = NULL;
        portal_status status;
        if (self->session == NULL) {
            self->init_error = g_error_new_literal (PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT,
                                                    "session: NULL: a PortalKeyringPortal needs a session");
        } else if ((status = portal_new (&handle, _portal_keyring_session_get_handle (self->session), NULL)) !=
                   PORTAL_OK) {
            self->init_error = _portal_keyring_error_new (status, portal_last_error_message ());
        } else {
            status = _portal_keyring_portal_listen (self, handle);
            if (status != PORTAL_OK) {
                self->init_error = _portal_keyring_error_new (status, portal_last_error_message ());
                portal_free (handle);
            } else {
                self->handle = handle;
            }
        }
    }
    if (self->init_error) {
        g_propagate_error (error, g_error_copy (self->init_error));
        return FALSE;
    }
    return TRUE;
}

/* What the validation's answer (error NULL: the HTTP status) means for the construction: a 401,
 * or a session already invalidated, is the rejection; no answer (network) or another status
 * leaves the session as it was; a cancel or a refusal fails the initialisation for good. */
static gboolean
portal_validated (PortalKeyringPortal *self, guint http_status, GError *failure, GError **error)
{
    if (failure == NULL) {
        if (http_status == 401)
            _portal_keyring_portal_rejected (self);
        return TRUE;
    }
    gboolean rejected = g_error_matches (failure, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_SESSION_INVALIDATED);
    if (rejected || g_error_matches (failure, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_NETWORK)) {
        g_error_free (failure);
        if (rejected)
            _portal_keyring_portal_rejected (self);
        return TRUE;
    }
    self->init_error = g_error_copy (failure);
    g_propagate_error (error, failure);
    return FALSE;
}

static gboolean
portal_keyring_portal_initable_init (GInitable *initable, GCancellable *cancellable, GError **error)
{
    PortalKeyringPortal *self = PORTAL_KEYRING_PORTAL (initable);
    if (!portal_setup (self, error))
        return FALSE;
    guint http_status = 0;
    GError *failure = NULL;
    GBytes *body = portal_keyring_portal_request_sync (self, "GET", VALIDATION_TARGET, NULL, &http_status,
                                                       cancellable, &failure);
    g_clear_pointer (&body, g_bytes_unref);
    return portal_validated (self, http_status, failure, error);
}

static void
portal_keyring_portal_initable_iface_init (GInitableIface *iface)
{
    iface->init = portal_keyring_portal_initable_init;
}

static void
validation_done (GObject *source, GAsyncResult *result, gpointer data)
{
    PortalKeyringPortal *self = PORTAL_KEYRING_PORTAL (source);
    GTask *task = data;
    guint http_status = 0;
    GError *failure = NULL, *error = NULL;
    GBytes *body = portal_keyring_portal_request_finish (self, result, &http_status, &failure);
    g_clear_pointer (&body, g_bytes_unref);
    if (portal_validated (self, http_status, failure, &error))
        g_task_return_boolean (task, TRUE);
    else
        g_task_return_error (task, error);
    g_object_unref (task);
}

static void
portal_keyring_portal_init_async (GAsyncInitable *initable, int io_priority, GCancellable *cancellable,
                                  GAsyncReadyCallback callback, gpointer user_data)
{
    PortalKeyringPortal *self = PORTAL_KEYRING_PORTAL (initable);
    GTask *task = g_task_new (self, cancellable, callback, user_data);
    g_task_set_source_tag (task, portal_keyring_portal_init_async);
    g_task_set_priority (task, io_priority);
    GError *error = NULL;
    if (!portal_setup (self, &error)) {
        g_task_return_error (task, error);
        g_object_unref (task);
        return;
    }
    portal_keyring_portal_request_async (self, "GET", VALIDATION_TARGET, NULL, cancellable, validation_done, task);
}

static gboolean
portal_keyring_portal_init_finish (GAsyncInitable *initable, GAsyncResult *result, GError **error)
{
    GTask *task = _portal_keyring_bridge_task (initable, result, portal_keyring_portal_init_async);
    return task ? g_task_propagate_boolean (task, error) : FALSE;
}

static void
portal_keyring_portal_async_initable_iface_init (GAsyncInitableIface *iface)
{
    iface->init_async = portal_keyring_portal_init_async;
    iface->init_finish = portal_keyring_portal_init_finish;
}

/**
 * portal_keyring_portal_get_session: (get-property session)
 * @self: a portal
 *
 * The session the portal was made for.
 *
 * Returns: (transfer none) (nullable): the session (%NULL only on a portal whose
 *   initialisation failed for want of it)
 */
PortalKeyringSession *
portal_keyring_portal_get_session (PortalKeyringPortal *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_PORTAL (self), NULL);
    return self->session;
}

portal *
_portal_keyring_portal_get_handle (PortalKeyringPortal *self, GError **error)
{
    if (self->init_error)
        g_propagate_error (error, g_error_copy (self->init_error));
    else if (self->handle == NULL)
        g_set_error_literal (error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT,
                             "PortalKeyringPortal was not initialised: make it with "
                             "portal_keyring_portal_new_async() or call g_async_initable_init_async() after "
                             "g_object_new()");
    else
        return self->handle;
    return NULL;
}
