// gi_restore.js — restore from GJS: the GNOME API (gi://PortalKeyring) vs libsecret's own
// introspected API (gi://Secret, gir1.2-secret-1), in one process.
//
//   GI_TYPELIB_PATH=… LD_LIBRARY_PATH=… gjs -m bench/gi_restore.js N
//
// The same measurement as bench/gi_restore.py, in JavaScript: ours is
// Auth.restore_session_sync(null) and Session.copy_token(), theirs Secret.password_lookup_sync,
// each on its own item of the same schema and document (BENCH_* environment variables from
// bench/gi_figures.py); 50 warm-up calls each, then N pairs alternating call by call, the order
// flipped every pair; prints "ours_ns theirs_ns" per pair (GLib's monotonic clock, in µs × 1000).
// Exits 1 if a call finds nothing.
import GLib from 'gi://GLib';
import PortalKeyring from 'gi://PortalKeyring?version=1';
import Secret from 'gi://Secret?version=1';
import System from 'system';

const OURS = 'bench-gi-gjs-portal', THEIRS = 'bench-gi-gjs-raw';
const env = name => GLib.getenv(name);
const n = parseInt(ARGV[0]);
if (!(n > 0)) {
    printerr('usage: gjs -m bench/gi_restore.js N');
    System.exit(64);
}

const STRING = Secret.SchemaAttributeType.STRING;
const schema = new Secret.Schema(env('BENCH_SCHEMA_NAME'), Secret.SchemaFlags.NONE,
    {auth_environment_id: STRING, session_generation: STRING, persisted_at: STRING});
const theirsAttrs = {auth_environment_id: THEIRS};
Secret.password_clear_sync(schema, theirsAttrs, null);
Secret.password_store_sync(schema, {...theirsAttrs, session_generation: '0'.repeat(32), persisted_at: '1700000000000000'},
    Secret.COLLECTION_DEFAULT, 'Portal session (bench baseline)', env('BENCH_DOCUMENT'), null);
const auth = PortalKeyring.Auth.new(OURS, env('BENCH_REDIRECT_URL'), null);
auth.clear_persisted_session_sync(null);
auth.persist_session_sync(env('BENCH_END_USER_ID'), env('BENCH_TOKEN'), null);

function fail(what) {
    printerr(`gi_restore.js: ${what} found nothing`);
    System.exit(1);
}

function ours() {
    const session = auth.restore_session_sync(null);
    if (session === null || !session.copy_token())
        fail('restore_session_sync');
}

function theirs() {
    if (!Secret.password_lookup_sync(schema, theirsAttrs, null))
        fail('Secret.password_lookup_sync');
}

for (let i = 0; i < 50; i++) {
    ours();
    theirs();
}
const clock = () => GLib.get_monotonic_time();
const lines = [];
for (let i = 0; i < n; i++) {
    let a, b;
    if (i & 1) {
        const t0 = clock(); theirs(); const t1 = clock(); ours(); const t2 = clock();
        a = t2 - t1; b = t1 - t0;
    } else {
        const t0 = clock(); ours(); const t1 = clock(); theirs(); const t2 = clock();
        a = t1 - t0; b = t2 - t1;
    }
    lines.push(`${a * 1000} ${b * 1000}`);
}
auth.clear_persisted_session_sync(null);
Secret.password_clear_sync(schema, theirsAttrs, null);
print(lines.join('\n'));
