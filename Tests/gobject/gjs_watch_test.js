// gjs_watch_test.js — PortalKeyring.Watch from GJS, against the private keyring: another process
// (this script as `gjs -m gjs_watch_test.js persist|clear ENV [END_USER]`) signs in and out, seen
// as "changed" with the event and end user id on the main context; with the provider stopped
// (SIGSTOP, then SIGCONT) making and stopping a watch leave a 10 ms timer on the same loop ticking
// (no gap over 50 ms). One line a check; exits 1 when any failed.
//
//   GI_TYPELIB_PATH=build/gobject LD_LIBRARY_PATH=build/gobject gjs -m Tests/gobject/gjs_watch_test.js
import GLib from 'gi://GLib';
import PortalKeyring from 'gi://PortalKeyring?version=1';
import System from 'system';

const Event = PortalKeyring.WatchEvent;
const GAP_MS = 50;
const script = GLib.filename_from_uri(import.meta.url)[0];

const makeAuth = envId => {
    const auth = new PortalKeyring.Auth({
        auth_environment_id: envId, redirect_url: 'portalkeyring://auth/callback', call_timeout_ms: 3000,
    });
    auth.init(null);
    return auth;
};

if (ARGV.length >= 2) { // the other process
    const auth = makeAuth(ARGV[1]);
    if (ARGV[0] === 'persist')
        auth.persist_session_sync(ARGV[2], 'cst-gjswatch.Token_0123', null);
    else
        auth.clear_persisted_session_sync(null);
    System.exit(0);
}

let failed = 0;
const check = (ok, what) => {
    if (!ok) failed++;
    print(`${ok ? 'ok   ' : 'FAIL '} ${what}`);
};

// Iterates the main context until until() or ms passed; returns until().
const spin = (until, ms) => {
    const end = GLib.get_monotonic_time() + ms * 1000;
    const context = GLib.MainContext.default();
    while (!until() && GLib.get_monotonic_time() < end) {
        context.iteration(false);
        GLib.usleep(1000);
    }
    return until();
};
const never = () => false;

const otherProcess = (...args) => {
    const [, , , status] = GLib.spawn_sync(null, ['gjs', '-m', script, ...args], null,
        GLib.SpawnFlags.SEARCH_PATH, null);
    check(status === 0, `the other process's ${args[0]}`);
};

const envId = `gjs-watch-test-${new Date().getTime()}`;
const auth = makeAuth(envId);
auth.clear_persisted_session_sync(null);
const seen = [];
const has = event => () => seen.some(s => s.event === event);

let watch = PortalKeyring.Watch.new(auth);
watch.connect('changed', (_w, event, endUserId) =>
    seen.push({event, endUserId, onMain: GLib.MainContext.default().is_owner()}));
check(watch.auth === auth, 'Watch.new(auth): the auth property');
check(spin(has(Event.STARTED), 10000), 'STARTED');
otherProcess('persist', envId, 'end-user-gjswatch');
check(spin(has(Event.SIGNED_IN), 10000), "another process's sign-in");
check(seen.some(s => s.event === Event.SIGNED_IN && s.endUserId === 'end-user-gjswatch'),
    `SIGNED_IN names its end user: ${JSON.stringify(seen)}`);
otherProcess('clear', envId);
check(spin(has(Event.SIGNED_OUT), 10000), "another process's sign-out");
check(seen.some(s => s.event === Event.SIGNED_OUT && s.endUserId === null), 'SIGNED_OUT with null');
check(seen.every(s => s.onMain), 'every signal on the main context');
watch.stop();
watch = null;

// The provider stopped: making and stopping watches never stall the loop.
const pidFile = GLib.build_filenamev([GLib.getenv('PORTAL_TEST_KEYRING_DIR') ?? '', 'keyring.pid']);
const provider = GLib.file_test(pidFile, GLib.FileTest.EXISTS)
    ? new TextDecoder().decode(GLib.file_get_contents(pidFile)[1]).trim()
    : GLib.getenv('PORTAL_TEST_KEYRING_PID');
const ticks = [];
const timer = GLib.timeout_add(GLib.PRIORITY_DEFAULT, 10, () => {
    ticks.push(GLib.get_monotonic_time());
    return GLib.SOURCE_CONTINUE;
});
spin(never, 50);
GLib.spawn_command_line_sync(`kill -STOP ${provider}`);
ticks.length = 0;
const stalled = [];
let stopped = PortalKeyring.Watch.new(auth);
stopped.connect('changed', (_w, event) => stalled.push(event));
spin(never, 200);
stopped.stop();
stopped = null;
spin(never, 200);
GLib.spawn_command_line_sync(`kill -CONT ${provider}`);
GLib.source_remove(timer);
const gapMs = Math.max(...ticks.slice(1).map((t, i) => t - ticks[i])) / 1000;
print(`largest timer gap with the provider stopped: ${gapMs.toFixed(1)} ms`);
check(ticks.length > 25 && gapMs <= GAP_MS, `the 10 ms timer never gapped over ${GAP_MS} ms (${gapMs.toFixed(1)})`);
check(stalled.length === 0, 'no signal from a watch stopped while the provider hung');
auth.clear_persisted_session_sync(null);
print(`gjs_watch_test: ${failed} failed`);
System.exit(failed ? 1 : 0);
