/*
 * portal_keyring.h — the C ABI of portal-keyring (libportal-keyring.so).
 *
 * portal-keyring keeps a Portal end user's Client Session Token (CST) in the user's Secret
 * Service keyring (GNOME Keyring, KWallet, KeePassXC), restores it on the next launch without a
 * network call, and clears it on sign-out. It speaks the Secret Service D-Bus API itself (GDBus,
 * on a session-bus connection of its own, with an encrypted transfer session on libgcrypt), so
 * it never shares or alters the application's bus connection or libsecret state.
 *
 * Conventions (all functions):
 *
 *  - Status: fallible functions return a portal_status; PORTAL_OK is 0. Outputs are written only
 *    on success. After a failure, portal_last_error_message() gives a human-readable detail for
 *    the calling thread. Messages never contain a token.
 *  - Outputs (out, *_out): required only where the output is what the call is for: the handle
 *    a constructor creates (portal_auth_new(), portal_new(), portal_new_with_api_key(),
 *    portal_completion_queue_new_*(), portal_auth_watch()) and the value a read or getter returns
 *    (a restored session, a copied token, a URL, an end user id, a secret, the QR modules, the
 *    sign-in methods); NULL there is PORTAL_ERR_INVALID_ARGUMENT. Every other output is optional
 *    and marked "optional": the extra outputs of those calls, and every output of a call made for
 *    its effect (persisting, signing in, sending a request, registering a listener, starting an
 *    operation, dispatching). NULL there means "not wanted": the call does the same work, writes
 *    nothing there, and frees what it would have handed over.
 *  - Strings in: borrowed, NUL-terminated UTF-8, read only during the call. NULL, invalid UTF-8,
 *    blank (for identifiers and tokens) or oversized strings give PORTAL_ERR_INVALID_ARGUMENT.
 *  - Strings out: either borrowed from a handle (documented per function, valid until that handle
 *    is freed) or owned by the caller and released with portal_string_free(), which wipes them.
 *    Never free() library memory.
 *  - Handles: opaque; created by *_new / returned by calls, released by the matching *_free.
 *    *_free(NULL) is a no-op. A handle must not be used after it is freed. As a safety net the
 *    library remembers the handles and caller-owned strings it has handed out: a second *_free or
 *    portal_string_free() of the same pointer, or of a pointer it never returned, is ignored; a
 *    freed handle, or a handle of another kind, passed to any other function gives
 *    PORTAL_ERR_INVALID_ARGUMENT (accessors returning a string give NULL). Still undefined: once
 *    the allocator reuses a freed address for a new handle of the same kind (or a new string), a
 *    stale pointer to it reaches the new object; and freeing a handle while another thread is in
 *    a call with it.
 *  - Threads: every function may be called from any thread. Handles may be shared between
 *    threads. portal_last_error_message() is per thread.
 *  - Non-blocking variants (*_async, section "Non-blocking calls") of the keyring and Portal
 *    calls never block and complete on the caller's GLib main context or on a pollable fd.
 *  - Blocking: every function says in one sentence how long it can block the calling thread at
 *    worst ("Worst case: …"). "Never blocks" means no I/O and no waiting for another thread,
 *    beyond the library's short internal locks (user code it is documented to run on the calling
 *    thread, such as a destroy_notify, takes what it takes). The bounds named there:
 *      - the call deadline: the provider calls, Secret portal calls and keyring-file work of one
 *        keyring operation together (a restore, a persist, a delete; in a Flatpak sandbox the
 *        move of the host's session included). Default 5000 ms; portal_auth_set_keyring_timeouts().
 *      - the prompt deadline: one provider prompt (an unlock; with KeePassXC also the
 *        confirmation it shows for each item stored or deleted), including a wait for another
 *        thread's prompt to end. Default 30000 ms. Not counted against the call deadline.
 *      - the keyring bound of one operation: its call deadline plus the prompt deadline for each
 *        prompt the provider shows (no prompt: the call deadline alone).
 *      - the persist turn: persists of one auth environment take turns, across this user's
 *        threads (in arrival order) and processes (a file lock in the library's private
 *        directory). A persist queued behind another waits for its turn at most one call
 *        deadline (default 5000 ms), not counted against its own call deadline, which then
 *        still bounds its own work; past that wait (the other persist is at a prompt) it runs
 *        without its turn, and the store order alone decides which of the two sign-ins stays.
 *        So a persist blocks at most two call deadlines (default 10000 ms) plus the prompt
 *        deadline for each prompt shown.
 *      - an HTTP request: 10 s to connect, 30 s in all (section "portal" below).
 *    A prompt not answered in time is left open, never dismissed; a later call in the same
 *    process waits for that prompt instead of opening another. Do not call keyring functions
 *    from a GUI thread if a prompt may appear: use their *_async variants there.
 *  - Connection: the library keeps its own session-bus connection (not GLib's shared one), so a
 *    restarted bus or Secret Service provider is reconnected on the next call and never
 *    terminates the host process.
 *  - PORTAL_ERR_SESSION_STORAGE messages start with one of the prefixes listed under "Storage
 *    failure messages" below. None of them deletes anything or means signed out; a locked
 *    keyring is never reported as "nothing stored".
 *  - Prompts: every prompt a provider returns (unlock, and KeePassXC's for each store and delete)
 *    is run with an empty window id, under the prompt deadline.
 *  - fork(): a child of a process that has used the library (or any GLib D-Bus connection) cannot
 *    use D-Bus; its keyring calls fail at once with PORTAL_ERR_SESSION_STORAGE naming fork().
 *    A child of a process that has not works normally. Call the library after exec instead.
 *  - Nothing aborts, traps or unwinds across this boundary.
 *
 * Storage (docs/storage.md#the-item): one item per auth environment in the default collection, schema
 * "io.portalhq.PortalKeyring.Session", attributes auth_environment_id, session_generation
 * (random 128-bit hex) and persisted_at (microseconds since the epoch); the secret is one line of
 * printable ASCII, "portal-keyring-session/2 e=<auth environment> u=<end user id> g=<generation>
 * t=<persisted_at> c=<CST>" (e, u, c in base64url without padding), content type
 * application/octet-stream, so no provider rewrites it (no backslash, tab or line end; not a
 * text/plain subtype). The JSON document of 0.1.0 ({"clientSessionToken":…,"endUserId":…,"v":1})
 * is still read and rewritten at the next persist. Before an item is deleted or restored, its
 * xdg:schema and auth_environment_id are confirmed (a version-2 document names its auth
 * environment). Nothing secret is stored in attributes or the label.
 *
 * Storage backends (docs/flatpak.md#where-sessions-are-kept, docs/storage.md#the-file-keyring-storage-override).
 * Where a portal_auth keeps sessions is decided from the environment when portal_auth_new() makes it:
 *  - Outside a Flatpak sandbox: the Secret Service (org.freedesktop.secrets on the session bus).
 *  - Inside one (/.flatpak-info exists), as libsecret decides there: the first keyring operation
 *    of the process asks the Secret portal (org.freedesktop.portal.Secret) for its version,
 *    within that operation's call deadline, and the answer holds for the life of the process.
 *    Version 1: the file keyring at $XDG_DATA_HOME/keyrings/default.keyring (in the sandbox
 *    ~/.var/app/APP_ID/data/keyrings/; $HOME/.local/share/keyrings/ when XDG_DATA_HOME is not an
 *    absolute path), in libsecret's file format, keyed by the master secret the portal hands
 *    out for the app. Another version, or a portal without the Secret interface: the Secret
 *    Service, as outside (the app needs --talk-name=org.freedesktop.secrets). A portal that
 *    cannot be asked (not running, no answer) fails that operation ("Secret portal: …") and is
 *    asked again at the next one, so sessions never go to one keyring for a while and to the
 *    other later. When neither XDG_DATA_HOME nor HOME is an absolute path, every keyring call
 *    fails with "keyring backend misconfigured: …".
 *  - Host-keyring migration (file keyring only): before the first operation on the file for an
 *    auth environment, while the sandbox still reaches the host's Secret Service (an earlier
 *    release of the app stored its session there), the newest sign-in stored on the host is
 *    written into the file and read back, the host items that were read are deleted, and the
 *    move is recorded in the file; once recorded it never runs again for that file and auth
 *    environment. A host sign-in of an end user other than the file's stays on the host. A host
 *    that cannot be reached has nothing to move. The move runs inside the operation that needed
 *    it, under that operation's call deadline: one it cuts short, or a failed step, fails that
 *    operation with nothing lost ("file keyring …" or the host's own message), and the next
 *    call goes on from there.
 *  - PORTAL_KEYRING_BACKEND, for tests and unusual setups, overrides the choice: unset or empty,
 *    the choice above; "secret-service", the Secret Service, also in a sandbox;
 *    "file:/absolute/path/default.keyring", that file keyring, keyed by the master secret in the
 *    file PORTAL_KEYRING_MASTER_SECRET_FILE names (an absolute path to a regular file of this
 *    user, mode 0600 or stricter, 1 to 4096 bytes, read each time a key must be derived) or,
 *    with that variable unset, by the Secret portal's. Any other value, or a master secret
 *    variable that is not an absolute path: every keyring call fails with "keyring backend
 *    misconfigured: …" naming the variable; never a silent fall back to another keyring.
 * portal_auth_watch() follows the same choice: the Secret Service's signals, or changes of the
 * keyring file.
 *
 * Storage failure messages: the message of PORTAL_ERR_SESSION_STORAGE starts with one of these
 * prefixes (N is a deadline in milliseconds). What it means; what the app does:
 *  - "Secret Service unavailable: no session bus: …", "Secret Service unavailable: …": no session
 *    bus, or no provider owns org.freedesktop.secrets (not installed, not started, crashed);
 *    in a fork() child of a process that used D-Bus, the message names fork(). Offer a retry
 *    (the next call reconnects); in a fork() child, call the library after exec.
 *  - "Secret Service did not answer <operation> within N ms": the provider was too slow. Retry;
 *    on slow machines raise the call deadline (portal_auth_set_keyring_timeouts()).
 *  - "<operation> did not finish within N ms: reading the stored items took the rest of the
 *    deadline …": the provider answered, but reading what it handed out used up the call
 *    deadline. As the previous one.
 *  - "keyring locked: …": the collection or item is locked and the unlock prompt was dismissed,
 *    could not be shown, or was not answered within N ms. Ask the end user to unlock the
 *    keyring, then retry (the retry prompts again).
 *  - "keyring refused: …": the provider's confirmation prompt for storing or deleting the item
 *    was dismissed or not answered (KeePassXC asks for every store and delete). Tell the end
 *    user; retry only when they ask.
 *  - "no default keyring: …": the Secret Service has no collection with the alias "default".
 *    The end user creates or chooses a default keyring (for example in Seahorse); then retry.
 *  - "Secret Service error: …": any other provider error, its text quoted. Show it; retry later.
 *  - "another sign-in was stored at the same moment and replaced this one: …": a persist (or
 *    the persist of a sign-in) lost to a sign-in stored at the same moment by another thread or
 *    process; the other one is the stored session. Do not persist again: restore to get it.
 *  - "file keyring …": the file keyring could not be used this time — its lock was not given
 *    within N ms, the operation ran out of time or was cancelled (nothing was written or
 *    deleted), the file cannot be accessed or is not a keyring file this library can read (it is
 *    left as it is), items of this schema do not open under the app's key, its key could not
 *    be derived, the watch cannot watch it, or the host's session could not be moved into it.
 *    Retry for the time-outs; a file that cannot be read needs the end user (or the app's
 *    support) to repair or move it.
 *  - "Secret portal: …": in a sandbox, the Secret portal could not be asked or could not hand
 *    out the app's master secret: not reachable, no answer within N ms, or the request was
 *    cancelled or refused (for example the host's keyring is locked and nobody unlocked it).
 *    Nothing was read or deleted. Retry later; the portal (xdg-desktop-portal) must be running.
 *  - "keyring backend misconfigured: …": PORTAL_KEYRING_BACKEND or
 *    PORTAL_KEYRING_MASTER_SECRET_FILE names no usable storage, its master secret file is not
 *    as required, or in a sandbox no data directory is known (see "Storage backends"). Not
 *    retryable: fix the environment.
 *  - "pending sign-in marker: …" (portal_auth_send_magic_link(), portal_auth_login_with_google()
 *    / _apple() and the desktop sign-ins only): the marker file could not be written; nothing
 *    was sent. Check $XDG_RUNTIME_DIR / $XDG_STATE_HOME; retry.
 *  - "no encrypted transfer session: libgcrypt is not usable" (portal_auth_verify_totp() only):
 *    no code was sent. Install libgcrypt (Debian: libgcrypt20).
 */
