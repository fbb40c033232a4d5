import Testing
@_spi(Bindings) @testable import PortalKeyringCore
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// The `async` spellings from `@MainActor` code in Swift 6 language mode, against the
/// real keyring and the loopback Portal API: results, a responsive main actor while the work
/// waits, task cancellation, and blocking work kept off the cooperative pool.
@MainActor
@Suite(.serialized) struct AsyncTests {
    private func newAuth(_ tag: String) throws -> PortalAuth {
        _ = try KeyringControl.environment() // unlocks gnome-keyring-locked's keyring, once
        return try PortalAuth(authEnvironmentId: "swift-async-\(tag)-\(getpid())", redirectUrl: "app://cb",
                       apiHost: try FakePortalAPI.host())
    }

    @Test func persistRestoreClearAwaitedOnTheMainActor() async throws {
        let auth = try newAuth("round-trip")
        let stored = try await auth.persistSession(endUserId: "u-async", clientSessionToken: "tok-async")
        #expect(stored.endUserId == "u-async")
        let restored = try await auth.restoreSession()
        #expect(try restored?.getToken() == "tok-async")
        try await restored?.invalidate()
        #expect(try await auth.restoreSession() == nil)
        _ = try await auth.persistSession(endUserId: "u-async", clientSessionToken: "tok-async-2")
        try await auth.clearPersistedSession()
        #expect(try await auth.restoreSession() == nil)
    }

