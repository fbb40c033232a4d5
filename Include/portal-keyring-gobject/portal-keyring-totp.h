/* portal-keyring-totp.h — the TOTP step's helpers: who is signing in, the enrolment secret, the
 * enrolment QR code. No I/O. */
#ifndef PORTAL_KEYRING_TOTP_H
#define PORTAL_KEYRING_TOTP_H

#if !defined(PORTAL_KEYRING_GOBJECT_INSIDE) && !defined(PORTAL_KEYRING_GOBJECT_COMPILATION)
#error "Only <portal-keyring-gobject/portal-keyring-gobject.h> can be included directly."
#endif

#include <glib.h>

G_BEGIN_DECLS

gchar *portal_keyring_user_jwt_get_end_user_id (const gchar *user_jwt, GError **error);

gchar *portal_keyring_totp_link_get_secret (const gchar *totp_link, GError **error);

gchar *portal_keyring_totp_qr_code (const gchar *totp_link, guint *size, GError **error);

gchar *portal_keyring_totp_qr_svg (const gchar *totp_link, GError **error);

G_END_DECLS

#endif /* PORTAL_KEYRING_TOTP_H */