#ifndef PORTAL_KEYRING_H
#define PORTAL_KEYRING_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define PORTAL_API __attribute__((visibility("default")))
#else
#define PORTAL_API
#endif

/* ---------------------------------------------------------------------------------------------
 * Versions
 * ------------------------------------------------------------------------------------------- */

/** Version of the header. PORTAL_KEYRING_VERSION_NUMBER is MAJOR*1000000 + MINOR*1000 + PATCH. */
#define PORTAL_KEYRING_VERSION_MAJOR 0
#define PORTAL_KEYRING_VERSION_MINOR 1
#define PORTAL_KEYRING_VERSION_PATCH 0
#define PORTAL_KEYRING_VERSION_NUMBER 1000
#define PORTAL_KEYRING_VERSION_STRING "0.1.0"

/**
 * The version of the loaded library, as MAJOR*1000000 + MINOR*1000 + PATCH. Compare with
 * PORTAL_KEYRING_VERSION_NUMBER to detect a header/library mismatch. Thread-safe.
 * Worst case: never blocks.
 */
PORTAL_API uint32_t portal_keyring_version_number(void);

/**
 * The version of the loaded library as a static string such as "0.1.0"; never NULL, not freed.
 * Worst case: never blocks.
 */
PORTAL_API const char *portal_keyring_version(void);

/* ---------------------------------------------------------------------------------------------
 * Status codes and errors
 * ------------------------------------------------------------------------------------------- */

/** Result of a fallible call. New codes may be added; treat unknown non-zero codes as errors. */
typedef enum portal_status {
    /** Success. */
    PORTAL_OK = 0,
    /** An argument was NULL, blank, not UTF-8, too long or otherwise rejected; nothing was done. */
    PORTAL_ERR_INVALID_ARGUMENT = 1,
    /**
     * The Secret Service could not be used this time: no session bus, no provider, the collection
     * is locked and was not unlocked, the prompt was dismissed, the provider did not answer within
     * the deadline, or there is no default collection; from the sign-in starters, also: the pending
     * sign-in marker could not be written. This is never "signed out", and nothing was deleted.
     * The message says which.
     */
    PORTAL_ERR_SESSION_STORAGE = 2,
    /** The session was invalidated; its token is gone. */
    PORTAL_ERR_SESSION_INVALIDATED = 3,
    /** The Portal API rejected the credential (HTTP 401). */
    PORTAL_ERR_UNAUTHORIZED = 4,
    /** The Portal API could not be reached, timed out or answered with an unexpected response. */
    PORTAL_ERR_NETWORK = 5,
    /** An internal error (for example out of memory). */
    PORTAL_ERR_INTERNAL = 6,
    /** The Portal API answered HTTP 429 (too many requests); try again later. Portal's magic-link
     * limit is per address per minute and comes without a Retry-After header: the message is then
     * "rate limited by the Portal API; retry later". When a Retry-After is sent, the message is
     * "…; retry after N s" with N its whole seconds (delta-seconds, or an HTTP-date converted).
     * Never retried automatically. */
    PORTAL_ERR_RATE_LIMITED = 7,
    /** The Portal API's response lacked a required field; the message names it. */
    PORTAL_ERR_MALFORMED_RESPONSE = 8,
    /** A sign-in grant was rejected: already used, expired or unknown. Start the sign-in again. */
    PORTAL_ERR_INVALID_GRANT = 9,
    /** The user JWT of a TOTP verification was rejected (expired, used, malformed). */
    PORTAL_ERR_INVALID_USER_JWT = 10,
    /** Sign-in failed: an error redirect (or one without a token or known method), or a wrong
     * TOTP code. HTTP 5xx and other refusals have their own codes (PORTAL_ERR_SERVER,
     * PORTAL_ERR_REQUEST_REFUSED). */
    PORTAL_ERR_AUTHENTICATION_FAILED = 11,
    /**
     * portal_auth_handle_redirect() refused a redirect that no sign-in asked for: no
     * portal_auth_send_magic_link() / portal_auth_login_with_google() / _apple() for this auth
     * environment by this user (any process) in the last 15 minutes, or that sign-in completed
     * already. Nothing was exchanged or stored (login CSRF, docs/sign-in.md#redirect-hijacking).
     */
    PORTAL_ERR_UNSOLICITED_REDIRECT = 12,
    /**
     * portal_auth_handle_redirect() signed in an end user other than the one whose session is
     * stored: nothing was stored. Confirm with portal_auth_handle_redirect_v2() and
     * PORTAL_REDIRECT_REPLACE_END_USER (same handle and URL: no second exchange).
     */
    PORTAL_ERR_DIFFERENT_END_USER = 13,
    /** A non-blocking operation was cancelled with portal_operation_cancel() before it completed. */
    PORTAL_ERR_CANCELLED = 14,
    /** portal_auth_send_magic_link(): the handle has no magic-link sender and template (Portal
     * requires both): call portal_auth_set_magic_link() first. Nothing was sent or recorded. */
    PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED = 15,
    /** portal_auth_login_with_google() / _apple(): the auth environment has not enabled that
     * provider. Not retryable; see portal_auth_get_methods(). */
    PORTAL_ERR_AUTH_METHOD_UNAVAILABLE = 16,
    /** HTTP 400 from the magic-link or OAuth URL request: the account abstraction asked for
     * with portal_auth_set_account_abstraction() is not available for this auth environment.
     * The message is the server's text (at most 200 characters, control characters removed). */
    PORTAL_ERR_ACCOUNT_ABSTRACTION_UNAVAILABLE = 17,
    /** The Portal API answered HTTP 5xx: a server-side failure, not a failed sign-in (a sign-in
     * grant stays usable); try again later. The message names the status. */
    PORTAL_ERR_SERVER = 18,
    /** The Portal API refused the request with a 4xx status other than 401 and 429 (403, 400,
     * 404 …): a configuration or request problem, not a failed sign-in. The message names the
     * status and the server's text. */
    PORTAL_ERR_REQUEST_REFUSED = 19,
    /**
     * No QR code could be made of a TOTP enrolment link (portal_totp_qr_code()): it is not an
     * otpauth:// link with a valid base32 secret, it is too long for a QR code, or libqrencode
     * (Debian: libqrencode4) is not installed.
     */
    PORTAL_ERR_TOTP_QR_UNAVAILABLE = 20,
    /** portal_auth_sign_in_with_google() / _apple() (and _async): a desktop sign-in of this auth
     * environment is already waiting in this process. Returned at once; nothing was done. */
    PORTAL_ERR_SIGN_IN_IN_PROGRESS = 21,
    /** portal_auth_sign_in_with_google() / _apple(): the desktop could not open the sign-in page
     * (no application registered for its URL scheme and no OpenURI portal, or the browser failed
     * to start). The message gives the reason and the scheme, never the URL. Nothing persisted. */
    PORTAL_ERR_SIGN_IN_UNAVAILABLE = 22,
    /** portal_auth_sign_in_with_google() / _apple(): no redirect came back within the timeout.
     * Nothing was persisted by the call. */
    PORTAL_ERR_SIGN_IN_TIMED_OUT = 23
} portal_status;

/**
 * A static, human-readable name for a status code ("ok", "invalid argument", …); never NULL,
 * not freed. Unknown codes give "unknown status". Thread-safe.
 * Worst case: never blocks.
 */
PORTAL_API const char *portal_status_str(portal_status status);

/**
 * The detail of the last failure on the calling thread, or "" when the last call on this thread
 * succeeded. portal_status_str(), portal_last_error_message() and the version functions never
 * change it, so `portal_status_str(st), portal_last_error_message()` in one expression is fine. Never NULL. The string is owned by the library and valid until the next library call
 * on the same thread; copy it to keep it. Never contains a token, nor control characters (C0,
 * DEL, C1: text from a server, D-Bus or a redirect URL is stripped of them), so it is safe to
 * print to a terminal.
 * Worst case: never blocks.
 */
PORTAL_API const char *portal_last_error_message(void);

/* ---------------------------------------------------------------------------------------------
 * Strings returned to the caller
 * ------------------------------------------------------------------------------------------- */

/**
 * Wipes (overwrites with zeros) and frees a string that the library returned as caller-owned,
 * such as the token from portal_session_copy_token() or a body from portal_request(). The whole
 * allocation is wiped, by the length the library recorded when it handed the string out (a
 * response body with NUL bytes inside is wiped to its end, not to its first NUL). NULL, a
 * pointer the library did not return and a second free of the same pointer are no-ops.
 * Thread-safe.
 * Worst case: never blocks.
 */
PORTAL_API void portal_string_free(char *string);

/* ---------------------------------------------------------------------------------------------
 * portal_auth: client auth for one auth environment
 * ------------------------------------------------------------------------------------------- */

/** Client auth for one Portal auth environment (PortalSwift's PortalAuth). Thread-safe. */
typedef struct portal_auth portal_auth;

/** A signed-in end user's session (PortalSwift's PortalSession). Thread-safe. */
typedef struct portal_session portal_session;

/**
 * Creates client auth for an auth environment. Does no I/O.
 *
 * Worst case: never blocks.
 *
 * @param[out] out               receives the new handle; free it with portal_auth_free().
 * @param auth_environment_id    the auth environment id; not blank, at most 2048 bytes, no control
 *                               character (it goes into a request header).
 * @param redirect_url           the app's sign-in redirect URL: absolute, "scheme://…" (e.g.
 *                               "myapp://auth"), or a private-use "scheme:/path" without an
 *                               authority (RFC 8252 §7.1, e.g. "com.example.app:/oauth2redirect");
 *                               at most 8192 bytes, no whitespace or control characters; not a
 *                               javascript:, vbscript: or data: URL.
 * @param api_host               the Portal API host (optionally "host:port"), or NULL for
 *                               "api.portalhq.io".
 * @return PORTAL_OK, or PORTAL_ERR_INVALID_ARGUMENT naming the first bad argument (checked in the
 *         order auth_environment_id, redirect_url, api_host; out is checked first of all).
 */
PORTAL_API portal_status portal_auth_new(portal_auth **out, const char *auth_environment_id,
                                         const char *redirect_url, const char *api_host);

/**
 * Frees a handle from portal_auth_new(). NULL is a no-op. Sessions it returned stay valid.
 * Worst case: never blocks.
 */
PORTAL_API void portal_auth_free(portal_auth *auth);

/**
 * Sets the keyring deadlines used by later calls on this handle (all threads).
 *
 * Worst case: never blocks.
 *
 * @param call_timeout_ms    bound for the provider calls, Secret portal calls and keyring-file
 *                           work of one operation together, in milliseconds (1 … 600000;
 *                           default 5000).
 * @param prompt_timeout_ms  bound for one unlock prompt, in milliseconds (1 … 600000;
 *                           default 30000).
 * @return PORTAL_OK or PORTAL_ERR_INVALID_ARGUMENT.
 */
