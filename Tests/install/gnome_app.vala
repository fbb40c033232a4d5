// gnome_app.vala — the install test's Vala program, compiled against the installed .vapi:
//
//   valac --pkg portal-keyring-gobject-1 --vapidir PREFIX/share/vala/vapi gnome_app.vala
//
//   gnome_app ENV_ID END_USER   a blank auth environment id throws
//                               PortalKeyring.Error.INVALID_ARGUMENT; then a restore of ENV_ID
//                               (persisted by app.c) gives END_USER's session
// Exits 1 when either does not hold.
int main (string[] args) {
    if (args.length != 3) {
        stderr.printf ("usage: gnome_app ENV_ID END_USER\n");
        return 1;
    }
    int code = 0;
    try {
        new PortalKeyring.Auth ("", "portal-install-test://auth/callback", null);
    } catch (PortalKeyring.Error.INVALID_ARGUMENT e) {
        code = e.code;
    } catch (Error e) {
        stderr.printf ("gnome_app: a blank auth environment id: %s\n", e.message);
    }
    try {
        var auth = new PortalKeyring.Auth (args[1], "portal-install-test://auth/callback", null);
        var session = auth.restore_session_sync ();
        print ("blank id: error code %d; restored %s\n", code, session != null ? session.end_user_id : "nothing");
        return code == PortalKeyring.Error.INVALID_ARGUMENT && session != null && session.end_user_id == args[2] ? 0 : 1;
    } catch (Error e) {
        stderr.printf ("gnome_app: restore: %s\n", e.message);
        return 1;
    }
}
