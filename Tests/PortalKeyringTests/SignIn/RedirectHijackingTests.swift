import Testing
import Dispatch
import FoundationEssentials
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

// Login CSRF ("redirect hijacking"). Against the loopback Portal API and the
// real keyring; markers under the harness's private XDG_RUNTIME_DIR, or a scratch directory.

private let validations = "/api/v3/auth/magic-links/validations"

private func freshAuth() throws -> PortalAuth {
    _ = try KeyringControl.environment()
    return try PortalAuth(authEnvironmentId: "csrf-\(ItemSchema.newGeneration().prefix(12))", redirectUrl: redirect,
                          apiHost: try FakePortalAPI.host(), magicLink: testMagicLink,
                          keyringTimeouts: KeyringTimeouts(callMilliseconds: 5_000, promptMilliseconds: 1_000))
}

private func expectError(_ expected: PortalAuthError, sourceLocation: SourceLocation = #_sourceLocation,
                         _ body: () throws(PortalAuthError) -> RedirectResult) {
    do {
        let result = try body()
        Issue.record("expected \(expected), got \(result)", sourceLocation: sourceLocation)
    } catch {
        #expect(error == expected, sourceLocation: sourceLocation)
    }
}

private func now() -> Int64 { Int64(time(nil)) }

@Suite(.serialized) struct RedirectHijackingTests {
    /// Without a pending sign-in a valid grant is neither exchanged nor stored; the opt-out
    /// exchanges it. Kills: signin/unsolicited-accepted.
    @Test func unsolicitedRedirectDoesNothing() throws {
        let a = try freshAuth()
        let url = try grant("magic_link", user: "eu-attacker")
        let before = try FakePortalAPI.requests(validations).total
        expectError(.unsolicitedRedirect) { () throws(PortalAuthError) in try a.handleRedirect(url: url) }
        #expect(try FakePortalAPI.requests(validations).total == before, "an unsolicited grant was exchanged")
        #expect(try a.restoreSession() == nil)
        // The opt-out (an app whose sign-ins start elsewhere).
        guard case .authenticated(let sessionResult) = try a.handleRedirect(url: url, options: .allowUnsolicited) else {
            Issue.record("allowUnsolicited must exchange the grant")
            return
        }
        let session = sessionResult.session
        #expect(session.endUserId == "eu-attacker")
        try a.clearPersistedSession()
    }

    /// A sign-in started by one instance (sendMagicLink, loginWithGoogle, loginWithApple) is
    /// honoured by another (the desktop handler is another process: the CLI test covers that);
    /// completing it consumes the marker, while a repeat delivery of the same URL still returns the
    /// cached result with one exchange. Kills: signin/marker-not-consumed, auth/start-not-recorded.
    @Test(arguments: ["magic", "google", "apple"])
    func startedSignInIsHonouredOnceAcrossInstances(start: String) throws {
        let starter = try freshAuth()
        switch start {
        case "magic": try starter.sendMagicLink(email: "csrf@example.com")
        case "google": _ = try starter.loginWithGoogle()
        default: _ = try starter.loginWithApple()
        }
        let handler = try PortalAuth(authEnvironmentId: starter.authEnvironmentId, redirectUrl: redirect, apiHost: starter.apiHost)
        #expect(handler.pendingSignIn.isPending())
        let url = try grant("magic_link", user: "eu-own")
        guard case .authenticated(let sessionResult) = try handler.handleRedirect(url: url) else {
            Issue.record("a started sign-in must complete")
            return
        }
        let session = sessionResult.session
        #expect(session.endUserId == "eu-own")
        #expect(!handler.pendingSignIn.isPending(), "a completed sign-in must consume the marker")
        let before = try FakePortalAPI.requests(validations).total
        guard case .authenticated(let againResult) = try handler.handleRedirect(url: url) else {
            Issue.record("a repeat delivery must return the cached result")
            return
        }
        let again = againResult.session
        #expect(try again.getToken() == session.getToken())
        #expect(try FakePortalAPI.requests(validations).total == before)
        // A second grant after the sign-in completed is unsolicited.
        let second = try grant("magic_link", user: "eu-own")
        expectError(.unsolicitedRedirect) { () throws(PortalAuthError) in try handler.handleRedirect(url: second) }
        #expect(try FakePortalAPI.requests(validations).total == before)
        try handler.clearPersistedSession()
    }

