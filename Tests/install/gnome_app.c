/*
 * gnome_app.c — the install test's C program on the GNOME API, built as an application builds it:
 *
 *   cc gnome_app.c $(pkg-config --cflags --libs portal-keyring-gobject-1) -o gnome_app
 *
 *   gnome_app ENV_ID END_USER   a blank auth environment id fails with
 *                               PORTAL_KEYRING_ERROR_INVALID_ARGUMENT; then a restore of ENV_ID
 *                               (persisted by app.c) returns END_USER's session
 *
 * Exit status 0 when both hold, 1 otherwise. Tokens are never printed.
 */
#include <portal-keyring-gobject/portal-keyring-gobject.h>

#define REDIRECT_URL "portal-install-test://auth/callback"

int main(int argc, char **argv) {
    if (argc != 3) {
        g_printerr("usage: gnome_app ENV_ID END_USER\n");
        return 1;
    }
    g_autoptr(GError) error = NULL;
    g_autoptr(PortalKeyringAuth) refused = portal_keyring_auth_new("", REDIRECT_URL, NULL, &error);
    if (refused != NULL || !g_error_matches(error, PORTAL_KEYRING_ERROR, PORTAL_KEYRING_ERROR_INVALID_ARGUMENT)) {
        g_printerr("gnome_app: a blank auth environment id gave %s\n", error ? error->message : "an auth");
        return 1;
    }
    g_print("blank id: PORTAL_KEYRING_ERROR_INVALID_ARGUMENT (%d); ", error->code);
    g_clear_error(&error);
    g_autoptr(PortalKeyringAuth) auth = portal_keyring_auth_new(argv[1], REDIRECT_URL, NULL, &error);
    g_autoptr(PortalKeyringSession) session =
        auth ? portal_keyring_auth_restore_session_sync(auth, NULL, &error) : NULL;
    if (session == NULL || g_strcmp0(portal_keyring_session_get_end_user_id(session), argv[2]) != 0) {
        g_printerr("gnome_app: restore: %s\n", error ? error->message : session ? "another end user" : "signed out");
        return 1;
    }
    g_print("restored %s\n", portal_keyring_session_get_end_user_id(session));
    return 0;
}
