// gnome_app.js — the install test's GJS program: gi://PortalKeyring from the installed typelib.
//
//   GI_TYPELIB_PATH=PREFIX/lib/girepository-1.0 gjs -m gnome_app.js ENV_ID END_USER
//
// A blank auth environment id throws PortalKeyring.Error.INVALID_ARGUMENT; then a restore of
// ENV_ID (persisted by app.c) gives END_USER's session. Exits 1 when either does not hold.
import PortalKeyring from 'gi://PortalKeyring?version=1';
import System from 'system';

const [envId, user] = ARGV;
let code = null;
try {
    PortalKeyring.Auth.new('', 'portal-install-test://auth/callback', null);
} catch (e) {
    if (e.matches(PortalKeyring.Error, PortalKeyring.Error.INVALID_ARGUMENT))
        code = e.code;
}
const auth = PortalKeyring.Auth.new(envId, 'portal-install-test://auth/callback', null);
const session = auth.restore_session_sync(null);
print(`blank id: error code ${code}; restored ${session?.end_user_id ?? 'nothing'}`);
System.exit(code === PortalKeyring.Error.INVALID_ARGUMENT && session?.end_user_id === user ? 0 : 1);