PORTAL_API portal_status portal_auth_set_keyring_timeouts(portal_auth *auth, uint32_t call_timeout_ms,
                                                          uint32_t prompt_timeout_ms);

/**
 * Sets the magic-link sender and email template that portal_auth_send_magic_link() sends (the
 * Portal backend requires both; PortalSwift's MagicLinkConfig). Without them that call returns
 * PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED. Does no I/O.
 *
 * Calls that start after this returns, on any thread, use the new values; a call already running
 * (or an _async one already started) keeps the values it started with. Thread-safe; safe at any
 * time, typically right after portal_auth_new().
 *
 * Worst case: never blocks.
 *
 * @param from_email   the sender address (borrowed for the call; copied); with template_id NULL
 *                     too, clears the configuration.
 * @param template_id  the email template id (borrowed; copied).
 *                     Each: not blank, at most 2048 bytes of UTF-8, no control character.
 * @return PORTAL_OK, or PORTAL_ERR_INVALID_ARGUMENT (NULL auth; one of the two NULL but not the
 *         other; a blank, oversized or invalid value) and the handle is unchanged.
 */
PORTAL_API portal_status portal_auth_set_magic_link(portal_auth *auth, const char *from_email,
                                                    const char *template_id);

/** Whether sign-in asks for an account-abstracted client (portal_auth_set_account_abstraction()). */
typedef enum portal_account_abstraction {
    /** Not sent: the auth environment decides (the default). */
    PORTAL_ACCOUNT_ABSTRACTION_DEFAULT = 0,
    /** Sent as isAccountAbstracted=false. */
    PORTAL_ACCOUNT_ABSTRACTION_OFF = 1,
    /** Sent as isAccountAbstracted=true. */
    PORTAL_ACCOUNT_ABSTRACTION_ON = 2
} portal_account_abstraction;

/**
 * Sets whether portal_auth_send_magic_link() and portal_auth_login_with_google() / _apple() ask
 * for an account-abstracted client (PortalSwift's isAccountAbstracted). When Portal cannot honour
 * it they return PORTAL_ERR_ACCOUNT_ABSTRACTION_UNAVAILABLE. Does no I/O; threads as
 * portal_auth_set_magic_link().
 *
 * Worst case: never blocks.
 *
 * @return PORTAL_OK, or PORTAL_ERR_INVALID_ARGUMENT (NULL auth, a value not listed above).
 */
PORTAL_API portal_status portal_auth_set_account_abstraction(portal_auth *auth, portal_account_abstraction value);

/**
 * Restores the persisted session without a network call. Blocks (keyring I/O).
 *
 * Worst case: the keyring bound of one operation: the call deadline (default 5000 ms) plus the
 * prompt deadline (default 30000 ms) for each prompt the provider shows (in a Flatpak sandbox, the
 * Secret portal's version query and the host-keyring migration included).
 *
 * @param[out] out  on PORTAL_OK receives the session, or NULL when the end user is signed out
 *                  (nothing stored, or only unusable items, which were deleted). Free a session
 *                  with portal_session_free().
 * @return PORTAL_OK (check *out for NULL = signed out); PORTAL_ERR_SESSION_STORAGE when the
 *         keyring cannot be read this time — then nothing was deleted and the end user is NOT
 *         known to be signed out; PORTAL_ERR_INVALID_ARGUMENT for NULL arguments.
 */
PORTAL_API portal_status portal_auth_restore_session(portal_auth *auth, portal_session **out);

/**
 * Deletes every stored session for this auth environment (sign-out, or a clean slate on the first
 * launch after install). Succeeds when nothing is stored. Never fires invalidation listeners.
 * Blocks (keyring I/O).
 *
 * Worst case: as long as sign-in exchanges running on this handle on other threads take (it waits
 * for them; each bounded as portal_auth_handle_redirect()), then the keyring bound of one
 * operation: the call deadline (default 5000 ms) plus the prompt deadline (default 30000 ms) for
 * each prompt the provider shows.
 *
 * @return PORTAL_OK, PORTAL_ERR_SESSION_STORAGE or PORTAL_ERR_INVALID_ARGUMENT.
 */
PORTAL_API portal_status portal_auth_clear_persisted_session(portal_auth *auth);

/**
 * Stores a session whose CST the app's own backend issued, replacing any stored session for this
 * auth environment. The new item is written first and older ones removed afterwards, so a
 * failure leaves the previously stored session intact. Blocks (keyring I/O).
 *
 * Tokens: UTF-8 text of 1 … 65536 bytes without whitespace or control characters round-trips
 * byte-exact (quotes, backslashes, non-ASCII included). A token with a space, tab, CR, LF, any
 * other Unicode whitespace or a control character anywhere — a pasted token with a trailing
 * newline — gives PORTAL_ERR_INVALID_ARGUMENT naming client_session_token (refused, not trimmed);
 * only persisting checks this: a session stored by an earlier version is restored whatever its
 * token holds. A C string ends at its first NUL, so "a\0b" is the token "a". Invalid UTF-8
 * ("client_session_token: not valid UTF-8") and longer tokens ("longer than 65536 bytes") give
 * PORTAL_ERR_INVALID_ARGUMENT — never truncation. A stored document whose token could not be
 * handed out whole (an escaped NUL, invalid UTF-8, over 64 KiB) is unusable: restore deletes it
 * and reports signed out.
 *
 * Worst case: the persist turn and its own call deadline (two call deadlines, default 10000 ms)
 * plus the prompt deadline (default 30000 ms) for each prompt the provider shows.
 *
 * @param end_user_id           the Portal end user id; not blank, at most 2048 bytes, no control
 *                               character (one stored by an earlier version still restores).
 * @param client_session_token  the CST (borrowed; the library keeps its own wiped-on-release copy).
 * @param[out] out              optional (may be NULL): receives the stored session; free it with
 *                              portal_session_free().
 * @return PORTAL_OK, PORTAL_ERR_INVALID_ARGUMENT or PORTAL_ERR_SESSION_STORAGE (for example the
 *         default collection is locked, or there is no default collection).
 */
PORTAL_API portal_status portal_auth_persist_session(portal_auth *auth, const char *end_user_id,
                                                     const char *client_session_token,
                                                     portal_session **out);

/* ---------------------------------------------------------------------------------------------
 * Sign-in (network; the calls that persist also keyring I/O: each states its worst case)
 * ------------------------------------------------------------------------------------------- */

/**
 * The sign-in methods the auth environment allows (GET /api/v3/auth/methods). Blocks (network).
 *
 * Worst case: one HTTP request: 30 s (10 s of it to connect).
 *
 * @param[out] methods_out             receives a comma-separated list such as
 *                                     "EMAIL_MAGIC_LINK,GOOGLE,APPLE"; free with portal_string_free().
 * @param[out] auto_create_wallet_out  optional: whether Portal creates wallets automatically.
 * @return PORTAL_OK, PORTAL_ERR_NETWORK, PORTAL_ERR_RATE_LIMITED, PORTAL_ERR_MALFORMED_RESPONSE,
 *         PORTAL_ERR_UNAUTHORIZED, PORTAL_ERR_SERVER, PORTAL_ERR_REQUEST_REFUSED or
 *         PORTAL_ERR_INVALID_ARGUMENT.
 */
PORTAL_API portal_status portal_auth_get_methods(portal_auth *auth, char **methods_out, bool *auto_create_wallet_out);

/**
 * Asks Portal to email a sign-in link to email (trimmed and lower-cased) that opens the app's
 * redirect URL, from the sender and with the template set by portal_auth_set_magic_link() (and
 * isAccountAbstracted when portal_auth_set_account_abstraction() set it). The answer's body is
 * not read. Never retried automatically (a retry could send a second email). Blocks (network).
 * Without a magic-link configuration it returns PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED before
 * anything else: nothing sent, no marker recorded.
 *
 * First records the pending sign-in marker that portal_auth_handle_redirect() requires: a
 * non-secret 0600 file under $XDG_RUNTIME_DIR/portal-keyring/ (or, when that is unset or not a
 * private directory of this user, $XDG_STATE_HOME/portal-keyring-pending/, default
 * ~/.local/state/…), valid 15 minutes, shared by every process of this user. When it cannot be
 * written this returns PORTAL_ERR_SESSION_STORAGE (message "pending sign-in marker: …") and sends
 * nothing.
 *
 * Worst case: writing the pending sign-in marker (a local file), then one HTTP request: 30 s (10 s
 * of it to connect).
 *
 * @return PORTAL_OK, PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED, PORTAL_ERR_INVALID_ARGUMENT,
 *         PORTAL_ERR_RATE_LIMITED, PORTAL_ERR_ACCOUNT_ABSTRACTION_UNAVAILABLE, PORTAL_ERR_NETWORK,
 *         PORTAL_ERR_SESSION_STORAGE, PORTAL_ERR_SERVER, PORTAL_ERR_REQUEST_REFUSED or
 *         PORTAL_ERR_UNAUTHORIZED.
 */
PORTAL_API portal_status portal_auth_send_magic_link(portal_auth *auth, const char *email);

/**
 * The Google (or Apple) authorize URL to open in the end user's browser; Portal redirects back to
 * the app's redirect URL with a grant for portal_auth_handle_redirect(). Blocks (network). First
 * records the pending sign-in marker, as portal_auth_send_magic_link() does. Fetched fresh on every
 * call (the URL's state is single-use). A provider the auth environment has not enabled gives
 * PORTAL_ERR_AUTH_METHOD_UNAVAILABLE; PORTAL_ERR_UNAUTHORIZED means an unknown auth environment, a
 * redirect URL Portal does not allow, or a half-configured provider (Portal does not say which);
 * otherwise the errors of portal_auth_send_magic_link() except PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED.
 *
 * Worst case: writing the pending sign-in marker (a local file), then one HTTP request: 30 s (10 s
 * of it to connect).
 *
 * @param[out] url_out  receives the URL; free with portal_string_free().
 */
PORTAL_API portal_status portal_auth_login_with_google(portal_auth *auth, char **url_out);
/**
 * See portal_auth_login_with_google().
 * Worst case: as portal_auth_login_with_google().
 */
PORTAL_API portal_status portal_auth_login_with_apple(portal_auth *auth, char **url_out);

/** What portal_auth_handle_redirect() made of a URL. */
typedef enum portal_redirect_kind {
    /** Not this app's redirect URL (other scheme, host or path): nothing was done. */
    PORTAL_REDIRECT_NOT_HANDLED = 0,
    /** Signed in: the session was persisted before the call returned. */
    PORTAL_REDIRECT_AUTHENTICATED = 1,
    /** A TOTP code is needed: call portal_auth_verify_totp() with the user JWT. Nothing persisted. */
    PORTAL_REDIRECT_TOTP_REQUIRED = 2
} portal_redirect_kind;

/** Flags of portal_auth_handle_redirect_v2(); combine with |. Unknown bits: INVALID_ARGUMENT. */
typedef enum portal_redirect_flags {
    /** The defaults: both login CSRF defences on. */
    PORTAL_REDIRECT_FLAGS_NONE = 0,
    /**
     * Opt-out: exchange the grant although no sign-in is pending (no marker), for apps whose
     * sign-ins start elsewhere (e.g. their backend sends the magic links). Re-opens login CSRF.
     */
    PORTAL_REDIRECT_ALLOW_UNSOLICITED = 1,
    /** Confirmation after PORTAL_ERR_DIFFERENT_END_USER: replace the other end user's session. */
    PORTAL_REDIRECT_REPLACE_END_USER = 2
} portal_redirect_flags;

