import Testing
import Dispatch
import FoundationEssentials
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// The loopback Portal API started by scripts/with-portal-api.sh (Tests/portal-api).
enum FakePortalAPI {
    static func host() throws -> String {
        try #require(getenv("PORTAL_TEST_API_HOST").map { String(cString: $0) },
                     "run through the README's test command: PORTAL_TEST_API_HOST is unset (scripts/with-portal-api.sh)")
    }

    @discardableResult
    static func admin(_ method: String, _ path: String, _ json: String? = nil) throws -> String {
        let target = try #require(TargetURL("http://\(try host())/_admin/\(path)"))
        let response = try HTTPClient().send(PortalRequest(method: method, target: "", body: json.map { Array($0.utf8) }),
                                              to: target, bearer: nil)
        #expect(response.status == 200, "admin \(path) answered \(response.status)")
        return String(decoding: response.body, as: UTF8.self)
    }

    /// Issues a CST for `endUserId`; returns the token.
    static func issueToken(endUserId: String) throws -> String {
        struct Issued: Decodable { struct Session: Decodable { let token: String }; let data: Session }
        let body = try admin("POST", "sessions", #"{"endUserId":"\#(endUserId)"}"#)
        return try JSONDecoder().decode(Issued.self, from: Data(body.utf8)).data.token
    }

    /// Requests to `route` so far, and how many of them carried a bearer.
    static func requests(_ route: String) throws -> (total: Int, withBearer: Int) {
        struct Stats: Decodable {
            struct Route: Decodable { let requests: Int; let withBearer: Int }
            struct Body: Decodable { let routes: [String: Route] }
            let data: Body
        }
        let stats = try JSONDecoder().decode(Stats.self, from: Data(try admin("GET", "stats").utf8))
        let entry = stats.data.routes[route]
        return (entry?.requests ?? 0, entry?.withBearer ?? 0)
    }
}

private final class Counter: Sendable {
    private let value = Lock(0)
    func increment() { value.withLock { $0 += 1 } }
    var count: Int { value.withLock { $0 } }
}

private func waitUntil(_ seconds: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = monotonicMilliseconds() + Int(seconds * 1000)
    while monotonicMilliseconds() < deadline {
        if condition() { return true }
        usleep(10_000)
    }
    return condition()
}

/// Invalidation against the loopback Portal API and, where storage matters, the real keyring.
@Suite(.serialized) struct InvalidationTests {
    private func signIn(_ user: String = "user-\(getpid())") throws -> (PortalAuth, PortalSession, String) {
        _ = try KeyringControl.environment()
        let auth = try PortalAuth(authEnvironmentId: "inv-\(ItemSchema.newGeneration().prefix(12))",
                                  redirectUrl: "app://cb", apiHost: try FakePortalAPI.host())
        let token = try FakePortalAPI.issueToken(endUserId: user)
        return (auth, try auth.persistSession(endUserId: user, clientSessionToken: token), token)
    }

    @Test func validSessionStaysValid() throws {
        let (auth, session, _) = try signIn()
        let fired = Counter()
        let portal = try Portal(credentials: session)
        portal.onSessionInvalidated { fired.increment() }
        let response = try portal.send(PortalRequest(target: "/api/v3/clients/me"))
        #expect(response.status == 200)
        portal.waitForListenerDeliveries()
        #expect(fired.count == 0)
        #expect(try auth.restoreSession() != nil)
        try auth.clearPersistedSession()
    }