    /// `totpRequired` also completes the pending sign-in.
    @Test func totpRequiredConsumesTheMarker() throws {
        let a = try freshAuth()
        try a.pendingSignIn.record()
        guard case .totpRequired = try a.handleRedirect(url: try grant("magic_link", user: "eu-totp2", totp: true)) else {
            Issue.record("expected totpRequired")
            return
        }
        #expect(!a.pendingSignIn.isPending())
    }

    /// A marker is valid for 15 minutes after the sign-in started; older, or from the future
    /// beyond a minute of clock skew, it is no marker. Kills: signin/marker-never-expires.
    @Test func markerExpires() throws {
        let a = try freshAuth()
        #expect(PendingSignIn.lifetimeSeconds == 900)
        try a.pendingSignIn.record(at: now() - 901)
        #expect(!a.pendingSignIn.isPending())
        let url = try grant("magic_link", user: "eu-late")
        expectError(.unsolicitedRedirect) { () throws(PortalAuthError) in try a.handleRedirect(url: url) }
        try a.pendingSignIn.record(at: now() + 3_600)
        #expect(!a.pendingSignIn.isPending())
        try a.pendingSignIn.record(at: now() - 840)
        #expect(a.pendingSignIn.isPending())
        guard case .authenticated = try a.handleRedirect(url: url) else {
            Issue.record("a 14-minute-old sign-in is still pending")
            return
        }
        try a.clearPersistedSession()
    }

    /// A stored session of another end user is never replaced silently: nothing is stored, the
    /// sign-in stays pending, and the same URL with `.replaceDifferentEndUser` persists the
    /// remembered exchange (no second one). The same end user signs in silently. Kills:
    /// signin/different-user-replaced.
    @Test func differentEndUserNeedsConfirmation() throws {
        let a = try freshAuth()
        let stored = try a.persistSession(endUserId: "eu-victim", clientSessionToken: "victim-token")
        try a.pendingSignIn.record()
        let url = try grant("oauth", user: "eu-other", provider: "GOOGLE")
        let route = "/api/v3/auth/oauth/tokens"
        let before = try FakePortalAPI.requests(route).total
        for _ in 0..<2 {
            expectError(.differentEndUser(storedEndUserId: "eu-victim", newEndUserId: "eu-other")) { () throws(PortalAuthError) in
                try a.handleRedirect(url: url)
            }
        }
        #expect(try a.restoreSession()?.getToken() == stored.getToken(), "the victim's session was replaced")
        #expect(try FakePortalAPI.requests(route).total == before + 1)
        #expect(a.pendingSignIn.isPending(), "a refused switch must not consume the pending sign-in")
        guard case .authenticated(let sessionResult) = try a.handleRedirect(url: url, options: .replaceDifferentEndUser) else {
            Issue.record("the confirmation must persist the new end user")
            return
        }
        let session = sessionResult.session
        #expect(session.endUserId == "eu-other")
        #expect(try a.restoreSession()?.endUserId == "eu-other")
        #expect(try FakePortalAPI.requests(route).total == before + 1, "the confirmation exchanged again")
        #expect(!a.pendingSignIn.isPending())
        // The same end user signing in again: silent.
        try a.pendingSignIn.record()
        guard case .authenticated(let againResult) = try a.handleRedirect(url: try grant("magic_link", user: "eu-other")) else {
            Issue.record("the same end user must sign in silently")
            return
        }
        let again = againResult.session
        #expect(try a.restoreSession()?.getToken() == again.getToken())
        try a.clearPersistedSession()
    }