/**
 * Completes a sign-in from the redirect URL the browser opened (query parameters token, error,
 * authMethod=EMAIL_MAGIC_LINK, login_type=GOOGLE|APPLE); portal_auth_handle_redirect_v2() with
 * flags PORTAL_REDIRECT_FLAGS_NONE.
 *
 * Login CSRF defences (docs/sign-in.md#redirect-hijacking): the grant is exchanged only while a sign-in
 * started by portal_auth_send_magic_link() or portal_auth_login_with_google()/_apple() for this
 * auth environment is pending (a marker file, see portal_auth_send_magic_link(): at most 15
 * minutes old, any process of this user); otherwise PORTAL_ERR_UNSOLICITED_REDIRECT and nothing is
 * done. PORTAL_REDIRECT_AUTHENTICATED or PORTAL_REDIRECT_TOTP_REQUIRED completes (removes) the
 * pending sign-in, so a second grant needs a new sign-in. When the keyring holds a session of
 * another end user, nothing is stored and PORTAL_ERR_DIFFERENT_END_USER is returned; the same end
 * user signing in again replaces the session silently. Error redirects and URLs without a grant
 * are reported as below whatever the marker says (they do nothing either way).
 *
 * PORTAL_REDIRECT_NOT_HANDLED, with nothing done, for a URL that is not this app's (as PortalSwift
 * decides): empty or blank, longer than 8192 UTF-16 code units, not the configured redirect URL
 * (scheme and host compared case-insensitively, surrounding whitespace, the fragment and trailing
 * slashes ignored), without a token or with an empty one, or without a known method marker
 * (authMethod=EMAIL_MAGIC_LINK, else login_type=GOOGLE|APPLE, exact case). Query values: '+' is a
 * space, percent-escapes are decoded as UTF-8 (a value that does not decode is kept as it came),
 * and the last of a repeated name wins.
 *
 * The grant is exchanged once per
 * portal_auth handle: delivering the same redirect again returns the same result without a second
 * exchange (a TOTP step that portal_auth_verify_totp() completed since returns
 * PORTAL_REDIRECT_AUTHENTICATED with the session); if the exchange succeeded but the keyring write failed, this returns
 * PORTAL_ERR_SESSION_STORAGE and a repeat delivery retries only the write. A failed exchange stays
 * retryable. portal_auth_clear_persisted_session() forgets remembered grants. Blocks (network,
 * keyring).
 *
 * Worst case: one HTTP request (30 s), a restore (one call deadline) and a persist (two call
 * deadlines): 45 s with the default deadlines, plus the prompt deadline (default 30000 ms) for
 * each prompt the provider shows; a call delivering the same URL on this handle on another thread
 * is waited for first.
 *
 * @param url                   the URL the browser opened, UTF-8; not NULL. One longer than 8192
 *                               UTF-16 code units is not handled, before it is parsed (at most
 *                               24576 bytes are read). An error parameter appears in
 *                               portal_last_error_message() cut to 100 characters, without
 *                               control characters.
 * @param[out] kind_out          optional: receives the kind.
 * @param[out] session_out       optional: for PORTAL_REDIRECT_AUTHENTICATED, receives the session
 *                               (portal_session_free()); otherwise set to NULL. Its client:
 *                               portal_session_get_client_id(), portal_session_get_is_account_abstracted().
 * @param[out] user_jwt_out      optional: for PORTAL_REDIRECT_TOTP_REQUIRED, receives the user JWT
 *                               (a credential: portal_string_free() wipes it); otherwise NULL. Its
 *                               end user: portal_user_jwt_get_end_user_id().
 * @param[out] totp_link_out     optional: for PORTAL_REDIRECT_TOTP_REQUIRED, the otpauth:// enrolment
 *                               link when the end user has not set up TOTP yet, else NULL
 *                               (portal_string_free(); it embeds the TOTP secret, which
 *                               portal_totp_link_get_secret() extracts: never log it).
 * @return PORTAL_OK (check *kind_out), PORTAL_ERR_AUTHENTICATION_FAILED (an error parameter, even
 *         beside a token), PORTAL_ERR_INVALID_GRANT (grant rejected, or an answer carrying
 *         neither a session token nor a user JWT), PORTAL_ERR_RATE_LIMITED,
 *         PORTAL_ERR_MALFORMED_RESPONSE, PORTAL_ERR_NETWORK, PORTAL_ERR_SESSION_STORAGE,
 *         PORTAL_ERR_SERVER (HTTP 5xx: the grant stays usable), PORTAL_ERR_REQUEST_REFUSED,
 *         PORTAL_ERR_UNSOLICITED_REDIRECT, PORTAL_ERR_DIFFERENT_END_USER or
 *         PORTAL_ERR_INVALID_ARGUMENT.
 */
PORTAL_API portal_status portal_auth_handle_redirect(portal_auth *auth, const char *url, portal_redirect_kind *kind_out,
                                                     portal_session **session_out, char **user_jwt_out,
                                                     char **totp_link_out);

/**
 * portal_auth_handle_redirect() with flags (portal_redirect_flags, combined with |). Prefer this
 * function when an app needs either flag. With PORTAL_REDIRECT_REPLACE_END_USER, after
 * PORTAL_ERR_DIFFERENT_END_USER, the same handle and URL persist the remembered exchange without a
 * second one; on another handle or in another process the grant is spent, so the end user signs in
 * again. Returns the same kinds (never a new one) and statuses as portal_auth_handle_redirect(),
 * plus PORTAL_ERR_INVALID_ARGUMENT for unknown flag bits. Thread-safe; blocks (network, keyring).
 * Worst case: as portal_auth_handle_redirect().
 */
PORTAL_API portal_status portal_auth_handle_redirect_v2(portal_auth *auth, const char *url, uint32_t flags,
                                                        portal_redirect_kind *kind_out, portal_session **session_out,
                                                        char **user_jwt_out, char **totp_link_out);

/**
 * Signs the end user in with Google in their browser and returns when the sign-in completed
 * (PortalSwift's signInWithGoogle(); docs/sign-in.md#desktop-sign-in). Fetches a fresh authorize URL
 * (recording the pending sign-in marker, as portal_auth_login_with_google() does), opens it with
 * the desktop's URL opener (GIO's default handler for its scheme: the user's browser from XDG
 * mimeapps.list, or the OpenURI portal inside a Flatpak sandbox), then waits for the redirect,
 * whichever way it comes back:
 *  - to this process: the app passes it to portal_auth_handle_redirect() (or _v2, _async; any
 *    handle of the same auth environment, any thread), and this call returns that call's result,
 *    or its error (a rejected grant, PORTAL_ERR_DIFFERENT_END_USER, a keyring failure), except
 *    PORTAL_ERR_UNSOLICITED_REDIRECT and PORTAL_ERR_CANCELLED. An error redirect ends it only
 *    when it carries the `state` parameter of the authorize URL this call opened (any web page
 *    can send the app's scheme ?error=access_denied): without it, the error is that
 *    handle_redirect call's alone and this call keeps waiting;
 *  - to the URL handler's process (portal-session handle-redirect, examples/desktop), which
 *    persists the session: this call sees it through a session watch and returns
 *    PORTAL_REDIRECT_AUTHENTICATED with the restored session (no client id). A TOTP step or an
 *    error the other process meets stores nothing and is not seen: the call waits until its
 *    timeout. When the keyring turns locked meanwhile (KeePassXC with ConfirmAccessItem shows
 *    the other process's item locked), the call restores, running the provider's prompt; a
 *    dismissed prompt returns PORTAL_ERR_SESSION_STORAGE.
 * The call itself persists nothing. One per auth environment in a process: another returns
 * PORTAL_ERR_SIGN_IN_IN_PROGRESS at once. Blocks until then (network, keyring, the end user in
 * the browser): GUI threads use portal_auth_sign_in_with_google_async(), which can be cancelled.
 *
 * Worst case: two call deadlines (reading the stored state, starting the session watch; default
 * 10000 ms) plus a bus round trip, one HTTP request (30 s), the browser's launch, then timeout_ms
 * (0: 900000 ms) for the redirect and at most one restore's keyring bound past it (the call
 * deadline, default 5000 ms, plus the prompt deadline, default 30000 ms, for each prompt shown).
 *
 * @param timeout_ms   how long to wait for the redirect once the page is open, in milliseconds;
 *                     0 is the default and maximum, 900000 (15 minutes: the pending sign-in
 *                     marker's lifetime). More: PORTAL_ERR_INVALID_ARGUMENT.
 * @param[out] kind_out, session_out, user_jwt_out, totp_link_out  as portal_auth_handle_redirect()
 *                     writes them (kind_out never PORTAL_REDIRECT_NOT_HANDLED), on success only.
 * @return PORTAL_OK, PORTAL_ERR_SIGN_IN_IN_PROGRESS, PORTAL_ERR_SIGN_IN_UNAVAILABLE (no application
 *         could open the page; nothing persisted), PORTAL_ERR_SIGN_IN_TIMED_OUT, the errors of
 *         portal_auth_login_with_google() (PORTAL_ERR_MALFORMED_RESPONSE also for an authorize URL
 *         that is not https://, or http:// to a loopback host), PORTAL_ERR_SESSION_STORAGE (no
 *         session bus for the watch, or the stored sign-in unreadable), the in-process
 *         delivery's error, or PORTAL_ERR_INVALID_ARGUMENT.
 */
PORTAL_API portal_status portal_auth_sign_in_with_google(portal_auth *auth, uint32_t timeout_ms,
                                                         portal_redirect_kind *kind_out, portal_session **session_out,
                                                         char **user_jwt_out, char **totp_link_out);
/**
 * See portal_auth_sign_in_with_google(); PORTAL_ERR_AUTH_METHOD_UNAVAILABLE when Apple is not
 * enabled.
 * Worst case: as portal_auth_sign_in_with_google().
 */
PORTAL_API portal_status portal_auth_sign_in_with_apple(portal_auth *auth, uint32_t timeout_ms,
                                                        portal_redirect_kind *kind_out, portal_session **session_out,
                                                        char **user_jwt_out, char **totp_link_out);

/**
 * Completes a TOTP sign-in: exchanges code (digits) with the user JWT, persists the session and
 * returns it. Blocks (network, keyring).
 *
 * The session's end user is the JWT's endUserId claim (portal_user_jwt_get_end_user_id()), read
 * before the code is sent: a JWT without it fails with PORTAL_ERR_INVALID_USER_JWT and nothing is
 * sent. Portal answers a wrong code with HTTP 401, the same as for an expired or used JWT: that
 * is PORTAL_ERR_AUTHENTICATION_FAILED; ask the end user for a new code and call again with the
 * same JWT (when it keeps failing, the sign-in has expired: start it again).
 *
 * Portal spends the user JWT when it accepts a code, so the handle remembers an accepted exchange
 * (in memory, under a SHA-256 digest of the JWT, never the JWT; the token in wiped memory) until
 * portal_auth_clear_persisted_session(): when the keyring write fails after the exchange
 * (PORTAL_ERR_SESSION_STORAGE, e.g. a locked keyring whose prompt was dismissed or a provider
 * past the call deadline), calling this again with the same JWT on the same handle, from any
 * thread and with any well-formed code (the one typed then), retries only the write; after a
 * successful write it returns the same session (a new portal_session handle). A call with the
 * same JWT while one runs waits for it. A rejected or unanswered exchange is not remembered;
 * another handle or process cannot retry (the end user signs in again). Thread-safe.
 *
 * Worst case: one HTTP request (30 s), a restore (one call deadline) and a persist (two call
 * deadlines): 45 s with the default deadlines, plus the prompt deadline (default 30000 ms) for
 * each prompt the provider shows; a call with the same user JWT on this handle on another thread
 * is waited for first.
 *
 * @param[out] out  optional: receives the session (portal_session_free()); it answers
 *                  portal_session_get_client_id() and portal_session_get_is_account_abstracted().
 * @return PORTAL_OK, PORTAL_ERR_INVALID_USER_JWT (no endUserId claim; nothing sent),
 *         PORTAL_ERR_AUTHENTICATION_FAILED (code rejected), PORTAL_ERR_RATE_LIMITED,
 *         PORTAL_ERR_MALFORMED_RESPONSE, PORTAL_ERR_NETWORK, PORTAL_ERR_SESSION_STORAGE or
 *         PORTAL_ERR_INVALID_ARGUMENT.
 */
