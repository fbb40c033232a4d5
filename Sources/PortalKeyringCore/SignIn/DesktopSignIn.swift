import CGLib

/// The desktop sign-in: PortalSwift's `signInWithGoogle()` / `signInWithApple()`, which own the
/// browser session and return the result, on a Linux desktop (docs/sign-in.md#desktop-sign-in).
///
/// There is no in-app browser sheet whose callback the library could read: the page opens in the
/// end user's browser (`DesktopURLOpener`), and the redirect comes back through the desktop's
/// handler for the app's URL scheme, either to the app itself, which passes it to
/// `handleRedirect(url:)` (an in-process delivery: `SignInInFlight`), or to a URL-handler process
/// such as `portal-session handle-redirect`, which persists the session that this process's
/// `SessionWatch` then sees. The call waits for whichever comes first.
extension PortalAuth {
    /// How long a desktop sign-in waits for its redirect by default: 15 minutes, the pending
    /// sign-in marker's lifetime (`handleRedirect` refuses a later redirect as unsolicited), and
    /// the longest timeout accepted.
    public static let defaultSignInTimeout: Duration = .seconds(PendingSignIn.lifetimeSeconds)

    /// Signs the end user in with Google in their browser and returns when the sign-in completed.
    ///
    /// 1. Fetches a fresh authorize URL (`loginWithGoogle()`, which records the pending sign-in
    ///    marker) and opens it with the desktop's URL opener: GIO's default handler for its
    ///    scheme (the user's web browser, from XDG `mimeapps.list`), or the OpenURI portal inside
    ///    a Flatpak sandbox.
    /// 2. Waits for the redirect, delivered either way:
    ///    - to this process: the app's URL handler passes it to `handleRedirect(url:)` (on any
    ///      `PortalAuth` of this auth environment, any thread) and this call returns that call's
    ///      result: `.authenticated` (persisted, with the client the API named) or
    ///      `.totpRequired`; an error of that call (a rejected grant, `differentEndUser`, a
    ///      keyring failure) ends this call with the same error, except `unsolicitedRedirect` and
    ///      `cancelled`. An `error` redirect ends it only when it carries the `state` parameter
    ///      of the authorize URL this call opened: any web page can send the app's scheme
    ///      `?error=access_denied`, so one without that `state` fails the `handleRedirect` call
    ///      alone and this call keeps waiting (for the real redirect, its timeout or a cancel);
    ///    - to another process (`portal-session handle-redirect URL` registered as the scheme's
    ///      handler, `examples/desktop/`), which persists the session: this call sees it through a
    ///      `SessionWatch` and returns `.authenticated` with the restored session (`clientId` and
    ///      `isAccountAbstracted` nil: the other process had them). Any new sign-in stored for
    ///      this auth environment meanwhile counts. A TOTP step or an error that the other
    ///      process met stores nothing and is not seen here: the call waits until its timeout.
    ///      When the keyring turns locked meanwhile (KeePassXC with ConfirmAccessItem shows the
    ///      other process's new item locked to this one), the call restores, which runs the
    ///      provider's prompt; a dismissed one throws `sessionStorageFailure`.
    ///
    /// One at a time: while one waits in this process for this auth environment, another throws
    /// `signInInProgress` at once. The call itself persists nothing: `handleRedirect` does, in
    /// whichever process the redirect reaches. Redirect hijacking (docs/sign-in.md#redirect-hijacking): the pending sign-in
    /// marker is recorded as by `loginWithGoogle()` and consumed by the completed sign-in, so a
    /// redirect after it is refused as unsolicited.
    ///
    /// Blocks the calling thread until it completes (network, keyring, the end user's time in
    /// the browser): call the `async` form from a GUI thread. The blocking form ends early only
    /// on its timeout or when its operation is cancelled (C's `portal_operation_cancel`).
    ///
    /// - Parameter timeout: how long to wait for the redirect once the page is open; more than 0,
    ///   at most `defaultSignInTimeout` (15 minutes, the default).
    /// - Throws: `signInInProgress`; `invalidArgument(name: "timeout")`; what `loginWithGoogle()`
    ///   throws (`authMethodUnavailable`, `networkFailure` …); `malformedResponse(field:
    ///   "google")` for an authorize URL that is not `https://` (or `http://` to a loopback host);
    ///   `signInUnavailable(message:)` when the desktop cannot open it (nothing persisted);
    ///   `signInTimedOut`; `sessionStorageFailure` when there is no session bus for the watch or
    ///   the stored sign-in cannot be read; `cancelled`; and the in-process delivery's error.
    public func signInWithGoogle(timeout: Duration = PortalAuth.defaultSignInTimeout) throws(PortalAuthError)
        -> AuthResult {
        try signInWithBrowser(provider: "GOOGLE", timeout: timeout)
    }

