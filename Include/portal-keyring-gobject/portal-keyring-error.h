/* portal-keyring-error.h — the error domain of the GNOME API: one code per C status. */
#ifndef PORTAL_KEYRING_ERROR_H
#define PORTAL_KEYRING_ERROR_H

#if !defined(PORTAL_KEYRING_GOBJECT_INSIDE) && !defined(PORTAL_KEYRING_GOBJECT_COMPILATION)
#error "Only <portal-keyring-gobject/portal-keyring-gobject.h> can be included directly."
#endif

#include <glib-object.h>

G_BEGIN_DECLS

/**
 * PORTAL_KEYRING_ERROR:
 *
 * The error domain of portal-keyring: every error of this library is in it, except a
 * cancellation, which is `G_IO_ERROR_CANCELLED` as everywhere in GIO. Its codes are
 * [enum@PortalKeyring.Error].
 */
#define PORTAL_KEYRING_ERROR (portal_keyring_error_quark ())

/**
 * PortalKeyringError:
 * @PORTAL_KEYRING_ERROR_INVALID_ARGUMENT: an argument was missing, blank, not UTF-8, too long
 *   or otherwise refused; nothing was done. The message names the argument.
 * @PORTAL_KEYRING_ERROR_SESSION_STORAGE: the keyring could not be used this time (no session
 *   bus, no Secret Service, a locked keyring whose unlock was dismissed, a provider that did not
 *   answer in time, no default keyring). Never "signed out": nothing was deleted. The message
 *   says which.
 * @PORTAL_KEYRING_ERROR_SESSION_INVALIDATED: the session was invalidated; its token is gone.
 * @PORTAL_KEYRING_ERROR_UNAUTHORIZED: the Portal API rejected the credential (HTTP 401).
 * @PORTAL_KEYRING_ERROR_NETWORK: the Portal API could not be reached, timed out or answered
 *   with an unexpected response.
 * @PORTAL_KEYRING_ERROR_INTERNAL: an internal error (for example out of memory), or a status
 *   of a newer C library that this one does not know.
 * @PORTAL_KEYRING_ERROR_RATE_LIMITED: the Portal API answered HTTP 429; try again later.
 * @PORTAL_KEYRING_ERROR_MALFORMED_RESPONSE: the Portal API's response lacked a required field.
 * @PORTAL_KEYRING_ERROR_INVALID_GRANT: a sign-in grant was rejected (used, expired or unknown).
 * @PORTAL_KEYRING_ERROR_INVALID_USER_JWT: the user JWT of a TOTP verification was rejected.
 * @PORTAL_KEYRING_ERROR_AUTHENTICATION_FAILED: sign-in failed (an error redirect, a wrong TOTP
 *   code).
 * @PORTAL_KEYRING_ERROR_UNSOLICITED_REDIRECT: a redirect that no sign-in asked for was refused.
 * @PORTAL_KEYRING_ERROR_DIFFERENT_END_USER: the redirect signed in an end user other than the
 *   stored one; nothing was stored.
 * @PORTAL_KEYRING_ERROR_CANCELLED: kept so that every C status has its code; this library
 *   never reports it: a cancelled operation fails with `G_IO_ERROR_CANCELLED`.
 * @PORTAL_KEYRING_ERROR_MAGIC_LINK_NOT_CONFIGURED: no magic-link sender and template are set.
 * @PORTAL_KEYRING_ERROR_AUTH_METHOD_UNAVAILABLE: the auth environment has not enabled that
 *   sign-in provider.
 * @PORTAL_KEYRING_ERROR_ACCOUNT_ABSTRACTION_UNAVAILABLE: the account abstraction asked for is
 *   not available for this auth environment.
 * @PORTAL_KEYRING_ERROR_SERVER: the Portal API answered HTTP 5xx; try again later.
 * @PORTAL_KEYRING_ERROR_REQUEST_REFUSED: the Portal API refused the request with a 4xx status
 *   other than 401 and 429.
 * @PORTAL_KEYRING_ERROR_TOTP_QR_UNAVAILABLE: no QR code could be made of a TOTP enrolment link.
 * @PORTAL_KEYRING_ERROR_SIGN_IN_IN_PROGRESS: a desktop sign-in of this auth environment is
 *   already waiting in this process.
 * @PORTAL_KEYRING_ERROR_SIGN_IN_UNAVAILABLE: the desktop could not open the sign-in page.
 * @PORTAL_KEYRING_ERROR_SIGN_IN_TIMED_OUT: no redirect came back within the timeout.
 *
 * The codes of [error@PortalKeyring.Error]. Each has the number of the C ABI's
 * `portal_status` of the same name, so a C program that uses both sees the same numbers.
 */
typedef enum {
    PORTAL_KEYRING_ERROR_INVALID_ARGUMENT = 1,
    PORTAL_KEYRING_ERROR_SESSION_STORAGE = 2,
    PORTAL_KEYRING_ERROR_SESSION_INVALIDATED = 3,
    PORTAL_KEYRING_ERROR_UNAUTHORIZED = 4,
    PORTAL_KEYRING_ERROR_NETWORK = 5,
    PORTAL_KEYRING_ERROR_INTERNAL = 6,
    PORTAL_KEYRING_ERROR_RATE_LIMITED = 7,
    PORTAL_KEYRING_ERROR_MALFORMED_RESPONSE = 8,
    PORTAL_KEYRING_ERROR_INVALID_GRANT = 9,
    PORTAL_KEYRING_ERROR_INVALID_USER_JWT = 10,
    PORTAL_KEYRING_ERROR_AUTHENTICATION_FAILED = 11,
    PORTAL_KEYRING_ERROR_UNSOLICITED_REDIRECT = 12,
    PORTAL_KEYRING_ERROR_DIFFERENT_END_USER = 13,
    PORTAL_KEYRING_ERROR_CANCELLED = 14,
    PORTAL_KEYRING_ERROR_MAGIC_LINK_NOT_CONFIGURED = 15,
    PORTAL_KEYRING_ERROR_AUTH_METHOD_UNAVAILABLE = 16,
    PORTAL_KEYRING_ERROR_ACCOUNT_ABSTRACTION_UNAVAILABLE = 17,
    PORTAL_KEYRING_ERROR_SERVER = 18,
    PORTAL_KEYRING_ERROR_REQUEST_REFUSED = 19,
    PORTAL_KEYRING_ERROR_TOTP_QR_UNAVAILABLE = 20,
    PORTAL_KEYRING_ERROR_SIGN_IN_IN_PROGRESS = 21,
    PORTAL_KEYRING_ERROR_SIGN_IN_UNAVAILABLE = 22,
    PORTAL_KEYRING_ERROR_SIGN_IN_TIMED_OUT = 23
} PortalKeyringError;

GQuark portal_keyring_error_quark (void);

GType portal_keyring_error_get_type (void) G_GNUC_CONST;
#define PORTAL_KEYRING_TYPE_ERROR (portal_keyring_error_get_type ())

G_END_DECLS

#endif /* PORTAL_KEYRING_ERROR_H */
