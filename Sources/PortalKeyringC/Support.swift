// Conversions shared by the exported functions: status codes, the thread-local last error,
// argument checks for C strings, and handle boxes. Nothing here may trap: every failure becomes
// a status code and a message.
import CPortalKeyring
@_spi(Bindings) import PortalKeyringCore
#if canImport(Glibc)
import Glibc
#endif

// MARK: - Last error (thread-local, never NULL)

/// A pthread key whose value is this thread's last error message (malloc'd, freed on thread exit).
private let lastErrorKey: pthread_key_t = {
    var key = pthread_key_t()
    pthread_key_create(&key) { free($0) }
    return key
}()

/// A static empty C string returned when there is no error.
nonisolated(unsafe) private let emptyMessage: UnsafePointer<CChar> = staticCString("")

/// Points at the bytes of a string literal (static storage, never freed).
func staticCString(_ literal: StaticString) -> UnsafePointer<CChar> {
    UnsafeRawPointer(literal.utf8Start).assumingMemoryBound(to: CChar.self)
}

func setLastError(_ message: String) {
    let old = pthread_getspecific(lastErrorKey)
    pthread_setspecific(lastErrorKey, strdup(message))
    free(old)
}

func clearLastError() {
    guard let old = pthread_getspecific(lastErrorKey) else { return }
    pthread_setspecific(lastErrorKey, nil)
    free(old)
}

func lastErrorMessage() -> UnsafePointer<CChar> {
    guard let message = pthread_getspecific(lastErrorKey) else { return emptyMessage }
    return UnsafePointer(message.assumingMemoryBound(to: CChar.self))
}

// MARK: - Status

/// A failure on its way out through the C boundary.
struct CFailure: Error {
    let status: portal_status
    let message: String

    /// What a rejected argument should have been, by Swift parameter name (say what is
    /// expected, not only that the value is invalid).
    static let expected = [
        "apiHost": "expected a host name or IP address with an optional :port (api.portalhq.io, "
            + "127.0.0.1:8080), without a scheme or path",
        "redirectUrl": "expected an absolute URL scheme://… (myapp://auth) or scheme:/path "
            + "(com.example.app:/oauth2redirect), at most \(PortalAuth.maxRedirectURLBytes) bytes, "
            + "without whitespace or control characters",
        "clientSessionToken": "expected 1 … \(PortalAuth.maxTokenBytes) bytes of UTF-8 without whitespace or "
            + "control characters (spaces, tabs, CR, LF)",
        "userJwt": "expected the user JWT: 1 … \(PortalAuth.maxTokenBytes) bytes without whitespace or control characters",
        "apiKey": "expected 1 … \(PortalAuth.maxTokenBytes) bytes without whitespace or control characters",
        "authEnvironmentId": "expected 1 … \(PortalAuth.maxIdentifierBytes) bytes, not blank, without control characters",
        "endUserId": "expected 1 … \(PortalAuth.maxIdentifierBytes) bytes, not blank, without control characters",
        "fromEmail": "expected 1 … \(PortalAuth.maxIdentifierBytes) bytes, not blank, without control characters",
        "templateId": "expected 1 … \(PortalAuth.maxIdentifierBytes) bytes, not blank, without control characters",
        "timeout": "expected 0 (the default, \(PortalAuth.defaultSignInTimeout.components.seconds / 60) minutes) or at most "
            + "\(PortalAuth.defaultSignInTimeout.components.seconds * 1000) milliseconds",
    ]

    static func invalidArgument(_ name: String, _ problem: String) -> CFailure {
        CFailure(status: PORTAL_ERR_INVALID_ARGUMENT, message: "\(name): \(problem)")
    }

    /// `message` may carry outside text (a server, D-Bus, a redirect): control characters are
    /// removed and the length capped before it becomes the thread's last-error message.
    init(status: portal_status, message: String) {
        self.status = status
        self.message = DisplayText.sanitized(message, limit: DisplayText.maxMessageCharacters + 100)
    }

