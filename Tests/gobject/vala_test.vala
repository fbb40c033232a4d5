// vala_test.vala — the GNOME API from Vala through the generated .vapi (valac --pkg
// portal-keyring-gobject-1): async/yield on a main loop against the private keyring and the fake
// Portal API.
// Prints one line a check; exits 1 when any failed.
int failed = 0;

void check (bool ok, string what) {
    if (!ok)
        failed++;
    print ("%s %s\n", ok ? "ok   " : "FAIL ", what);
}

async void run (MainLoop loop) {
    var env_id = "vala-test-%lld".printf (get_real_time ());
    try {
        new PortalKeyring.Auth ("", "myapp://auth", null);
        check (false, "a blank auth environment id is refused");
    } catch (PortalKeyring.Error.INVALID_ARGUMENT e) {
        check (true, "a blank auth environment id is refused: " + e.message);
    } catch (Error e) {
        check (false, "a blank auth environment id: wrong error " + e.message);
    }
    try {
        var auth = new PortalKeyring.Auth (env_id, "portalkeyring://auth/callback", null);
        yield auth.clear_persisted_session ();
        check ((yield auth.restore_session ()) == null, "restore when signed out gives null, no error");
        var stored = yield auth.persist_session ("end-user-vala", "cst-vala.Token_0123456789");
        check (stored.end_user_id == "end-user-vala", "persist returns the stored session");
        var restored = yield auth.restore_session ();
        check (restored != null && restored.end_user_id == "end-user-vala", "restore returns the persisted session");
        var cancellable = new Cancellable ();
        cancellable.cancel ();
        try {
            yield auth.restore_session (cancellable);
            check (false, "a cancelled restore throws");
        } catch (IOError.CANCELLED e) {
            check (true, "a cancelled restore throws IOError.CANCELLED");
        }
        yield auth.clear_persisted_session ();
        check ((yield auth.restore_session ()) == null, "signed out after clear");
        // Sign-in through the .vapi, against the fake Portal API (scripts/with-portal-api.sh).
        var signer = new PortalKeyring.Auth (env_id, "portalkeyring://auth/callback",
                                             Environment.get_variable ("PORTAL_TEST_API_HOST"));
        bool wallet;
        string[] methods = yield signer.get_methods (null, out wallet);
        check ("GOOGLE" in methods && wallet, "get_methods: " + string.joinv (",", methods));
        var result = yield signer.handle_redirect ("otherapp://auth?token=x", PortalKeyring.RedirectFlags.NONE);
        check (result.kind == PortalKeyring.RedirectKind.NOT_HANDLED, "another app's URL is not handled");
    } catch (Error e) {
        check (false, "unexpected error: " + e.message);
    }
    loop.quit ();
}

int main () {
    var loop = new MainLoop ();
    run.begin (loop);
    loop.run ();
    print ("vala_test: %d failed\n", failed);
    return failed > 0 ? 1 : 0;
}
