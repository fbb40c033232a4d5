/* portal-keyring-watch.c — PortalKeyringWatch over a C portal_watch (portal_auth_watch_async):
 * the C events as the "changed" signal, on the main context the watch was made on; started and
 * stopped without waiting on the keyring. */
#include "portal-keyring-private.h"

/**
 * PortalKeyringWatch:
 *
 * Reports changes of an auth environment's stored session made by any process of the user (a
 * URL handler that completed a sign-in, a second window that signed out, a 401 that invalidated
 * the session) as [signal@PortalKeyring.Watch::changed], without polling.
 *
 * Make one with [ctor@PortalKeyring.Watch.new], or with [ctor@GObject.Object.new] and
 * [property@PortalKeyring.Watch:auth] followed by [method@Gio.Initable.init]. Either returns at
 * once: the subscription and the first read of the keyring run on the C library's watch thread,
 * and the first signal says how it went: %PORTAL_KEYRING_WATCH_EVENT_STARTED (every change after
 * it is reported) or %PORTAL_KEYRING_WATCH_EVENT_FAILED. So an app waiting for sign-in makes the
 * watch, then restores ([method@PortalKeyring.Auth.restore_session_async]); a sign-in that lands
 * between the two is seen by the restore or reported after `STARTED`.
 *
 * Every signal is emitted on the thread-default main context of the thread that made the watch,
 * at that moment, as GIO's completions are. The app's own persists are reported too:
 * [method@PortalKeyring.Watch.get_origin], called in the handler, says whose change it was.
 *
 * [method@PortalKeyring.Watch.stop], or the last reference, ends the watch. Neither waits for the
 * keyring: a read in progress (a hung provider) finishes on the C library's thread by itself.
 */
struct _PortalKeyringWatch {
    GObject parent_instance;
    PortalKeyringAuth *auth;
    /* Set by a successful initialisation; NULL before it and after stop. */
    portal_watch *handle;
    /* The failed initialisation's error, given again by a second init. */
    GError *init_error;
    gboolean init_ran;
    /* The origin of the change being emitted; UNKNOWN outside an emission. */
    PortalKeyringWatchOrigin origin;
};

static void portal_keyring_watch_initable_iface_init (GInitableIface *iface);

G_DEFINE_TYPE_WITH_CODE (PortalKeyringWatch, portal_keyring_watch, G_TYPE_OBJECT,
                         G_IMPLEMENT_INTERFACE (G_TYPE_INITABLE, portal_keyring_watch_initable_iface_init))

G_DEFINE_ENUM_TYPE (PortalKeyringWatchEvent, portal_keyring_watch_event,
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_WATCH_EVENT_SIGNED_IN, "signed-in"),
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_WATCH_EVENT_SIGNED_OUT, "signed-out"),
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_WATCH_EVENT_LOCKED, "locked"),
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_WATCH_EVENT_RESYNC, "resync"),
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_WATCH_EVENT_STARTED, "started"),
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_WATCH_EVENT_FAILED, "failed"),
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_WATCH_EVENT_AVAILABLE, "available"))

G_DEFINE_ENUM_TYPE (PortalKeyringWatchOrigin, portal_keyring_watch_origin,
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_WATCH_ORIGIN_UNKNOWN, "unknown"),
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_WATCH_ORIGIN_THIS_PROCESS, "this-process"),
    G_DEFINE_ENUM_VALUE (PORTAL_KEYRING_WATCH_ORIGIN_OTHER_PROCESS, "other-process"))

/* The values are the C events' numbers (the enum's documentation promises it). */
G_STATIC_ASSERT ((int) PORTAL_KEYRING_WATCH_EVENT_SIGNED_IN == (int) PORTAL_WATCH_SIGNED_IN);
G_STATIC_ASSERT ((int) PORTAL_KEYRING_WATCH_EVENT_SIGNED_OUT == (int) PORTAL_WATCH_SIGNED_OUT);
G_STATIC_ASSERT ((int) PORTAL_KEYRING_WATCH_EVENT_LOCKED == (int) PORTAL_WATCH_LOCKED);
G_STATIC_ASSERT ((int) PORTAL_KEYRING_WATCH_EVENT_RESYNC == (int) PORTAL_WATCH_RESYNC);
G_STATIC_ASSERT ((int) PORTAL_KEYRING_WATCH_EVENT_STARTED == (int) PORTAL_WATCH_STARTED);
G_STATIC_ASSERT ((int) PORTAL_KEYRING_WATCH_EVENT_FAILED == (int) PORTAL_WATCH_FAILED);
G_STATIC_ASSERT ((int) PORTAL_KEYRING_WATCH_EVENT_AVAILABLE == (int) PORTAL_WATCH_AVAILABLE);
G_STATIC_ASSERT ((int) PORTAL_KEYRING_WATCH_ORIGIN_THIS_PROCESS == (int) PORTAL_WATCH_ORIGIN_THIS_PROCESS);
G_STATIC_ASSERT ((int) PORTAL_KEYRING_WATCH_ORIGIN_OTHER_PROCESS == (int) PORTAL_WATCH_ORIGIN_OTHER_PROCESS);

