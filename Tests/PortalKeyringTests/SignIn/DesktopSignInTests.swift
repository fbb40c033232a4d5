import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// `signInWithGoogle(timeout:)` / `signInWithApple(timeout:)` (DesktopSignIn.swift) with real
/// parts: GIO's URL opener launching `FakeBrowser` (a desktop file registered for
/// x-scheme-handler/http(s)), the loopback Portal API's authorize URLs and grants, the private
/// keyring, the session watch, and `portal-session handle-redirect` as the URL handler's process.
@Suite(.serialized) struct DesktopSignInTests {
    private func auth(_ tag: String) throws -> PortalAuth {
        _ = try KeyringControl.environment()
        return try PortalAuth(authEnvironmentId: "desktop-\(tag)-\(ItemSchema.newGeneration().prefix(8))",
                              redirectUrl: redirect, apiHost: try FakePortalAPI.host(),
                              keyringTimeouts: KeyringTimeouts(callMilliseconds: 5_000, promptMilliseconds: 1_000))
    }

    /// The error a finished sign-in task threw, as the library's error.
    private func failure(_ task: Task<AuthResult, any Error>) async -> PortalAuthError? {
        if case .failure(let error) = await task.result { return error as? PortalAuthError }
        return nil
    }

    /// Waits until the browser was launched `count` times in all.
    private func launched(_ count: Int) async throws {
        let end = monotonicMilliseconds() + 20_000
        while try FakeBrowser.opened().count < count, monotonicMilliseconds() < end {
            try await Task.sleep(for: .milliseconds(20))
        }
        try #require(try FakeBrowser.opened().count == count, "the browser was not launched")
    }