    /// Signs the end user in with Apple in their browser; see `signInWithGoogle(timeout:)`
    /// (`authMethodUnavailable(method: "APPLE")`, `malformedResponse(field: "apple")`).
    public func signInWithApple(timeout: Duration = PortalAuth.defaultSignInTimeout) throws(PortalAuthError)
        -> AuthResult {
        try signInWithBrowser(provider: "APPLE", timeout: timeout)
    }

    /// Throws `invalidArgument(name: "timeout")` unless `timeout` is positive and at most
    /// `defaultSignInTimeout`. The C exports check it before they start.
    @_spi(Bindings)
    public static func checkSignInTimeout(_ timeout: Duration) throws(PortalAuthError) {
        guard timeout > .zero, timeout <= defaultSignInTimeout else { throw .invalidArgument(name: "timeout") }
    }

    /// The one body of both providers' desktop sign-in, run under the caller's `OperationToken`
    /// when there is one (the `async` form's, or a C operation's): its cancellation ends the wait.
    func signInWithBrowser(provider: String, timeout: Duration) throws(PortalAuthError) -> AuthResult {
        try Self.checkSignInTimeout(timeout)
        let flight = SignInInFlight.shared
        let waiter = try flight.claim(authEnvironmentId)
        defer { flight.release(waiter) }
        let removeHook = OperationToken.current?.onCancel { flight.cancel(waiter) } ?? {}
        defer { removeHook() }

        // The sign-in stored before this one, as a read that never prompts sees it: a restore that
        // finds it again is no new sign-in.
        let before: String?
        if case .signedIn(let generation, _)? = try? storage.observe(authEnvironmentId: authEnvironmentId) {
            before = generation
        } else {
            before = nil
        }
        // Watch before the page opens, so that no sign-in stored after it is missed. A new item
        // that this process may not read without an unlock (KeePassXC's ConfirmAccessItem, for an
        // item another process created) is seen as locked: the restore below asks for it.
        let watch = try SessionWatch(auth: self) { change in
            if change == .locked { flight.signInStored(waiter) }
            if case .signedIn = change { flight.signInStored(waiter) }
        }
        defer { watch.cancel() }
        let url = try authorizeURL(provider: provider)
        // Only a web page: whatever else the API answered is not handed to the desktop to open.
        guard let target = TargetURL(url), target.scheme == "https" || target.isLoopback else {
            throw .malformedResponse(field: provider.lowercased())
        }
        // Only an `error` redirect that carries this page's single-use `state` ends the wait:
        // another page's `?error=…` is the handleRedirect caller's alone (docs/security.md, "A web page ends a desktop sign-in").
        flight.expect(state: RedirectQuery.state(ofAuthorizeURL: url), for: waiter)
        // A cancel during the request must not open a browser for a sign-in nobody waits for.
        if OperationToken.currentIsCancelled { throw .cancelled }
        try DesktopURLOpener.open(url)

        let end = MonotonicInstant.now.advanced(by: timeout)
        while true {
            switch flight.wait(waiter, until: end) {
            case .outcome(let outcome):
                return try outcome.get()
            case .timedOut:
                throw .signInTimedOut
            case .stored:
                // Stored by another process (the URL handler): the session as it is now, unlocked
                // through the provider's prompt if need be (a dismissed prompt ends the call with
                // sessionStorageFailure: the sign-in may be stored, it cannot be read). Signed out
                // again, or the sign-in from before (a lock that hid it): keep waiting.
                if let session = try restoreSession(), session.generation == nil || session.generation != before {
                    return .authenticated(AuthenticatedResult(session: session, clientId: nil, isAccountAbstracted: nil))
                }
            }
        }
    }
}
