/// Errors thrown by the portal-keyring Swift API.
///
/// Cases and names follow PortalSwift's `PortalAuthError`. The C ABI maps each case to one
/// `portal_status` code (see `Include/portal_keyring.h`).
public enum PortalAuthError: Error, Equatable, Sendable {
    /// An argument was rejected before any I/O happened. `name` is the parameter's Swift name
    /// (for example `"authEnvironmentId"`, `"redirectUrl"`, `"clientSessionToken"`).
    case invalidArgument(name: String)

    /// The Secret Service keyring could not be read or written this time: no session bus, no
    /// Secret Service provider, the collection is locked and was not unlocked, the unlock prompt
    /// was dismissed, the provider did not answer within the deadline, or there is no default
    /// collection to store into. Never means "signed out" and never comes with a deletion
    /// (docs/api.md#errors and docs/api.md#failures-and-deadlines). `message` is human-readable and never contains a token.
    case sessionStorageFailure(message: String)

    /// The session was invalidated (by `PortalSession.invalidate()`, a rejected request, or a
    /// sign-out); its token is no longer available.
    case sessionInvalidated

    /// The Portal API rejected the credential (HTTP 401).
    case unauthorized

    /// The request did not get a usable response: connection failure, timeout, TLS error, or a
    /// request the library refused to send (a bearer over plain HTTP to a non-loopback host).
    case networkFailure(message: String)

    /// The Portal API answered HTTP 429: too many requests. `POST /magic-links` allows a few
    /// emails per address per minute and sends no `Retry-After`, so `retryAfterSeconds` is
    /// usually nil: wait and let the end user ask again (never retried automatically). When a
    /// `Retry-After` header is present it is parsed: whole seconds (delta-seconds, or an
    /// HTTP-date converted to seconds from now); nil when absent, 0, or a date passed.
    case rateLimited(retryAfterSeconds: Int?)

    /// The Portal API's response lacked a required field (named here).
    case malformedResponse(field: String)

    /// The redirect's grant was rejected: used already, expired, or unknown (HTTP 401 on exchange).
    case invalidGrant

    /// The user JWT for a TOTP verification was rejected: expired, used or malformed.
    case invalidUserJwt

    /// Sign-in failed: an `error` redirect parameter (or a redirect without a token or a known
    /// method), or a wrong TOTP code; `message` says which (never a token). A server failure
    /// (`internalServerError`) or a refused request (`clientError`) is never reported as this.
    case authenticationFailed(message: String)

    /// `sendMagicLink(email:)` was called on a `PortalAuth` made without a `MagicLinkConfig`:
    /// the backend requires `fromEmail` and `templateId`. Raised before any I/O: nothing was
    /// sent and no pending sign-in was recorded.
    case magicLinkNotConfigured

    /// `loginWithGoogle()` / `loginWithApple()`: the auth environment has not enabled that
    /// provider (`GET /api/v3/auth/oauth/urls` answered without its URL). `method` is the
    /// backend's name, `"GOOGLE"` or `"APPLE"`. Not retryable; see `getMethods()`.
    case authMethodUnavailable(method: String)

    /// HTTP 400 with `{"error": …}` from `POST /magic-links` or `GET /oauth/urls`: the
    /// `isAccountAbstracted` asked for is not available for this auth environment. `message` is
    /// the server's text, at most 200 characters, without control characters.
    case accountAbstractionUnavailable(message: String)

    /// The Portal API answered with HTTP 5xx (`status`): a server-side failure, not a rejected
    /// sign-in; the request may be tried again later (PortalSwift's `internalServerError`).
    case internalServerError(status: Int)

    /// The Portal API refused the request with a 4xx status other than 401 and 429 (403, 400,
    /// 404 …; PortalSwift's `clientError`): not a failed sign-in of the end user but a request the
    /// backend will not serve as sent (configuration, a disabled method, a bad field).
    /// `message` is the server's `error` text, sanitized and capped, or empty.
    case clientError(status: Int, message: String)

    /// `handleRedirect` refused a redirect no sign-in here asked for: no `sendMagicLink`,
    /// `loginWithGoogle` or `loginWithApple` for this auth environment, by this user, in the last
    /// 15 minutes, or that sign-in was completed already. Nothing was exchanged or stored (login
    /// CSRF defence; docs/sign-in.md#redirect-hijacking). Start the sign-in again.
    case unsolicitedRedirect