    @Test func theBrowserIsTheDesktopsHandlerAsGioSeesIt() throws {
        let a = try auth("gio")
        try FakeBrowser.install(mode: "ignore", auth: a)
        // The desktop's own tool, in a process of its own, reads the same registration.
        let output = try #require(popen("gio mime x-scheme-handler/https 2>&1", "r"))
        var text = ""
        var buffer = [CChar](repeating: 0, count: 1024)
        while fgets(&buffer, Int32(buffer.count), output) != nil {
            text += String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        #expect(pclose(output) == 0)
        #expect(text.contains("Default application for “x-scheme-handler/https”: \(FakeBrowser.desktopId)"), "\(text)")
    }

    /// The redirect comes back into this process: the app hands it to `handleRedirect`, and the
    /// waiting call returns that call's result (with the client the API named, which only the
    /// exchange knows), persisted; the completed sign-in consumed the marker, so a fresh grant
    /// afterwards is refused as unsolicited.
    @Test func inProcessDeliveryReturnsTheSignedInResult() async throws {
        let a = try auth("inproc")
        try FakeBrowser.install(mode: "deliver", auth: a, endUser: "eu-desktop-inproc")
        let signIn = Task { try await a.signInWithGoogle(timeout: .seconds(60)) }
        let url = try await FakeBrowser.waitForFile("redirect")
        #expect(url.hasPrefix(redirect) && url.contains("login_type=GOOGLE"))
        // The app's URL handler code, on another PortalAuth of the same auth environment.
        let app = try PortalAuth(authEnvironmentId: a.authEnvironmentId, redirectUrl: redirect, apiHost: a.apiHost)
        guard case .authenticated(let delivered) = try await app.handleRedirect(url: url) else {
            Issue.record("handleRedirect did not sign in")
            return
        }
        guard case .authenticated(let result) = try await signIn.value else {
            Issue.record("the desktop sign-in did not return the signed-in result")
            return
        }
        #expect(result.session.endUserId == "eu-desktop-inproc")
        #expect(result.clientId != nil && result.clientId == delivered.clientId)
        #expect(try result.session.getToken() == delivered.session.getToken())
        #expect(try await a.restoreSession()?.getToken() == delivered.session.getToken())
        #expect(try FakeBrowser.opened().count == 1)

        let unsolicited = try grant("oauth", user: "eu-desktop-attacker", provider: "GOOGLE")
        await #expect(throws: PortalAuthError.unsolicitedRedirect) { try await a.handleRedirect(url: unsolicited) }
        #expect(try await a.restoreSession()?.endUserId == "eu-desktop-inproc")
        try await a.clearPersistedSession()
    }

    /// The redirect goes to the URL handler's process (`portal-session handle-redirect`), which
    /// persists the session: the waiting call sees it through the watch and returns it restored.
    ///
    /// KeePassXC with ConfirmAccessItem (`keepassxc-confirm`) shows the other process's new item
    /// locked to this one: the call restores, which runs the access prompt, and nobody answers it
    /// here: `sessionStorageFailure` at the prompt deadline, not a wait until the timeout.
    @Test func completionByTheHandlerProcessIsSeenThroughTheWatch() async throws {
        let a = try auth("handler")
        try FakeBrowser.install(mode: "handler", auth: a, endUser: "eu-desktop-handler")
        if KeyringControl.provider == "keepassxc-confirm" {
            let started = monotonicMilliseconds()
            do throws(PortalAuthError) {
                _ = try await a.signInWithApple(timeout: .seconds(60))
                Issue.record("an item locked to this process was read without a confirmation")
            } catch .sessionStorageFailure(let message) {
                #expect(message.contains("locked"), "\(message)")
            } catch {
                Issue.record("expected sessionStorageFailure, got \(error)")
            }
            #expect(monotonicMilliseconds() - started < 20_000)
            #expect(try await FakeBrowser.waitForFile("handler-status") == "0")
            return
        }
        let result = try await a.signInWithApple(timeout: .seconds(60))
        #expect(try await FakeBrowser.waitForFile("handler-status") == "0")
        guard case .authenticated(let signedIn) = result else {
            Issue.record("expected authenticated")
            return
        }
        #expect(signedIn.session.endUserId == "eu-desktop-handler")
        #expect(signedIn.clientId == nil)  // the handler's process had it, this one restored
        #expect(try await a.restoreSession()?.getToken() == signedIn.session.getToken())
        // The handler's process completed the sign-in and consumed the marker.
        let unsolicited = try grant("oauth", user: "eu-desktop-attacker", provider: "APPLE")
        await #expect(throws: PortalAuthError.unsolicitedRedirect) { try await a.handleRedirect(url: unsolicited) }
        try await a.clearPersistedSession()
    }

    /// The `state` parameter of the authorize URL the browser was launched with.
    private func openedState() throws -> String {
        let opened = try #require(try FakeBrowser.opened().last, "the browser was not launched")
        return try #require(RedirectQuery.state(ofAuthorizeURL: opened), "no state in \(opened)")
    }

    /// An `error` redirect delivered in process (the end user declined) that carries the sign-in's
    /// `state` ends the wait with it.
    @Test func anErrorRedirectEndsTheWait() async throws {
        let a = try auth("error")
        try FakeBrowser.install(mode: "deliver", auth: a, endUser: "eu-desktop-error")
        let signIn = Task { try await a.signInWithGoogle(timeout: .seconds(60)) }
        _ = try await FakeBrowser.waitForFile("redirect")
        let state = try openedState()
        let declined = redirect + "?error=access_denied&login_type=GOOGLE&state=" + state
        await #expect(throws: PortalAuthError.self) { try await a.handleRedirect(url: declined) }
        guard case .authenticationFailed(let message) = await failure(signIn) else {
            Issue.record("expected authenticationFailed")
            return
        }
        #expect(message.contains("access_denied"))
        #expect(try await a.restoreSession() == nil)
    }

    /// docs/security.md "A web page ends a desktop sign-in": any web page can navigate to the app's scheme with
    /// `?error=access_denied`. Without the sign-in's `state` (none, another one, the right one
    /// with a byte more or less) the `handleRedirect` caller gets the error, but the waiting
    /// sign-in goes on, and the end user's real redirect a moment later completes it: the app
    /// never says "failed" while a session is stored.
    @Test func anErrorRedirectWithoutTheSignInsStateDoesNotEndTheWait() async throws {
        let a = try auth("forged")
        try FakeBrowser.install(mode: "deliver", auth: a, endUser: "eu-desktop-forged")
        let signIn = Task { try await a.signInWithGoogle(timeout: .seconds(60)) }
        let url = try await FakeBrowser.waitForFile("redirect")
        let state = try openedState()
        let app = try PortalAuth(authEnvironmentId: a.authEnvironmentId, redirectUrl: redirect, apiHost: a.apiHost)
        for forged in ["?error=access_denied&login_type=GOOGLE", "?error=access_denied&state=",
                       "?error=access_denied&login_type=GOOGLE&state=forged",
                       "?error=access_denied&state=" + state + "x", "?error=access_denied&state=" + state.dropLast(),
                       "?state=" + state + "&error=access_denied&state=other"] {
            do throws(PortalAuthError) {
                _ = try await app.handleRedirect(url: redirect + forged)
                Issue.record("\(forged) was not an error")
            } catch .authenticationFailed(let message) {
                #expect(message.contains("access_denied"), "\(message)")
            } catch {
                Issue.record("\(forged): expected authenticationFailed, got \(error)")
            }
        }
        // A wrongly ended wait has ended by now (the delivery reports before it returns).
        try await Task.sleep(for: .milliseconds(200))
        guard case .authenticated(let delivered) = try await app.handleRedirect(url: url) else {
            Issue.record("handleRedirect did not sign in")
            return
        }
        guard case .authenticated(let result) = try await signIn.value else {
            Issue.record("the desktop sign-in did not return the signed-in result")
            return
        }
        #expect(result.session.endUserId == "eu-desktop-forged")
        #expect(result.clientId != nil && result.clientId == delivered.clientId)
        #expect(try await a.restoreSession()?.endUserId == "eu-desktop-forged")
        try await a.clearPersistedSession()
    }

    /// Single flight: while one sign-in waits, a second one for the same auth environment fails at
    /// once with `signInInProgress` and opens no browser; once the first ended, a new one may start.
    @Test func aSecondCallWhileOneWaitsFailsAtOnce() async throws {
        let a = try auth("single")
        try FakeBrowser.install(mode: "ignore", auth: a)
        let first = Task { try await a.signInWithGoogle(timeout: .seconds(30)) }
        try await launched(1)
        let started = monotonicMilliseconds()
        await #expect(throws: PortalAuthError.signInInProgress) { try await a.signInWithApple(timeout: .seconds(5)) }
        #expect(throws: PortalAuthError.signInInProgress) { try a.signInWithGoogle(timeout: .seconds(5)) }
        #expect(monotonicMilliseconds() - started < 1_000)
        #expect(try FakeBrowser.opened().count == 1)
        // Released by the cancel itself (its handler runs inside cancel()), not later by the
        // worker thread: the next sign-in starts at once (and ends at its short timeout).
        first.cancel()
        #expect(throws: PortalAuthError.signInTimedOut) { try a.signInWithGoogle(timeout: .milliseconds(200)) }
        #expect(await failure(first) == .cancelled)
        #expect(try FakeBrowser.opened().count == 2)
    }

    /// Cancelling the task ends the wait promptly with `.cancelled`, and the work behind it too:
    /// its session watch (a "portal-watch" thread) stops, rather than waiting out the timeout. The
    /// call persists nothing, then or later. A task cancelled before the call opens no browser.
    @Test func cancellationEndsItPromptlyAndPersistsNothing() async throws {
        let a = try auth("cancel")
        try FakeBrowser.install(mode: "ignore", auth: a)
        _ = await threadsBecome(0)
        let watches = watchThreads()
        let signIn = Task { try await a.signInWithGoogle(timeout: .seconds(60)) }
        try await launched(1)
        #expect(watchThreads() == watches + 1)
        let cancelled = monotonicMilliseconds()
        signIn.cancel()
        #expect(await failure(signIn) == .cancelled)
        #expect(monotonicMilliseconds() - cancelled < 1_000)
        #expect(await threadsBecome(watches), "the cancelled sign-in's watch is still running")
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await a.restoreSession() == nil)

        let early = Task { () async throws -> AuthResult in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await a.signInWithGoogle(timeout: .seconds(60))
        }
        #expect(await failure(early) == .cancelled)
        try await Task.sleep(for: .milliseconds(300))
        #expect(try FakeBrowser.opened().count == 1)
    }