    /// Maps a core error; `names` translates Swift parameter names to the C ones.
    init(_ error: PortalAuthError, names: [String: String] = [:]) {
        switch error {
        case .invalidArgument(let name):
            let cName = names[name] ?? name
            self.init(status: PORTAL_ERR_INVALID_ARGUMENT, message: "\(cName): \(CFailure.expected[name] ?? "invalid value")")
        case .sessionStorageFailure(let message):
            self.init(status: PORTAL_ERR_SESSION_STORAGE, message: message)
        case .sessionInvalidated:
            self.init(status: PORTAL_ERR_SESSION_INVALIDATED, message: "the session was invalidated")
        case .unauthorized:
            self.init(status: PORTAL_ERR_UNAUTHORIZED, message: "the Portal API rejected the credential")
        case .networkFailure(let message):
            self.init(status: PORTAL_ERR_NETWORK, message: message)
        case .rateLimited:
            // "rate limited by the Portal API; retry after N s" (N from a Retry-After the response
            // carried), else "; retry later": no wait is promised that the server did not give.
            self.init(status: PORTAL_ERR_RATE_LIMITED, message: "\(error)")
        case .malformedResponse(let field):
            self.init(status: PORTAL_ERR_MALFORMED_RESPONSE, message: "the Portal API response lacks \(field)")
        case .invalidGrant:
            self.init(status: PORTAL_ERR_INVALID_GRANT, message: "the sign-in grant was rejected (used, expired or unknown)")
        case .invalidUserJwt:
            self.init(status: PORTAL_ERR_INVALID_USER_JWT, message: "invalid user JWT: it has no readable endUserId claim, or the Portal API refused it (expired or used); start the sign-in again")
        case .authenticationFailed(let message):
            self.init(status: PORTAL_ERR_AUTHENTICATION_FAILED, message: message)
        case .unsolicitedRedirect:
            self.init(status: PORTAL_ERR_UNSOLICITED_REDIRECT, message: "\(error)")
        case .differentEndUser:
            self.init(status: PORTAL_ERR_DIFFERENT_END_USER, message: "\(error); to replace it, repeat the call with "
                      + "PORTAL_REDIRECT_REPLACE_END_USER (portal_auth_handle_redirect_v2)")
        case .totpQrUnavailable:
            self.init(status: PORTAL_ERR_TOTP_QR_UNAVAILABLE, message: "\(error)")
        case .cancelled:
            self.init(status: PORTAL_ERR_CANCELLED, message: "the operation was cancelled")
        case .signInInProgress:
            self.init(status: PORTAL_ERR_SIGN_IN_IN_PROGRESS, message: "\(error)")
        case .signInUnavailable(let message):
            self.init(status: PORTAL_ERR_SIGN_IN_UNAVAILABLE, message: message)
        case .signInTimedOut:
            self.init(status: PORTAL_ERR_SIGN_IN_TIMED_OUT, message: "\(error)")
        case .magicLinkNotConfigured:
            self.init(status: PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED,
                      message: "no magic-link sender and template: call portal_auth_set_magic_link() first; nothing sent")
        case .authMethodUnavailable(let method):
            self.init(status: PORTAL_ERR_AUTH_METHOD_UNAVAILABLE,
                      message: "\(method) is not an enabled sign-in method of this auth environment")
        case .accountAbstractionUnavailable(let message):
            self.init(status: PORTAL_ERR_ACCOUNT_ABSTRACTION_UNAVAILABLE, message: message)
        case .internalServerError:
            self.init(status: PORTAL_ERR_SERVER, message: "\(error)")
        case .clientError:
            self.init(status: PORTAL_ERR_REQUEST_REFUSED, message: "\(error)")
        }
    }
}

/// Runs the body of an exported function: success clears the thread's last error; a failure
/// records its message and returns its status. Nothing escapes.
func exported(_ body: () throws(CFailure) -> Void) -> portal_status {
    do {
        try body()
        clearLastError()
        return PORTAL_OK
    } catch {
        setLastError(error.message)
        return error.status
    }
}

/// Calls into the core, mapping `PortalAuthError`.
func core<T>(names: [String: String] = [:], _ body: () throws(PortalAuthError) -> T) throws(CFailure) -> T {
    do {
        return try body()
    } catch {
        throw CFailure(error, names: names)
    }
}

// MARK: - Arguments