    /// A keyring that cannot be read fails the sign-in before the single-use grant is spent: the
    /// same URL delivered again once it is unlocked signs in (a handler process that exchanged
    /// first and failed the write lost the sign-in). Kills: signin/grant-spent-before-keyring.
    @Test(.disabled(if: KeyringControl.lockIsUndoneByReads, KeyringControl.passwordlessReason))
    func lockedKeyringKeepsTheGrantUnspent() throws {
        let a = try freshAuth()
        try a.pendingSignIn.record()
        let url = try grant("magic_link", user: "eu-locked")
        let before = try FakePortalAPI.requests(validations).total
        try KeyringControl.lock()
        var failure = ""
        do throws(PortalAuthError) {
            _ = try a.handleRedirect(url: url)
        } catch {
            failure = "\(error)"
        }
        #expect(failure.contains("locked"), "a sign-in into a locked keyring must fail as locked: '\(failure)'")
        try KeyringControl.unlock()
        #expect(try FakePortalAPI.requests(validations).total == before, "the grant was spent although the keyring was locked")
        let handler = try PortalAuth(authEnvironmentId: a.authEnvironmentId, redirectUrl: redirect, apiHost: a.apiHost)
        guard case .authenticated(let sessionResult) = try handler.handleRedirect(url: url) else {
            Issue.record("the same URL must sign in once the keyring is unlocked")
            return
        }
        let session = sessionResult.session
        #expect(session.endUserId == "eu-locked")
        try a.clearPersistedSession()
    }