PORTAL_API portal_status portal_auth_verify_totp(portal_auth *auth, const char *code, const char *user_jwt,
                                                 portal_session **out);

/**
 * The end user of a TOTP step: the endUserId claim of its user JWT (read, not verified: Portal
 * verifies the JWT), the end user portal_auth_verify_totp() will persist the session for. For
 * showing who is signing in before the code is asked for. No I/O; thread-safe.
 *
 * Worst case: never blocks.
 *
 * @param user_jwt  the user JWT from portal_auth_handle_redirect() (borrowed for the call).
 * @param[out] out  receives the end user id (portal_string_free()).
 * @return PORTAL_OK, PORTAL_ERR_INVALID_USER_JWT (not a JWT, or no non-blank string endUserId
 *         claim) or PORTAL_ERR_INVALID_ARGUMENT (NULL argument). *out is written only on PORTAL_OK.
 */
PORTAL_API portal_status portal_user_jwt_get_end_user_id(const char *user_jwt, char **out);

/**
 * The shared secret of a TOTP enrolment link, to type into an authenticator app: the link's
 * secret parameter (the last one when repeated), percent-decoded, trimmed and uppercased, when it
 * is base32 (A-Z, 2-7, optional trailing '='). A secret: wipe it with portal_string_free(). Never
 * blocks; no I/O; thread-safe.
 *
 * Worst case: never blocks.
 *
 * @param totp_link  the otpauth:// link from portal_auth_handle_redirect() (borrowed for the call).
 * @param[out] out   receives the secret (portal_string_free()), or NULL when the link is not an
 *                   otpauth:// link or carries no valid secret.
 * @return PORTAL_OK or PORTAL_ERR_INVALID_ARGUMENT (NULL argument, or longer than 65536 bytes).
 */
PORTAL_API portal_status portal_totp_link_get_secret(const char *totp_link, char **out);

/**
 * A TOTP enrolment link as a QR code for an authenticator app to scan: error-correction level M,
 * byte mode, the smallest version that holds it, a 4-module quiet zone included in the size. It
 * encodes the link as portal_totp_link_get_secret() reads it (trimmed, decoded as a whole when it
 * came percent-encoded). libqrencode is loaded on the first call, not before. No
 * network; thread-safe. The modules encode the secret: show them, never log or store them.
 *
 * Worst case: never blocks (beyond loading libqrencode on the first call).
 *
 * @param totp_link        the otpauth:// link (borrowed for the call).
 * @param[out] size_out    optional: receives the number of modules on one side (29 for the
 *                         smallest code; also the square root of the modules' length).
 * @param[out] modules_out receives size * size characters, row-major from the top left: '1' for a
 *                         dark module, '0' for a light one (portal_string_free(), which wipes).
 * @return PORTAL_OK, PORTAL_ERR_TOTP_QR_UNAVAILABLE or PORTAL_ERR_INVALID_ARGUMENT (NULL argument,
 *         or a link longer than 65536 bytes). The outputs are written only on PORTAL_OK.
 */
PORTAL_API portal_status portal_totp_qr_code(const char *totp_link, size_t *size_out, char **modules_out);

/**
 * portal_totp_qr_code() as an SVG document: one unit per module, black on an opaque white
 * square, for toolkits that draw SVG (scale it without smoothing). Same errors.
 *
 * Worst case: as portal_totp_qr_code().
 *
 * @param[out] svg_out  receives the document (portal_string_free(), which wipes).
 */
PORTAL_API portal_status portal_totp_qr_svg(const char *totp_link, char **svg_out);

/* ---------------------------------------------------------------------------------------------
 * portal_session
 * ------------------------------------------------------------------------------------------- */

/**
 * The session's end user id. Borrowed: valid until portal_session_free(session).
 * Worst case: never blocks.
 *
 * @return the id, or NULL when session is NULL (then the last error is set).
 */
PORTAL_API const char *portal_session_get_end_user_id(const portal_session *session);

/**
 * The session's auth environment id. Borrowed: valid until portal_session_free(session).
 * Worst case: never blocks.
 *
 * @return the id, or NULL when session is NULL (then the last error is set).
 */
PORTAL_API const char *portal_session_get_auth_environment_id(const portal_session *session);

/**
 * The Portal client the sign-in that returned this handle named (portal_auth_handle_redirect(),
 * portal_auth_verify_totp() and their _async forms). Borrowed: valid until
 * portal_session_free(session).
 * Worst case: never blocks.
 *
 * @return the client id; NULL when the Portal API named none, for a handle from any other call
 *         (a restored or transferred session), or when session is NULL (then the last error is
 *         set; otherwise it is cleared).
 */
PORTAL_API const char *portal_session_get_client_id(const portal_session *session);

/**
 * Whether the sign-in that returned this handle reported an account-abstracted client (see
 * portal_session_get_client_id() for which handles know).
 * Worst case: never blocks.
 *
 * @return 1 or 0 as reported; -1 when unknown (not reported, another kind of handle) or when
 *         session is NULL (then the last error is set).
 */
PORTAL_API int portal_session_get_is_account_abstracted(const portal_session *session);

/**
 * Copies the session's Client Session Token.
 *
 * Worst case: never blocks.
 *
 * @param[out] out  receives a NUL-terminated copy owned by the caller; release it with
 *                  portal_string_free(), which wipes it. Keep the copy as briefly as possible.
 * @return PORTAL_OK, PORTAL_ERR_SESSION_INVALIDATED when the session was invalidated, or
 *         PORTAL_ERR_INVALID_ARGUMENT.
 */
PORTAL_API portal_status portal_session_copy_token(const portal_session *session, char **out);

/**
 * Frees a session handle, wiping its token. NULL is a no-op. Does not touch the keyring.
 * Worst case: never blocks.
 */
PORTAL_API void portal_session_free(portal_session *session);

/**
 * Invalidates the session: drops its token from memory first, then deletes the stored item only
 * if it still holds this sign-in (matched by its session_generation attribute), so a newer
 * sign-in persisted meanwhile — by this or another process — is never wiped. Idempotent; a repeat
 * after a failed delete retries the delete. Does not fire listeners (see portal_report_unauthorized).
 * Blocks (keyring I/O).
 *
 * Worst case: the keyring bound of one operation: the call deadline (default 5000 ms) plus the
 * prompt deadline (default 30000 ms) for each prompt the provider shows.
 *
 * @return PORTAL_OK, PORTAL_ERR_SESSION_STORAGE (the token is gone from memory regardless) or
 *         PORTAL_ERR_INVALID_ARGUMENT.
 */
PORTAL_API portal_status portal_session_invalidate(portal_session *session);

/* ---------------------------------------------------------------------------------------------
 * portal: the Portal client for one credential, and session invalidation
 *
 * HTTP goes through libcurl: HTTPS for every host except loopback (127.0.0.0/8, ::1, localhost;
 * localhost is reached over IPv4 only, at 127.0.0.1: a server on the IPv6 loopback alone is [::1]);
 * a bearer token is never sent over plain HTTP to another host. Timeouts: 10 s to connect, 30 s
 * per request. Redirects are not followed.
 *
 * Invalidation (docs/api.md#invalidation): a request that carried the session's token as bearer to the exact
 * Portal API host and got HTTP 401 invalidates the session — the token is dropped, the stored
 * item of that sign-in is deleted — and fires every listener once. Per credential, for the whole
 * process: every portal handle built on the same sign-in (one session handle, or several restores
 * of it) drops the token and fires its listeners, once, whichever handle saw the 401. 5xx, 403,
 * timeouts, network errors and other hosts never invalidate.
 *
 * Callback threads and reentrancy: listener callbacks run on a library-owned thread (one serial
 * queue per portal handle), never on the thread that registered or reported, and never while the
 * library holds a lock. destroy_notify runs on that thread after a delivery, and otherwise on the
 * thread that ends the registration (portal_listener_cancel(), portal_free(), a spent or failed
 * registration); docs/threading.md has the table. A callback may call any library function,
 * including portal_listener_cancel() on its own handle, portal_free() on its portal, and
 * portal_auth_restore_session(). Callbacks of one portal run one at a time.
 * ------------------------------------------------------------------------------------------- */

/** The Portal client for one credential (PortalSwift's Portal). Thread-safe. */
typedef struct portal portal;

/** Called once when the session is invalidated by the backend. */
typedef void (*portal_session_invalidated_cb)(void *user_data);

/** Releases user_data; called exactly once per registration. */
typedef void (*portal_destroy_notify)(void *user_data);

/**
 * Creates a Portal client for a session and validates the session at once: sends
 * GET https://<api_host>/api/v3/clients/me with "Authorization: Bearer <CST>" on a library thread
 * (the call does not wait for it). If that request gets HTTP 401 the session is invalidated and
 * listeners fire — including listeners registered after this call returns (replay).
 *
 * Worst case: never blocks: the validation request runs on a library thread.
 *
 * @param[out] out   receives the handle; free it with portal_free().
 * @param session    the credential (borrowed; the portal keeps its own reference, so the session
 *                   handle may be freed first). The portal and the session handle share state:
 *                   after invalidation portal_session_copy_token() reports
 *                   PORTAL_ERR_SESSION_INVALIDATED.
 * @param api_host   the Portal API host ("host" or "host:port"), or NULL for the host of the
 *                   portal_auth the session came from.
 * @return PORTAL_OK or PORTAL_ERR_INVALID_ARGUMENT.
 */
PORTAL_API portal_status portal_new(portal **out, const portal_session *session, const char *api_host);

/**
 * Creates a Portal client from a static API key. It never invalidates anything; registering a
 * listener succeeds with handle 0 and calls destroy_notify at once.
 *
 * Worst case: never blocks.
 *
 * @return PORTAL_OK or PORTAL_ERR_INVALID_ARGUMENT.
 */
PORTAL_API portal_status portal_new_with_api_key(portal **out, const char *api_key, const char *api_host);

/**
 * Frees a portal: the explicit close of the listener-lifetime rule (docs/threading.md). Aborts
 * its requests in flight (the validation request sent by portal_new() included), cancels every
 * listener registration (each destroy_notify runs once, on the calling thread unless it already
 * ran) and waits for the requests to return — at most about a second, libcurl's progress
 * interval. From the moment it starts the portal invalidates nothing: a 401 one of those requests
 * still receives deletes no item (the session stays stored; the next portal detects the
 * rejection). No callback of this portal runs after portal_free() returns (a callback
 * already running on another thread is waited for, unless portal_free() is called from it).
 * NULL is a no-op. May be called from inside a callback. Free every portal before the process
 * exits: a request still running on a library thread while the process tears down its TLS
 * library at exit can crash the process. From a main loop's thread use portal_free_async(),
 * which does the waiting on a worker thread.
 * Worst case: about a second (libcurl's progress interval) for its requests to abort, plus as long
 * as a listener callback already running on another thread takes to return (nothing when called
 * from that callback).
 */
PORTAL_API void portal_free(portal *portal);