/// Reads a borrowed C string argument: non-NULL, at most `maxBytes` bytes (scanning no further),
/// valid UTF-8. Blankness is the core's check.
func stringArgument(_ pointer: UnsafePointer<CChar>?, _ name: String, maxBytes: Int,
                    allowingBlank: Bool = false) throws(CFailure) -> String {
    guard let pointer else { throw .invalidArgument(name, "must not be NULL") }
    let length = strnlen(pointer, maxBytes + 1)
    if length > maxBytes { throw .invalidArgument(name, "longer than \(maxBytes) bytes") }
    let bytes = UnsafeRawBufferPointer(start: pointer, count: length).bindMemory(to: UInt8.self)
    guard let string = String(validating: bytes, as: UTF8.self) else {
        throw .invalidArgument(name, "not valid UTF-8")
    }
    if !allowingBlank && string.isBlank { throw .invalidArgument(name, "must not be empty or blank") }
    return string
}

/// A secret C argument (a token, an API key, a user JWT) as a String this call owns. Its storage
/// is wiped when the last reference goes: at the end of a blocking export, or when an async
/// export's work (which captures it) is released on the worker. Every export that takes a
/// secret reads it through `secretArgument`, in its blocking and its async form alike
/// (`Tests/c/memscan_test/` scans for copies after each).
final class SecretArgument: @unchecked Sendable {
    private(set) var value: String
    init(_ value: String) { self.value = value }
    deinit { wipeStringStorage(&value) }
}

/// `stringArgument` for a secret: the same checks, the result wiped when released.
func secretArgument(_ pointer: UnsafePointer<CChar>?, _ name: String, maxBytes: Int) throws(CFailure) -> SecretArgument {
    SecretArgument(try stringArgument(pointer, name, maxBytes: maxBytes))
}

func outArgument<T>(_ pointer: UnsafeMutablePointer<T>?, _ name: String = "out") throws(CFailure) -> UnsafeMutablePointer<T> {
    guard let pointer else { throw .invalidArgument(name, "must not be NULL") }
    return pointer
}

/// Copies `text` into malloc'd memory for a caller-owned `char *` (released with
/// `portal_string_free`, which wipes).
func mallocCString(_ text: String) throws(CFailure) -> UnsafeMutablePointer<CChar> {
    guard let copy = strdup(text) else { throw CFailure(status: PORTAL_ERR_INTERNAL, message: "out of memory") }
    return handOutString(copy)
}

// MARK: - Handles

/// Behind `portal_auth *`. The core's `PortalAuth` is immutable; changing the timeouts swaps in
/// a new one under the lock.
final class AuthHandle: Sendable {
    let auth: Lock<PortalAuthBox>
    init(_ auth: PortalAuth) { self.auth = Lock(PortalAuthBox(value: auth)) }
    var current: PortalAuth { auth.withLock { $0.value } }
}

struct PortalAuthBox: Sendable { var value: PortalAuth }

/// Behind `portal_session *`: the core session plus C copies of its identifiers, which the
/// borrowed-string accessors return.
final class SessionHandle {
    let session: PortalSession
    let endUserId: UnsafeMutablePointer<CChar>
    let authEnvironmentId: UnsafeMutablePointer<CChar>
    /// What the sign-in that made this handle said about the client (nil: not said, or a
    /// restored or transferred session).
    let clientId: UnsafeMutablePointer<CChar>?
    let isAccountAbstracted: Bool?

    init?(_ session: PortalSession, clientId: String? = nil, isAccountAbstracted: Bool? = nil) {
        guard let endUserId = strdup(session.endUserId) else { return nil }
        guard let authEnvironmentId = strdup(session.authEnvironmentId) else {
            free(endUserId)
            return nil
        }
        var client: UnsafeMutablePointer<CChar>?
        if let clientId {
            guard let copy = strdup(clientId) else {
                free(endUserId)
                free(authEnvironmentId)
                return nil
            }
            client = copy
        }
        self.session = session
        self.endUserId = endUserId
        self.authEnvironmentId = authEnvironmentId
        self.clientId = client
        self.isAccountAbstracted = isAccountAbstracted
    }

    deinit {
        free(endUserId)
        free(authEnvironmentId)
        free(clientId)
    }
}

