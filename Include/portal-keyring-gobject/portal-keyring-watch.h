/* portal-keyring-watch.h — PortalKeyringWatch: changes of an auth environment's stored session,
 * made by any process, as a signal. */
#ifndef PORTAL_KEYRING_WATCH_H
#define PORTAL_KEYRING_WATCH_H

#if !defined(PORTAL_KEYRING_GOBJECT_INSIDE) && !defined(PORTAL_KEYRING_GOBJECT_COMPILATION)
#error "Only <portal-keyring-gobject/portal-keyring-gobject.h> can be included directly."
#endif

#include <gio/gio.h>

#include "portal-keyring-auth.h"

G_BEGIN_DECLS

/**
 * PortalKeyringWatchEvent:
 * @PORTAL_KEYRING_WATCH_EVENT_SIGNED_IN: a new sign-in was persisted (by any process); the
 *   signal's end user id names its end user.
 * @PORTAL_KEYRING_WATCH_EVENT_SIGNED_OUT: the stored session was cleared or invalidated:
 *   nothing is stored. Show sign-in.
 * @PORTAL_KEYRING_WATCH_EVENT_LOCKED: the session item, or the collection that may hold it, is
 *   locked: the state cannot be read without an unlock. Not signed out: restore (which
 *   unlocks) to learn the state.
 * @PORTAL_KEYRING_WATCH_EVENT_RESYNC: the Secret Service provider restarted (or the bus
 *   connection was made again): changes may have been missed. Restore to learn the state;
 *   later changes are reported again.
 * @PORTAL_KEYRING_WATCH_EVENT_STARTED: the first event: the watch is live, and every change
 *   after it is reported.
 * @PORTAL_KEYRING_WATCH_EVENT_FAILED: instead of %PORTAL_KEYRING_WATCH_EVENT_STARTED: the watch
 *   could not start (no session bus); the signal's string is the message saying why. No event
 *   follows.
 *
 * What a [signal@PortalKeyring.Watch::changed] reports. The numbers are those of the C ABI's
 * `portal_watch_event`.
 */
typedef enum {
    PORTAL_KEYRING_WATCH_EVENT_SIGNED_IN = 1,
    PORTAL_KEYRING_WATCH_EVENT_SIGNED_OUT = 2,
    PORTAL_KEYRING_WATCH_EVENT_LOCKED = 3,
    PORTAL_KEYRING_WATCH_EVENT_RESYNC = 4,
    PORTAL_KEYRING_WATCH_EVENT_STARTED = 5,
    PORTAL_KEYRING_WATCH_EVENT_FAILED = 6
} PortalKeyringWatchEvent;

GType portal_keyring_watch_event_get_type (void) G_GNUC_CONST;
#define PORTAL_KEYRING_TYPE_WATCH_EVENT (portal_keyring_watch_event_get_type ())

#define PORTAL_KEYRING_TYPE_WATCH (portal_keyring_watch_get_type ())
G_DECLARE_FINAL_TYPE (PortalKeyringWatch, portal_keyring_watch, PORTAL_KEYRING, WATCH, GObject)

PortalKeyringWatch *portal_keyring_watch_new (PortalKeyringAuth *auth, GError **error);

PortalKeyringAuth *portal_keyring_watch_get_auth (PortalKeyringWatch *self);

void portal_keyring_watch_stop (PortalKeyringWatch *self);

G_END_DECLS

#endif /* PORTAL_KEYRING_WATCH_H */
