/* portal-keyring-session.h — PortalKeyringSession: a signed-in end user's session. */
#ifndef PORTAL_KEYRING_SESSION_H
#define PORTAL_KEYRING_SESSION_H

#if !defined(PORTAL_KEYRING_GOBJECT_INSIDE) && !defined(PORTAL_KEYRING_GOBJECT_COMPILATION)
#error "Only <portal-keyring-gobject/portal-keyring-gobject.h> can be included directly."
#endif

#include <glib-object.h>

G_BEGIN_DECLS

/**
 * PortalKeyringAccountAbstraction:
 * @PORTAL_KEYRING_ACCOUNT_ABSTRACTION_DEFAULT: not said: for a session, the sign-in did not
 *   report it (or the session was restored or persisted, which never know it).
 * @PORTAL_KEYRING_ACCOUNT_ABSTRACTION_OFF: not account-abstracted.
 * @PORTAL_KEYRING_ACCOUNT_ABSTRACTION_ON: account-abstracted.
 *
 * Whether a Portal client is account-abstracted. Three values, not a boolean, because the C ABI
 * knows it only for a session that a sign-in returned: "not reported" must not read as "off".
 * The numbers are those of the C ABI's `portal_account_abstraction`.
 */
typedef enum {
    PORTAL_KEYRING_ACCOUNT_ABSTRACTION_DEFAULT = 0,
    PORTAL_KEYRING_ACCOUNT_ABSTRACTION_OFF = 1,
    PORTAL_KEYRING_ACCOUNT_ABSTRACTION_ON = 2
} PortalKeyringAccountAbstraction;

GType portal_keyring_account_abstraction_get_type (void) G_GNUC_CONST;
#define PORTAL_KEYRING_TYPE_ACCOUNT_ABSTRACTION (portal_keyring_account_abstraction_get_type ())

#define PORTAL_KEYRING_TYPE_SESSION (portal_keyring_session_get_type ())
G_DECLARE_FINAL_TYPE (PortalKeyringSession, portal_keyring_session, PORTAL_KEYRING, SESSION, GObject)

const gchar *portal_keyring_session_get_end_user_id (PortalKeyringSession *self);

const gchar *portal_keyring_session_get_auth_environment_id (PortalKeyringSession *self);

const gchar *portal_keyring_session_get_client_id (PortalKeyringSession *self);

PortalKeyringAccountAbstraction portal_keyring_session_get_account_abstraction (PortalKeyringSession *self);

gchar *portal_keyring_session_copy_token (PortalKeyringSession *self, GError **error);

void portal_keyring_token_free (gchar *token);

G_END_DECLS

#endif /* PORTAL_KEYRING_SESSION_H */
