import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The Portal client for one credential: PortalSwift's `Portal`, reduced to the session layer.
///
/// `Portal(credentials:)` validates the session against the Portal API at once
/// (`GET /api/v3/clients/me` with the CST as bearer, on a background thread), and every request
/// made through `send(_:)` that carries the bearer to the exact Portal API host and gets HTTP 401
/// invalidates the session and fires `onSessionInvalidated` listeners — once per credential, on
/// every Portal of the process built on it (`CredentialRegistry`; docs/api.md#invalidation). 5xx, 403, timeouts, connection errors and other hosts never invalidate.
///
/// HTTP: libcurl; HTTPS for every host except loopback (127.0.0.0/8, ::1, localhost: over IPv4
/// only, `HTTPClient.transportOptions`), 10 s to connect, 30 s per request, redirects not
/// followed. Thread-safe.
public final class Portal: Sendable {
    /// The Portal API host requests go to (`host` or `host:port`).
    public let apiHost: String
    /// The session this Portal was built from; nil for a static API key.
    public let credentials: PortalSession?
    private let apiKey: SecretBytes?
    let invalidation: InvalidationCenter
    /// The credential's name in `CredentialRegistry`; nil for a static API key.
    private let credential: String?
    let http: HTTPClient
    /// Requests in flight, and the switch `close()` uses to abort them.
    private let cancellation = RequestCancellation()
    /// Cancelled by `close()`: aborts each request's own `RequestCancellation` (docs/threading.md).
    private let closing = OperationToken()
    /// An atomic, not a Mutex: Synchronization's Mutex is futex-based, which ThreadSanitizer does
    /// not see as synchronization.
    private let inFlight = Atomic<Int>(0)

    /// Builds a Portal from a restored or signed-in session and validates it at once, without
    /// blocking the caller.
    ///
    /// - Parameters:
    ///   - credentials: the session; its token is sent as `Authorization: Bearer`.
    ///   - apiHost: the Portal API host; default the session's (from its `PortalAuth`).
    /// - Throws: `invalidArgument(name: "apiHost")` for a host that is not `host` or `host:port`.
    public convenience init(credentials: PortalSession, apiHost: String? = nil) throws(PortalAuthError) {
        if let apiHost { try PortalAuth.checkHost(apiHost) }
        self.init(credentials: credentials, apiHost: apiHost, http: HTTPClient())
    }

    init(credentials: PortalSession, apiHost: String?, http: HTTPClient, validate: Bool = true) {
        self.apiHost = apiHost ?? credentials.apiHost
        self.credentials = credentials
        self.apiKey = nil
        self.http = http
        self.invalidation = InvalidationCenter(phase: credentials.isInvalidated ? .invalidated : .active)
        let credential = CredentialRegistry.key(credentials)
        self.credential = credential
        CredentialRegistry.join(self, credential: credential)
        if validate {
            OperationWorkers.submit(.network) { [self] in
                _ = try? self.send(PortalRequest(target: "/api/v3/clients/me"))
            }
        }
    }

    /// Builds a Portal that sends nothing until asked (no validation at init): `portal-session
    /// check` sends its one `GET /api/v3/clients/me` itself and reads the answer; a 401 there
    /// invalidates exactly as any other (`reportUnauthorized`).
    @_spi(PortalKeyringCLI)
    public convenience init(credentialsUnvalidated credentials: PortalSession) {
        self.init(credentials: credentials, apiHost: nil, http: HTTPClient(), validate: false)
    }

    /// Builds a Portal from a static API key. Such a Portal never invalidates anything and its
    /// `onSessionInvalidated` returns a spent handle.
    ///
    /// - Throws: `invalidArgument(name:)` for a blank key or host.
    public init(apiKey: String, apiHost: String = PortalAuth.defaultApiHost) throws(PortalAuthError) {
        try PortalAuth.checkNewToken(apiKey, name: "apiKey")
        let key = SecretBytes.copyingUTF8(of: apiKey)
        try PortalAuth.checkHost(apiHost)
        self.apiHost = apiHost
        self.credentials = nil
        self.apiKey = key
        self.http = HTTPClient()
        self.invalidation = InvalidationCenter(phase: .staticKey)
        self.credential = nil
    }

    /// The last reference is gone (docs/threading.md "Listener lifetime"): this never cancels a
    /// listener an invalidation already reached; the others are released uncalled, since no
    /// request of this Portal is in flight (each one holds it) to detect an invalidation.
    deinit {
        invalidation.releaseOnDrop()
        if let credential { CredentialRegistry.prune(credential) }
    }

    /// Stops this Portal (the explicit close of the listener-lifetime rule, docs/threading.md):
    /// aborts requests in flight (including the validation request sent at init), cancels every
    /// listener registration and waits for the requests to return — about a second at most,
    /// libcurl's progress interval. From now on nothing invalidates: a 401 seen later deletes no
    /// item. Later requests fail with `networkFailure`.
    /// Call it before the process exits: a request still running on a library thread while the
    /// process tears down its TLS library can crash it. The C ABI's `portal_free` calls it.
    public func close() {
        cancellation.cancel()
        closing.cancel()
        invalidation.close()
        waitForRequests()
    }


