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
    /// (SPEC §3, §5). `message` is human-readable and never contains a token.
    case sessionStorageFailure(message: String)

    /// The session was invalidated (by `PortalSession.invalidate()`, a rejected request, or a
    /// sign-out); its token is no longer available.
    case sessionInvalidated

    /// The Portal API rejected the credential (HTTP 401).
    case unauthorized

    /// The request did not get a usable response: connection failure, timeout, TLS error, or a
    /// request the library refused to send (a bearer over plain HTTP to a non-loopback host).
    case networkFailure(message: String)

    /// The Portal API answered HTTP 429: too many requests; try again later. `retryAfterSeconds`
    /// is the wait its `Retry-After` header asked for, in whole seconds (delta-seconds, or an
    /// HTTP-date converted to seconds from now); nil when it sent none (or 0, or a date passed).
    case rateLimited(retryAfterSeconds: Int?)

    /// The Portal API's response lacked a required field (named here).
    case malformedResponse(field: String)

    /// The redirect's grant was rejected: used already, expired, or unknown (HTTP 401 on exchange).
    case invalidGrant

    /// The user JWT for a TOTP verification was rejected: expired, used or malformed.
    case invalidUserJwt

    /// Sign-in failed: an `error` redirect parameter, a wrong TOTP code, or another backend
    /// error; `message` says which (never a token).
    case authenticationFailed(message: String)

    /// `handleRedirect` refused a redirect no sign-in here asked for: no `sendMagicLink`,
    /// `loginWithGoogle` or `loginWithApple` for this auth environment, by this user, in the last
    /// 15 minutes, or that sign-in was completed already. Nothing was exchanged or stored (login
    /// CSRF defence; README "Redirect hijacking"). Start the sign-in again.
    case unsolicitedRedirect

    /// `handleRedirect` signed in `newEndUserId`, but a session of `storedEndUserId` is stored:
    /// nothing was stored. To replace it, call `handleRedirect` again with the same URL on the
    /// same instance and `.replaceDifferentEndUser` (no second exchange). End user ids are not
    /// secrets.
    case differentEndUser(storedEndUserId: String, newEndUserId: String)
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
        case .unsolicitedRedirect:
            return "unsolicited redirect: no sign-in was started for this auth environment in the last 15 minutes; nothing done"
        case .differentEndUser(let stored, let new):
            return "the redirect signs in end user \(new), but end user \(stored) is signed in; nothing stored"
        case .cancelled: return "cancelled"
        }
    }
}
