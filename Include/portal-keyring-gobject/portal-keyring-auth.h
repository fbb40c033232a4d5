/* portal-keyring-auth.h — PortalKeyringAuth: client auth for one Portal auth environment. */
#ifndef PORTAL_KEYRING_AUTH_H
#define PORTAL_KEYRING_AUTH_H

#if !defined(PORTAL_KEYRING_GOBJECT_INSIDE) && !defined(PORTAL_KEYRING_GOBJECT_COMPILATION)
#error "Only <portal-keyring-gobject/portal-keyring-gobject.h> can be included directly."
#endif

#include <gio/gio.h>

#include "portal-keyring-session.h"
#include "portal-keyring-sign-in-result.h"

G_BEGIN_DECLS

#define PORTAL_KEYRING_TYPE_AUTH (portal_keyring_auth_get_type ())
G_DECLARE_FINAL_TYPE (PortalKeyringAuth, portal_keyring_auth, PORTAL_KEYRING, AUTH, GObject)

PortalKeyringAuth *portal_keyring_auth_new (const gchar *auth_environment_id, const gchar *redirect_url,
                                            const gchar *api_host, GError **error);

const gchar *portal_keyring_auth_get_auth_environment_id (PortalKeyringAuth *self);

const gchar *portal_keyring_auth_get_redirect_url (PortalKeyringAuth *self);

const gchar *portal_keyring_auth_get_api_host (PortalKeyringAuth *self);

guint portal_keyring_auth_get_call_timeout_ms (PortalKeyringAuth *self);

guint portal_keyring_auth_get_prompt_timeout_ms (PortalKeyringAuth *self);

const gchar *portal_keyring_auth_get_magic_link_from_email (PortalKeyringAuth *self);

const gchar *portal_keyring_auth_get_magic_link_template_id (PortalKeyringAuth *self);

PortalKeyringAccountAbstraction portal_keyring_auth_get_account_abstraction (PortalKeyringAuth *self);

void portal_keyring_auth_restore_session_async (PortalKeyringAuth *self, GCancellable *cancellable,
                                                GAsyncReadyCallback callback, gpointer user_data);

PortalKeyringSession *portal_keyring_auth_restore_session_finish (PortalKeyringAuth *self, GAsyncResult *result,
                                                                  GError **error);

PortalKeyringSession *portal_keyring_auth_restore_session_sync (PortalKeyringAuth *self, GCancellable *cancellable,
                                                                GError **error);

void portal_keyring_auth_persist_session_async (PortalKeyringAuth *self, const gchar *end_user_id,
                                                const gchar *client_session_token, GCancellable *cancellable,
                                                GAsyncReadyCallback callback, gpointer user_data);

PortalKeyringSession *portal_keyring_auth_persist_session_finish (PortalKeyringAuth *self, GAsyncResult *result,
                                                                  GError **error);

PortalKeyringSession *portal_keyring_auth_persist_session_sync (PortalKeyringAuth *self, const gchar *end_user_id,
                                                                const gchar *client_session_token,
                                                                GCancellable *cancellable, GError **error);

void portal_keyring_auth_clear_persisted_session_async (PortalKeyringAuth *self, GCancellable *cancellable,
                                                        GAsyncReadyCallback callback, gpointer user_data);

gboolean portal_keyring_auth_clear_persisted_session_finish (PortalKeyringAuth *self, GAsyncResult *result,
                                                             GError **error);

gboolean portal_keyring_auth_clear_persisted_session_sync (PortalKeyringAuth *self, GCancellable *cancellable,
                                                           GError **error);

void portal_keyring_auth_get_methods_async (PortalKeyringAuth *self, GCancellable *cancellable,
                                            GAsyncReadyCallback callback, gpointer user_data);

gchar **portal_keyring_auth_get_methods_finish (PortalKeyringAuth *self, GAsyncResult *result,
                                                gboolean *auto_create_wallet, GError **error);

gchar **portal_keyring_auth_get_methods_sync (PortalKeyringAuth *self, gboolean *auto_create_wallet,
                                              GCancellable *cancellable, GError **error);

