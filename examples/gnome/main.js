// main.js — a GTK 4 / libadwaita app over the GNOME API (PortalKeyring-1), in GJS: it restores the
// session on launch, shows a sign-in screen when signed out (an emailed magic link, then a TOTP
// code when the end user has one) and "Signed in as END_USER" with a Sign out button when signed
// in, and goes back to the sign-in screen when the Portal API rejects the session
// (PortalKeyring.Portal's session-invalidated) or another process signs out (PortalKeyring.Watch's
// changed). Nothing here blocks the main loop: every call is the _async form.
//
//   PORTAL_AUTH_ENVIRONMENT_ID=… PORTAL_MAGIC_LINK_FROM=login@example.com \
//   PORTAL_MAGIC_LINK_TEMPLATE=… gjs -m examples/gnome/main.js
//   gjs -m examples/gnome/main.js 'org.example.PortalKeyringDemo://auth?token=…'   # the link
//
// Configuration from the environment: PORTAL_AUTH_ENVIRONMENT_ID (required), PORTAL_API_HOST
// (default: Portal's), PORTAL_MAGIC_LINK_FROM and PORTAL_MAGIC_LINK_TEMPLATE (the magic link's
// sender and template). The link in the email opens the app's redirect URL
// (APP_ID://auth?token=…): the desktop starts `main.js URL` (the .desktop file's `Exec=… %u`),
// which hands the URL to the running instance's `open` (GApplication's single instance).
//
// GApplication actions (also for a test: `gapplication action org.example.PortalKeyringDemo NAME`):
// send-magic-link(s email), verify-totp(s code), check (GET /api/v3/clients/me with the session),
// sign-out, screenshot(s path: the window as a PNG), quit. Each state change prints one line on stdout:
// "state: signed-out", "state: totp-required", "state: signed-in END_USER"; and "invalidated" when
// the Portal API rejected the session.
import Adw from 'gi://Adw?version=1';
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';
import Graphene from 'gi://Graphene';
import Gtk from 'gi://Gtk?version=4.0';
import PortalKeyring from 'gi://PortalKeyring?version=1';
import System from 'system';

const APP_ID = 'org.example.PortalKeyringDemo';
const REDIRECT_URL = `${APP_ID}://auth`;

for (const name of ['restore_session', 'send_magic_link', 'handle_redirect', 'verify_totp',
    'clear_persisted_session'])
    Gio._promisify(PortalKeyring.Auth.prototype, `${name}_async`, `${name}_finish`);
Gio._promisify(PortalKeyring.Portal, 'new_async', 'new_finish');
Gio._promisify(PortalKeyring.Portal.prototype, 'request_async', 'request_finish');

const env = name => GLib.getenv(name) || null;

class Demo {
    constructor() {
        this.app = new Adw.Application({application_id: APP_ID, flags: Gio.ApplicationFlags.HANDLES_OPEN});
        this.app.connect('startup', () => this._startup());
        this.app.connect('activate', () => this.window.present());
        this.app.connect('open', (_app, files) => {
            this.window.present();
            for (const file of files)
                this._run(() => this._handleRedirect(file.get_uri()));
        });
        this.portal = this.endUserId = this.userJwt = null;
    }

    _startup() {
        this.auth = new PortalKeyring.Auth({
            auth_environment_id: env('PORTAL_AUTH_ENVIRONMENT_ID') ?? '', redirect_url: REDIRECT_URL,
            api_host: env('PORTAL_API_HOST'), magic_link_from_email: env('PORTAL_MAGIC_LINK_FROM'),
            magic_link_template_id: env('PORTAL_MAGIC_LINK_TEMPLATE'),
        });
        this.auth.init(null); // a missing or blank setting throws here, naming it
        this._buildWindow();
        this._addActions();
        // Start the watch, then restore: a sign-in between the two is seen by one or the other.
        this.watch = PortalKeyring.Watch.new(this.auth);
        this.watch.connect('changed', (_w, event, endUserId) => this._onWatch(event, endUserId));
        this._run(() => this._restore());
    }

    _buildWindow() {
        const box = children => {
            const b = new Gtk.Box({orientation: Gtk.Orientation.VERTICAL, spacing: 12, margin_start: 36,
                margin_end: 36});
            children.forEach(child => b.append(child));
            return b;
        };
        const button = (label, action, style) => {
            const b = new Gtk.Button({label, action_name: action, halign: Gtk.Align.CENTER});
            b.add_css_class(style);
            b.add_css_class('pill');
            return b;
        };

        this.email = new Gtk.Entry({placeholder_text: 'you@example.com', input_purpose: Gtk.InputPurpose.EMAIL});
        const send = button('Email me a sign-in link', null, 'suggested-action');
        send.connect('clicked', () => this.app.activate_action('send-magic-link',
            new GLib.Variant('s', this.email.text.trim().toLowerCase())));
        this.hint = new Gtk.Label({wrap: true, css_classes: ['dim-label']});
        const signIn = new Adw.StatusPage({icon_name: 'dialog-password-symbolic', title: 'Sign in',
            description: 'We email you a link that signs you in on this computer.'});
        signIn.set_child(box([this.email, send, this.hint]));

        this.code = new Gtk.Entry({placeholder_text: '123456', input_purpose: Gtk.InputPurpose.PIN, max_length: 6});
        const verify = button('Verify', null, 'suggested-action');
        verify.connect('clicked', () => this.app.activate_action('verify-totp', new GLib.Variant('s', this.code.text.trim())));
        const totp = new Adw.StatusPage({icon_name: 'dialog-password-symbolic', title: 'Two-factor code',
            description: 'Enter the 6-digit code from your authenticator app.'});
        totp.set_child(box([this.code, verify]));

        this.signedIn = new Adw.StatusPage({icon_name: 'emblem-ok-symbolic', title: 'Signed in'});
        this.status = new Gtk.Label({css_classes: ['dim-label']});
        this.signedIn.set_child(box([button('Check the session', 'app.check', 'flat'), this.status,
            button('Sign out', 'app.sign-out', 'destructive-action')]));

        this.stack = new Gtk.Stack({transition_type: Gtk.StackTransitionType.CROSSFADE});
        this.stack.add_named(new Gtk.Spinner({spinning: true, halign: Gtk.Align.CENTER}), 'loading');
        this.stack.add_named(signIn, 'signed-out');
        this.stack.add_named(totp, 'totp-required');
        this.stack.add_named(this.signedIn, 'signed-in');
        const content = new Gtk.Box({orientation: Gtk.Orientation.VERTICAL});
        content.append(new Adw.HeaderBar({title_widget: new Adw.WindowTitle({title: 'Portal Keyring Demo'})}));
        this.stack.vexpand = true;
        content.append(this.stack);
        this.window = new Adw.ApplicationWindow({application: this.app, content, default_width: 520,
            default_height: 600});
    }

