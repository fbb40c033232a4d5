/*
 * portal-keyring-private.h — what the files of the GNOME API share and do not export: the one
 * conversion of a C status to a GError, the session made from a C handle, the auth's and the
 * portal's instances and C handles, and the bridge from a C operation to a GTask (portal-keyring-task-bridge.c) that the auth's
 * operations (portal-keyring-auth-operations.c) start and wait on.
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

/* PortalKeyringAuth's instance: its construct properties (portal-keyring-auth.c installs them,
 * portal-keyring-auth-properties.c reads them out) and the C handle its initialisation made. */
struct _PortalKeyringAuth {
    GObject parent_instance;
    gchar *auth_environment_id;
    gchar *redirect_url;
    gchar *api_host;
    guint call_timeout_ms;
    guint prompt_timeout_ms;
    gchar *magic_link_from_email;
    gchar *magic_link_template_id;
    PortalKeyringAccountAbstraction account_abstraction;
    /* Set by a successful initialisation; NULL before it and after a failed one. */
    portal_auth *handle;
    /* The failed initialisation's error, given again by every later call. */
    GError *init_error;
    gboolean init_ran;
};

/* The auth's C handle, or NULL with the error that says why there is none (its initialisation
 * failed, or never ran). */
portal_auth *_portal_keyring_auth_get_handle (PortalKeyringAuth *self, GError **error);

/* PortalKeyringPortal's instance: its session and the C handle its initialisation made
 * (portal-keyring-portal.c), and where and whether its invalidation was delivered
 * (portal-keyring-portal-invalidation.c). */
struct _PortalKeyringPortal {
    GObject parent_instance;
    PortalKeyringSession *session;
    /* Set by a successful set-up (portal_setup()); NULL before it and after a failed one. */
    portal *handle;
    /* Where the invalidation is delivered: the thread-default context at construction, and the
     * C listener's queue on it. */
    GMainContext *context;
    portal_completion_queue *queue;
    gboolean invalidated;
    /* The failed initialisation's error, given again by every later call. */
    GError *init_error;
    gboolean setup_ran;
};

/* The portal's C handle, or NULL with the error that says why there is none (its initialisation
 * failed, or never ran). */
portal *_portal_keyring_portal_get_handle (PortalKeyringPortal *self, GError **error);

/* Installs PortalKeyringPortal:invalidated (as prop_id) and ::session-invalidated. */
void _portal_keyring_portal_class_init_invalidation (GObjectClass *object_class, guint prop_id);

/* Registers handle's invalidation listener on the thread-default context of this call (the
 * construction's: kept in self->context, with self->queue); the C status of the registration. */
portal_status _portal_keyring_portal_listen (PortalKeyringPortal *self, portal *handle);

/* The validation's rejection (a 401, or a session invalidated already): reported on the
 * construction's context, as the listener's is. */
void _portal_keyring_portal_rejected (PortalKeyringPortal *self);

/* The session's C handle (borrowed). */
portal_session *_portal_keyring_session_get_handle (PortalKeyringSession *self);

/* What a C operation's success returns to its GTask: a PortalKeyringSession (or NULL) as a
 * pointer, TRUE as a boolean, a Response as a pointer, or (a sign-in operation) a SignInOutcome
 * as a pointer. */
typedef enum { RESULT_SESSION, RESULT_BOOLEAN, RESULT_RESPONSE, RESULT_SIGN_IN } ResultKind;

/* A request's answer: the HTTP status and the body (wiped when the last reference goes). */
typedef struct {
    guint http_status;
    GBytes *body;
} Response;

/* The answer of a C request: body (with its length) taken, wiped when the GBytes goes. */
Response *_portal_keyring_response_new_take (long http_status, char *body, size_t length);

void _portal_keyring_response_free (gpointer response);

/* Starts one C *_async operation on handle (the portal_auth or portal of the object) with its
 * completion callback, bridge data and destroy_notify; args are the operation's own arguments
 * (copied by the C call if it keeps them). */
typedef portal_status (*StartFunc) (gpointer handle, gpointer args, portal_completion_cb callback, void *bridge,
                                    portal_destroy_notify destroy_notify, uint64_t *operation_out);

/* The body of every _async call: a GTask for self (a PortalKeyringAuth or PortalKeyringPortal)
 * tagged source_tag, whose C operation start begins on self's handle; the task returns on the
 * thread-default main context of this call, and a cancel of cancellable reaches the C operation.
 * A task that cannot start (no handle, already cancelled, refused arguments) returns its error at
 * once. */
void _portal_keyring_bridge_run (gpointer self, GCancellable *cancellable, GAsyncReadyCallback callback,
                                 gpointer user_data, gpointer source_tag, ResultKind kind, StartFunc start,
                                 gpointer args);

/* A sign-in operation's C result with its owned fields taken (portal_sign_in_result lives only
 * during its callback): what the task of every sign-in operation returns; each _finish picks
 * the fields its C call sets. */
typedef struct {
    portal_redirect_kind kind;
    portal_session *session;
    char *text;
    gboolean auto_create_wallet;
    char *user_jwt;
    char *totp_link;
} SignInOutcome;

/* Frees what is left in outcome (the C library's free functions: the user JWT is wiped). */
void _portal_keyring_sign_in_outcome_free (SignInOutcome *outcome);

/* StartFunc for the C sign-in calls, whose completion is a portal_sign_in_cb. */
typedef portal_status (*SignInStartFunc) (portal_auth *auth, gpointer args, portal_sign_in_cb callback, void *bridge,
                                          portal_destroy_notify destroy_notify, uint64_t *operation_out);

/* _portal_keyring_bridge_run for a sign-in operation: the task returns a SignInOutcome. */
void _portal_keyring_bridge_run_sign_in (PortalKeyringAuth *self, GCancellable *cancellable,
                                         GAsyncReadyCallback callback, gpointer user_data, gpointer source_tag,
                                         SignInStartFunc start, gpointer args);

/* The _finish of a sign-in operation: the outcome of self's _async call source_tag (transfer
 * full), or NULL with error set (or with a critical when result is not that call's). */
SignInOutcome *_portal_keyring_bridge_sign_in_outcome (PortalKeyringAuth *self, GAsyncResult *result,
                                                      gpointer source_tag, GError **error);

/* The PortalKeyringSignInResult of a finished sign-in's outcome (its kind, session, user JWT and
 * TOTP link; the outcome is freed), or NULL for a NULL outcome (a failed sign-in). */
PortalKeyringSignInResult *_portal_keyring_sign_in_result_new_take (SignInOutcome *outcome);

/* The check of every _finish call: result as the GTask of self's _async call source_tag, or NULL
 * (with a critical) when it is not one. */
GTask *_portal_keyring_bridge_task (gpointer self, GAsyncResult *result, gpointer source_tag);

/* A _sync form with a GCancellable: begin (a private main context, pushed as the thread-default),
 * the _async form with _portal_keyring_sync_done and the SyncWait as its callback, end (iterate
 * until the result is in, pop), the _finish form on wait.result, then clear. */
typedef struct {
    GMainContext *context;
    GAsyncResult *result;
} SyncWait;

void _portal_keyring_sync_done (GObject *source, GAsyncResult *result, gpointer data);
void _portal_keyring_sync_wait_begin (SyncWait *wait);
void _portal_keyring_sync_wait_end (SyncWait *wait);
void _portal_keyring_sync_wait_clear (SyncWait *wait);

G_END_DECLS

#endif /* PORTAL_KEYRING_PRIVATE_H */
