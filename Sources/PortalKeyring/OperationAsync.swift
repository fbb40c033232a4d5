@_spi(Bindings) import PortalKeyringCore

/// The `async` spellings of the blocking calls (docs/threading.md), with PortalSwift's names:
/// `try await auth.restoreSession()`. The blocking keyring and HTTP work runs on the library's
/// worker threads (`OperationWorkers`, "portal-async"), never on the cooperative thread pool, and
/// the awaiting task is resumed when it is done. Cancelling the task cancels the operation (its
/// keyring call, prompt wait or HTTP request; see `OperationToken`) and throws
/// `PortalAuthError.cancelled` at once.
enum OperationRunner {
    /// Runs `body` on a worker under a fresh `OperationToken` that task cancellation cancels.
    static func run<T: Sendable>(_ lane: OperationWorkers.Lane = .network,
                                 _ body: @escaping @Sendable () throws(PortalAuthError) -> T)
        async throws(PortalAuthError) -> T {
        let token = OperationToken()
        let once = OnceResume<T>()
        let result: Result<T, PortalAuthError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                once.arm(continuation)
                OperationWorkers.submit(lane) {
                    if token.isCancelled { return } // the cancel handler resumed already
                    let outcome: Result<T, PortalAuthError>
                    do throws(PortalAuthError) {
                        outcome = .success(try token.run { () throws(PortalAuthError) -> T in try body() })
                    } catch {
                        outcome = .failure(error)
                    }
                    once.resume(token.isCancelled ? .failure(.cancelled) : outcome)
                }
            }
        } onCancel: {
            token.cancel()
            once.resume(.failure(.cancelled))
        }
        return try result.get()
    }
}

/// Resumes a continuation exactly once, whichever of the worker and the cancel handler is first
/// (the cancel handler may even run before the continuation exists).
private final class OnceResume<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Result<T, PortalAuthError>, Never>?
        var early: Result<T, PortalAuthError>?
        var done = false
    }

    private let state = Lock(State())

    func arm(_ continuation: CheckedContinuation<Result<T, PortalAuthError>, Never>) {
        let early = state.withLock { s -> Result<T, PortalAuthError>? in
            if let early = s.early { return early }
            s.continuation = continuation
            return nil
        }
        if let early { continuation.resume(returning: early) }
    }

    func resume(_ result: Result<T, PortalAuthError>) {
        let continuation = state.withLock { s -> CheckedContinuation<Result<T, PortalAuthError>, Never>? in
            guard !s.done else { return nil }
            s.done = true
            guard let continuation = s.continuation else {
                s.early = result
                return nil
            }
            s.continuation = nil
            return continuation
        }
        continuation?.resume(returning: result)
    }
}

extension PortalAuth {
    /// `restoreSession()` without blocking a thread of the caller's: see `OperationRunner`.
    /// - Throws: as the blocking call, and `.cancelled` when the task is cancelled.
    public func restoreSession() async throws(PortalAuthError) -> PortalSession? {
        try await OperationRunner.run(.keyring) { () throws(PortalAuthError) in try self.restoreSession() }
    }

    /// `persistSession(endUserId:clientSessionToken:)` without blocking; `.cancelled` on task
    /// cancellation (then the new session was stored, or the previous one is intact).
    public func persistSession(endUserId: String, clientSessionToken: String) async throws(PortalAuthError)
        -> PortalSession {
        try await OperationRunner.run(.keyring) { () throws(PortalAuthError) in
            try self.persistSession(endUserId: endUserId, clientSessionToken: clientSessionToken)
        }
    }

    /// `clearPersistedSession()` without blocking; `.cancelled` on task cancellation.
    public func clearPersistedSession() async throws(PortalAuthError) {
        try await OperationRunner.run(.keyring) { () throws(PortalAuthError) in try self.clearPersistedSession() }
    }
}

extension PortalAuth {
    /// `getMethods()` without blocking; `.cancelled` on task cancellation.
    public func getMethods() async throws(PortalAuthError) -> AuthMethods {
        try await OperationRunner.run { () throws(PortalAuthError) in try self.getMethods() }
    }