void portal_keyring_auth_send_magic_link_async (PortalKeyringAuth *self, const gchar *email,
                                                GCancellable *cancellable, GAsyncReadyCallback callback,
                                                gpointer user_data);

gboolean portal_keyring_auth_send_magic_link_finish (PortalKeyringAuth *self, GAsyncResult *result, GError **error);

gboolean portal_keyring_auth_send_magic_link_sync (PortalKeyringAuth *self, const gchar *email,
                                                   GCancellable *cancellable, GError **error);

void portal_keyring_auth_login_with_google_async (PortalKeyringAuth *self, GCancellable *cancellable,
                                                  GAsyncReadyCallback callback, gpointer user_data);

gchar *portal_keyring_auth_login_with_google_finish (PortalKeyringAuth *self, GAsyncResult *result, GError **error);

gchar *portal_keyring_auth_login_with_google_sync (PortalKeyringAuth *self, GCancellable *cancellable, GError **error);

void portal_keyring_auth_login_with_apple_async (PortalKeyringAuth *self, GCancellable *cancellable,
                                                 GAsyncReadyCallback callback, gpointer user_data);

gchar *portal_keyring_auth_login_with_apple_finish (PortalKeyringAuth *self, GAsyncResult *result, GError **error);

gchar *portal_keyring_auth_login_with_apple_sync (PortalKeyringAuth *self, GCancellable *cancellable, GError **error);

void portal_keyring_auth_handle_redirect_async (PortalKeyringAuth *self, const gchar *url,
                                                PortalKeyringRedirectFlags flags, GCancellable *cancellable,
                                                GAsyncReadyCallback callback, gpointer user_data);

PortalKeyringSignInResult *portal_keyring_auth_handle_redirect_finish (PortalKeyringAuth *self, GAsyncResult *result,
                                                                       GError **error);

PortalKeyringSignInResult *portal_keyring_auth_handle_redirect_sync (PortalKeyringAuth *self, const gchar *url,
                                                                     PortalKeyringRedirectFlags flags,
                                                                     GCancellable *cancellable, GError **error);

void portal_keyring_auth_verify_totp_async (PortalKeyringAuth *self, const gchar *code, const gchar *user_jwt,
                                            GCancellable *cancellable, GAsyncReadyCallback callback,
                                            gpointer user_data);

PortalKeyringSession *portal_keyring_auth_verify_totp_finish (PortalKeyringAuth *self, GAsyncResult *result,
                                                              GError **error);

PortalKeyringSession *portal_keyring_auth_verify_totp_sync (PortalKeyringAuth *self, const gchar *code,
                                                            const gchar *user_jwt, GCancellable *cancellable,
                                                            GError **error);

void portal_keyring_auth_sign_in_with_google_async (PortalKeyringAuth *self, guint timeout_ms,
                                                    GCancellable *cancellable, GAsyncReadyCallback callback,
                                                    gpointer user_data);

PortalKeyringSignInResult *portal_keyring_auth_sign_in_with_google_finish (PortalKeyringAuth *self,
                                                                           GAsyncResult *result, GError **error);

PortalKeyringSignInResult *portal_keyring_auth_sign_in_with_google_sync (PortalKeyringAuth *self, guint timeout_ms,
                                                                         GCancellable *cancellable, GError **error);

void portal_keyring_auth_sign_in_with_apple_async (PortalKeyringAuth *self, guint timeout_ms,
                                                   GCancellable *cancellable, GAsyncReadyCallback callback,
                                                   gpointer user_data);

PortalKeyringSignInResult *portal_keyring_auth_sign_in_with_apple_finish (PortalKeyringAuth *self,
                                                                          GAsyncResult *result, GError **error);

PortalKeyringSignInResult *portal_keyring_auth_sign_in_with_apple_sync (PortalKeyringAuth *self, guint timeout_ms,
                                                                        GCancellable *cancellable, GError **error);

G_END_DECLS

#endif /* PORTAL_KEYRING_AUTH_H */