    /// Bounded: no redirect within the timeout is `signInTimedOut`; a timeout that is not more than
    /// 0 and at most 15 minutes is refused before anything is done.
    @Test func theTimeoutEndsItWithAClearError() async throws {
        let a = try auth("timeout")
        try FakeBrowser.install(mode: "ignore", auth: a)
        let started = monotonicMilliseconds()
        await #expect(throws: PortalAuthError.signInTimedOut) { try await a.signInWithGoogle(timeout: .milliseconds(500)) }
        let waited = monotonicMilliseconds() - started
        #expect(waited >= 500 && waited < 10_000, "waited \(waited) ms")
        #expect(try await a.restoreSession() == nil)
        #expect("\(PortalAuthError.signInTimedOut)".contains("no redirect came back"))
        for bad: Duration in [.zero, .seconds(-1), PortalAuth.defaultSignInTimeout + .seconds(1)] {
            #expect(throws: PortalAuthError.invalidArgument(name: "timeout")) { try a.signInWithGoogle(timeout: bad) }
        }
        #expect(PortalAuth.defaultSignInTimeout == .seconds(15 * 60))
        #expect(try FakeBrowser.opened().count == 1)
    }

    /// docs/security.md "A desktop sign-in's timeout and claim": the timeout, counted from the page's opening, is when the call gives
    /// up, not later: a 2 s sign-in ends within 3 s of the browser's launch (twice the timeout
    /// would be 4). Kills: signin/timeout-doubled.
    @Test func itGivesUpAtItsTimeoutNotLater() async throws {
        let a = try auth("deadline")
        try FakeBrowser.install(mode: "ignore", auth: a)
        let timeout = 2_000
        let started = monotonicMilliseconds()
        let signIn = Task { try await a.signInWithGoogle(timeout: .milliseconds(timeout)) }
        try await launched(1)
        let opened = monotonicMilliseconds()
        #expect(await failure(signIn) == .signInTimedOut)
        let ended = monotonicMilliseconds()
        #expect(ended - started >= timeout, "gave up after \(ended - started) ms, before its \(timeout) ms")
        #expect(ended - opened < timeout + 1_000, "gave up \(ended - opened) ms after the page opened; timeout \(timeout) ms")
        #expect(try await a.restoreSession() == nil)
    }

