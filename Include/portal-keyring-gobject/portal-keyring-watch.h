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
 * @PORTAL_KEYRING_WATCH_EVENT_AVAILABLE: the keyring answers again after a call of this process
 *   failed for want of it (a stalled provider resumed; no signal of the provider says so):
 *   restore to learn the state.
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
    PORTAL_KEYRING_WATCH_EVENT_FAILED = 6,
    PORTAL_KEYRING_WATCH_EVENT_AVAILABLE = 7
} PortalKeyringWatchEvent;

GType portal_keyring_watch_event_get_type (void) G_GNUC_CONST;
#define PORTAL_KEYRING_TYPE_WATCH_EVENT (portal_keyring_watch_event_get_type ())

/**
 * PortalKeyringWatchOrigin:
 * @PORTAL_KEYRING_WATCH_ORIGIN_UNKNOWN: not a change of the stored session (started, locked,
 *   resync, …), a sign-out seen right after a lock or a resync, or no signal is being emitted.
 * @PORTAL_KEYRING_WATCH_ORIGIN_THIS_PROCESS: this process made it: its own sign-in, sign-out,
 *   or a 401 it reported.
 * @PORTAL_KEYRING_WATCH_ORIGIN_OTHER_PROCESS: another process made it (another window, a URL
 *   handler, a keyring tool).
 *
 * Who made the change a [signal@PortalKeyring.Watch::changed] reports
 * ([method@PortalKeyring.Watch.get_origin]). The numbers are those of the C ABI's
 * `portal_watch_origin`.
 */
typedef enum {
    PORTAL_KEYRING_WATCH_ORIGIN_UNKNOWN = 0,
    PORTAL_KEYRING_WATCH_ORIGIN_THIS_PROCESS = 1,
    PORTAL_KEYRING_WATCH_ORIGIN_OTHER_PROCESS = 2
} PortalKeyringWatchOrigin;

GType portal_keyring_watch_origin_get_type (void) G_GNUC_CONST;
#define PORTAL_KEYRING_TYPE_WATCH_ORIGIN (portal_keyring_watch_origin_get_type ())

#define PORTAL_KEYRING_TYPE_WATCH (portal_keyring_watch_get_type ())
G_DECLARE_FINAL_TYPE (PortalKeyringWatch, portal_keyring_watch, PORTAL_KEYRING, WATCH, GObject)

PortalKeyringWatch *portal_keyring_watch_new (PortalKeyringAuth *auth, GError **error);

PortalKeyringAuth *portal_keyring_watch_get_auth (PortalKeyringWatch *self);

void portal_keyring_watch_stop (PortalKeyringWatch *self);

PortalKeyringWatchOrigin portal_keyring_watch_get_origin (PortalKeyringWatch *self);

G_END_DECLS

#endif /* PORTAL_KEYRING_WATCH_H */