    /// A 10 ms ticker on the main actor keeps ticking while a request waits 1.5 s on the API.
    @Test func mainActorStaysResponsiveWhileARequestWaits() async throws {
        let auth = try newAuth("responsive")
        let token = try FakePortalAPI.issueToken(endUserId: "u-responsive")
        let session = try await auth.persistSession(endUserId: "u-responsive", clientSessionToken: token)
        let portal = try Portal(credentials: session)
        defer { portal.close() }
        try FakePortalAPI.admin("POST", "faults", #"{"route":"/api/v3/async-slow","delayMs":1500,"count":1}"#)
        let gaps = MainActorTicker()
        let ticker = Task { @MainActor in await gaps.tick() }
        let start = monotonicMilliseconds()
        let response = try await portal.send(PortalRequest(target: "/api/v3/async-slow"))
        let elapsed = monotonicMilliseconds() - start
        gaps.running = false
        await ticker.value
        let maxGap = gaps.maxGap
        print("async send to a slow API: \(elapsed) ms, largest main-actor gap \(maxGap) ms")
        #expect(elapsed >= 1400)
        #expect(response.status == 404)
        #expect(maxGap <= 200, "the main actor stalled for \(maxGap) ms") // blocking would be ≥ 1400 ms; load jitter stays under ~100 (Tests/c/async_test/)
        try await auth.clearPersistedSession()
    }

    /// Keyring work never waits behind network work: with every network worker busy on a slow
    /// Portal API (6 requests of 3 s each, more than the pool's 4 threads), an async sign-out and
    /// restore complete at once (they queued behind the requests before: up to 3 s, and up to a
    /// request's 30 s bound on a real slow backend).
    @Test func signOutNeverWaitsBehindSlowRequests() async throws {
        let auth = try newAuth("lanes")
        let token = try FakePortalAPI.issueToken(endUserId: "u-lanes")
        let session = try await auth.persistSession(endUserId: "u-lanes", clientSessionToken: token)
        let portal = try Portal(credentials: session)
        try FakePortalAPI.admin("POST", "faults", #"{"route":"/api/v3/lanes-slow","delayMs":3000,"count":6}"#)
        let requests = (0..<6).map { _ in
            Task.detached { _ = try? await portal.send(PortalRequest(target: "/api/v3/lanes-slow")) }
        }
        try await Task.sleep(for: .milliseconds(300))  // every network worker is waiting on the API
        let start = monotonicMilliseconds()
        _ = try await auth.restoreSession()
        try await auth.clearPersistedSession()
        let took = monotonicMilliseconds() - start
        print("restore + sign-out with 6 slow requests in flight: \(took) ms")
        #expect(took < 1500, "the keyring work waited \(took) ms behind the requests")
        for request in requests { await request.value }
        portal.close()
    }

    /// Cancelling the task aborts the request and throws `.cancelled` at once.
    @Test func taskCancellationCancelsTheRequest() async throws {
        let auth = try newAuth("cancel")
        let token = try FakePortalAPI.issueToken(endUserId: "u-cancel")
        let session = try await auth.persistSession(endUserId: "u-cancel", clientSessionToken: token)
        let portal = try Portal(credentials: session)
        defer { portal.close() }
        try FakePortalAPI.admin("POST", "faults", #"{"route":"/api/v3/async-cancel","delayMs":8000,"count":1}"#)
        let task = Task.detached { [portal] in try await portal.send(PortalRequest(target: "/api/v3/async-cancel")) }
        try await Task.sleep(for: .milliseconds(300))
        let cancelledAt = monotonicMilliseconds()
        task.cancel()
        do {
            _ = try await task.value
            Issue.record("the cancelled request returned")
        } catch let error as PortalAuthError {
            #expect(error == .cancelled)
        }
        let latency = monotonicMilliseconds() - cancelledAt
        print("async send cancelled: threw \(latency) ms after Task.cancel()")
        #expect(latency < 200)
        #expect(try session.getToken() == token) // an aborted request invalidates nothing
        try await auth.clearPersistedSession()
    }

    /// A finished `async` call leaves nothing of its own behind: the worker thread that ran it
    /// lets go of the job, and with it the Portal it captured (found by the AddressSanitizer
    /// pass: finished jobs stayed queued until 64 more had run).
    @Test func finishedCallsLetGoOfThePortal() async throws {
        let auth = try newAuth("released")
        let session = try await auth.persistSession(endUserId: "u-released", clientSessionToken: "tok-released")
        weak var watched: Portal?
        do {
            let portal = Portal(credentials: session, apiHost: nil, http: HTTPClient(), validate: false)
            watched = portal
            #expect(try await portal.reportUnauthorized(rejectedToken: "not-this-token") == false)
        }
        for _ in 0..<200 where watched != nil { try await Task.sleep(for: .milliseconds(10)) }
        #expect(watched == nil, "a finished call still holds its Portal")
        try await auth.clearPersistedSession()
    }

    /// The README's pattern: a listener hops to the main actor; Swift 6 mode accepts it.
    @Test func invalidationReachesTheMainActor() async throws {
        let auth = try newAuth("listener")
        let token = try FakePortalAPI.issueToken(endUserId: "u-listener")
        let session = try await auth.persistSession(endUserId: "u-listener", clientSessionToken: token)
        let portal = try Portal(credentials: session)
        defer { portal.close() }
        let screen = SignInScreen()
        portal.onSessionInvalidated { Task { @MainActor in screen.show() } }
        #expect(try await portal.reportUnauthorized(rejectedToken: token))
        for _ in 0..<500 where screen.shown == 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(screen.shown == 1)
        #expect(try await auth.restoreSession() == nil)
    }

    /// `onSessionInvalidated(onMainActor:)`: a `@MainActor` listener registered directly from
    /// `@MainActor` code in Swift 6 mode, run on the main actor, once.
    @Test func mainActorListenerRunsOnTheMainActor() async throws {
        let auth = try newAuth("main-actor-listener")
        let token = try FakePortalAPI.issueToken(endUserId: "u-main-actor")
        let session = try await auth.persistSession(endUserId: "u-main-actor", clientSessionToken: token)
        let portal = try Portal(credentials: session)
        defer { portal.close() }
        let screen = SignInScreen()
        portal.onSessionInvalidated(onMainActor: {
            MainActor.assertIsolated()
            screen.show()
        })
        #expect(try await portal.reportUnauthorized(rejectedToken: token))
        for _ in 0..<500 where screen.shown == 0 { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(50))
        #expect(screen.shown == 1)
        #expect(try await auth.restoreSession() == nil)
    }

    /// The blocking body runs on the library's "portal-async" worker threads, not on a thread of
    /// the cooperative pool; eight of them blocked at once leave the pool free.
    @Test func blockingWorkStaysOffTheCooperativePool() async throws {
        let names = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    try await OperationRunner.run { () throws(PortalAuthError) in
                        usleep(200_000)
                        return currentThreadName()
                    }
                }
            }
            var names: [String] = []
            for try await name in group { names.append(name) }
            return names
        }
        #expect(names.count == 8)
        #expect(names.allSatisfy { $0 == "portal-async" }, "the blocking work ran on \(names)")
        let start = monotonicMilliseconds()
        #expect(await Task.detached { 42 }.value == 42)
        #expect(monotonicMilliseconds() - start < 100)
    }
}

/// Sleeps 10 ms at a time on the main actor and records the largest gap between wake-ups.
@MainActor
final class MainActorTicker {
    var running = true
    var maxGap = 0

    func tick() async {
        var last = monotonicMilliseconds()
        while running {
            try? await Task.sleep(for: .milliseconds(10))
            let now = monotonicMilliseconds()
            maxGap = max(maxGap, now - last)
            last = now
        }
    }
}


/// The calling thread's name (/proc/thread-self/comm), "" when unreadable.
private func currentThreadName() -> String {
    guard let file = fopen("/proc/thread-self/comm", "r") else { return "" }
    defer { fclose(file) }
    var buffer = [CChar](repeating: 0, count: 64)
    guard fgets(&buffer, Int32(buffer.count), file) != nil else { return "" }
    let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return name.hasSuffix("\n") ? String(name.dropLast()) : name
}

@MainActor
private final class SignInScreen {
    var shown = 0
    func show() { shown += 1 }
}