enum { PROP_0, PROP_AUTH, N_PROPS };

static GParamSpec *properties[N_PROPS];

enum { CHANGED, N_SIGNALS };

static guint signals[N_SIGNALS];

/* ------------------------------------------------------------------------------------------
 * The C watch's user data: a weak reference, so that the watch is finalised with the app's last
 * reference (a strong one would keep it alive until stop). The C library delivers each event on
 * the main-context queue it made for the thread-default context at portal_auth_watch_async()
 * (queue NULL), so the signal is emitted there without another hop; the weak reference also
 * covers an event already running on that context while another thread stops the watch. Freed by
 * the C watch's destroy_notify, once no event is running or queued.
 * ------------------------------------------------------------------------------------------ */

static void
delivery_free (void *data)
{
    GWeakRef *ref = data;
    g_weak_ref_clear (ref);
    g_free (ref);
}

static void
delivered (portal_watch_event event, const char *end_user_id, void *data)
{
    /* New kinds may be added to the C ABI: a value the enum does not register is skipped. */
    if (event < PORTAL_WATCH_SIGNED_IN || event > PORTAL_WATCH_AVAILABLE)
        return;
    PortalKeyringWatch *self = g_weak_ref_get (data);
    if (self == NULL)
        return;
    /* Read in the C callback, as the C ABI asks; a value added later counts as unknown. */
    portal_watch_origin origin = portal_watch_current_origin ();
    PortalKeyringWatchOrigin outer = self->origin;
    self->origin = origin == PORTAL_WATCH_ORIGIN_THIS_PROCESS || origin == PORTAL_WATCH_ORIGIN_OTHER_PROCESS
                       ? (PortalKeyringWatchOrigin) origin
                       : PORTAL_KEYRING_WATCH_ORIGIN_UNKNOWN;
    g_signal_emit (self, signals[CHANGED], 0, (PortalKeyringWatchEvent) event, end_user_id);
    self->origin = outer;
    /* May be the last reference (a handler that dropped its own): then dispose frees the C watch
     * from inside its callback, which the C ABI allows. */
    g_object_unref (self);
}

static void
portal_keyring_watch_dispose (GObject *object)
{
    portal_keyring_watch_stop (PORTAL_KEYRING_WATCH (object));
    g_clear_object (&PORTAL_KEYRING_WATCH (object)->auth);
    G_OBJECT_CLASS (portal_keyring_watch_parent_class)->dispose (object);
}

static void
portal_keyring_watch_finalize (GObject *object)
{
    g_clear_error (&PORTAL_KEYRING_WATCH (object)->init_error);
    G_OBJECT_CLASS (portal_keyring_watch_parent_class)->finalize (object);
}

