/* Tests/flatpak/stop_before_host_delete.c — a process that stops between the two halves of the
 * move of a session from the host's Secret Service into the sandbox's file keyring (the write
 * and read-back done, the host delete not): Tests/flatpak/migration.sh checks that the next call
 * leaves one session, nothing lost and nothing twice.
 *
 *   stop_before_host_delete AUTH_ENVIRONMENT_ID REDIRECT_URL
 *
 * Defines secret_item_delete_sync, which the library calls (FaultInjectionSeam.beforeDelete)
 * right before each Item.Delete when a program interposes it: here it ends the process at once
 * (exit 9), as a crash or a kill would. Built with -rdynamic and linked with libsecret (whose own
 * definition the library compares with). Exits 9 when it stopped there; 0 when the restore
 * returned without deleting anything on the host (nothing to move); 1 on a failure. */
#include <portal_keyring.h>
#include <stdio.h>
#include <unistd.h>

typedef struct _GCancellable GCancellable;
typedef struct _GError GError;
typedef struct _SecretItem SecretItem;
int secret_item_delete_sync(SecretItem *self, GCancellable *cancellable, GError **error);

int secret_item_delete_sync(SecretItem *self, GCancellable *cancellable, GError **error) {
    (void)self, (void)cancellable, (void)error;
    _exit(9);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s AUTH_ENVIRONMENT_ID REDIRECT_URL\n", argv[0]);
        return 1;
    }
    portal_auth *auth = NULL;
    if (portal_auth_new(&auth, argv[1], argv[2], NULL) != PORTAL_OK) {
        fprintf(stderr, "portal_auth_new: %s\n", portal_last_error_message());
        return 1;
    }
    portal_session *session = NULL;
    portal_status status = portal_auth_restore_session(auth, &session);
    if (status != PORTAL_OK) fprintf(stderr, "restore: %s\n", portal_last_error_message());
    portal_session_free(session);
    portal_auth_free(auth);
    return status == PORTAL_OK ? 0 : 1;
}