    /// `close()` in two halves for the C ABI's `portal_free_async` (docs/threading.md): this one aborts the
    /// requests and cancels every listener registration without waiting for anything, not even a
    /// listener callback running on the delivery queue (it finishes on its own: a listener that
    /// waits for the app's main loop must not deadlock with a free called on that loop);
    /// `finishClose()` (on a worker thread) waits for the aborted requests and that callback.
    @_spi(Bindings)
    public func beginClose() {
        cancellation.cancel()
        closing.cancel()
        invalidation.close(wait: false)
    }

    /// The second half of `beginClose()`: waits (about a second at most) until no request of this
    /// Portal is in flight, then until a listener callback still running has returned.
    @_spi(Bindings)
    public func finishClose() {
        waitForRequests()
        invalidation.drain()
    }

    /// Waits (about a second at most) until no request of this Portal is in flight.
    @_spi(Bindings)
    public func waitForRequests() {
        for _ in 0..<400 where inFlight.load(ordering: .acquiring) > 0 { usleep(5_000) }
    }

    /// Registers `listener` to run once when the backend rejects this credential.
    ///
    /// Every listener is told, each at most once. A listener added after the rejection gets one
    /// replayed delivery. Listeners run on a library-owned serial queue, never while the library
    /// holds a lock, so they may call anything (including `cancel()` on their own handle).
    /// `clearSession()` never fires them.
    ///
    /// - Returns: a handle whose `cancel()` stops pending and future delivery; a spent handle
    ///   (id 0) for a static API key or after `clearSession()`.
    @discardableResult
    public func onSessionInvalidated(_ listener: @escaping @Sendable () -> Void) -> SessionInvalidatedHandle {
        invalidation.add(listener, release: nil)
    }

    /// Registration with a release hook, for the C ABI's destroy-notify: `release` runs exactly
    /// once, after the only delivery, on cancel, on free, or at once for a spent handle.
    @_spi(Bindings)
    public func onSessionInvalidated(_ listener: @escaping @Sendable () -> Void,
                                     release: @escaping @Sendable () -> Void) -> SessionInvalidatedHandle {
        invalidation.add(listener, release: release)
    }

    /// Cancels a registration by id (the C ABI's handles are ids). Unknown ids are ignored.
    @_spi(Bindings)
    public func cancelListener(id: UInt64) {
        let registration = invalidation.registration(id)
        invalidation.remove(id)
        registration?.cancel()
    }

    /// Cancels every registration (releasing each once): the C ABI's `portal_free`.
    @_spi(Bindings)
    public func cancelAllListeners() {
        invalidation.cancelAll()
    }

    /// Waits until listener deliveries queued so far have returned.
    public func waitForListenerDeliveries() {
        invalidation.drain()
    }

    /// Tells the Portal that a request the app made itself, carrying `rejectedToken` as bearer
    /// to the Portal API host, got HTTP 401. Invalidates the session and fires the listeners if
    /// `rejectedToken` is still the credential's current token; otherwise does nothing.
    ///
    /// - Returns: whether this call invalidated the session.
    /// - Throws: `sessionStorageFailure` when the stored item could not be deleted (the session
    ///   is invalidated in memory and the listeners fire regardless).
    @discardableResult
    public func reportUnauthorized(rejectedToken: String) throws(PortalAuthError) -> Bool {
        try reportUnauthorized(SecretBytes.copyingUTF8(of: rejectedToken))
    }

    func reportUnauthorized(_ rejected: SecretBytes) throws(PortalAuthError) -> Bool {
        guard let credentials, credentials.holds(token: rejected), invalidation.beginInvalidation() else {
            return false
        }
        var failure: PortalAuthError?
        do { try credentials.invalidate() } catch { failure = error }
        invalidation.notifyListeners()
        // Per credential, not per Portal: the other Portals on this credential hear it too.
        if let credential {
            for peer in CredentialRegistry.peers(of: self, credential: credential) { peer.credentialInvalidated() }
        }
        if let failure { throw failure }
        return true
    }

    /// Another Portal on this credential invalidated it (its stored item is deleted already):
    /// this one drops the token from memory and tells its listeners, once, unless it was closed
    /// or signed out (`CredentialRegistry`).
    private func credentialInvalidated() {
        guard invalidation.beginInvalidation() else { return }
        credentials?.dropToken()
        invalidation.notifyListeners()
    }

