// gjs_test.js — the GNOME API from GJS, as an app would use it: gi://PortalKeyring, async/await
// through Gio._promisify, on a GLib main loop, against the private keyring.
//
//   GI_TYPELIB_PATH=build/gobject LD_LIBRARY_PATH=build/gobject gjs -m Tests/gobject/gjs_test.js
//
// One line a check ("ok    …" / "FAIL  …"); exits 1 when any failed.
import GLib from 'gi://GLib';
import Gio from 'gi://Gio';
import PortalKeyring from 'gi://PortalKeyring?version=1';
import System from 'system';

for (const name of ['restore_session', 'persist_session', 'clear_persisted_session'])
    Gio._promisify(PortalKeyring.Auth.prototype, `${name}_async`, `${name}_finish`);

let failed = 0;
const check = (ok, what) => {
    if (!ok) failed++;
    print(`${ok ? 'ok   ' : 'FAIL '} ${what}`);
};

const envId = `gjs-test-${new Date().getTime()}`;
const token = 'cst-gjs.Token_0123456789';

async function main() {
    // Bad arguments: a GError, caught as an exception.
    try {
        PortalKeyring.Auth.new('', 'myapp://auth', null);
        check(false, 'a blank auth environment id is refused');
    } catch (e) {
        check(e.matches(PortalKeyring.Error, PortalKeyring.Error.INVALID_ARGUMENT),
            `a blank auth environment id is refused: ${e.message}`);
    }
    const auth = PortalKeyring.Auth.new(envId, 'portalkeyring://auth/callback', null);
    check(auth.auth_environment_id === envId && auth.call_timeout_ms === 5000, 'construct properties read back');

    check(await auth.clear_persisted_session_async(null) === true, 'clear on a clean slate');
    const signedOut = await auth.restore_session_async(null);
    check(signedOut === null, 'restore when signed out resolves to null, no exception');

    const stored = await auth.persist_session_async('end-user-gjs', token, null);
    check(stored !== null && stored.end_user_id === 'end-user-gjs', 'persist returns the stored session');

    const restored = await auth.restore_session_async(null);
    check(restored !== null && restored.end_user_id === 'end-user-gjs' && restored.auth_environment_id === envId,
        'restore returns the persisted session');
    check(restored !== null && restored.client_id === null &&
        restored.account_abstraction === PortalKeyring.AccountAbstraction.DEFAULT,
        'a restored session knows no client id or account abstraction');
    check(restored !== null && restored.copy_token() === token, 'copy_token gives the token back byte-exact');

    try {
        await auth.persist_session_async('end-user-gjs', 'token with spaces', null);
        check(false, 'a token with spaces is refused');
    } catch (e) {
        check(e.matches(PortalKeyring.Error, PortalKeyring.Error.INVALID_ARGUMENT),
            `a token with spaces is refused: ${e.message}`);
    }

    const cancellable = new Gio.Cancellable();
    cancellable.cancel();
    try {
        await auth.restore_session_async(cancellable);
        check(false, 'a cancelled restore rejects');
    } catch (e) {
        check(e.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.CANCELLED), 'a cancelled restore rejects with CANCELLED');
    }

    check(await auth.clear_persisted_session_async(null) === true, 'clear');
    check(await auth.restore_session_async(null) === null, 'signed out after clear');
}

const loop = new GLib.MainLoop(null, false);
main().catch(e => {
    check(false, `unexpected exception: ${e}`);
}).finally(() => loop.quit());
loop.run();
print(`gjs_test: ${failed} failed`);
System.exit(failed ? 1 : 0);
