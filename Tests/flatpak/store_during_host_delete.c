/* Tests/flatpak/store_during_host_delete.c — a restore whose move of the host's session into the
 * sandbox's file keyring meets a sign-in that another process stores on the host during the move,
 * right before the move's first host delete: Tests/flatpak/migration.sh checks that it is neither
 * deleted nor dropped (the next call moves it).
 *
 *   store_during_host_delete AUTH_ENVIRONMENT_ID REDIRECT_URL COMMAND
 *
 * Defines secret_item_delete_sync, which the library calls (FaultInjectionSeam.beforeDelete)
 * right before each Item.Delete when a program interposes it: the first time, it runs COMMAND
 * (sh -c; the test stores the sign-in on the host with keyringctl) and lets the delete go on.
 * Built with -rdynamic and linked with libsecret (whose own definition the library compares with).
 * Exits 0 when the restore succeeded and COMMAND ran (and exited 0), 1 otherwise. */
#include <portal_keyring.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

typedef struct _GCancellable GCancellable;
typedef struct _GError GError;
typedef struct _SecretItem SecretItem;
int secret_item_delete_sync(SecretItem *self, GCancellable *cancellable, GError **error);

static const char *command;
static int ran, command_status = -1;

int secret_item_delete_sync(SecretItem *self, GCancellable *cancellable, GError **error) {
    (void)self, (void)cancellable, (void)error;
    if (!ran) {
        ran = 1;
        int status = system(command);
        command_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s AUTH_ENVIRONMENT_ID REDIRECT_URL COMMAND\n", argv[0]);
        return 1;
    }
    command = argv[3];
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
    if (!ran || command_status != 0) fprintf(stderr, "the command before the host delete: ran %d, exit %d\n", ran, command_status);
    return status == PORTAL_OK && ran && command_status == 0 ? 0 : 1;
}