    _addActions() {
        const add = (name, type, handler) => {
            const action = new Gio.SimpleAction({name, parameter_type: type ? new GLib.VariantType(type) : null});
            action.connect('activate', (_a, parameter) => this._run(() => handler(parameter?.unpack())));
            this.app.add_action(action);
        };
        add('send-magic-link', 's', async email => {
            await this.auth.send_magic_link_async(email, null);
            this.hint.label = `Open the link we sent to ${email}.`;
            print(`sent: ${email}`);
        });
        add('verify-totp', 's', async code => {
            const session = await this.auth.verify_totp_async(code, this.userJwt, null);
            this.userJwt = null;
            await this._signedIn(session);
        });
        add('check', null, async () => {
            if (!this.portal)
                return;
            const [, status] = await this.portal.request_async('GET', '/api/v3/clients/me', null, null);
            this.status.label = `The Portal API answered HTTP ${status}.`;
            print(`check: HTTP ${status}`);
        });
        add('sign-out', null, async () => {
            await this.auth.clear_persisted_session_async(null);
            this._signedOut();
        });
        add('screenshot', 's', path => this._screenshot(path));
        add('quit', null, () => this.app.quit());
    }

    // Runs an async step; an error is shown and printed, never a sign-out.
    _run(step) {
        Promise.resolve().then(step).catch(e => {
            this.hint.label = this.status.label = e.message;
            printerr(`error: ${e.message}`);
        });
    }

    _show(state, line = state) {
        this.stack.visible_child_name = state;
        print(`state: ${line}`);
    }

    async _restore() {
        const session = await this.auth.restore_session_async(null); // null: signed out
        if (session)
            await this._signedIn(session);
        else
            this._signedOut();
    }

    async _handleRedirect(url) {
        const result = await this.auth.handle_redirect_async(url, PortalKeyring.RedirectFlags.NONE, null);
        if (result.kind === PortalKeyring.RedirectKind.TOTP_REQUIRED) {
            this.userJwt = result.copy_user_jwt();
            this._show('totp-required');
        } else if (result.kind === PortalKeyring.RedirectKind.AUTHENTICATED) {
            await this._signedIn(result.session); // persisted already
        }
    }

    async _signedIn(session) {
        const endUserId = session.end_user_id;
        if (this.endUserId === endUserId) // the watch reports the app's own sign-in too
            return;
        this.endUserId = endUserId;
        const portal = await PortalKeyring.Portal.new_async(session, null); // validates the session
        if (this.endUserId !== endUserId) // signed out meanwhile
            return;
        portal.connect('session-invalidated', () => this._invalidated());
        this.portal = portal;
        if (portal.invalidated) { // rejected while validating: the signal ran before the connect
            this._invalidated();
            return;
        }
        this.signedIn.description = `Signed in as ${endUserId}`;
        this.status.label = '';
        this._show('signed-in', `signed-in ${endUserId}`);
    }

    _signedOut(why = '') {
        this.portal = this.endUserId = null;
        this.hint.label = why;
        if (this.stack.visible_child_name !== 'signed-out')
            this._show('signed-out');
    }

    // The Portal API rejected the session (a 401): the library deleted it from the keyring already.
    _invalidated() {
        print('invalidated');
        this._signedOut('Your session has ended. Sign in again.');
    }

    _onWatch(event, endUserId) {
        const Event = PortalKeyring.WatchEvent;
        if (event === Event.SIGNED_OUT)
            this._signedOut();
        else if (event === Event.RESYNC || event === Event.LOCKED ||
                 (event === Event.SIGNED_IN && this.endUserId !== endUserId))
            this._run(() => this._restore());
    }

    // The window as it draws itself (no screen grab, no compositor), once the stack's crossfade ended.
    _screenshot(path) {
        if (this.stack.transition_running) {
            GLib.timeout_add(GLib.PRIORITY_DEFAULT, 50, () => this._run(() => this._screenshot(path)));
            return;
        }
        const [width, height] = [this.window.get_width(), this.window.get_height()];
        const snapshot = new Gtk.Snapshot();
        new Gtk.WidgetPaintable({widget: this.window}).snapshot(snapshot, width, height);
        const texture = this.window.get_renderer().render_texture(snapshot.to_node(),
            new Graphene.Rect({origin: new Graphene.Point({x: 0, y: 0}), size: new Graphene.Size({width, height})}));
        texture.save_to_png(path);
        print(`screenshot: ${path}`);
    }
}

System.exit(new Demo().app.run([System.programInvocationName, ...ARGV]));
