import Testing
@_spi(PortalKeyringCLI) @testable import PortalKeyringCore
@testable import PortalKeyring
import CGLib
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// One operation, one deadline (docs/security.md, "One operation, one deadline"): every
/// step of a storage operation — the Secret portal's version query and `RetrieveSecret`, the move
/// of the host's session with each of its host calls and file reads and writes, the Secret
/// Service calls — shares the operation's `callMilliseconds`, so a slow portal and a slow host
/// together still end the operation at its bound, where a deadline per step let it run for
/// several bounds in a row. Here against the test's own portal (`FakeSecretPortal`, in
/// `SecretPortalBusTests`'s serialized suite: it owns the portal's bus name) and the Secret
/// Service of scripts/with-keyring.sh; Tests/bounds/run.sh times the real sandbox.
extension SecretPortalBusTests {
    /// The bound of these tests' operations, and what an operation may take past it (a process
    /// under load: the deadline thread's wake-up, a key derivation in flight). Both ×10 under a
    /// sanitizer (the slow fault checks), where the steps themselves take several times longer:
    /// the delays below are fractions of the bound, so what is tested stays the same.
    static let bound: UInt32 = 1000 * HostileInput.sanitizerSlowdown
    static let slack = 300 * Int(HostileInput.sanitizerSlowdown)

    /// A host keyring whose every call takes `delay` (UInt32.max: a stopped provider), cut at the
    /// deadline of the operation it is part of, as the Secret Service's calls are: then it
    /// throws `.timedOut`, nothing done.
    final class SlowHost: SessionStorage, @unchecked Sendable {
        let inner = InMemoryStorage()
        let delay = Lock<UInt32>(0)
        let timeouts: KeyringTimeouts
        init(timeouts: KeyringTimeouts) { self.timeouts = timeouts }

        private func call<T>(_ body: () throws(StorageFailure) -> T) throws(StorageFailure) -> T {
            try OperationDeadline.run(timeouts) { () throws(StorageFailure) -> T in
                let delay = self.delay.withLock { $0 }
                let done = delay == .max ? MonotonicInstant.distantFuture : .now.advanced(byMilliseconds: delay)
                let end = OperationDeadline.end(timeouts)
                g_usleep(gulong(min(done, end).remainingMilliseconds) * 1000)
                if end <= done { throw .timedOut(operation: "host", milliseconds: OperationDeadline.milliseconds(timeouts)) }
                return try body()
            }
        }

        func restore(authEnvironmentId: String) throws(StorageFailure) -> ReadPolicy.Restored? {
            try call { () throws(StorageFailure) in try inner.restore(authEnvironmentId: authEnvironmentId) }
        }
        func replace(authEnvironmentId: String, generation: String, now: UInt64, label: String,
                     document: (UInt64) -> SecretBytes) throws(StorageFailure) -> UInt64 {
            try call { () throws(StorageFailure) in
                try inner.replace(authEnvironmentId: authEnvironmentId, generation: generation, now: now, label: label,
                                  document: document)
            }
        }
        func delete(itemId: String) throws(StorageFailure) {
            try call { () throws(StorageFailure) in try inner.delete(itemId: itemId) }
        }
        func deleteAll(authEnvironmentId: String, generation: String?) throws(StorageFailure) -> Int {
            try call { () throws(StorageFailure) in try inner.deleteAll(authEnvironmentId: authEnvironmentId, generation: generation) }
        }
        func observe(authEnvironmentId: String) throws(StorageFailure) -> SessionObservation {
            try call { () throws(StorageFailure) in try inner.observe(authEnvironmentId: authEnvironmentId) }
        }
        func describe() throws(StorageFailure) -> [(String, String)] { [] }
        func watchedFile() throws(StorageFailure) -> String? { nil }
        func withTimeouts(_ timeouts: KeyringTimeouts) -> any SessionStorage { self }
    }

    /// A sandbox storage over a new file keyring in a directory of its own, with the test's portal
    /// chosen afresh and `host` as the host keyring; `body` gets it and the directory.
    private func inSandbox(_ host: SlowHost, _ body: (FlatpakStorage, FakeSecretPortal) throws -> Void) throws {
        _ = try #require(getenv("PORTAL_TEST_KEYRING_DIR"), "run inside scripts/with-keyring.sh (a private session bus)")
        let portal = try FakeSecretPortal()
        defer { portal.stop() }
        let directory = try temporaryDirectory()
        defer { removeDirectory(directory) }
        FlatpakStorage.chosen.withLock { $0 = nil }
        defer { FlatpakStorage.chosen.withLock { $0 = nil } }
        let storage = FlatpakStorage(keyringPath: directory + "/keyrings/default.keyring",
                                     timeouts: KeyringTimeouts(callMilliseconds: Self.bound, promptMilliseconds: 30_000),
                                     host: host)
        try body(storage, portal)
    }

    /// How long `body` took (milliseconds), and what it threw.
    private func timed(_ body: () throws(StorageFailure) -> Void) -> (milliseconds: Int, failure: StorageFailure?) {
        let start = g_get_monotonic_time()
        var failure: StorageFailure?
        do throws(StorageFailure) { try body() } catch { failure = error }
        return ((g_get_monotonic_time() - start) / 1000, failure)
    }

