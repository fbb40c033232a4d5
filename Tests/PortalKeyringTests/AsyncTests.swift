import Testing
import Synchronization
@_spi(PortalKeyringC) @testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// The `async` spellings (issue 12) from `@MainActor` code in Swift 6 language mode, against the
/// real keyring and the loopback Portal API: results, a responsive main actor while the work
/// waits, task cancellation, and blocking work kept off the cooperative pool.
@MainActor
@Suite(.serialized) struct AsyncTests {
    private func newAuth(_ tag: String) throws -> PortalAuth {
        try PortalAuth(authEnvironmentId: "swift-async-\(tag)-\(getpid())", redirectUrl: "app://cb",
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
        #expect(maxGap <= 50, "the main actor stalled for \(maxGap) ms")
        try await auth.clearPersistedSession()
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

    /// Eight operations blocked for 400 ms do not hold the cooperative pool: a detached task still
    /// runs at once.
    @Test func blockingWorkStaysOffTheCooperativePool() async throws {
        let started = StartCount()
        let blocked = (0..<8).map { _ in
            Task.detached {
                try await OperationRunner.run { () throws(PortalAuthError) in
                    started.value.add(1, ordering: .relaxed)
                    usleep(400_000)
                    return 1
                }
            }
        }
        while started.value.load(ordering: .relaxed) < OperationWorkers.maxThreads { try await Task.sleep(for: .milliseconds(5)) }
        let start = monotonicMilliseconds()
        let value = await Task.detached { 42 }.value
        let latency = monotonicMilliseconds() - start
        print("a detached task ran \(latency) ms after 8 blocking operations were started")
        #expect(value == 42)
        #expect(latency < 100)
        for task in blocked { #expect(try await task.value == 1) }
    }
}

/// Sleeps 10 ms at a time on the main actor and records the largest gap between wake-ups.
@MainActor
private final class MainActorTicker {
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

private final class StartCount: Sendable {
    let value = Atomic<Int>(0)
}