/**
 * Registers a listener for session invalidation.
 *
 * Worst case: never blocks.
 *
 * @param callback        called at most once, on a library thread (see above).
 * @param user_data       passed to callback and destroy_notify.
 * @param destroy_notify  optional; called exactly once: after the callback's only delivery
 *                        returns, when the registration is cancelled or the portal freed before
 *                        delivery, at once for a spent registration (API-key portal, or after
 *                        portal_clear_session()), or before returning on a failed registration.
 * @param[out] out        optional: receives the handle for portal_listener_cancel(); 0 for a
 *                        spent registration. NULL registers all the same: the registration then
 *                        cannot be cancelled and is owned by the portal, which ends it (callback
 *                        not entered, destroy_notify run) when it is freed, unless it was
 *                        delivered first.
 * @return PORTAL_OK or PORTAL_ERR_INVALID_ARGUMENT (NULL portal or callback; destroy_notify has
 *         then already been called).
 */
PORTAL_API portal_status portal_on_session_invalidated(portal *portal, portal_session_invalidated_cb callback,
                                                       void *user_data, portal_destroy_notify destroy_notify,
                                                       uint64_t *out);

/**
 * Cancels a registration: after this returns, its callback is never entered (if it is running on
 * another thread, this waits for it to return; called from inside the callback itself, it does
 * not wait). Unknown, already-cancelled and 0 handles are ignored.
 *
 * Worst case: never blocks, unless the registration's callback is running on another thread: then
 * as long as that callback takes to return.
 *
 * @return PORTAL_OK or PORTAL_ERR_INVALID_ARGUMENT (NULL portal).
 */
PORTAL_API portal_status portal_listener_cancel(portal *portal, uint64_t handle);

/**
 * Reports that a request the app made itself, with rejected_token as bearer to the Portal API
 * host, got HTTP 401. If rejected_token is the session's current token, invalidates the session
 * (keyring I/O: blocks) and fires the listeners once; otherwise does nothing.
 *
 * Worst case: when it invalidates, the keyring bound of one operation: the call deadline (default
 * 5000 ms) plus the prompt deadline (default 30000 ms) for each prompt the provider shows;
 * otherwise never blocks.
 *
 * @param[out] invalidated_out  optional: receives true if this call invalidated the session.
 * @return PORTAL_OK, PORTAL_ERR_SESSION_STORAGE (the delete failed; the session is invalidated in
 *         memory and listeners fire regardless) or PORTAL_ERR_INVALID_ARGUMENT.
 */
PORTAL_API portal_status portal_report_unauthorized(portal *portal, const char *rejected_token,
                                                    bool *invalidated_out);

/**
 * Host-initiated sign-out: drops the token from memory and deletes every stored session of the
 * auth environment. Never fires listeners. Blocks (keyring I/O).
 *
 * Worst case: two keyring operations (the sign-in's item, then every stored session of the auth
 * environment): two call deadlines (default 10000 ms) plus the prompt deadline (default 30000 ms)
 * for each prompt the provider shows.
 *
 * @return PORTAL_OK, PORTAL_ERR_SESSION_STORAGE or PORTAL_ERR_INVALID_ARGUMENT.
 */
PORTAL_API portal_status portal_clear_session(portal *portal);

/**
 * Sends an authenticated request and waits for the response. Blocks (network, up to 30 s).
 * The bearer is attached only when target is a path ("/api/v3/...") or an absolute URL on the
 * Portal API host exactly; a 401 from that host invalidates the session as described above.
 *
 * Worst case: one HTTP request (30 s, 10 s of it to connect); a 401 that invalidates the session
 * adds the keyring bound of one operation: the call deadline (default 5000 ms) plus the prompt
 * deadline (default 30000 ms) for each prompt the provider shows.
 *
 * @param method            "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD" or "OPTIONS", exactly
 *                          (upper case); anything else (including CR, LF or other bytes that could
 *                          rewrite the request line) is PORTAL_ERR_INVALID_ARGUMENT, and nothing
 *                          is sent.
 * @param target            a path on the Portal API host, or an absolute https URL.
 * @param body              optional JSON body (NULL for none).
 * @param[out] status_out   optional: receives the HTTP status.
 * @param[out] body_out     optional: receives the response body (at most 4 MiB), with a NUL
 *                          after it, owned by the caller (portal_string_free(), which wipes all
 *                          of it, NUL bytes inside included).
 * @param[out] body_len_out optional: receives the body's length in bytes (the body may contain
 *                          NUL bytes; then use this length, not strlen).
 * @return PORTAL_OK (whatever the HTTP status), PORTAL_ERR_SESSION_INVALIDATED,
 *         PORTAL_ERR_NETWORK or PORTAL_ERR_INVALID_ARGUMENT.
 */
PORTAL_API portal_status portal_request(portal *portal, const char *method, const char *target,
                                        const char *body, long *status_out, char **body_out,
                                        size_t *body_len_out);

/* ---------------------------------------------------------------------------------------------
 * Non-blocking calls
 *
 * The sign-in calls' variants (portal_auth_get_methods_async, …, portal_auth_verify_totp_async)
 * follow the same rules with their own result type, portal_sign_in_result (end of this section).
 *
 * Each *_async function checks its arguments, starts the operation and returns at once; it never
 * blocks (no keyring or network I/O on the calling thread). The blocking work runs on a
 * library-owned worker thread ("portal-async", at most 4 of them, started on demand; operations
 * beyond that wait in a FIFO queue). The operation then completes exactly once: its callback runs
 * once, with the status, the result and the error message, on the thread of its completion queue
 * (below), and destroy_notify(user_data) runs once right after the callback returns.
 *
 * Completion queues: where completions (and queued listener deliveries) run.
 *  - A main-context queue runs them from its GLib GMainContext: in the thread that iterates that
 *    context (g_main_loop_run), one idle source per completion, default priority.
 *  - A pollable queue has a file descriptor that becomes readable when completions are ready;
 *    portal_completion_queue_dispatch() runs them on the calling thread. Watch the fd with any
 *    loop (Qt's QSocketNotifier, libuv's uv_poll, asyncio's add_reader, plain poll()).
 *  - queue == NULL in an *_async call means a main-context queue for the calling thread's
 *    thread-default GMainContext at call time (g_main_context_ref_thread_default(): the global
 *    default context unless the thread pushed another), as GTask does. Completions are then
 *    dispatched on that context only: in the thread that iterates it with a GLib main loop. With
 *    no loop running on it (Qt without its GLib event dispatcher, as with QT_NO_GLIB=1; libuv;
 *    asyncio; a thread with no loop) nothing arrives, and nothing says so: the completion waits
 *    until some thread iterates that context. Outside a GLib loop, use a pollable queue.
 *
 * Cancellation: portal_operation_cancel() completes the operation at once with
 * PORTAL_ERR_CANCELLED (the callback still runs on its queue, once, later) unless it already
 * completed. The work in flight is stopped too: a keyring call is cancelled through its
 * GCancellable, a wait for an unlock prompt ends within 250 ms (the prompt is left open, never
 * dismissed, like a prompt deadline), an HTTP request is aborted (within libcurl's progress
 * interval, about a second). Not interrupted (the callback still runs at once; only the worker
 * stays busy): waiting for another operation's prompt to end, which is bounded by the prompt
 * deadline. Cancellation never half-applies a persist: the new item is created
 * before older ones are removed, so a cancelled persist either stored the new session (restore
 * returns it; an older item may remain until the next persist) or left the previous one intact.
 *
 * A completion that cannot run is dropped, never run late on another thread: when its pollable
 * queue was freed, or its GMainContext was destroyed with the source pending. Then only
 * destroy_notify runs (on the thread that frees the queue or destroys the context, or on the
 * worker), and owned results are freed.
 * ------------------------------------------------------------------------------------------- */

/** Where completions run (see above). Thread-safe; shared by any number of operations. */
typedef struct portal_completion_queue portal_completion_queue;

/**
 * The result of a non-blocking call, passed to its callback. Allocated by the library and valid
 * only during the callback; never copy it by value (fields may be added at the end). Only the
 * fields the call's documentation names are set; the others are NULL / 0 / false.
 *
 * Ownership: session and body are owned by the library. To keep one, take it: copy the pointer
 * and set the field to NULL; the library frees whatever is left in the struct after the callback
 * returns (portal_session_free(), portal_string_free()).
 */
typedef struct portal_result {
    /** restore (NULL = signed out), persist: the session. */
    portal_session *session;
    /** request: the HTTP status. */
    long http_status;
    /** request: the response body with a NUL after it (at most 4 MiB). */
    char *body;
    /** request: the body's length in bytes (the body may contain NUL bytes). */
    size_t body_len;
    /** report_unauthorized: whether this call invalidated the session. */
    bool invalidated;
} portal_result;

/**
 * Completion of a non-blocking call; runs exactly once per started operation, on its queue.
 *
 * @param status         PORTAL_OK, PORTAL_ERR_CANCELLED, or the blocking call's error status.
 * @param result         the result (see portal_result for ownership); never NULL.
 * @param error_message  "" on success, else the detail (the text portal_last_error_message()
 *                       would give after the blocking call); never NULL, valid during the call.
 *                       The thread's portal_last_error_message() is not changed.
 * @param user_data      as passed to the *_async call.
 */
typedef void (*portal_completion_cb)(portal_status status, portal_result *result, const char *error_message,
                                     void *user_data);

/**
 * Creates a queue whose completions run from a GLib main context.
 *
 * Worst case: never blocks.
 *
 * @param[out] out          receives the queue; free it with portal_completion_queue_free().
 * @param main_context      a GMainContext * (the queue keeps a reference), or NULL for the calling
 *                          thread's thread-default context at this call.
 * @return PORTAL_OK or PORTAL_ERR_INVALID_ARGUMENT (NULL out).
 */
PORTAL_API portal_status portal_completion_queue_new_for_main_context(portal_completion_queue **out,
                                                                      void *main_context);

/**
 * Creates a pollable queue: completions wait until portal_completion_queue_dispatch() runs them.
 *
 * Worst case: never blocks.
 *
 * @param[out] out  receives the queue; free it with portal_completion_queue_free().
 * @return PORTAL_OK, PORTAL_ERR_INTERNAL (no eventfd) or PORTAL_ERR_INVALID_ARGUMENT.
 */
PORTAL_API portal_status portal_completion_queue_new_pollable(portal_completion_queue **out);

/**
 * The file descriptor of a pollable queue: readable (POLLIN) while completions are ready. Owned by
 * the queue (closed by portal_completion_queue_free()); only poll it, never read or close it.
 * Worst case: never blocks.
 *
 * @return the fd, or -1 for a main-context queue, NULL or a freed queue (then the last error is set).
 */
PORTAL_API int portal_completion_queue_get_fd(const portal_completion_queue *queue);

/**
 * Runs the ready completions of a pollable queue on the calling thread, then returns; never
 * waits. A callback may start or cancel operations and call dispatch again (those run in the
 * next round), and may free the queue: the round stops there, and its other completions are
 * dropped (destroy_notify only). Call it from one thread at a time (the thread that owns your loop).
 *
 * Worst case: never waits; it takes as long as the callbacks it runs.
 *
 * @param[out] ran_out  optional: receives how many completions ran.
 * @return PORTAL_OK, or PORTAL_ERR_INVALID_ARGUMENT (NULL, freed or main-context queue).
 */
PORTAL_API portal_status portal_completion_queue_dispatch(portal_completion_queue *queue, size_t *ran_out);

/**
 * Releases the caller's queue handle. Operations still running keep the queue alive: a
 * main-context queue still delivers them; a pollable queue drops its ready completions at once
 * (destroy_notify on the calling thread) and later ones as they arrive (on the worker), and its
 * fd is closed when the last of them is gone — stop polling it now. NULL is a no-op.
 * Worst case: never blocks.
 */
PORTAL_API void portal_completion_queue_free(portal_completion_queue *queue);

/**
 * Cancels a non-blocking operation (see "Cancellation" above). Unknown, 0 and already completed
 * operations are ignored. May be called from any thread, including a callback.
 * Worst case: never blocks.
 *
 * @return PORTAL_OK.
 */