static void
portal_keyring_watch_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
    switch (prop_id) {
    case PROP_AUTH:
        g_value_set_object (value, PORTAL_KEYRING_WATCH (object)->auth);
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
portal_keyring_watch_set_property (GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec)
{
    switch (prop_id) {
    case PROP_AUTH:
        g_set_object (&PORTAL_KEYRING_WATCH (object)->auth, g_value_get_object (value));
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
portal_keyring_watch_class_init (PortalKeyringWatchClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS (klass);
    object_class->dispose = portal_keyring_watch_dispose;
    object_class->finalize = portal_keyring_watch_finalize;
    object_class->get_property = portal_keyring_watch_get_property;
    object_class->set_property = portal_keyring_watch_set_property;

    /**
     * PortalKeyringWatch:auth: (getter get_auth)
     *
     * The auth whose auth environment is watched.
     */
    properties[PROP_AUTH] =
        g_param_spec_object ("auth", NULL, NULL, PORTAL_KEYRING_TYPE_AUTH,
                             G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties (object_class, N_PROPS, properties);

    /**
     * PortalKeyringWatch::changed:
     * @self: the watch
     * @event: what happened
     * @end_user_id: (nullable): for %PORTAL_KEYRING_WATCH_EVENT_SIGNED_IN, the end user id; for
     *   %PORTAL_KEYRING_WATCH_EVENT_FAILED, the message saying why; %NULL for the others
     *
     * The stored session changed, or the watch started or failed to. Emitted in order, each
     * event once, on the thread-default main context of the thread that made the watch; never
     * after [method@PortalKeyring.Watch.stop] returned on that context's thread.
     */
    signals[CHANGED] = g_signal_new ("changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                     G_TYPE_NONE, 2, PORTAL_KEYRING_TYPE_WATCH_EVENT, G_TYPE_STRING);
}

static void
portal_keyring_watch_init (PortalKeyringWatch *self)
{
    (void) self;
}

static gboolean
portal_keyring_watch_initable_init (GInitable *initable, GCancellable *cancellable, GError **error)
{
    PortalKeyringWatch *self = PORTAL_KEYRING_WATCH (initable);
    (void) cancellable; /* nothing here waits: portal_auth_watch_async() returns at once */
    /* GInitable: a second init gives the first one's answer. */
    if (!self->init_ran) {
        self->init_ran = TRUE;
        portal_auth *auth = NULL;
        if (self->auth == NULL)
            self->init_error = g_error_new_literal (PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT,
                                                    "auth: a PortalKeyringAuth is required");
        else if ((auth = _portal_keyring_auth_get_handle (self->auth, &self->init_error)) != NULL) {
            GWeakRef *ref = g_new0 (GWeakRef, 1);
            g_weak_ref_init (ref, self);
            /* destroy_notify has run already when this fails. */
            portal_status status = portal_auth_watch_async (auth, NULL, delivered, ref, delivery_free, &self->handle);
            if (status != PORTAL_OK)
                self->init_error = _portal_keyring_error_new (status, portal_last_error_message ());
        }
    }
    if (self->init_error) {
        g_propagate_error (error, g_error_copy (self->init_error));
        return FALSE;
    }
    return TRUE;
}

static void
portal_keyring_watch_initable_iface_init (GInitableIface *iface)
{
    iface->init = portal_keyring_watch_initable_init;
}

/**
 * portal_keyring_watch_new:
 * @auth: the auth whose auth environment to watch
 * @error: return location for a #GError
 *
 * Starts watching @auth's auth environment. Returns at once (no bus round trip, no keyring
 * read); the first [signal@PortalKeyring.Watch::changed] is
 * %PORTAL_KEYRING_WATCH_EVENT_STARTED or %PORTAL_KEYRING_WATCH_EVENT_FAILED. Every signal is
 * emitted on the thread-default main context of the calling thread.
 *
 * Returns: (transfer full): the watch, or %NULL with @error set: the error of an auth whose
 *   initialisation failed, or %PORTAL_KEYRING_ERROR_SESSION_STORAGE when D-Bus cannot be used
 *   in this process (after fork())
 */
PortalKeyringWatch *
portal_keyring_watch_new (PortalKeyringAuth *auth, GError **error)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_AUTH (auth), NULL);
    return g_initable_new (PORTAL_KEYRING_TYPE_WATCH, NULL, error, "auth", auth, NULL);
}

/**
 * portal_keyring_watch_get_origin:
 * @self: a watch
 *
 * Who made the change the [signal@PortalKeyring.Watch::changed] being emitted reports: call it
 * in the handler. An app tells its own sign-out or 401
 * (%PORTAL_KEYRING_WATCH_ORIGIN_THIS_PROCESS) from another window's
 * (%PORTAL_KEYRING_WATCH_ORIGIN_OTHER_PROCESS), so that "signed out elsewhere" is shown only for
 * the latter.
 *
 * Returns: the origin; %PORTAL_KEYRING_WATCH_ORIGIN_UNKNOWN outside a handler, and for events
 *   that are not a change of the stored session
 */
PortalKeyringWatchOrigin
portal_keyring_watch_get_origin (PortalKeyringWatch *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_WATCH (self), PORTAL_KEYRING_WATCH_ORIGIN_UNKNOWN);
    return self->origin;
}

/**
 * portal_keyring_watch_get_auth: (get-property auth)
 * @self: a watch
 *
 * The auth whose auth environment is watched.
 *
 * Returns: (transfer none) (nullable): the auth (%NULL only on a watch made without one)
 */
PortalKeyringAuth *
portal_keyring_watch_get_auth (PortalKeyringWatch *self)
{
    g_return_val_if_fail (PORTAL_KEYRING_IS_WATCH (self), NULL);
    return self->auth;
}

/**
 * portal_keyring_watch_stop:
 * @self: a watch
 *
 * Ends the watch: called on the thread of the watch's main context, no signal is emitted after
 * it returns (events not yet emitted are dropped). Never waits for the keyring, also while the
 * provider hangs, so it may be called from a main loop or a [signal@PortalKeyring.Watch::changed]
 * handler. A second call does nothing; the last reference stops the watch too.
 */
void
portal_keyring_watch_stop (PortalKeyringWatch *self)
{
    g_return_if_fail (PORTAL_KEYRING_IS_WATCH (self));
    g_clear_pointer (&self->handle, portal_watch_free);
}
