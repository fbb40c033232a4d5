/* portal-keyring-portal.h — PortalKeyringPortal: the Portal client for one session, and the
 * session's invalidation. */
#ifndef PORTAL_KEYRING_PORTAL_H
#define PORTAL_KEYRING_PORTAL_H

#if !defined(PORTAL_KEYRING_GOBJECT_INSIDE) && !defined(PORTAL_KEYRING_GOBJECT_COMPILATION)
#error "Only <portal-keyring-gobject/portal-keyring-gobject.h> can be included directly."
#endif

#include <gio/gio.h>

#include "portal-keyring-session.h"

G_BEGIN_DECLS

#define PORTAL_KEYRING_TYPE_PORTAL (portal_keyring_portal_get_type ())
G_DECLARE_FINAL_TYPE (PortalKeyringPortal, portal_keyring_portal, PORTAL_KEYRING, PORTAL, GObject)

void portal_keyring_portal_new_async (PortalKeyringSession *session, GCancellable *cancellable,
                                      GAsyncReadyCallback callback, gpointer user_data);

PortalKeyringPortal *portal_keyring_portal_new_finish (GAsyncResult *result, GError **error);

PortalKeyringPortal *portal_keyring_portal_new_sync (PortalKeyringSession *session, GCancellable *cancellable,
                                                     GError **error);

PortalKeyringSession *portal_keyring_portal_get_session (PortalKeyringPortal *self);

gboolean portal_keyring_portal_get_invalidated (PortalKeyringPortal *self);

void portal_keyring_portal_request_async (PortalKeyringPortal *self, const gchar *method, const gchar *target,
                                          const gchar *body, GCancellable *cancellable,
                                          GAsyncReadyCallback callback, gpointer user_data);

GBytes *portal_keyring_portal_request_finish (PortalKeyringPortal *self, GAsyncResult *result, guint *http_status,
                                              GError **error);

GBytes *portal_keyring_portal_request_sync (PortalKeyringPortal *self, const gchar *method, const gchar *target,
                                            const gchar *body, guint *http_status, GCancellable *cancellable,
                                            GError **error);

G_END_DECLS

#endif /* PORTAL_KEYRING_PORTAL_H */
