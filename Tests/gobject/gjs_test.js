// gjs_test.js — the GNOME API from GJS, as an app would use it: gi://PortalKeyring, async/await
// through Gio._promisify, on a GLib main loop, against the private keyring.
//
//   GI_TYPELIB_PATH=build/gobject LD_LIBRARY_PATH=build/gobject gjs -m Tests/gobject/gjs_test.js
//
// Then a TOTP sign-in against the fake Portal API of scripts/with-portal-api.sh.
// One line a check ("ok    …" / "FAIL  …"); exits 1 when any failed.
import GLib from 'gi://GLib';
import Gio from 'gi://Gio';
import PortalKeyring from 'gi://PortalKeyring?version=1';
import System from 'system';

for (const name of ['restore_session', 'persist_session', 'clear_persisted_session', 'get_methods',
    'send_magic_link', 'handle_redirect', 'verify_totp'])
    Gio._promisify(PortalKeyring.Auth.prototype, `${name}_async`, `${name}_finish`);
Gio._promisify(PortalKeyring.Portal, 'new_async', 'new_finish');
Gio._promisify(PortalKeyring.Portal.prototype, 'request_async', 'request_finish');

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
    await signIn();
}

// A TOTP sign-in against the fake Portal API (scripts/with-portal-api.sh): a grant minted by its
// admin API, handle_redirect, a wrong code, the right one, the session a restore finds.
function adminData(method, path, body) {
    const script = 'import json,sys,urllib.request as u; b=sys.argv[3].encode() or None; ' +
        "r=u.Request(sys.argv[1]+sys.argv[2], data=b, method=sys.argv[4], headers={'Content-Type':'application/json'}); " +
        "print(json.dumps(json.load(u.urlopen(r))['data']))";
    const python = Gio.Subprocess.new(['python3', '-c', script, GLib.getenv('PORTAL_TEST_API_URL'), path, body ?? '',
        method], Gio.SubprocessFlags.STDOUT_PIPE);
    const [, out] = python.communicate_utf8(null, null);
    return JSON.parse(out);
}

async function signIn() {
    const signer = new PortalKeyring.Auth({
        auth_environment_id: envId, redirect_url: 'portalkeyring://auth/callback',
        api_host: GLib.getenv('PORTAL_TEST_API_HOST'),
    });
    signer.init(null);
    const [methods, autoCreateWallet] = await signer.get_methods_async(null);
    check(methods.includes('EMAIL_MAGIC_LINK') && autoCreateWallet === true, `get_methods: ${methods}`);
    try {
        await signer.send_magic_link_async('someone@example.com', null);
        check(false, 'send_magic_link without a configuration rejects');
    } catch (e) {
        check(e.matches(PortalKeyring.Error, PortalKeyring.Error.MAGIC_LINK_NOT_CONFIGURED),
            `send_magic_link without a configuration rejects: ${e.message}`);
    }
    const endUser = `end-user-gjs-totp-${new Date().getTime()}`;
    const grant = adminData('POST', '/_admin/grants', JSON.stringify({
        kind: 'magic_link', endUserId: endUser, totpRequired: true, redirectUrl: 'portalkeyring://auth/callback',
    }));
    const step = await signer.handle_redirect_async(grant.redirectUrl,
        PortalKeyring.RedirectFlags.ALLOW_UNSOLICITED, null);
    check(step.kind === PortalKeyring.RedirectKind.TOTP_REQUIRED && step.session === null,
        'handle_redirect of a TOTP grant asks for the code');
    const jwt = step.copy_user_jwt();
    check(step.copy_totp_link()?.startsWith('otpauth://'), 'the enrolment link comes with the first TOTP step');
    const {code} = adminData('GET', `/_admin/totp?endUserId=${endUser}`);
    try {
        await signer.verify_totp_async(code === '000000' ? '111111' : '000000', jwt, null);
        check(false, 'a wrong TOTP code rejects');
    } catch (e) {
        check(e.matches(PortalKeyring.Error, PortalKeyring.Error.AUTHENTICATION_FAILED), 'a wrong TOTP code rejects');
    }
    const session = await signer.verify_totp_async(code, jwt, null);
    check(session.end_user_id === endUser && session.client_id !== null, 'verify_totp signs the end user in');
    const restored = await signer.restore_session_async(null);
    check(restored?.end_user_id === endUser, 'restore finds the signed-in session');
    check(await signer.clear_persisted_session_async(null) === true, 'clear after the sign-in');
}