PORTAL_API portal_status portal_operation_cancel(uint64_t operation);

/*
 * Common parameters of the *_async calls:
 *   queue           where the callback runs, or NULL (thread-default GMainContext at call time).
 *   callback        required; runs exactly once when the call returned PORTAL_OK.
 *   user_data       passed to callback and destroy_notify.
 *   destroy_notify  optional; runs once: after the callback returns, when the completion is
 *                   dropped, or before the call returns an error.
 *   operation_out   optional: receives the operation id for portal_operation_cancel() (never 0).
 * Return: PORTAL_OK (started: the callback will run) or PORTAL_ERR_INVALID_ARGUMENT (the same
 * argument checks as the blocking call, plus callback and queue; nothing started, callback never
 * runs, destroy_notify has run already, the thread's last error is set).
 */

/**
 * portal_auth_restore_session() without blocking. result->session: the session, or NULL when
 * signed out (status PORTAL_OK). Errors as the blocking call, plus PORTAL_ERR_CANCELLED.
 * Worst case: never blocks: the work runs on a worker thread.
 */
PORTAL_API portal_status portal_auth_restore_session_async(portal_auth *auth, portal_completion_queue *queue,
                                                           portal_completion_cb callback, void *user_data,
                                                           portal_destroy_notify destroy_notify,
                                                           uint64_t *operation_out);

/**
 * portal_auth_persist_session() without blocking. The strings are copied before this returns.
 * result->session: the stored session. Errors as the blocking call, plus PORTAL_ERR_CANCELLED.
 * Worst case: never blocks: the work runs on a worker thread.
 */
PORTAL_API portal_status portal_auth_persist_session_async(portal_auth *auth, const char *end_user_id,
                                                           const char *client_session_token,
                                                           portal_completion_queue *queue,
                                                           portal_completion_cb callback, void *user_data,
                                                           portal_destroy_notify destroy_notify,
                                                           uint64_t *operation_out);

/**
 * portal_auth_clear_persisted_session() without blocking. No result fields.
 * Worst case: never blocks: the work runs on a worker thread.
 */
PORTAL_API portal_status portal_auth_clear_persisted_session_async(portal_auth *auth, portal_completion_queue *queue,
                                                                   portal_completion_cb callback, void *user_data,
                                                                   portal_destroy_notify destroy_notify,
                                                                   uint64_t *operation_out);

/**
 * portal_session_invalidate() without blocking. The token is dropped from memory before this
 * returns; the keyring delete runs on a worker. No result fields.
 * Worst case: never blocks: the work runs on a worker thread.
 */
PORTAL_API portal_status portal_session_invalidate_async(portal_session *session, portal_completion_queue *queue,
                                                         portal_completion_cb callback, void *user_data,
                                                         portal_destroy_notify destroy_notify,
                                                         uint64_t *operation_out);

/**
 * portal_request() without blocking. The strings are copied before this returns.
 * result->http_status, result->body, result->body_len. Errors as the blocking call, plus
 * PORTAL_ERR_CANCELLED.
 * Worst case: never blocks: the work runs on a worker thread.
 */
PORTAL_API portal_status portal_request_async(portal *portal, const char *method, const char *target,
                                              const char *body, portal_completion_queue *queue,
                                              portal_completion_cb callback, void *user_data,
                                              portal_destroy_notify destroy_notify, uint64_t *operation_out);

/**
 * portal_report_unauthorized() without blocking. result->invalidated.
 * Worst case: never blocks: the work runs on a worker thread.
 */
PORTAL_API portal_status portal_report_unauthorized_async(portal *portal, const char *rejected_token,
                                                          portal_completion_queue *queue,
                                                          portal_completion_cb callback, void *user_data,
                                                          portal_destroy_notify destroy_notify,
                                                          uint64_t *operation_out);

/**
 * portal_clear_session() without blocking. No result fields.
 * Worst case: never blocks: the work runs on a worker thread.
 */
PORTAL_API portal_status portal_clear_session_async(portal *portal, portal_completion_queue *queue,
                                                    portal_completion_cb callback, void *user_data,
                                                    portal_destroy_notify destroy_notify,
                                                    uint64_t *operation_out);

/**
 * portal_on_session_invalidated() with the callback delivered on a completion queue (NULL: the
 * calling thread's thread-default GMainContext at this call) instead of a library thread; for
 * example on a GTK app's main thread. The same rules otherwise: called at most once, replayed to
 * a late registration, out (optional) receives the handle for portal_listener_cancel(), and
 * with out NULL the registration is owned by the portal until its delivery or portal_free() /
 * portal_free_async() (then never delivered; destroy_notify runs). destroy_notify runs
 * exactly once: after the delivery, on the queue's thread (or when that delivery is dropped);
 * or, when nothing was delivered, on the thread that cancels, frees or fails the registration.
 * Unlike portal_on_session_invalidated(), cancel and free stop a delivery only until it is
 * queued: once the invalidation has been handed to the queue, the callback runs there even if
 * portal_listener_cancel() or portal_free() is called meanwhile.
 * Worst case: never blocks.
 */
PORTAL_API portal_status portal_on_session_invalidated_queued(portal *portal, portal_completion_queue *queue,
                                                              portal_session_invalidated_cb callback,
                                                              void *user_data, portal_destroy_notify destroy_notify,
                                                              uint64_t *out);

/**
 * Frees a portal without blocking: like portal_free() (requests aborted, every listener
 * registration cancelled before this returns, so no listener callback starts after it), but
 * nothing is waited for on the calling thread: the aborted requests (up to about a second) and a
 * listener callback already running on the library's thread are waited for on a worker thread.
 * Such a callback finishes on its own, then its destroy_notify runs (on its thread); so a
 * listener that waits for the caller's main loop cannot deadlock with this call made on that
 * loop. When all of that is over, callback (optional) runs once on queue with PORTAL_OK: only
 * then is it safe to exit the process (see portal_free()). NULL portal:
 * PORTAL_ERR_INVALID_ARGUMENT.
 * Worst case: never blocks: the waiting runs on a worker thread.
 */
PORTAL_API portal_status portal_free_async(portal *portal, portal_completion_queue *queue,
                                           portal_completion_cb callback, void *user_data,
                                           portal_destroy_notify destroy_notify);

/* Non-blocking sign-in calls: the same rules and common parameters as the other *_async calls
 * (queue, user_data, destroy_notify, operation_out), with a sign-in callback. */

/**
 * The result of a non-blocking sign-in call, passed to its callback. Allocated by the library and
 * valid only during the callback; never copy it by value (fields may be added at the end). Only
 * the fields the call's documentation names are set; the others are NULL / 0 / false.
 *
 * Ownership: session, text, user_jwt and totp_link are owned by the library. To keep one, take
 * it: copy the pointer and set the field to NULL; the library frees whatever is left after the
 * callback returns (portal_session_free(), portal_string_free(), which wipes the user JWT).
 */
typedef struct portal_sign_in_result {
    /** handle_redirect, sign_in_with_google/_apple: what the sign-in came to
     * (PORTAL_REDIRECT_NOT_HANDLED for the other calls). */
    portal_redirect_kind kind;
    /** handle_redirect and sign_in_with_google/_apple (PORTAL_REDIRECT_AUTHENTICATED),
     * verify_totp: the persisted session. */
    portal_session *session;
    /** get_methods: the comma-separated methods; login_with_google/_apple: the authorize URL. */
    char *text;
    /** get_methods: whether Portal creates wallets automatically. */
    bool auto_create_wallet;
    /** handle_redirect, sign_in_with_google/_apple (PORTAL_REDIRECT_TOTP_REQUIRED): the user JWT,
     * a credential. */
    char *user_jwt;
    /** handle_redirect, sign_in_with_google/_apple (PORTAL_REDIRECT_TOTP_REQUIRED): the otpauth://
     * enrolment link, or NULL. */
    char *totp_link;
} portal_sign_in_result;

/**
 * Completion of a non-blocking sign-in call; runs exactly once per started operation, on its
 * queue, with the same parameters as portal_completion_cb except the result type.
 *
 * @param status         PORTAL_OK, PORTAL_ERR_CANCELLED, or the blocking call's error status.
 * @param result         the result (see portal_sign_in_result for ownership); never NULL.
 * @param error_message  "" on success, else the detail; never NULL, valid during the call. The
 *                       thread's portal_last_error_message() is not changed.
 * @param user_data      as passed to the *_async call.
 */
typedef void (*portal_sign_in_cb)(portal_status status, portal_sign_in_result *result, const char *error_message,
                                  void *user_data);

/**
 * portal_auth_get_methods() without blocking. result->text: the comma-separated methods,
 * result->auto_create_wallet. Errors as the blocking call, plus PORTAL_ERR_CANCELLED.
 * Worst case: never blocks: the work runs on a worker thread.
 */
PORTAL_API portal_status portal_auth_get_methods_async(portal_auth *auth, portal_completion_queue *queue,
                                                       portal_sign_in_cb callback, void *user_data,
                                                       portal_destroy_notify destroy_notify, uint64_t *operation_out);

/**
 * portal_auth_send_magic_link() without blocking. A NULL or over-long email is refused before
 * this returns; the address format is checked on the worker (then the callback gets
 * PORTAL_ERR_INVALID_ARGUMENT and nothing was sent). The pending sign-in marker is written on the worker, before the request. No result
 * fields. Errors as the blocking call, plus PORTAL_ERR_CANCELLED: a cancelled request may still
 * have reached Portal (an email may be sent; never retried).
 * Worst case: never blocks: the work runs on a worker thread.
 */
PORTAL_API portal_status portal_auth_send_magic_link_async(portal_auth *auth, const char *email,
                                                           portal_completion_queue *queue, portal_sign_in_cb callback,
                                                           void *user_data, portal_destroy_notify destroy_notify,
                                                           uint64_t *operation_out);

/**
 * portal_auth_login_with_google() without blocking. result->text: the authorize URL. Errors as
 * the blocking call, plus PORTAL_ERR_CANCELLED.
 * Worst case: never blocks: the work runs on a worker thread.
 */
PORTAL_API portal_status portal_auth_login_with_google_async(portal_auth *auth, portal_completion_queue *queue,
                                                             portal_sign_in_cb callback, void *user_data,
                                                             portal_destroy_notify destroy_notify,
                                                             uint64_t *operation_out);

/**
 * portal_auth_login_with_apple() without blocking; see portal_auth_login_with_google_async().
 * Worst case: never blocks: the work runs on a worker thread.
 */
PORTAL_API portal_status portal_auth_login_with_apple_async(portal_auth *auth, portal_completion_queue *queue,
                                                            portal_sign_in_cb callback, void *user_data,
                                                            portal_destroy_notify destroy_notify,
                                                            uint64_t *operation_out);

/**
 * portal_auth_handle_redirect_v2() without blocking: url (at most 8192 bytes) and flags
 * (portal_redirect_flags; unknown bits are PORTAL_ERR_INVALID_ARGUMENT before anything starts)
 * are checked and the URL copied before this returns. result->kind; result->session for
 * PORTAL_REDIRECT_AUTHENTICATED; result->user_jwt and result->totp_link (or NULL) for
 * PORTAL_REDIRECT_TOTP_REQUIRED. Errors and the exchange-once rule as the blocking call, plus
 * PORTAL_ERR_CANCELLED: a cancel after the grant exchange leaves the session persisted or not
 * (never half), and a repeat delivery of the URL on the same handle returns the remembered
 * exchange.
 * Worst case: never blocks: the work runs on a worker thread.
 */
PORTAL_API portal_status portal_auth_handle_redirect_async(portal_auth *auth, const char *url, uint32_t flags,
                                                           portal_completion_queue *queue, portal_sign_in_cb callback,
                                                           void *user_data, portal_destroy_notify destroy_notify,
                                                           uint64_t *operation_out);