    private static let operations = ["restore", "persist", "clear", "watch", "status"]

    private func run(_ operation: String, _ storage: FlatpakStorage, _ env: String) throws(StorageFailure) {
        switch operation {
        case "restore": _ = try storage.restore(authEnvironmentId: env)
        case "persist":
            _ = try storage.replace(authEnvironmentId: env, generation: "ff01", now: 500, label: "bounds") { persistedAt in
                SessionDocument.encode(authEnvironmentId: env, endUserId: "eu-new", token: SecretBytes.copyingUTF8(of: "cst-new"),
                                       generation: "ff01", persistedAt: persistedAt)
            }
        case "clear": _ = try storage.deleteAll(authEnvironmentId: env, generation: nil)
        case "watch": _ = try storage.observe(authEnvironmentId: env)
        default:
            // `portal-session status`: the move and the description, one operation.
            let auth = try? PortalAuth(authEnvironmentId: env, redirectUrl: "com.example.app://auth", apiHost: PortalAuth.defaultApiHost,
                                       storage: storage, keyringTimeouts: storage.timeouts)
            guard let auth else { throw .failed("no auth") }
            do { _ = try auth.describeKeyring() } catch { throw .failed("\(error)") }
        }
    }

    /// The portal slow (each answer 70 % of the bound): its version query and the master
    /// secret's `RetrieveSecret` (a file keyring whose key this process has not derived yet)
    /// together outlast the bound, and the operation ends at it (a deadline per step let it
    /// succeed after 1.4 bounds).
    @Test(arguments: operations)
    func aSlowPortalEndsTheSandboxOperationAtItsBound(_ operation: String) throws {
        let host = SlowHost(timeouts: .default)
        host.inner.fail(with: .unavailable("no provider owns org.freedesktop.secrets"))
        try inSandbox(host) { storage, portal in
            // A file under the portal's secret, its key derived by another storage than the
            // sandbox's (whose kept key is for another file's salt).
            let other = FileKeyringStorage(path: storage.keyringPath, masterSecret: SecretBytes(count: 64) { for i in $0.indices { $0[i] = 0x5a } })
            try other.recordHostMigration(authEnvironmentId: "env-bound-portal")
            portal.answer.withLock { $0.delayMilliseconds = Self.bound * 7 / 10 }
            let (elapsed, failure) = timed { () throws(StorageFailure) in try run(operation, storage, "env-bound-portal") }
            #expect(elapsed <= Int(Self.bound) + Self.slack, "\(operation) took \(elapsed) ms, bound \(Self.bound) ms")
            #expect(failure != nil, "\(operation) outlasted its bound and still succeeded after \(elapsed) ms")
        }
    }

    /// The host's provider slow during the move of its session (each call 45 % of the bound): its
    /// restore, the delete of the moved item and the check read after it outlast the bound
    /// together, and the operation that moves it ends at the bound — nothing lost: the next
    /// operation finds the session in the file or still on the host.
    @Test(arguments: operations)
    func aSlowHostEndsTheMigrationAtTheOperationsBound(_ operation: String) throws {
        let host = SlowHost(timeouts: .default)
        let env = "env-bound-move"
        let document = SessionDocument.encode(authEnvironmentId: env, endUserId: "eu-host", token: SecretBytes.copyingUTF8(of: "cst-host"),
                                              generation: "ee01", persistedAt: 100)
        host.inner.add(env, secret: document.withUnsafeBytes { Array($0) }, generation: "ee01", persistedAt: 100)
        try inSandbox(host) { storage, portal in
            host.delay.withLock { $0 = Self.bound * 45 / 100 }
            let (elapsed, failure) = timed { () throws(StorageFailure) in try run(operation, storage, env) }
            #expect(elapsed <= Int(Self.bound) + Self.slack, "\(operation) took \(elapsed) ms, bound \(Self.bound) ms")
            #expect(failure != nil, "\(operation) outlasted its bound and still succeeded after \(elapsed) ms")
            host.delay.withLock { $0 = 0 }
            let after = try storage.restore(authEnvironmentId: env)
            #expect(after?.document.endUserId == "eu-host", "the host's session was lost")
        }
    }

    /// The host's provider stopped and the portal slow: the version query's time counts, and the
    /// host's restore is cut where the operation ends.
    @Test func aStoppedHostAndASlowPortalEndTheRestoreAtItsBound() throws {
        let host = SlowHost(timeouts: .default)
        host.delay.withLock { $0 = .max }
        try inSandbox(host) { storage, portal in
            portal.answer.withLock { $0.delayMilliseconds = Self.bound / 2 }
            let (elapsed, failure) = timed { () throws(StorageFailure) in _ = try storage.restore(authEnvironmentId: "env-bound-stopped") }
            #expect(elapsed <= Int(Self.bound) + Self.slack, "restore took \(elapsed) ms, bound \(Self.bound) ms")
            guard case .timedOut? = failure else {
                Issue.record("restore: \(failure.map { $0.message } ?? "no failure"), wanted a timeout")
                return
            }
        }
    }