    /// `handleRedirect` signed in `newEndUserId`, but a session of `storedEndUserId` is stored:
    /// nothing was stored. To replace it, call `handleRedirect` again with the same URL on the
    /// same instance and `.replaceDifferentEndUser` (no second exchange). End user ids are not
    /// secrets.
    case differentEndUser(storedEndUserId: String, newEndUserId: String)
    /// No QR code could be made of a TOTP enrolment link: there is none, it is not an
    /// `otpauth://` link with a valid base32 secret, it is too long for a QR code, or libqrencode
    /// (Debian: libqrencode4) is not installed. Never includes the link.
    case totpQrUnavailable

    /// `signInWithGoogle(timeout:)` / `signInWithApple(timeout:)`: a desktop sign-in of this auth
    /// environment is already waiting in this process (PortalSwift's
    /// `PortalAuthSignInError.signInInProgress`: a second one would fetch another single-use
    /// `state` and open a second browser tab). Thrown at once; nothing was done.
    case signInInProgress

    /// `signInWithGoogle(timeout:)` / `signInWithApple(timeout:)`: the desktop could not open the
    /// sign-in page (PortalSwift's `PortalAuthSignInError.unavailable`): no application is
    /// registered for its URL scheme and no OpenURI portal answered, or the browser failed to
    /// start. `message` gives GIO's reason and the scheme, never the URL. Nothing was persisted.
    case signInUnavailable(message: String)

    /// `signInWithGoogle(timeout:)` / `signInWithApple(timeout:)`: no redirect came back within
    /// the call's timeout, neither to `handleRedirect` in this process nor stored by the URL
    /// handler's process. Nothing was persisted by the call. The pending sign-in stays open for
    /// the rest of its 15 minutes, so a browser tab finished later is still accepted.
    case signInTimedOut

    /// The operation's task was cancelled before it completed (the `async` spellings only;
    /// C: `PORTAL_ERR_CANCELLED`). A cancelled persist stored the new session or left the previous
    /// one intact, never half.
    case cancelled
}

extension PortalAuthError: CustomStringConvertible {
    /// Safe to print: messages built from outside text (a server, D-Bus, a redirect) have their
    /// control characters removed and their length capped (`DisplayText`).
    public var description: String {
        DisplayText.sanitized(rawDescription, limit: DisplayText.maxMessageCharacters + 100)
    }

    private var rawDescription: String {
        switch self {
        case .invalidArgument(let name): return "invalid argument: \(name)"
        case .sessionStorageFailure(let message): return "session storage failure: \(message)"
        case .sessionInvalidated: return "session invalidated"
        case .unauthorized: return "unauthorized"
        case .networkFailure(let message): return "network failure: \(message)"
        case .rateLimited(let seconds):
            return "rate limited by the Portal API" + (seconds.map { "; retry after \($0) s" } ?? "; retry later")
        case .malformedResponse(let field): return "malformed response: missing \(field)"
        case .invalidGrant: return "invalid grant"
        case .invalidUserJwt: return "invalid user JWT"
        case .authenticationFailed(let message): return "authentication failed: \(message)"
        case .magicLinkNotConfigured:
            return "magic link not configured: give PortalAuth a MagicLinkConfig (fromEmail, templateId); nothing sent"
        case .authMethodUnavailable(let method):
            return "auth method unavailable: \(method) is not enabled for this auth environment"
        case .accountAbstractionUnavailable(let message):
            return "account abstraction unavailable for this auth environment: \(message)"
        case .internalServerError(let status): return "Portal API server error (HTTP \(status)); try again later"
        case .clientError(let status, let message):
            return "the Portal API refused the request (HTTP \(status))" + (message.isEmpty ? "" : ": \(message)")
        case .unsolicitedRedirect:
            return "unsolicited redirect: no sign-in was started for this auth environment in the last 15 minutes; nothing done"
        case .differentEndUser(let stored, let new):
            return "the redirect signs in end user \(new), but end user \(stored) is signed in; nothing stored"
        case .totpQrUnavailable:
            return "no QR code for this TOTP link (no otpauth:// link with a valid secret, too long, or libqrencode4 not installed)"
        case .signInInProgress:
            return "a sign-in is already in progress for this auth environment; wait for it or cancel it"
        case .signInUnavailable(let message): return "sign-in unavailable: \(message)"
        case .signInTimedOut:
            return "the sign-in timed out: no redirect came back from the browser; nothing stored"
        case .cancelled: return "cancelled"
        }
    }
}