    @Test func revokedTokenInvalidatesAtInitAndReplaysToALateListener() throws {
        let (auth, session, token) = try signIn()
        try FakePortalAPI.admin("POST", "revoke", #"{"token":"\#(token)"}"#)
        let portal = try Portal(credentials: session)
        #expect(waitUntil { session.isInvalidated }, "the init request's 401 must invalidate")
        let fired = Counter()
        portal.onSessionInvalidated { fired.increment() }   // registered after the rejection
        #expect(waitUntil { fired.count == 1 })
        portal.onSessionInvalidated { fired.increment() }
        #expect(waitUntil { fired.count == 2 })
        portal.waitForListenerDeliveries()
        #expect(fired.count == 2)
        #expect(try auth.restoreSession() == nil)
        #expect(throws: PortalAuthError.sessionInvalidated) { try session.getToken() }
        #expect(throws: PortalAuthError.sessionInvalidated) { try portal.send(PortalRequest(target: "/api/v3/clients/me")) }
    }

    @Test func concurrentRejectionsFireEachListenerOnceWithOneDelete() throws {
        let storage = InMemoryStorage()
        let auth = try PortalAuth(authEnvironmentId: "burst", redirectUrl: "app://cb", apiHost: try FakePortalAPI.host(),
                                  storage: storage)
        let token = try FakePortalAPI.issueToken(endUserId: "burst-user")
        let session = try auth.persistSession(endUserId: "burst-user", clientSessionToken: token)
        let deletesBefore = storage.deleteCalls
        let portal = Portal(credentials: session, apiHost: nil, http: HTTPClient(), validate: false)
        let counters = (0..<5).map { _ in Counter() }
        for counter in counters { portal.onSessionInvalidated { counter.increment() } }
        try FakePortalAPI.admin("POST", "revoke", #"{"token":"\#(token)"}"#)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<13 { _ = try? portal.send(PortalRequest(target: "/api/v3/clients/me")) }
            _ = try? portal.reportUnauthorized(rejectedToken: token)
        }
        portal.waitForListenerDeliveries()
        #expect(counters.allSatisfy { $0.count == 1 })
        #expect(storage.deleteCalls - deletesBefore == 1)
        #expect(storage.count == 0)
    }

    /// Invalidation is per credential, process-wide: Portals built on one session, or on
    /// another restore of the same sign-in, all hear a 401 that one of them saw — each listener
    /// once, after the item was deleted; a Portal on another sign-in, one closed, or one signed
    /// out with `clearSession()` (which never fires listeners) hears nothing.
    @Test func everyPortalOnTheCredentialHearsItsRejectionOnce() throws {
        let (auth, session, token) = try signIn()
        let restored = try #require(try auth.restoreSession())
        let restoredAgain = try #require(try auth.restoreSession())
        let seer = Portal(credentials: session, apiHost: nil, http: HTTPClient(), validate: false)
        let sameSession = Portal(credentials: session, apiHost: nil, http: HTTPClient(), validate: false)
        let sameSignIn = Portal(credentials: restored, apiHost: nil, http: HTTPClient(), validate: false)
        let closed = Portal(credentials: restored, apiHost: nil, http: HTTPClient(), validate: false)
        let signedOut = Portal(credentials: restoredAgain, apiHost: nil, http: HTTPClient(), validate: false)
        let (otherAuth, otherSession, _) = try signIn()
        let otherSignIn = Portal(credentials: otherSession, apiHost: nil, http: HTTPClient(), validate: false)
        let portals = [seer, sameSession, sameSignIn, closed, signedOut, otherSignIn]
        let counters = portals.map { _ in Counter() }
        let storedAtDelivery = Counter()
        for (portal, counter) in zip(portals, counters) {
            portal.onSessionInvalidated {
                counter.increment()
                if (try? auth.restoreSession()) != nil { storedAtDelivery.increment() }
            }
        }
        closed.close()
        try signedOut.clearSession()
        try FakePortalAPI.admin("POST", "revoke", #"{"token":"\#(token)"}"#)
        #expect(try seer.send(PortalRequest(target: "/api/v3/clients/me")).status == 401)
        portals.forEach { $0.waitForListenerDeliveries() }
        #expect(counters.map(\.count) == [1, 1, 1, 0, 0, 0])
        #expect(storedAtDelivery.count == 0, "a listener ran before the rejected item was deleted")
        #expect(restored.isInvalidated)
        #expect(throws: PortalAuthError.sessionInvalidated) { try sameSignIn.send(PortalRequest(target: "/api/v3/clients/me")) }
        // Late listeners on a peer get their replay; nothing fires twice.
        let late = Counter()
        sameSignIn.onSessionInvalidated { late.increment() }
        #expect(waitUntil { late.count == 1 })
        _ = try? sameSession.reportUnauthorized(rejectedToken: token)
        portals.forEach { $0.waitForListenerDeliveries() }
        #expect(counters.map(\.count) == [1, 1, 1, 0, 0, 0])
        #expect(!otherSession.isInvalidated)
        try otherAuth.clearPersistedSession()
    }

    /// Two restores of one sign-in, each in its own Portal, both rejected at the same moment:
    /// every listener still hears it once (each Portal starts its invalidation at most once,
    /// whether its own 401 or its peer's comes first).
    @Test func simultaneousRejectionsOnTwoRestoresTellEachListenerOnce() throws {
        for _ in 0..<5 {
            let (auth, _, token) = try signIn()
            let portals = try (0..<2).map { _ in
                Portal(credentials: try #require(try auth.restoreSession()), apiHost: nil, http: HTTPClient(), validate: false)
            }
            let counters = portals.map { _ in Counter() }
            for (portal, counter) in zip(portals, counters) { portal.onSessionInvalidated { counter.increment() } }
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                _ = try? portals[index].reportUnauthorized(rejectedToken: token)
            }
            portals.forEach { $0.waitForListenerDeliveries() }
            #expect(counters.map(\.count) == [1, 1])
            #expect(try auth.restoreSession() == nil)
        }
    }

    @Test func aNewerSignInSurvivesTheOldSessionsRejection() throws {
        let (auth, old, oldToken) = try signIn("same-user")
        let portal = Portal(credentials: old, apiHost: nil, http: HTTPClient(), validate: false)
        // Meanwhile another PortalAuth (as another process would) signs in anew.
        let other = try PortalAuth(authEnvironmentId: auth.authEnvironmentId, redirectUrl: "app://cb",
                                   apiHost: auth.apiHost)
        let newToken = try FakePortalAPI.issueToken(endUserId: "same-user")
        try other.persistSession(endUserId: "same-user", clientSessionToken: newToken)
        try FakePortalAPI.admin("POST", "revoke", #"{"token":"\#(oldToken)"}"#)
        #expect(try portal.send(PortalRequest(target: "/api/v3/clients/me")).status == 401)
        #expect(old.isInvalidated)
        #expect(try auth.restoreSession()?.getToken() == newToken)
        try auth.clearPersistedSession()
    }

    @Test func idleExpiryAndMaximumLifetimeInvalidate() throws {
        for advance in [25 * 3600, 0] {
            let (auth, session, _) = try signIn()
            let portal = Portal(credentials: session, apiHost: nil, http: HTTPClient(), validate: false)
            if advance == 0 {
                // Keep it active every 20 h until past 7 days: sliding expiry is capped at issue + 7 d.
                for _ in 0..<12 {
                    try FakePortalAPI.admin("POST", "clock", #"{"advanceSeconds":72000}"#)
                    if try portal.send(PortalRequest(target: "/api/v3/clients/me")).status == 401 { break }
                }
            } else {
                try FakePortalAPI.admin("POST", "clock", #"{"advanceSeconds":\#(advance)}"#)
                #expect(try portal.send(PortalRequest(target: "/api/v3/clients/me")).status == 401)
            }
            #expect(session.isInvalidated)
            #expect(try auth.restoreSession() == nil)
        }
        try FakePortalAPI.admin("POST", "clock", #"{"offsetSeconds":0}"#)
    }

    @Test func serverErrorsTimeoutsAndOtherHostsNeverInvalidate() throws {
        let (auth, session, token) = try signIn()
        let fired = Counter()
        let fast = HTTPClient(connectTimeoutMilliseconds: 1_000, totalTimeoutMilliseconds: 500)
        let portal = Portal(credentials: session, apiHost: nil, http: fast, validate: false)
        portal.onSessionInvalidated { fired.increment() }

        try FakePortalAPI.admin("POST", "faults", #"{"route":"/api/v3/clients/me","status":500,"count":1}"#)
        #expect(try portal.send(PortalRequest(target: "/api/v3/clients/me")).status == 500)
        try FakePortalAPI.admin("POST", "faults", #"{"route":"/api/v3/clients/me","delayMs":1500,"count":1}"#)
        #expect(throws: PortalAuthError.self) { try portal.send(PortalRequest(target: "/api/v3/clients/me")) }
        try FakePortalAPI.admin("POST", "faults", #"{"route":"/api/v3/clients/me","reset":true,"count":1}"#)
        #expect(throws: PortalAuthError.self) { try portal.send(PortalRequest(target: "/api/v3/clients/me")) }
        try FakePortalAPI.admin("DELETE", "faults")

        // Same server under another name: not the Portal API host, so no bearer and no invalidation.
        let port = try FakePortalAPI.host().split(separator: ":").last.map(String.init) ?? ""
        let before = try FakePortalAPI.requests("/api/v3/clients/me")
        #expect(try portal.send(PortalRequest(target: "http://localhost:\(port)/api/v3/clients/me")).status == 401)
        let after = try FakePortalAPI.requests("/api/v3/clients/me")
        #expect(after.total == before.total + 1 && after.withBearer == before.withBearer)
        // Plain HTTP to a non-loopback host is refused by the library itself (not by a DNS failure:
        // the message says so), and a look-alike of the real host is not the API host, so it gets
        // no bearer. (Byte-level proofs without DNS: MutationGuardTests.swift.)
        let lookAlike = Portal(credentials: session, apiHost: "api.portalhq.io", http: fast, validate: false)
        let refused = #expect(throws: PortalAuthError.self) {
            try lookAlike.send(PortalRequest(target: "http://api.portalhq.io/api/v3/clients/me"))
        }
        if case .networkFailure(let message)? = refused {
            #expect(message.contains("refused"), "plain HTTP failed for another reason: \(message)")
        } else {
            Issue.record("plain HTTP: expected a refusal, got \(String(describing: refused))")
        }
        let lookAlikeTarget = try #require(TargetURL("https://api.portalhq.io.evil.test/api/v3/clients/me"))
        #expect(!lookAlike.isPortalAPI(lookAlikeTarget), "a look-alike host must not get the bearer")
        _ = try? lookAlike.send(PortalRequest(target: lookAlikeTarget.url)) // fails without DNS; must not invalidate
        // A stale token reported by the app is ignored.
        #expect(try portal.reportUnauthorized(rejectedToken: token + "-old") == false)

        portal.waitForListenerDeliveries()
        #expect(fired.count == 0)
        #expect(!session.isInvalidated)
        #expect(try auth.restoreSession()?.getToken() == token)
        try auth.clearPersistedSession()
    }

    /// docs/security.md "Invalidation needs the exact token": `reportUnauthorized` invalidates only when the rejected token equals
    /// the session's token in every byte: one that differs in its last byte, its first, one in
    /// the middle, or is a byte shorter or longer is another token (nothing happens); the exact
    /// token then invalidates. Kills: session/unauthorized-last-byte-ignored.
    @Test func onlyTheSessionsExactTokenInvalidates() throws {
        let (auth, session, token) = try signIn()
        let portal = Portal(credentials: session, apiHost: nil, http: HTTPClient(), validate: false)
        let fired = Counter()
        portal.onSessionInvalidated { fired.increment() }
        func changed(at index: Int) -> String {
            var bytes = Array(token.utf8)
            bytes[index] = bytes[index] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            return String(decoding: bytes, as: UTF8.self)
        }
        let count = token.utf8.count
        for other in [changed(at: count - 1), changed(at: 0), changed(at: count / 2), String(token.dropLast()), token + "A"] {
            #expect(other != token)
            #expect(try portal.reportUnauthorized(rejectedToken: other) == false, "\(other) invalidated \(token)")
        }
        portal.waitForListenerDeliveries()
        #expect(fired.count == 0 && !session.isInvalidated)
        #expect(try auth.restoreSession()?.getToken() == token)
        #expect(try portal.reportUnauthorized(rejectedToken: token))
        portal.waitForListenerDeliveries()
        #expect(fired.count == 1 && session.isInvalidated)
        #expect(try auth.restoreSession() == nil)
    }

    @Test func cancelAndClearSessionStopDelivery() throws {
        let (auth, session, token) = try signIn()
        let portal = Portal(credentials: session, apiHost: nil, http: HTTPClient(), validate: false)
        let cancelled = Counter(), selfCancelling = Counter(), kept = Counter()
        portal.onSessionInvalidated { cancelled.increment() }.cancel()
        let box = Lock<SessionInvalidatedHandle?>(nil)
        let handle = portal.onSessionInvalidated {
            selfCancelling.increment()
            box.withLock { $0 }?.cancel()           // cancel own handle from inside: no deadlock
            _ = try? auth.restoreSession()          // re-enter the library
        }
        box.withLock { $0 = handle }
        portal.onSessionInvalidated { kept.increment() }
        #expect(try portal.reportUnauthorized(rejectedToken: token))
        portal.waitForListenerDeliveries()
        #expect(cancelled.count == 0 && selfCancelling.count == 1 && kept.count == 1)

        // clearSession never fires, and later registrations are spent.
        let (auth2, session2, _) = try signIn()
        let portal2 = Portal(credentials: session2, apiHost: nil, http: HTTPClient(), validate: false)
        let never = Counter()
        portal2.onSessionInvalidated { never.increment() }
        try portal2.clearSession()
        #expect(portal2.onSessionInvalidated { never.increment() }.isSpent)
        portal2.waitForListenerDeliveries()
        #expect(never.count == 0)
        #expect(try auth2.restoreSession() == nil)

        let keyed = try Portal(apiKey: "static-key", apiHost: try FakePortalAPI.host())
        #expect(keyed.onSessionInvalidated { never.increment() }.isSpent)
    }
}