    /// verify-totp, the second half of a sign-in, never replaces another end user's session
    /// silently either: refused before the code is sent, confirmed with `.replaceDifferentEndUser`.
    /// Kills: signin/totp-replaces-other-user.
    @Test func totpNeverReplacesAnotherEndUserSilently() throws {
        let a = try freshAuth()
        let victim = try a.persistSession(endUserId: "eu-victim", clientSessionToken: "victim-token")
        try a.pendingSignIn.record()
        guard case .totpRequired(let step) = try a.handleRedirect(url: try grant("magic_link", user: "eu-totp-other", totp: true)) else {
            Issue.record("expected totpRequired")
            return
        }
        let jwt = step.userJwt
        struct Code: Decodable { let code: String }
        struct Wrapped: Decodable { let data: Code }
        let code = try JSONDecoder().decode(Wrapped.self,
                                            from: Data(try FakePortalAPI.admin("GET", "totp?endUserId=eu-totp-other").utf8)).data.code
        let route = "/api/v3/auth/totps/validations"
        let before = try FakePortalAPI.requests(route).total
        #expect(throws: PortalAuthError.differentEndUser(storedEndUserId: "eu-victim", newEndUserId: "eu-totp-other")) {
            try a.verifyTotp(code: code, userJwt: jwt)
        }
        #expect(try FakePortalAPI.requests(route).total == before, "the code was sent although another end user is stored")
        #expect(try a.restoreSession()?.getToken() == victim.getToken(), "the victim's session was replaced")
        let session = try a.verifyTotp(code: code, userJwt: jwt, options: .replaceDifferentEndUser).session
        #expect(session.endUserId == "eu-totp-other")
        #expect(try a.restoreSession()?.endUserId == "eu-totp-other")
        try a.clearPersistedSession()
    }

    /// Two redirects of two end users completing at once (two handler processes; here two
    /// instances on two threads, each with its own lock file descriptor): the first to finish is
    /// stored, the second is refused as a different end user — never both "signed in" with one
    /// of them silently lost. Kills: signin/completion-unlocked.
    @Test func concurrentSignInsOfTwoEndUsersFirstWins() throws {
        let first = try freshAuth()
        let second = try PortalAuth(authEnvironmentId: first.authEnvironmentId, redirectUrl: redirect, apiHost: first.apiHost)
        for round in 0..<3 {
            try first.pendingSignIn.record()
            let urls = [try grant("magic_link", user: "eu-race-a\(round)"), try grant("magic_link", user: "eu-race-b\(round)")]
            try FakePortalAPI.admin("POST", "faults", #"{"route":"\#(validations)","delayMs":500,"count":2}"#)
            let outcomes = Lock([String](repeating: "", count: 2))
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                let auth = index == 0 ? first : second
                var outcome = "other"
                do throws(PortalAuthError) {
                    if case .authenticated(let signedIn) = try auth.handleRedirect(url: urls[index]) {
                        outcome = "signed in " + signedIn.session.endUserId
                    }
                } catch {
                    if case .differentEndUser = error { outcome = "refused" } else { outcome = "error \(error)" }
                }
                outcomes.withLock { $0[index] = outcome }
            }
            let results = outcomes.withLock { $0 }
            let signedIn = results.filter { $0.hasPrefix("signed in ") }
            #expect(signedIn.count == 1 && results.filter({ $0 == "refused" }).count == 1, "round \(round): \(results)")
            if let winner = signedIn.first {
                #expect(try first.restoreSession()?.endUserId == String(winner.dropFirst("signed in ".count)),
                        "round \(round): the stored session is not the one reported signed in")
            }
            try first.clearPersistedSession()
        }
    }

    /// Markers another user, a symlink, a FIFO, loose permissions or another auth environment
    /// could have made are no markers; a marker directory that is a symlink or not private is
    /// refused. Kills: signin/marker-follows-symlink, signin/marker-any-owner.
    @Test func markerFilesAreCheckedBeforeTheyCount() throws {
        let scratch = try scratchDirectory()
        defer { remove(scratch) }
        mkdir(scratch + "/run", 0o700)
        let env = ["XDG_RUNTIME_DIR": scratch + "/run"]
        let mine = PendingSignIn(authEnvironmentId: "env-a", environment: env)
        try mine.record()
        let dir = scratch + "/run/portal-keyring"
        let file = dir + "/" + mine.fileName
        var info = stat()
        #expect(stat(dir, &info) == 0 && info.st_mode & 0o777 == 0o700)
        #expect(stat(file, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(mine.isPending())

        // Loose permissions.
        chmod(file, 0o644)
        #expect(!mine.isPending())
        chmod(file, 0o600)
        #expect(mine.isPending())
        // Another user's file (the tests may run as root, which can give files away).
        if geteuid() == 0 {
            chown(file, 65_534, 65_534)
            #expect(!mine.isPending(), "another user's marker counted")
            chown(file, 0, 0)
        }
        // A symlink to a valid marker elsewhere.
        let elsewhere = scratch + "/planted"
        rename(file, elsewhere)
        symlink(elsewhere, file)
        #expect(!mine.isPending(), "a symlinked marker counted")
        unlink(file)
        // A FIFO is no marker, and does not block.
        mkfifo(file, 0o600)
        #expect(!mine.isPending())
        unlink(file)
        // Another auth environment's marker under this name.
        let other = PendingSignIn(authEnvironmentId: "env-b", environment: env)
        try other.record()
        rename(dir + "/" + other.fileName, file)
        #expect(!mine.isPending(), "another auth environment's marker counted")
        // Recording replaces whatever is there (rename over it), and consume removes it.
        try mine.record()
        #expect(mine.isPending())
        mine.consume()
        #expect(!mine.isPending())

        // A marker directory that is a symlink (to a directory of this user) is refused.
        let target = scratch + "/target"
        mkdir(target, 0o700)
        rmdir(dir)
        symlink(target, dir)
        #expect(throws: PortalAuthError.self) { try mine.record() }
        #expect(!mine.isPending())
        unlink(dir)
        // A marker directory others can write is refused.
        mkdir(dir, 0o700)
        chmod(dir, 0o777)
        #expect(throws: PortalAuthError.self) { try mine.record() }
        chmod(dir, 0o700)
        if geteuid() == 0 {
            chown(dir, 65_534, 65_534)
            #expect(throws: PortalAuthError.self) { try mine.record() }
            chown(dir, 0, 0)
        }
        try mine.record()
        #expect(mine.isPending())
    }

    /// In a Flatpak sandbox each instance has its own XDG_RUNTIME_DIR: markers go to the per-app
    /// `app/$FLATPAK_ID` directory all instances share, so a sign-in one instance started is
    /// pending for the next; only when it is a private directory of this user, and only for a
    /// plain app id.
    @Test func flatpakInstancesShareTheMarkerDirectory() throws {
        let scratch = try scratchDirectory()
        defer { remove(scratch) }
        let shared = scratch + "/shared-app-dir"
        for instance in ["one", "two"] { mkdir(scratch + "/" + instance, 0o700); mkdir(scratch + "/" + instance + "/app", 0o755) }
        mkdir(shared, 0o700)
        for instance in ["one", "two"] { symlink(shared, scratch + "/" + instance + "/app/org.example.App") }
        func instance(_ name: String) -> [String: String] {
            ["XDG_RUNTIME_DIR": scratch + "/" + name, "FLATPAK_ID": "org.example.App", "HOME": scratch]
        }
        try PendingSignIn(authEnvironmentId: "env-flatpak", environment: instance("one")).record()
        #expect(PendingSignIn(authEnvironmentId: "env-flatpak", environment: instance("two")).isPending())
        // Without the app id each instance keeps its own (the old behaviour: not pending there).
        var plain = instance("two")
        plain["FLATPAK_ID"] = nil
        #expect(!PendingSignIn(authEnvironmentId: "env-flatpak", environment: plain).isPending())
        // Not a private directory, or an app id that is a path: the instance's own directory.
        chmod(shared, 0o755)
        #expect(PrivateDirectory.location(runtimeDir: scratch + "/one", stateHome: nil, home: nil,
                                          flatpakId: "org.example.App")! == (scratch + "/one", "portal-keyring", false))
        chmod(shared, 0o700)
        #expect(PrivateDirectory.location(runtimeDir: scratch + "/one", stateHome: nil, home: nil,
                                          flatpakId: "org.example.App")! == (scratch + "/one/app/org.example.App", "portal-keyring", false))
        for id in ["..", ".", "", "a/../../one"] {
            #expect(PrivateDirectory.location(runtimeDir: scratch + "/one", stateHome: nil, home: nil,
                                              flatpakId: id)! == (scratch + "/one", "portal-keyring", false))
        }
    }

    /// Where markers live: a private XDG_RUNTIME_DIR, else XDG_STATE_HOME, else
    /// ~/.local/state (created 0700), never a shared directory.
    @Test func markerDirectoryFallsBackSafely() throws {
        let scratch = try scratchDirectory()
        defer { remove(scratch) }
        #expect(PrivateDirectory.location(runtimeDir: nil, stateHome: nil, home: "/h")! == ("/h/.local/state", "portal-keyring-pending", true))
        #expect(PrivateDirectory.location(runtimeDir: "relative", stateHome: "/s", home: "/h")! == ("/s", "portal-keyring-pending", true))
        #expect(PrivateDirectory.location(runtimeDir: nil, stateHome: "relative", home: nil) == nil)
        // An XDG_RUNTIME_DIR others can enter is not used.
        mkdir(scratch + "/open", 0o755)
        #expect(PrivateDirectory.location(runtimeDir: scratch + "/open", stateHome: nil, home: "/h")!.fallback)
        // No XDG_RUNTIME_DIR: under $HOME/.local/state, created 0700.
        mkdir(scratch + "/home", 0o700)
        let marker = PendingSignIn(authEnvironmentId: "env-home", environment: ["HOME": scratch + "/home"])
        try marker.record()
        #expect(marker.isPending())
        var info = stat()
        #expect(stat(scratch + "/home/.local/state", &info) == 0 && info.st_mode & 0o777 == 0o700)
        #expect(stat(scratch + "/home/.local/state/portal-keyring-pending/" + marker.fileName, &info) == 0
                && info.st_mode & 0o777 == 0o600)
        // A fallback base others can write is refused.
        mkdir(scratch + "/shared", 0o777)
        chmod(scratch + "/shared", 0o777)
        #expect(throws: PortalAuthError.self) {
            try PendingSignIn(authEnvironmentId: "env-shared", environment: ["XDG_STATE_HOME": scratch + "/shared"]).record()
        }
        // Nothing usable at all: recording fails, so the sign-in does not start.
        #expect(throws: PortalAuthError.self) { try PendingSignIn(authEnvironmentId: "env-none", environment: [:]).record() }
    }

    private func scratchDirectory() throws -> String {
        var template = Array("/tmp/portal-csrf-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw PortalAuthError.invalidArgument(name: "mkdtemp") }
        return String(cString: made)
    }

    private func remove(_ path: String) {
        let command = "rm -rf '\(path)'"
        _ = system(command)
    }
}
