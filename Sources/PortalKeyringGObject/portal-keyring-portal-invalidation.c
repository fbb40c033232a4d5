/* portal-keyring-portal-invalidation.c — the one place where the session's invalidation becomes
 * PortalKeyringPortal's PortalKeyringPortal::session-invalidated signal and
 * PortalKeyringPortal:invalidated property: both declared here, the C listener registered on the
 * construction's context, and the validation's rejection reported there too, exactly once
 * whichever comes first. The type and its initialisation are in portal-keyring-portal.c. */
#include "portal-keyring-private.h"

static GParamSpec *invalidated_property;
static guint session_invalidated_signal;

void
_portal_keyring_portal_class_init_invalidation (GObjectClass *object_class, guint prop_id)
{
    /**
     * PortalKeyringPortal:invalidated: (getter get_invalidated)
     *
     * Whether the Portal API rejected the session. Turns %TRUE once, never back, with
     * `notify::invalidated` right before [signal@PortalKeyring.Portal::session-invalidated]; a
     * handler connected later reads it to learn a rejection that came before.
     */
    invalidated_property = g_param_spec_boolean ("invalidated", NULL, NULL, FALSE,
                                                 G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
    g_object_class_install_property (object_class, prop_id, invalidated_property);

    /**
     * PortalKeyringPortal::session-invalidated:
     * @self: the portal
     *
     * The Portal API rejected the session (HTTP 401): its token is dropped and its stored item
     * deleted; show sign-in. Emitted exactly once per portal, on the thread-default main
     * context of the thread that constructed it, right after
     * [property@PortalKeyring.Portal:invalidated] turned %TRUE; never replayed to a handler
     * connected later (read the property after connecting).
     */
    session_invalidated_signal = g_signal_new ("session-invalidated", G_TYPE_FROM_CLASS (object_class),
                                               G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 0);
}

/* The one way the portal learns that its session was invalidated, from the C listener or from
 * the validation's answer (both see the same rejection): exactly once. */
static void
portal_invalidated (PortalKeyringPortal *self)
{
    if (self->invalidated)
        return;
    self->invalidated = TRUE;
    g_object_notify_by_pspec (G_OBJECT (self), invalidated_property);
    g_signal_emit (self, session_invalidated_signal, 0);
}

static gboolean
invalidated_in_context (gpointer self)
{
    portal_invalidated (self);
    return G_SOURCE_REMOVE;
}

/* The validation's rejection, seen on the thread that initialises: reported on the
 * construction's context as the listener's is, through g_main_context_invoke(): at once when
 * this thread holds or can take that context (an _async completion; a _sync call while no loop
 * runs it), else from the loop that runs it (a _sync call on a worker that pushed no context,
 * while the main loop runs). Either way with the context held, so that this report and the
 * listener's never run at the same time and the second finds the first's mark. */
void
_portal_keyring_portal_rejected (PortalKeyringPortal *self)
{
    g_main_context_invoke_full (self->context, G_PRIORITY_DEFAULT, invalidated_in_context, g_object_ref (self),
                                g_object_unref);
}

/* The C listener, delivered on the construction's context. Its data is a weak reference, so
 * that the C portal, which the GObject owns, holds no reference back to it (no cycle); a
 * delivery already queued when the GObject went finds it gone and does nothing. */
static void
listener_invalidated (void *data)
{
    PortalKeyringPortal *self = g_weak_ref_get (data);
    if (self == NULL)
        return;
    portal_invalidated (self);
    g_object_unref (self);
}

static void
listener_free (void *data)
{
    g_weak_ref_clear (data);
    g_free (data);
}


portal_status
_portal_keyring_portal_listen (PortalKeyringPortal *self, portal *handle)
{
    self->context = g_main_context_ref_thread_default ();
    portal_completion_queue_new_for_main_context (&self->queue, self->context);
    GWeakRef *ref = g_new0 (GWeakRef, 1);
    g_weak_ref_init (ref, self);
    uint64_t listener = 0;
    /* A rejection before this registration is replayed to it by the C library. */
    return portal_on_session_invalidated_queued (handle, self->queue, listener_invalidated, ref, listener_free,
                                                 &listener);
}

/**
 * portal_keyring_portal_get_invalidated: (get-property invalidated)
 * @self: a portal
 *
 * Whether the Portal API rejected the session: read it after connecting to
 * [signal@PortalKeyring.Portal::session-invalidated] to learn a rejection that came before.
 *
 * Returns: %TRUE once the session was invalidated
 */
gboolean
portal_keyring_portal_get_invalidated (PortalKeyringPortal *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_PORTAL (self), FALSE);
    return self->invalidated;
}
