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
        yield portal_checks (env_id + "-portal");
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

// The fake Portal API's admin routes (Tests/gobject/fake_api_admin.py): the data.token answered.
string admin (string method, string path, string? body = null) throws Error {
    string[] argv = { "python3", "Tests/gobject/fake_api_admin.py", method, path };
    if (body != null)
        argv += body;
    string output;
    Process.spawn_sync (null, argv, null, SpawnFlags.SEARCH_PATH, null, out output);
    return output.strip ();
}

async void settle (uint ms) {
    Timeout.add (ms, settle.callback);
    yield;
}

async PortalKeyring.Session stored_session (PortalKeyring.Auth auth, out string cst) throws Error {
    cst = admin ("POST", "/_admin/sessions", "{\"endUserId\":\"end-user-vala-portal\"}");
    yield auth.persist_session ("end-user-vala-portal", cst);
    return yield auth.restore_session ();
}

// The Portal: a request, a 401 invalidating once, a late handler, a cancel, no reference cycle.
async void portal_checks (string env_id) throws Error {
    var auth = new PortalKeyring.Auth (env_id, "portalkeyring://auth/callback", Environment.get_variable ("PORTAL_TEST_API_HOST"));
    string cst;
    var session = yield stored_session (auth, out cst);
    PortalKeyring.Portal? portal = yield new PortalKeyring.Portal (session);
    check (!portal.invalidated, "a valid session makes a portal, not invalidated");
    var signals = 0;
    portal.session_invalidated.connect (() => signals++);
    uint status;
    var body = yield portal.request ("GET", "/api/v3/clients/me", null, null, out status);
    check (status == 200 && ((string) body.get_data ()).contains ("end-user-vala-portal"), "request answers 200");

    admin ("POST", "/_admin/faults", "{\"route\":\"/api/v3/clients/me\",\"delayMs\":5000}");
    var cancellable = new Cancellable ();
    Timeout.add (100, () => { cancellable.cancel (); return Source.REMOVE; });
    var start = get_monotonic_time ();
    try {
        yield portal.request ("GET", "/api/v3/clients/me", null, cancellable, out status);
        check (false, "a cancelled request throws");
    } catch (IOError.CANCELLED e) {
        check (get_monotonic_time () - start < 1000000, "a cancelled request throws IOError.CANCELLED at once");
    }
    admin ("DELETE", "/_admin/faults");

    admin ("POST", "/_admin/revoke", "{\"token\":\"%s\"}".printf (cst));
    yield portal.request ("GET", "/api/v3/clients/me", null, null, out status);
    yield settle (1000);
    check (status == 401 && signals == 1 && portal.invalidated, "a 401 emits session_invalidated exactly once (%d)".printf (signals));
    try {
        yield portal.request ("GET", "/api/v3/clients/me", null, null, out status);
        check (false, "a request after invalidation throws");
    } catch (PortalKeyring.Error.SESSION_INVALIDATED e) {
        check (signals == 1, "a request after invalidation throws SESSION_INVALIDATED, no second signal");
    }
    // Out of the last request's callback first: its GTask holds the portal until it returns.
    yield settle (10);
    var gone = false;
    portal.weak_ref (() => gone = true);
    portal = null;
    check (gone, "the portal is finalised with its last unref (no cycle with its handler or session)");

    var revoked = yield stored_session (auth, out cst);
    admin ("POST", "/_admin/revoke", "{\"token\":\"%s\"}".printf (cst));
    PortalKeyring.Portal? late = yield new PortalKeyring.Portal (revoked);
    var late_signals = 0;
    late.session_invalidated.connect (() => late_signals++);
    yield settle (500);
    check (late.invalidated && late_signals == 0, "a handler connected after the rejection reads invalidated (no replay)");
    gone = false;
    late.weak_ref (() => gone = true);
    late = null;
    check (gone, "the rejected portal is finalised with its last unref");
    yield auth.clear_persisted_session ();
}

int main () {
    var loop = new MainLoop ();
    run.begin (loop);
    loop.run ();
    print ("vala_test: %d failed\n", failed);
    return failed > 0 ? 1 : 0;
}