// Handles and strings the library has handed out and not taken back. A cheap guard against the
// commonest C mistakes: a second free, a call with a freed handle, a handle of another kind, or
// a pointer the library never returned. Each is reported (PORTAL_ERR_INVALID_ARGUMENT) or, for the
// free functions, ignored, instead of corrupting the heap. What stays undefined: a freed address
// that the allocator has since reused for a new handle of the same kind (or a new string) is
// live again, so a stale pointer to it acts on the new object; and freeing a handle while
// another thread is still inside a call with it (the call keeps the object alive, but the
// caller broke the contract). One process-wide lock; held only for a dictionary operation.
private let liveHandles = Lock<[UInt: ObjectIdentifier]>([:])
/// Caller-owned strings by address, with the number of bytes to wipe when they come back.
private let liveStrings = Lock<[UInt: Int]>([:])

func retainHandle(_ object: AnyObject) -> OpaquePointer {
    let pointer = Unmanaged.passRetained(object).toOpaque()
    liveHandles.withLock { $0[UInt(bitPattern: pointer)] = ObjectIdentifier(type(of: object)) }
    return OpaquePointer(pointer)
}

/// The object behind a live handle of kind `T` (a strong reference, taken under the registry's
/// lock, so a concurrent free cannot release it under the caller).
func borrowHandle<T: AnyObject>(_ pointer: OpaquePointer?, as type: T.Type, _ name: String) throws(CFailure) -> T {
    guard let pointer else { throw .invalidArgument(name, "must not be NULL") }
    // Retained under the lock (balanced by takeRetainedValue below), so a free racing this call
    // drops only its own reference.
    let live = liveHandles.withLock { live in
        guard live[UInt(bitPattern: pointer)] == ObjectIdentifier(T.self) else { return false }
        _ = Unmanaged<T>.fromOpaque(UnsafeRawPointer(pointer)).retain()
        return true
    }
    guard live else {
        throw .invalidArgument(name, "not a live \(name) handle (freed already, or another kind of handle)")
    }
    return Unmanaged<T>.fromOpaque(UnsafeRawPointer(pointer)).takeRetainedValue()
}

/// Takes a live handle of kind `T` back; the returned reference is the handle's last retain.
/// nil for NULL, a freed handle, another kind of handle or an unknown pointer: ignored.
@discardableResult
func releaseHandle<T: AnyObject>(_ pointer: OpaquePointer?, as type: T.Type) -> T? {
    guard let pointer else { return nil }
    let owned = liveHandles.withLock { live in
        guard live[UInt(bitPattern: pointer)] == ObjectIdentifier(T.self) else { return false }
        live[UInt(bitPattern: pointer)] = nil
        return true
    }
    guard owned else { return nil }
    return Unmanaged<T>.fromOpaque(UnsafeRawPointer(pointer)).takeRetainedValue()
}

/// Records a malloc'd string handed to the caller (released with `portal_string_free`), with
/// its size in bytes including the terminating NUL (default: up to its first NUL, plus one).
/// `portal_string_free` wipes exactly that many bytes, so a body with an embedded NUL is wiped
/// whole.
func handOutString(_ string: UnsafeMutablePointer<CChar>, size: Int? = nil) -> UnsafeMutablePointer<CChar> {
    let size = size ?? strlen(string) + 1
    liveStrings.withLock { $0[UInt(bitPattern: string)] = size }
    return string
}

/// The recorded size of `string` if it was handed out and not yet freed (forgotten now); nil
/// for a pointer the library did not hand out or took back already.
func takeBackString(_ string: UnsafeMutablePointer<CChar>) -> Int? {
    liveStrings.withLock { $0.removeValue(forKey: UInt(bitPattern: string)) }
}

/// Hands a session to the caller as a new handle.
func sessionHandle(_ session: PortalSession) throws(CFailure) -> OpaquePointer {
    try sessionHandle(AuthenticatedResult(session: session, clientId: nil, isAccountAbstracted: nil))
}

/// Hands a signed-in session to the caller as a new handle that also answers
/// portal_session_get_client_id() and portal_session_get_is_account_abstracted().
func sessionHandle(_ result: AuthenticatedResult) throws(CFailure) -> OpaquePointer {
    guard let handle = SessionHandle(result.session, clientId: result.clientId,
                                     isAccountAbstracted: result.isAccountAbstracted) else {
        throw CFailure(status: PORTAL_ERR_INTERNAL, message: "out of memory")
    }
    return retainHandle(handle)
}