    /// Host-initiated sign-out: drops the token, deletes every stored session for the auth
    /// environment, and never fires `onSessionInvalidated`. Blocks (keyring I/O).
    ///
    /// - Throws: `sessionStorageFailure` when the keyring delete fails (the token is dropped
    ///   from memory regardless).
    public func clearSession() throws(PortalAuthError) {
        guard let credentials else { return }
        _ = invalidation.clear()
        do { try credentials.invalidate() } catch {}
        OwnChanges.deleting(credentials.authEnvironmentId, generation: nil)
        _ = try storageCall(credentials.authEnvironmentId) { () throws(StorageFailure) in
            try credentials.storage.deleteAll(authEnvironmentId: credentials.authEnvironmentId, generation: nil)
        }
    }

    /// Whether `target` is the Portal API host exactly: its authority (host and port, lower-cased)
    /// equals `apiHost`, or `apiHost:443` for https. A look-alike, another port, a prefix or a
    /// trailing-dot spelling is another host: it never gets the bearer, and its 401 never
    /// invalidates. (Internal so that tests can check the decision without DNS.)
    func isPortalAPI(_ target: TargetURL) -> Bool {
        target.authority == apiHost.lowercased()
            || (target.scheme == "https" && target.authority == apiHost.lowercased() + ":443")
    }


    /// What a request is checked for before anything is sent (`validate()`, then the target:
    /// a path on the Portal API host, or an absolute URL); the non-blocking C call checks it
    /// before it returns (`checkArguments(of:)`). Returns the parsed target.
    /// - Throws: `invalidArgument(name:)` naming `method`, `headers` or `target`.
    func checkRequest(_ request: PortalRequest) throws(PortalAuthError) -> TargetURL {
        try request.validate()
        if request.target.hasPrefix("/") {
            guard let url = TargetURL.forAPI(host: apiHost, path: request.target) else {
                throw .invalidArgument(name: "target")
            }
            return url
        }
        guard let url = TargetURL(request.target) else { throw .invalidArgument(name: "target") }
        return url
    }

    /// `checkRequest` for the C layer: throws what `send` would throw for the request's
    /// arguments, before anything starts.
    @_spi(Bindings)
    public func checkArguments(of request: PortalRequest) throws(PortalAuthError) {
        _ = try checkRequest(request)
    }
    /// Sends a request. The credential's bearer is attached only when the target is the Portal
    /// API host exactly (a path, or an absolute URL whose host and port equal `apiHost`); a 401
    /// to that host carrying the bearer invalidates the session (see `reportUnauthorized`).
    ///
    /// - Returns: the response, whatever its status.
    /// - Throws: `sessionInvalidated` when the credential was already invalidated;
    ///   `networkFailure(message:)` for connection errors, timeouts, TLS failures, a refused
    ///   plain-HTTP bearer; `invalidArgument(name: "target")` for a malformed target;
    ///   `invalidArgument(name: "method")` for a method outside `PortalRequest.allowedMethods`;
    ///   `invalidArgument(name: "headers")` for a header name that is not an RFC 7230 token or a
    ///   header value with CR, LF or NUL (all checked before anything is sent).
    public func send(_ request: PortalRequest) throws(PortalAuthError) -> PortalResponse {
        // Counted from the start, and nothing after close(): parsing the target already loads
        // and calls libcurl, and close() may have returned with the process exiting meanwhile.
        inFlight.wrappingAdd(1, ordering: .acquiringAndReleasing)
        defer { inFlight.wrappingSubtract(1, ordering: .acquiringAndReleasing) }
        if cancellation.isCancelled { throw .networkFailure(message: "the portal was closed") }
        let target = try checkRequest(request)
        let isPortalAPI = isPortalAPI(target)
        var bearer: SecretBytes?
        if isPortalAPI {
            if let credentials {
                guard let token = credentials.tokenBytes() else { throw .sessionInvalidated }
                bearer = token
            } else {
                bearer = apiKey
            }
        }
        var request = request
        if isPortalAPI, let credentials {
            request.headers.append((name: "x-portal-auth-environment-id", value: credentials.authEnvironmentId))
        }
        // A fresh trace id for every request to the Portal API host, unless the caller set one.
        if isPortalAPI, !request.headers.contains(where: { $0.name.lowercased() == TraceId.header.lowercased() }) {
            request.headers.append((name: TraceId.header, value: TraceId.fresh()))
        }
        // Aborted by close() or by cancelling the operation this thread runs (docs/threading.md).
        let abort = RequestCancellation()
        let unhookClose = closing.onCancel { abort.cancel() }
        let unhookOperation = OperationToken.current?.onCancel { abort.cancel() }
        defer { unhookClose(); unhookOperation?() }
        let response: PortalResponse
        do {
            response = try http.send(request, to: target, bearer: bearer, cancellation: abort)
        } catch {
            if cancellation.isCancelled { throw .networkFailure(message: "the portal was closed") }
            if OperationToken.currentIsCancelled { throw .networkFailure(message: "the request was cancelled") }
            throw .networkFailure(message: error.message(reaching: target.authority))
        }
        if response.status == 401, isPortalAPI, let bearer, credentials != nil {
            _ = try? reportUnauthorized(bearer)
        }
        return response
    }
}