/**
 * portal_auth_sign_in_with_google() without blocking: timeout_ms is checked before this returns.
 * result->kind, and result->session or result->user_jwt and result->totp_link, as for
 * portal_auth_handle_redirect_async(). The in-process delivery may come from
 * portal_auth_handle_redirect_async() on the same queue. Errors as the blocking call, plus
 * PORTAL_ERR_CANCELLED: portal_operation_cancel() ends the wait at once (before the page opened,
 * none is opened) and the call persists nothing afterwards. The wait holds one of the library's
 * network worker threads.
 * Worst case: never blocks: the work runs on a worker thread.
 */
PORTAL_API portal_status portal_auth_sign_in_with_google_async(portal_auth *auth, uint32_t timeout_ms,
                                                               portal_completion_queue *queue, portal_sign_in_cb callback,
                                                               void *user_data, portal_destroy_notify destroy_notify,
                                                               uint64_t *operation_out);

/**
 * portal_auth_sign_in_with_apple() without blocking; see portal_auth_sign_in_with_google_async().
 * Worst case: never blocks: the work runs on a worker thread.
 */
PORTAL_API portal_status portal_auth_sign_in_with_apple_async(portal_auth *auth, uint32_t timeout_ms,
                                                              portal_completion_queue *queue, portal_sign_in_cb callback,
                                                              void *user_data, portal_destroy_notify destroy_notify,
                                                              uint64_t *operation_out);

/**
 * portal_auth_verify_totp() without blocking. code and user_jwt are checked and copied before
 * this returns. result->session: the persisted session. Errors as the blocking call, plus
 * PORTAL_ERR_CANCELLED. A cancel after Portal accepted the code does not abort the keyring write
 * (the call deadline still bounds it): the worker persists the session when the keyring allows,
 * else keeps the exchange, and portal_auth_verify_totp() or this function with the same JWT on
 * the same handle returns the session without a second exchange.
 * Worst case: never blocks: the work runs on a worker thread.
 */
PORTAL_API portal_status portal_auth_verify_totp_async(portal_auth *auth, const char *code, const char *user_jwt,
                                                       portal_completion_queue *queue, portal_sign_in_cb callback,
                                                       void *user_data, portal_destroy_notify destroy_notify,
                                                       uint64_t *operation_out);

/* ---------------------------------------------------------------------------------------------
 * Watching the stored session (docs/threading.md)
 *
 * portal_auth_watch() reports changes of one auth environment's stored session made by any
 * process of the user (a URL handler that completed a sign-in, a second window that signed out,
 * a 401 that invalidated the session), without polling: the library listens on a session-bus
 * connection of its own for the Secret Service's signals and, on one, reads the auth
 * environment's items again (never unlocking, never prompting) and compares with what it saw
 * last. Items of other schemas or auth environments never produce events, even when a provider's
 * search over-matches. Bursts are coalesced: the keyring is read at most once per 100 ms while
 * signals keep coming, so 1,000 persists in a row give a few events, the last naming the final
 * state. While nothing changes, the watch costs no wake-up: its thread ("portal-watch") sleeps in
 * poll() until a D-Bus message for it arrives.
 *
 * The app's own changes are reported too, like any other process's, and each SIGNED_IN and
 * SIGNED_OUT says whose it was: portal_watch_current_origin(), called in the callback. The
 * provider's signal does not say who wrote an item, so the library remembers the generations
 * this process persisted and deleted (persist, clear, portal_clear_session(), an invalidation
 * by a 401 or portal_session_invalidate(); the blocking and non-blocking calls alike) and
 * compares: an app's own sign-out or 401 is PORTAL_WATCH_ORIGIN_THIS_PROCESS, another
 * window's or a URL handler's PORTAL_WATCH_ORIGIN_OTHER_PROCESS.
 * ------------------------------------------------------------------------------------------- */

/** A watch started by portal_auth_watch(); freed with portal_watch_free(). */
typedef struct portal_watch portal_watch;

/** What changed. New kinds may be added: ignore unknown values. */
typedef enum portal_watch_event {
    /** A new sign-in was persisted (by any process): end_user_id names its end user. */
    PORTAL_WATCH_SIGNED_IN = 1,
    /** The stored session was cleared or invalidated: nothing is stored. Show sign-in. */
    PORTAL_WATCH_SIGNED_OUT = 2,
    /** The session item, or the collection that may hold it, is locked: the state cannot be read
     *  without an unlock. NOT signed out: restore (which unlocks) to learn the state. */
    PORTAL_WATCH_LOCKED = 3,
    /** The Secret Service provider restarted (or the bus connection was re-established): changes
     *  may have been missed. Restore to learn the state; later changes are reported again. */
    PORTAL_WATCH_RESYNC = 4,
    /** portal_auth_watch_async() only, its first event: the watch is live; every change after
     *  this is reported. */
    PORTAL_WATCH_STARTED = 5,
    /** portal_auth_watch_async() only, instead of PORTAL_WATCH_STARTED: the watch could not start
     *  (no session bus, or D-Bus unusable after fork()); end_user_id is then the message saying
     *  why (UTF-8, no token). No event follows; free the watch. */
    PORTAL_WATCH_FAILED = 6,
    /** The keyring is readable again after a keyring call of this process for the watch's auth
     *  environment failed for want of the provider (PORTAL_ERR_SESSION_STORAGE with no answer in
     *  time, no provider, a provider error: a provider stopped, stalled or gone): a read has now
     *  succeeded (e.g. the provider was resumed). Leave a "keyring unavailable" state: restore to
     *  learn the state. A read of the watch's own that fails and then succeeds, or a failed call
     *  for another auth environment, is not reported (the app saw nothing unavailable). A change
     *  since the last event follows as its own event. Not sent for a lock (LOCKED, then the state
     *  once unlocked, says that) nor for a provider's restart (RESYNC). While the keyring cannot be
     *  read the watch reads it once a second (plus the call deadline a read can take), and not at
     *  all otherwise. */
    PORTAL_WATCH_AVAILABLE = 7
} portal_watch_event;

/** Who made the change a watch event reports (portal_watch_current_origin()). New values may
 *  be added: treat unknown ones as PORTAL_WATCH_ORIGIN_UNKNOWN. */
typedef enum portal_watch_origin {
    /** Not a change of the stored session (LOCKED, RESYNC, STARTED, FAILED and the like), a
     *  sign-out seen right after a lock or a resync (the watch did not see what went away), or
     *  no watch callback is running on this thread. */
    PORTAL_WATCH_ORIGIN_UNKNOWN = 0,
    /** This process made it: SIGNED_IN for a session it persisted (any sign-in call, any
     *  handle), SIGNED_OUT for a sign-in it cleared or invalidated. */
    PORTAL_WATCH_ORIGIN_THIS_PROCESS = 1,
    /** Another process made it (another window, a URL handler, a keyring tool). */
    PORTAL_WATCH_ORIGIN_OTHER_PROCESS = 2
} portal_watch_origin;

/**
 * The origin of the watch event whose callback is running on the calling thread; call it from
 * the portal_watch_cb. Per thread, like portal_last_error_message(): a callback that dispatches
 * another queue gets its own value back once the nested callbacks return.
 * Worst case: never blocks.
 *
 * @return the origin; PORTAL_WATCH_ORIGIN_UNKNOWN outside a watch callback.
 */
PORTAL_API portal_watch_origin portal_watch_current_origin(void);

/**
 * A watch event, on the watch's completion queue.
 *
 * @param event        what changed.
 * @param end_user_id  for PORTAL_WATCH_SIGNED_IN, the end user id (UTF-8); for
 *                     PORTAL_WATCH_FAILED, the failure's message; NULL for the other events.
 *                     Borrowed: valid only during the call (copy it to keep it).
 * @param user_data    as passed to portal_auth_watch().
 */
typedef void (*portal_watch_cb)(portal_watch_event event, const char *end_user_id, void *user_data);

/**
 * Starts watching auth's auth environment. Subscribes, waits until the bus has the subscription,
 * then reads the current state as the baseline (no event for it): every change after this returns
 * is reported. So an app waiting for sign-in calls portal_auth_watch(), then
 * portal_auth_restore_session(), and shows sign-in until PORTAL_WATCH_SIGNED_IN arrives.
 *
 * Worst case: the auth's call deadline (portal_auth_set_keyring_timeouts(), default 5000 ms)
 * plus one bus round trip; never shows a prompt. A provider that is not running, or a
 * keyring that cannot be read now, is not an error: the watch reports PORTAL_WATCH_RESYNC when a
 * provider takes the name org.freedesktop.secrets, and PORTAL_WATCH_AVAILABLE when a provider
 * that owned it answers again.
 *
 * Events are delivered in order, each once, on queue (see "Completion queues": a main-context
 * queue runs them from its GMainContext, a pollable queue from portal_completion_queue_dispatch();
 * NULL is the calling thread's thread-default GMainContext at this call). The callback may call
 * any library function, portal_watch_free() on its own watch included.
 *
 * @param auth            borrowed; the watch keeps what it needs (auth may be freed first).
 * @param queue           where callback runs, or NULL (see above). The watch keeps a reference.
 * @param callback        required.
 * @param user_data       passed to callback and destroy_notify.
 * @param destroy_notify  optional; runs exactly once: on a failed start before this returns,
 *                        else after portal_watch_free(), once no callback is running or queued
 *                        (on the thread that freed the watch, or on the queue's thread after the
 *                        last queued delivery was skipped).
 * @param[out] watch_out  receives the watch; free it with portal_watch_free().
 * @return PORTAL_OK; PORTAL_ERR_INVALID_ARGUMENT (NULL auth, callback or watch_out, a freed
 *         queue); PORTAL_ERR_SESSION_STORAGE (no session bus, or D-Bus unusable after fork()).
 *         Thread-safe.
 */
PORTAL_API portal_status portal_auth_watch(portal_auth *auth, portal_completion_queue *queue,
                                           portal_watch_cb callback, void *user_data,
                                           portal_destroy_notify destroy_notify, portal_watch **watch_out);

/**
 * portal_auth_watch() without blocking: returns at once (no bus round trip, no keyring read),
 * for GUI and event-loop code. The subscription and the baseline read happen on the watch's own
 * thread; then the first event on queue is PORTAL_WATCH_STARTED (live: every change after it is
 * reported) or PORTAL_WATCH_FAILED (with the message; nothing follows). So an app waiting for
 * sign-in starts the watch, then restores (portal_auth_restore_session_async()); a sign-in
 * that lands between the two is seen by the restore or reported after STARTED.
 *
 * Arguments, ownership, threads and destroy_notify as portal_auth_watch(); argument errors are
 * returned at once (PORTAL_ERR_INVALID_ARGUMENT, destroy_notify run before the return), as is
 * PORTAL_ERR_SESSION_STORAGE when D-Bus is unusable after fork().
 * Worst case: never blocks: the subscription and the baseline read run on the watch's thread.
 */
PORTAL_API portal_status portal_auth_watch_async(portal_auth *auth, portal_completion_queue *queue,
                                                 portal_watch_cb callback, void *user_data,
                                                 portal_destroy_notify destroy_notify, portal_watch **watch_out);

/**
 * Stops a watch and frees it. Never waits for the keyring: a read in progress finishes on the
 * watch thread by itself (bounded by the call deadline), which then exits; so this may be called
 * from a GUI or event loop. No callback starts after this returns when it is called on the
 * queue's thread (a callback already running on another thread may still finish). Events queued
 * and not yet delivered are skipped. May be called from the watch's own callback. NULL is a
 * no-op; a second free is ignored.
 * Worst case: never blocks.
 */
PORTAL_API void portal_watch_free(portal_watch *watch);

#ifdef __cplusplus
}
#endif

#endif /* PORTAL_KEYRING_H */