    /// `sendMagicLink(email:)` without blocking. On `.cancelled` the request may still have
    /// reached Portal (an email may be sent); it is never retried.
    public func sendMagicLink(email: String) async throws(PortalAuthError) {
        try await OperationRunner.run { () throws(PortalAuthError) in try self.sendMagicLink(email: email) }
    }

    /// `loginWithGoogle()` without blocking: the authorize URL to open in the browser.
    public func loginWithGoogle() async throws(PortalAuthError) -> String {
        try await OperationRunner.run { () throws(PortalAuthError) in try self.loginWithGoogle() }
    }

    /// `loginWithApple()` without blocking: the authorize URL to open in the browser.
    public func loginWithApple() async throws(PortalAuthError) -> String {
        try await OperationRunner.run { () throws(PortalAuthError) in try self.loginWithApple() }
    }

    /// `signInWithGoogle(timeout:)` without blocking (PortalSwift's
    /// `try await auth.signInWithGoogle()`). Cancelling the task ends the wait at once with
    /// `.cancelled` (before the page opened: no browser is opened) and the call persists
    /// nothing afterwards; a redirect that still reaches `handleRedirect` or the URL handler is
    /// completed there. The wait holds one of the library's network worker threads.
    public func signInWithGoogle(timeout: Duration = PortalAuth.defaultSignInTimeout) async throws(PortalAuthError)
        -> AuthResult {
        try await OperationRunner.run { () throws(PortalAuthError) in try self.signInWithGoogle(timeout: timeout) }
    }

    /// `signInWithApple(timeout:)` without blocking; see `signInWithGoogle(timeout:)`.
    public func signInWithApple(timeout: Duration = PortalAuth.defaultSignInTimeout) async throws(PortalAuthError)
        -> AuthResult {
        try await OperationRunner.run { () throws(PortalAuthError) in try self.signInWithApple(timeout: timeout) }
    }

    /// `handleRedirect(url:options:)` without blocking (PortalSwift's
    /// `try await auth.handleRedirect(url:)`). On `.cancelled` after the grant exchange the
    /// session is persisted or not, never half; delivering the URL again on this object returns
    /// the remembered exchange.
    public func handleRedirect(url: String, options: RedirectOptions = []) async throws(PortalAuthError)
        -> RedirectResult {
        try await OperationRunner.run { () throws(PortalAuthError) in try self.handleRedirect(url: url, options: options) }
    }

    /// `verifyTotp(code:userJwt:)` without blocking: the persisted session and its client. On
    /// `.cancelled` after Portal accepted the code, the worker still persists the session when the
    /// keyring allows; verifying again with the same JWT on this object returns it (or retries
    /// the write) without a second exchange.
    @discardableResult
    public func verifyTotp(code: String, userJwt: String) async throws(PortalAuthError) -> AuthenticatedResult {
        try await OperationRunner.run { () throws(PortalAuthError) in try self.verifyTotp(code: code, userJwt: userJwt) }
    }
}

extension PortalSession {
    /// `invalidate()` without blocking; `.cancelled` on task cancellation (the token is dropped
    /// from memory either way once the worker ran).
    public func invalidate() async throws(PortalAuthError) {
        try await OperationRunner.run(.keyring) { () throws(PortalAuthError) in try self.invalidate() }
    }
}

extension Portal {
    /// `send(_:)` without blocking; task cancellation aborts the request (`.cancelled`).
    public func send(_ request: PortalRequest) async throws(PortalAuthError) -> PortalResponse {
        try await OperationRunner.run { () throws(PortalAuthError) in try self.send(request) }
    }

    /// `reportUnauthorized(rejectedToken:)` without blocking.
    @discardableResult
    public func reportUnauthorized(rejectedToken: String) async throws(PortalAuthError) -> Bool {
        try await OperationRunner.run(.keyring) { () throws(PortalAuthError) in try self.reportUnauthorized(rejectedToken: rejectedToken) }
    }

    /// `clearSession()` without blocking; `.cancelled` on task cancellation.
    public func clearSession() async throws(PortalAuthError) {
        try await OperationRunner.run(.keyring) { () throws(PortalAuthError) in try self.clearSession() }
    }
}
