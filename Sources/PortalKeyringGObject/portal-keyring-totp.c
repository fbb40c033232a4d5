/* portal-keyring-totp.c — the TOTP step's helpers over the C ABI's: no I/O, any thread. Each hands
 * out its answer in GLib's memory (bindings free it with g_free()) and wipes the C library's copy
 * at once: the secret and the QR code's modules encode the TOTP secret. */
#include "portal-keyring-private.h"

/* A C call's string output in GLib's memory (the C copy wiped), or NULL with error set. The
 * callers make the C call first, in a statement of its own: as an argument here, the output
 * could be read before the call wrote it (C leaves the order of evaluation open). */
static gchar *
handed_out (portal_status status, char *c_string, GError **error)
{
    if (status != PORTAL_OK) {
        g_propagate_error (error, _portal_keyring_error_new (status, portal_last_error_message ()));
        return NULL;
    }
    gchar *copy = g_strdup (c_string);
    portal_string_free (c_string);
    return copy;
}

/**
 * portal_keyring_user_jwt_get_end_user_id:
 * @user_jwt: the user JWT of a TOTP step ([method@PortalKeyring.SignInResult.copy_user_jwt])
 * @error: return location for a #GError
 *
 * The end user a TOTP step signs in (the JWT's `endUserId` claim, read, not verified: Portal
 * verifies the JWT), to show who is signing in before the code is asked for.
 *
 * Returns: (transfer full): the end user id, or %NULL with @error set
 *   (%PORTAL_KEYRING_ERROR_INVALID_USER_JWT: not a JWT, or no end user in it)
 */
gchar *
portal_keyring_user_jwt_get_end_user_id (const gchar *user_jwt, GError **error)
{
    g_return_val_if_fail (error == NULL || *error == NULL, NULL);
    char *end_user_id = NULL;
    portal_status status = portal_user_jwt_get_end_user_id (user_jwt, &end_user_id);
    return handed_out (status, end_user_id, error);
}

/**
 * portal_keyring_totp_link_get_secret:
 * @totp_link: the otpauth:// enrolment link ([method@PortalKeyring.SignInResult.copy_totp_link])
 * @error: return location for a #GError
 *
 * The shared secret of an enrolment link, for the end user to type into an authenticator app
 * (base32, upper case). A secret: show it, never log or store it; in C release it with
 * [func@PortalKeyring.token_free], which wipes it.
 *
 * Returns: (transfer full) (nullable): the secret; %NULL without an error when the link is not an
 *   otpauth:// link with a valid secret; %NULL with @error set for a link longer than 65536 bytes
 *   (%PORTAL_KEYRING_ERROR_INVALID_ARGUMENT)
 */
gchar *
portal_keyring_totp_link_get_secret (const gchar *totp_link, GError **error)
{
    g_return_val_if_fail (error == NULL || *error == NULL, NULL);
    char *secret = NULL;
    portal_status status = portal_totp_link_get_secret (totp_link, &secret);
    return handed_out (status, secret, error);
}

/**
 * portal_keyring_totp_qr_code:
 * @totp_link: the otpauth:// enrolment link
 * @size: (out): the number of modules on one side (29 for the smallest code; a 4-module quiet
 *   zone included)
 * @error: return location for a #GError
 *
 * An enrolment link as a QR code for an authenticator app to scan (error-correction level M),
 * for toolkits that draw it themselves: @size × @size characters, row by row from the top left,
 * '1' for a dark module and '0' for a light one. The modules encode the secret: show them,
 * never log or store them. Loads libqrencode on the first call.
 *
 * Returns: (transfer full): the modules, or %NULL with @error set
 *   (%PORTAL_KEYRING_ERROR_TOTP_QR_UNAVAILABLE: libqrencode missing, or a link too long for a
 *   QR code)
 */
gchar *
portal_keyring_totp_qr_code (const gchar *totp_link, guint *size, GError **error)
{
    g_return_val_if_fail (size != NULL, NULL);
    g_return_val_if_fail (error == NULL || *error == NULL, NULL);
    size_t c_size = 0;
    char *modules = NULL;
    portal_status status = portal_totp_qr_code (totp_link, &c_size, &modules);
    gchar *copy = handed_out (status, modules, error);
    *size = copy ? (guint) c_size : 0;
    return copy;
}

/**
 * portal_keyring_totp_qr_svg:
 * @totp_link: the otpauth:// enrolment link
 * @error: return location for a #GError
 *
 * [func@PortalKeyring.totp_qr_code] as an SVG document (one unit per module, black on an opaque
 * white square), for toolkits that draw SVG: scale it without smoothing.
 *
 * Returns: (transfer full): the document, or %NULL with @error set, as
 *   [func@PortalKeyring.totp_qr_code]
 */
gchar *
portal_keyring_totp_qr_svg (const gchar *totp_link, GError **error)
{
    g_return_val_if_fail (error == NULL || *error == NULL, NULL);
    char *svg = NULL;
    portal_status status = portal_totp_qr_svg (totp_link, &svg);
    return handed_out (status, svg, error);
}