    /// docs/security.md "A desktop sign-in's timeout and claim": a cancelled sign-in frees its auth environment at once (the `async`
    /// caller resumes before the worker unwinds), so a newer sign-in may claim it while the old
    /// one's worker is still on its way out; that worker's release must leave the newer claim
    /// alone, or a third sign-in would start beside the newer one (two pages, two waits). The
    /// order is forced here on the registry itself. Kills: signin/release-drops-newer-claim.
    @Test func releasingAFinishedSignInKeepsANewerOnesClaim() throws {
        let flight = SignInInFlight.shared
        let id = "desktop-release-\(ItemSchema.newGeneration().prefix(8))"
        let first = try flight.claim(id)
        flight.cancel(first)
        let second = try flight.claim(id)
        flight.release(first)       // the cancelled sign-in's worker unwinds only now
        #expect(throws: PortalAuthError.signInInProgress) { _ = try flight.claim(id) }
        flight.release(first)       // twice: still nothing of the newer one's is dropped
        #expect(throws: PortalAuthError.signInInProgress) { _ = try flight.claim(id) }
        flight.release(second)
        let third = try flight.claim(id)
        flight.release(third)
    }

    /// The same through the public calls: a sign-in cancelled while it waits, a newer one started
    /// at once, and a third tried after the first one's worker has surely unwound (its watch
    /// thread gone): the third is refused, the newer one still waits and ends at its own timeout.
    @Test func aCancelledSignInsUnwindingLeavesTheNewerOneInFlight() async throws {
        let a = try auth("unwind")
        try FakeBrowser.install(mode: "ignore", auth: a)
        _ = await threadsBecome(0)
        let first = Task { try await a.signInWithGoogle(timeout: .seconds(60)) }
        try await launched(1)
        first.cancel()
        let second = Task { try await a.signInWithGoogle(timeout: .seconds(4)) }
        try await launched(2)
        #expect(await failure(first) == .cancelled)
        // The first sign-in's worker has released (its watch stopped before that) when only the
        // second one's watch thread is left.
        #expect(await threadsBecome(1), "the cancelled sign-in's watch is still running")
        try await Task.sleep(for: .milliseconds(200))
        #expect(throws: PortalAuthError.signInInProgress) { try a.signInWithApple(timeout: .seconds(1)) }
        #expect(try FakeBrowser.opened().count == 2)
        #expect(await failure(second) == .signInTimedOut)
    }

    /// No application registered for the authorize URL's scheme: a clear error naming the
    /// scheme's x-scheme-handler type, nothing persisted, and the slot is free again.
    @Test func openerFailureIsAClearErrorAndPersistsNothing() async throws {
        let a = try auth("noopener")
        try FakeBrowser.uninstall()
        do throws(PortalAuthError) {
            _ = try await a.signInWithGoogle(timeout: .seconds(30))
            Issue.record("the sign-in succeeded without a browser")
        } catch .signInUnavailable(let message) {
            #expect(message.contains("x-scheme-handler/http"), "\(message)")
            #expect(!message.contains("state="), "the message must not carry the URL")
        } catch {
            Issue.record("expected signInUnavailable, got \(error)")
        }
        #expect(try await a.restoreSession() == nil)
        // Nothing stays claimed: the next call fails the same way, not as in progress.
        let again = Task { try await a.signInWithGoogle(timeout: .milliseconds(100)) }
        guard case .signInUnavailable = await failure(again) else {
            Issue.record("expected signInUnavailable again")
            return
        }
        try FakeBrowser.install(mode: "ignore", auth: a)
    }
}
