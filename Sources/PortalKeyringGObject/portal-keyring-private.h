/*
 * portal-keyring-private.h — what the files of the GNOME API share and do not export: the one
 * conversion of a C status to a GError, and the session made from a C handle.
 */
#ifndef PORTAL_KEYRING_PRIVATE_H
#define PORTAL_KEYRING_PRIVATE_H

#include "portal_keyring.h"
#include "portal-keyring-gobject/portal-keyring-gobject.h"

G_BEGIN_DECLS

/* The GError of a failed C call: G_IO_ERROR_CANCELLED for PORTAL_ERR_CANCELLED (what GIO callers
 * test for), else PORTAL_KEYRING_ERROR with the status's number and the C detail (message may be
 * NULL or "": then the status's name). */
GError *_portal_keyring_error_new (portal_status status, const char *message);

/* The session owning handle (taken: freed with the session). */
PortalKeyringSession *_portal_keyring_session_new_take (portal_session *handle);

G_END_DECLS

#endif /* PORTAL_KEYRING_PRIVATE_H */
