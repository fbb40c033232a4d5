/*
 * sign_out.c — sign the end user out: delete the stored session of an auth environment.
 *
 *   sign_out AUTH_ENVIRONMENT_ID
 *
 * Exit status: 0 signed out (also when nothing was stored), 2 error (nothing was deleted).
 */
#include <portal_keyring.h>

#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s AUTH_ENVIRONMENT_ID\n", argv[0]);
        return 2;
    }
    portal_auth *auth = NULL;
    portal_status status = portal_auth_new(&auth, argv[1], "example-app://portal/redirect", NULL);
    if (status == PORTAL_OK) status = portal_auth_clear_persisted_session(auth);
    portal_auth_free(auth);
    if (status != PORTAL_OK) {
        fprintf(stderr, "error: %s (%d): %s\n", portal_status_str(status), (int)status,
                portal_last_error_message());
        return 2;
    }
    printf("signed out: stored session deleted\n");
    return 0;
}