    /// The migration's write waits for the persist turn another thread holds: inside a restore
    /// that wait counts against the restore's bound (only a persist's own waits are uncounted,
    /// `PersistTurn`), so the restore still ends at its bound — the session kept on the host.
    @Test func aTurnWaitInsideARestoreCountsAgainstItsBound() throws {
        let host = SlowHost(timeouts: .default)
        let env = "env-bound-turn-\(getpid())"
        let document = SessionDocument.encode(authEnvironmentId: env, endUserId: "eu-host", token: SecretBytes.copyingUTF8(of: "cst-host"),
                                              generation: "ef01", persistedAt: 100)
        host.inner.add(env, secret: document.withUnsafeBytes { Array($0) }, generation: "ef01", persistedAt: 100)
        try inSandbox(host) { storage, _ in
            host.delay.withLock { $0 = Self.bound * 45 / 100 }
            let holding = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let holder = PersistTurnTests.thread {
                _ = try? PersistTurn.shared.run(env, waitingAtMost: 1_000) { () throws(StorageFailure) in
                    holding.signal()
                    release.wait()
                }
            }
            holding.wait()
            let (elapsed, _) = timed { () throws(StorageFailure) in _ = try storage.restore(authEnvironmentId: env) }
            release.signal()
            pthread_join(holder, nil)
            #expect(elapsed <= Int(Self.bound) + Self.slack, "restore took \(elapsed) ms, bound \(Self.bound) ms")
            host.delay.withLock { $0 = 0 }
            let after = try storage.restore(authEnvironmentId: env)
            #expect(after?.document.endUserId == "eu-host", "the host's session was lost")
        }
    }

    /// A Secret Service call that is part of an operation whose time is up is not started: it
    /// fails at once as a timeout of that operation, however fast the provider answers.
    @Test func aSecretServiceCallInASpentOperationIsNotStarted() throws {
        _ = try #require(getenv("PORTAL_TEST_KEYRING_DIR"), "run inside scripts/with-keyring.sh (a private session bus)")
        let timeouts = KeyringTimeouts(callMilliseconds: 200, promptMilliseconds: 30_000)
        let storage = SecretServiceStorage(timeouts: timeouts)
        _ = try storage.restore(authEnvironmentId: "env-bound-spent")  // reachable, on its own
        let (elapsed, failure) = timed { () throws(StorageFailure) in
            try OperationDeadline.run(timeouts) { () throws(StorageFailure) in
                g_usleep(250_000)
                _ = try storage.restore(authEnvironmentId: "env-bound-spent")
            }
        }
        #expect(elapsed < 400)
        guard case .timedOut(_, let milliseconds)? = failure else {
            Issue.record("restore inside a spent operation: \(failure.map { $0.message } ?? "succeeded")")
            return
        }
        #expect(milliseconds == 200, "the message names the operation's bound")
    }

    /// The time a person spends at an unlock prompt (`Deadline.paused`) is not counted against the
    /// operation: it has a deadline of its own, and the operation's steps after it still have the
    /// time that was left before it.
    @Test func aPromptsTimeIsNotCountedAgainstTheOperation() throws {
        _ = try #require(getenv("PORTAL_TEST_KEYRING_DIR"), "run inside scripts/with-keyring.sh (a private session bus)")
        let timeouts = KeyringTimeouts(callMilliseconds: 200, promptMilliseconds: 30_000)
        let storage = SecretServiceStorage(timeouts: timeouts)
        let (_, failure) = timed { () throws(StorageFailure) in
            try OperationDeadline.run(timeouts) { () throws(StorageFailure) in
                try Deadlines.shared.run(operation: "unlock", until: .now.advanced(byMilliseconds: 200), reporting: 200) { deadline throws(StorageFailure) in
                    try deadline.paused { () throws(StorageFailure) in g_usleep(300_000) }
                }
                _ = try storage.restore(authEnvironmentId: "env-bound-prompt")
            }
        }
        #expect(failure == nil, "the step after the prompt: \(failure.map { $0.message } ?? "")")
    }

    /// A file-keyring write that is part of an operation whose time is up writes nothing.
    @Test func aFileKeyringWriteInASpentOperationWritesNothing() throws {
        let directory = try temporaryDirectory()
        defer { removeDirectory(directory) }
        let timeouts = KeyringTimeouts(callMilliseconds: 200, promptMilliseconds: 30_000)
        let file = FileKeyringStorage(path: directory + "/default.keyring", masterSecret: master("bounds"), timeouts: timeouts)
        let (_, failure) = timed { () throws(StorageFailure) in
            try OperationDeadline.run(timeouts) { () throws(StorageFailure) in
                g_usleep(250_000)
                try file.recordHostMigration(authEnvironmentId: "env-bound-file")
            }
        }
        #expect(failure != nil, "written after the operation's end")
        let recorded = try file.hostMigrationRecorded(authEnvironmentId: "env-bound-file")
        #expect(!recorded)
    }
}
