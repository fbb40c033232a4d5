// vala_watch_test.vala — PortalKeyring.Watch from Vala through the generated .vapi, against the
// private keyring: another process (this program as `vala_watch_test persist|clear ENV
// [END_USER]`) signs in and out, seen as "changed" with the event and end user id on the main
// context; with the provider stopped (SIGSTOP, then SIGCONT) making and stopping a watch leave a
// 10 ms timer on the same loop ticking (no gap over 50 ms); the watch is finalised with its last
// reference. Prints one line a check; exits 1 when any failed.
const int GAP_MS = 50;
int failed = 0;

void check (bool ok, string what) {
    if (!ok)
        failed++;
    print ("%s %s\n", ok ? "ok   " : "FAIL ", what);
}

PortalKeyring.Auth make_auth (string env_id) throws Error {
    var auth = (PortalKeyring.Auth) Object.new (typeof (PortalKeyring.Auth), "auth-environment-id", env_id,
                                                "redirect-url", "portalkeyring://auth/callback",
                                                "call-timeout-ms", 3000u);
    auth.init ();
    return auth;
}

// Iterates the main context until until() or ms passed; returns until().
delegate bool Until ();

bool spin (Until until, int ms) {
    var end = get_monotonic_time () + ms * 1000;
    while (!until () && get_monotonic_time () < end) {
        MainContext.default ().iteration (false);
        Thread.usleep (1000);
    }
    return until ();
}

void other_process (string self_path, string[] args) {
    string[] argv = { self_path };
    foreach (var arg in args)
        argv += arg;
    int status = -1;
    try {
        Process.spawn_sync (null, argv, null, 0, null, null, null, out status);
    } catch (SpawnError e) {
        check (false, "the other process: " + e.message);
    }
    check (status == 0, "the other process's " + args[0]);
}

void signal_provider (string sig) {
    var pid_file = Path.build_filename (Environment.get_variable ("PORTAL_TEST_KEYRING_DIR") ?? "", "keyring.pid");
    string pid = Environment.get_variable ("PORTAL_TEST_KEYRING_PID");
    try {
        if (FileUtils.test (pid_file, FileTest.EXISTS))
            FileUtils.get_contents (pid_file, out pid);
        Process.spawn_command_line_sync ("kill -%s %s".printf (sig, pid.strip ()));
    } catch (Error e) {
        check (false, "kill -%s: %s".printf (sig, e.message));
    }
}

int main (string[] args) {
    try {
        if (args.length >= 3) { // the other process
            var auth = make_auth (args[2]);
            if (args[1] == "persist")
                auth.persist_session_sync (args[3], "cst-valawatch.Token_0123");
            else
                auth.clear_persisted_session_sync ();
            return 0;
        }
        var env_id = "vala-watch-test-%lld".printf (get_real_time ());
        var auth = make_auth (env_id);
        auth.clear_persisted_session_sync ();
        int started = 0, signed_in = 0, signed_out = 0, off_main = 0;
        string? end_user = null;
        var watch = new PortalKeyring.Watch (auth);
        watch.changed.connect ((event, end_user_id) => {
            if (!MainContext.default ().is_owner ())
                off_main++;
            if (event == PortalKeyring.WatchEvent.STARTED)
                started++;
            else if (event == PortalKeyring.WatchEvent.SIGNED_IN) {
                signed_in++;
                end_user = end_user_id;
            } else if (event == PortalKeyring.WatchEvent.SIGNED_OUT && end_user_id == null)
                signed_out++;
        });
        check (spin (() => started == 1, 10000), "STARTED");
        other_process (args[0], { "persist", env_id, "end-user-valawatch" });
        check (spin (() => signed_in > 0, 10000) && end_user == "end-user-valawatch",
               "another process's sign-in: SIGNED_IN \"%s\"".printf (end_user ?? "(null)"));
        other_process (args[0], { "clear", env_id });
        check (spin (() => signed_out > 0, 10000), "another process's sign-out: SIGNED_OUT with null");
        check (off_main == 0, "every signal on the main context");
        bool finalised = false;
        watch.weak_ref (() => finalised = true);
        watch.stop ();
        watch = null;
        check (finalised, "finalised with its last reference");

        // The provider stopped: making and stopping watches never stall the loop.
        int64 last = 0, gap = 0;
        var timer = Timeout.add (10, () => {
            var now = get_monotonic_time ();
            if (last != 0 && now - last > gap)
                gap = now - last;
            last = now;
            return Source.CONTINUE;
        });
        spin (() => false, 50);
        signal_provider ("STOP");
        last = 0;
        int stalled = 0;
        var stopped = new PortalKeyring.Watch (auth);
        stopped.changed.connect (() => stalled++);
        spin (() => false, 200);
        stopped.stop ();
        stopped = null;
        spin (() => false, 200);
        signal_provider ("CONT");
        Source.remove (timer);
        print ("largest timer gap with the provider stopped: %.1f ms\n", gap / 1000.0);
        check (gap > 0 && gap <= GAP_MS * 1000, "the 10 ms timer never gapped over %d ms".printf (GAP_MS));
        check (stalled == 0, "no signal from a watch stopped while the provider hung");
        auth.clear_persisted_session_sync ();
    } catch (Error e) {
        check (false, "unexpected error: " + e.message);
    }
    print ("vala_watch_test: %d failed\n", failed);
    return failed > 0 ? 1 : 0;
}
