/* portal-keyring-sign-in-result.h — PortalKeyringSignInResult: what a sign-in redirect came to. */
#ifndef PORTAL_KEYRING_SIGN_IN_RESULT_H
#define PORTAL_KEYRING_SIGN_IN_RESULT_H

#if !defined(PORTAL_KEYRING_GOBJECT_INSIDE) && !defined(PORTAL_KEYRING_GOBJECT_COMPILATION)
#error "Only <portal-keyring-gobject/portal-keyring-gobject.h> can be included directly."
#endif

#include <glib-object.h>

#include "portal-keyring-session.h"

G_BEGIN_DECLS

/**
 * PortalKeyringRedirectKind:
 * @PORTAL_KEYRING_REDIRECT_KIND_NOT_HANDLED: not this app's redirect URL (another scheme, host
 *   or path, or no grant in it): nothing was done.
 * @PORTAL_KEYRING_REDIRECT_KIND_AUTHENTICATED: signed in: the session was persisted before the
 *   operation completed.
 * @PORTAL_KEYRING_REDIRECT_KIND_TOTP_REQUIRED: a TOTP code is needed: pass it with the result's
 *   user JWT to [method@PortalKeyring.Auth.verify_totp_async]. Nothing was persisted.
 *
 * What a sign-in redirect came to. The numbers are those of the C ABI's `portal_redirect_kind`.
 */
typedef enum {
    PORTAL_KEYRING_REDIRECT_KIND_NOT_HANDLED = 0,
    PORTAL_KEYRING_REDIRECT_KIND_AUTHENTICATED = 1,
    PORTAL_KEYRING_REDIRECT_KIND_TOTP_REQUIRED = 2
} PortalKeyringRedirectKind;

GType portal_keyring_redirect_kind_get_type (void) G_GNUC_CONST;
#define PORTAL_KEYRING_TYPE_REDIRECT_KIND (portal_keyring_redirect_kind_get_type ())

/**
 * PortalKeyringRedirectFlags:
 * @PORTAL_KEYRING_REDIRECT_FLAGS_NONE: the defaults: both login CSRF defences on.
 * @PORTAL_KEYRING_REDIRECT_FLAGS_ALLOW_UNSOLICITED: exchange the grant although no sign-in of
 *   this auth environment is pending, for apps whose sign-ins start elsewhere (their backend
 *   sends the magic links). Re-opens login CSRF.
 * @PORTAL_KEYRING_REDIRECT_FLAGS_REPLACE_END_USER: the confirmation after
 *   %PORTAL_KEYRING_ERROR_DIFFERENT_END_USER: replace the other end user's stored session.
 *
 * Options of [method@PortalKeyring.Auth.handle_redirect_async]. The numbers are those of the
 * C ABI's `portal_redirect_flags`.
 */
typedef enum /*< flags >*/ {
    PORTAL_KEYRING_REDIRECT_FLAGS_NONE = 0,
    PORTAL_KEYRING_REDIRECT_FLAGS_ALLOW_UNSOLICITED = 1 << 0,
    PORTAL_KEYRING_REDIRECT_FLAGS_REPLACE_END_USER = 1 << 1
} PortalKeyringRedirectFlags;

GType portal_keyring_redirect_flags_get_type (void) G_GNUC_CONST;
#define PORTAL_KEYRING_TYPE_REDIRECT_FLAGS (portal_keyring_redirect_flags_get_type ())

#define PORTAL_KEYRING_TYPE_SIGN_IN_RESULT (portal_keyring_sign_in_result_get_type ())
G_DECLARE_FINAL_TYPE (PortalKeyringSignInResult, portal_keyring_sign_in_result, PORTAL_KEYRING, SIGN_IN_RESULT,
                      GObject)

PortalKeyringRedirectKind portal_keyring_sign_in_result_get_kind (PortalKeyringSignInResult *self);

PortalKeyringSession *portal_keyring_sign_in_result_get_session (PortalKeyringSignInResult *self);

gchar *portal_keyring_sign_in_result_copy_user_jwt (PortalKeyringSignInResult *self);

gchar *portal_keyring_sign_in_result_copy_totp_link (PortalKeyringSignInResult *self);

G_END_DECLS

#endif /* PORTAL_KEYRING_SIGN_IN_RESULT_H */