// The fake Portal API's admin routes (Tests/gobject/fake_api_admin.py): the data.token answered.
function admin(method, path, body = null) {
    const argv = ['python3', 'Tests/gobject/fake_api_admin.py', method, path, ...body ? [body] : []];
    const [, out] = GLib.spawn_sync(null, argv, null, GLib.SpawnFlags.SEARCH_PATH, null);
    return new TextDecoder().decode(out).trim();
}

const sleep = ms => new Promise(resolve => GLib.timeout_add(GLib.PRIORITY_DEFAULT, ms, () => {
    resolve();
    return GLib.SOURCE_REMOVE;
}));

// A session the fake API knows, persisted and restored through an auth on that API.
async function storedSession(auth, user) {
    const cst = admin('POST', '/_admin/sessions', JSON.stringify({endUserId: user}));
    await auth.persist_session_async(user, cst, null);
    return [await auth.restore_session_async(null), cst];
}

// The Portal: a request, a 401 invalidating once, a late handler, a cancel, no reference cycle.
async function portal() {
    const auth = PortalKeyring.Auth.new(`${envId}-portal`, 'portalkeyring://auth/callback',
        GLib.getenv('PORTAL_TEST_API_HOST'));
    const [session, cst] = await storedSession(auth, 'end-user-gjs-portal');
    const valid = await PortalKeyring.Portal.new_async(session, null);
    check(!valid.invalidated && valid.session === session, 'a valid session makes a portal, not invalidated');
    let signals = 0;
    valid.connect('session-invalidated', () => signals++);
    const [body, status] = await valid.request_async('GET', '/api/v3/clients/me', null, null);
    check(status === 200 && new TextDecoder().decode(body.toArray()).includes('end-user-gjs-portal'),
        `request answers 200 with the client (status ${status})`);

    admin('POST', '/_admin/faults', JSON.stringify({route: '/api/v3/clients/me', delayMs: 5000}));
    const cancellable = new Gio.Cancellable();
    GLib.timeout_add(GLib.PRIORITY_DEFAULT, 100, () => cancellable.cancel());
    const start = GLib.get_monotonic_time();
    try {
        await valid.request_async('GET', '/api/v3/clients/me', null, cancellable);
        check(false, 'a cancelled request rejects');
    } catch (e) {
        const ms = (GLib.get_monotonic_time() - start) / 1000;
        check(e.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.CANCELLED) && ms < 1000,
            `a cancelled request rejects with CANCELLED at once (${ms.toFixed(0)} ms, the API delays 5 s)`);
    }
    admin('DELETE', '/_admin/faults');

    admin('POST', '/_admin/revoke', JSON.stringify({token: cst}));
    const [, rejected] = await valid.request_async('GET', '/api/v3/clients/me', null, null);
    await sleep(1000);
    check(rejected === 401 && signals === 1 && valid.invalidated,
        `a 401 emits session-invalidated exactly once (${signals}) and sets invalidated`);
    try {
        await valid.request_async('GET', '/api/v3/clients/me', null, null);
        check(false, 'a request after invalidation rejects');
    } catch (e) {
        check(e.matches(PortalKeyring.Error, PortalKeyring.Error.SESSION_INVALIDATED) && signals === 1,
            'a request after invalidation rejects with SESSION_INVALIDATED, no second signal');
    }
    // Collected first: the GAsyncResults JS still wraps hold their source object.
    System.gc();
    await sleep(100);
    check(System.refcount(valid) === 1,
        `the portal is held by nothing but its JS wrapper (${System.refcount(valid)}): no cycle`);

    const [revoked, revokedCst] = await storedSession(auth, 'end-user-gjs-portal');
    admin('POST', '/_admin/revoke', JSON.stringify({token: revokedCst}));
    const late = await PortalKeyring.Portal.new_async(revoked, null);
    let lateSignals = 0;
    late.connect('session-invalidated', () => lateSignals++);
    await sleep(500);
    check(late.invalidated && lateSignals === 0,
        'a handler connected after construction rejected the session reads invalidated (no replay)');
    System.gc();
    await sleep(100);
    check(System.refcount(late) === 1,
        `the rejected portal is held by nothing but its JS wrapper (${System.refcount(late)})`);
    await auth.clear_persisted_session_async(null);
}

const loop = new GLib.MainLoop(null, false);
main().then(portal).catch(e => {
    check(false, `unexpected exception: ${e}`);
}).finally(() => loop.quit());
loop.run();
print(`gjs_test: ${failed} failed`);
System.exit(failed ? 1 : 0);
