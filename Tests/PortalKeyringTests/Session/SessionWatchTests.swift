import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// Threads of this process named "portal-watch" (also DesktopSignInTests).
func watchThreads() -> Int {
    guard let dir = opendir("/proc/self/task") else { return -1 }
    defer { closedir(dir) }
    var count = 0
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name.hasPrefix(".") { continue }
        guard let file = fopen("/proc/self/task/\(name)/comm", "r") else { continue }
        var buffer = [CChar](repeating: 0, count: 64)
        if fgets(&buffer, 64, file) != nil,
           String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) == "portal-watch\n" {
            count += 1
        }
        fclose(file)
    }
    return count
}

/// Waits (up to 2 s) until `watchThreads()` is `count`: a GLib thread names itself once it
/// runs, and a joined thread leaves /proc shortly after.
func threadsBecome(_ count: Int) async -> Bool {
    for _ in 0..<200 {
        if watchThreads() == count { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return false
}

/// `auth.sessionChanges` against the real keyring: the changes another `PortalAuth`
/// makes arrive in order; cancelling the iterating task ends the sequence and stops the watch
/// thread; a lock is never a sign-out.
@Suite(.serialized) struct SessionWatchTests {
    private func newAuth(_ tag: String) throws -> PortalAuth {
        _ = try KeyringControl.environment()
        return try PortalAuth(authEnvironmentId: "swift-watch-\(tag)-\(getpid())", redirectUrl: "app://cb")
    }

    @Test func changesByAnotherAuthArriveInOrder() async throws {
        let auth = try newAuth("order")
        let writer = try PortalAuth(authEnvironmentId: auth.authEnvironmentId, redirectUrl: "app://cb")
        let other = try PortalAuth(authEnvironmentId: auth.authEnvironmentId + "-other", redirectUrl: "app://cb")
        let changes = try await auth.sessionChanges
        var events = changes.makeAsyncIterator()
        _ = try await writer.persistSession(endUserId: "eu-swift-1", clientSessionToken: "tok-1")
        #expect(await events.next() == .signedIn(endUserId: "eu-swift-1"))
        _ = try await other.persistSession(endUserId: "eu-other", clientSessionToken: "tok-o")
        try await writer.clearPersistedSession()
        #expect(await events.next() == .signedOut) // the other environment gave nothing
        try await other.clearPersistedSession()
        changes.cancel()
        #expect(await events.next() == nil)
    }

    /// A damaged item (its document names another sign-in than its `session_generation`;
    /// docs/providers.md) is not restored, so the watch announces no sign-in for it either: the
    /// first event is the intact sign-in stored after it.
    @Test func aDamagedItemIsNoSignIn() async throws {
        let auth = try newAuth("damaged")
        let id = auth.authEnvironmentId
        let changes = try await auth.sessionChanges
        var events = changes.makeAsyncIterator()
        let document = SessionDocument.encode(authEnvironmentId: id, endUserId: "older-user",
                                              token: SecretBytes.copyingUTF8(of: "older-token"), generation: "0a", persistedAt: 1)
        #expect(try KeyringControl.run(["store", "--schema", ItemSchema.name, "auth_environment_id=\(id)",
                                        "session_generation=0b", "persisted_at=1"],
                                       input: document.withUnsafeBytes { Array($0) }).status == 0)
        let writer = try PortalAuth(authEnvironmentId: id, redirectUrl: "app://cb")
        _ = try await writer.persistSession(endUserId: "eu-intact", clientSessionToken: "tok-intact")
        #expect(await events.next() == .signedIn(endUserId: "eu-intact"))
        try await writer.clearPersistedSession()
        changes.cancel()
    }

    @Test func cancellingTheIteratingTaskStopsTheWatch() async throws {
        let auth = try newAuth("cancel")
        // A watch stopped by an earlier test ends its thread on its own, shortly after.
        _ = await threadsBecome(0)
        let before = watchThreads()
        let changes = try await auth.sessionChanges
        #expect(await threadsBecome(before + 1))
        let consumer = Task { () -> Int in
            var count = 0
            for await _ in changes { count += 1 }
            return count
        }
        consumer.cancel()
        #expect(await consumer.value == 0)
        #expect(await threadsBecome(before))
    }

    /// Cancelling the iterating task while the watch's read hangs on a stopped provider neither
    /// blocks the canceller (the stream's termination handler runs inside `cancel()`) nor a
    /// thread of the cooperative pool: the watch thread finishes its read on its own
    /// (docs/threading.md). Before, `cancel()` joined the watch thread for the read's deadline.
    @Test func cancellingDuringAHungReadBlocksNobody() async throws {
        let provider = try #require(KeyringControl.providerPID(), "no provider pid (scripts/with-keyring.sh)")
        let auth = try newAuth("hung")
        let writer = try PortalAuth(authEnvironmentId: auth.authEnvironmentId, redirectUrl: "app://cb")
        let changes = try await auth.sessionChanges
        let consumer = Task { () -> Int in
            var count = 0
            for await _ in changes { count += 1 }
            return count
        }
        // The first persist is read at once; the second one's read waits out the 100 ms
        // coalescing window, and starts while the provider is stopped: it hangs.
        _ = try await writer.persistSession(endUserId: "eu-hung-1", clientSessionToken: "tok-1")
        _ = try await writer.persistSession(endUserId: "eu-hung-2", clientSessionToken: "tok-2")
        kill(provider, SIGSTOP)
        defer { kill(provider, SIGCONT) }
        try await Task.sleep(for: .milliseconds(300))
        let beats = Heartbeat()
        let heart = Task { await beats.run() }
        let started = monotonicMilliseconds()
        consumer.cancel()
        let cancelling = monotonicMilliseconds() - started
        _ = await consumer.value
        let ended = monotonicMilliseconds() - started
        try await Task.sleep(for: .milliseconds(200))
        beats.running = false
        await heart.value
        kill(provider, SIGCONT)
        print("cancel during a hung read: cancel() \(cancelling) ms, iteration ended after \(ended) ms, largest heartbeat gap \(beats.maxGap) ms")
        #expect(cancelling < 500, "cancel() blocked \(cancelling) ms")
        #expect(ended < 1000, "the iteration ended only after \(ended) ms")
        #expect(beats.maxGap < 500, "the cooperative pool stalled \(beats.maxGap) ms")
        try await writer.clearPersistedSession()
    }

    /// `await portal.closeAsync()` with a request in flight keeps the main actor responsive: the wait
    /// for the aborted request happens on a library worker (the blocking `close()` held the
    /// main actor for up to a second).
    @Test @MainActor func asyncCloseKeepsTheMainActorFree() async throws {
        let auth = try newAuth("close")
        let token = try FakePortalAPI.issueToken(endUserId: "u-close")
        let session = try await auth.persistSession(endUserId: "u-close", clientSessionToken: token)
        let portal = try Portal(credentials: session)
        try FakePortalAPI.admin("POST", "faults", #"{"route":"/api/v3/close-slow","delayMs":3000,"count":1}"#)
        let request = Task.detached { try? await portal.send(PortalRequest(target: "/api/v3/close-slow")) }
        try await Task.sleep(for: .milliseconds(300))  // the request is in flight
        let gaps = MainActorTicker()
        let ticker = Task { @MainActor in await gaps.tick() }
        let started = monotonicMilliseconds()
        await portal.closeAsync()
        let took = monotonicMilliseconds() - started
        gaps.running = false
        await ticker.value
        _ = await request.value
        print("await close() with a request in flight: \(took) ms, largest main-actor gap \(gaps.maxGap) ms")
        #expect(took < 2500, "close waited for the whole slow request")
        #expect(gaps.maxGap <= 200, "the main actor stalled for \(gaps.maxGap) ms")
        try await auth.clearPersistedSession()
    }

    @Test func aLockIsNotASignOut() {
        #expect(SessionChange.between(.signedIn(generation: "g", endUserId: "u"), .locked) == .locked)
        #expect(SessionChange.between(.locked, .signedIn(generation: "g", endUserId: "u")) == .signedIn(endUserId: "u"))
        #expect(SessionChange.between(.signedIn(generation: "g", endUserId: "u"), .signedIn(generation: "g", endUserId: "u")) == nil)
        #expect(SessionChange.between(nil, .signedOut) == .signedOut)
    }
}

/// A task on the cooperative pool that notes the largest gap between its 10 ms sleeps. The test's
/// thread stops it while the task reads: the state is behind a `Lock` (ThreadSanitizer saw the
/// plain fields race).
final class Heartbeat: Sendable {
    private let state = Lock((running: true, maxGap: 0))
    var running: Bool {
        get { state.withLock { $0.running } }
        set { state.withLock { $0.running = newValue } }
    }
    var maxGap: Int { state.withLock { $0.maxGap } }

    func run() async {
        var last = monotonicMilliseconds()
        while running {
            try? await Task.sleep(for: .milliseconds(10))
            let now = monotonicMilliseconds()
            state.withLock { $0.maxGap = max($0.maxGap, now - last) }
            last = now
        }
    }
}
