import Testing
import Dispatch
@testable import PortalKeyringCore
@testable import PortalKeyring
import Glibc

/// Persists of one auth environment take turns (`PersistTurn`; docs/security.md, "Ordering
/// sign-ins"): one at a time, and the threads of one process in arrival order, so that none
/// waits out its turn behind later arrivals and fails as superseded. Fault condition 11 shows the
/// outcome on the real keyring (no storage failure under contention); this pins the order itself,
/// which a quiet machine hides there.
struct PersistTurnTests {
    private static func sleep(milliseconds: Int) { usleep(useconds_t(milliseconds * 1000)) }

    /// A thread of its own for `body` (not a dispatch worker: their number follows the cores,
    /// and a queue of waiting work would arrive in order whatever the turns do). Joined by the
    /// caller.
    static func thread(_ body: @escaping @Sendable () -> Void) -> pthread_t {
        final class Box { let body: @Sendable () -> Void; init(_ body: @escaping @Sendable () -> Void) { self.body = body } }
        var thread = pthread_t()
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        let created = pthread_create(&thread, nil, { raw in
            guard let raw else { return nil }
            Unmanaged<Box>.fromOpaque(raw).takeRetainedValue().body()
            return nil
        }, box)
        precondition(created == 0, "pthread_create")
        return thread
    }

    @Test func threadsTakeTheirTurnsOneAtATimeInArrivalOrder() {
        let environment = "turn-order-\(getpid())"
        let entered = Lock<[Int]>([])
        let inside = Lock<(now: Int, most: Int)>((0, 0))
        var threads: [pthread_t] = []
        for index in 0..<8 {
            // Each thread arrives once the one before it is in line, or 50 ms after it started
            // (a loaded machine may take longer to queue it); each turn lasts 300 ms, so several
            // wait behind each turn.
            for _ in 0..<50 where PersistTurn.shared.queued(environment) < index { Self.sleep(milliseconds: 1) }
            threads.append(Self.thread {
                _ = try? PersistTurn.shared.run(environment, waitingAtMost: 10_000) { () throws(StorageFailure) in
                    inside.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
                    entered.withLock { $0.append(index) }
                    Self.sleep(milliseconds: 300)
                    inside.withLock { $0.now -= 1 }
                }
            })
        }
        for thread in threads { pthread_join(thread, nil) }
        #expect(inside.withLock { $0.most } == 1, "two persists ran at once")
        #expect(entered.withLock { $0 } == Array(0..<8), "turns taken out of arrival order")
    }

    @Test func aTurnNotGivenInTimeLetsThePersistRunWithoutIt() {
        let environment = "turn-timeout-\(getpid())"
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holder = Self.thread {
            _ = try? PersistTurn.shared.run(environment, waitingAtMost: 1_000) { () throws(StorageFailure) in
                holding.signal()
                release.wait()
            }
        }
        holding.wait()
        let start = DispatchTime.now().uptimeNanoseconds
        var ran = false
        _ = try? PersistTurn.shared.run(environment, waitingAtMost: 200) { () throws(StorageFailure) in ran = true }
        let waited = (DispatchTime.now().uptimeNanoseconds - start) / 1_000_000
        release.signal()
        pthread_join(holder, nil)
        #expect(ran, "the persist did not run once its wait was over")
        #expect(waited >= 190 && waited < 2_000, "waited \(waited) ms for a 200 ms turn")
    }

    /// A persist waits for its turn at most one call deadline in all —
    /// the queue of its own process and the lock the processes share together — and then runs
    /// without it. Another process holds the shared lock throughout (as one waiting for a person
    /// at a prompt would). `first` (a 1000 ms deadline) waits for that lock for its whole
    /// deadline; `second` (2000 ms), arriving right after, waits about 1000 ms in the queue
    /// behind `first` and then for the lock only for what is left of its own 2000 ms. Each
    /// persist's wait is taken up to the moment its document is asked for (the store's key is
    /// derived beforehand). A lock given a deadline of its own (a fresh one once first in line,
    /// or one past the turn's end) makes one of them wait twice as long.
    @Test func aPersistWaitsForItsTurnAtMostOneCallDeadlineInAll() throws {
        let environment = "turn-bound-\(getpid())"
        let store = try FileStore()
        try PortalAuth(authEnvironmentId: "setup", redirectUrl: "app://cb", apiHost: "api.portalhq.io", storage: store.storage)
            .persistSession(endUserId: "s", clientSessionToken: "t")
        let otherProcess = PrivateDirectory.lock(PersistOrder.lockName(environment), until: .distantFuture)
        try #require(otherProcess >= 0, "the shared turn lock (in the library's private directory) could not be taken")
        defer { close(otherProcess) }
        let waited = Lock<[String: Int]>([:])
        let failures = Lock<[String]>([])
        func persist(_ name: String, within milliseconds: UInt32) -> pthread_t {
            let storage = store.storage.withTimeouts(KeyringTimeouts(callMilliseconds: milliseconds, promptMilliseconds: milliseconds))
            return Self.thread {
                let start = monotonicMilliseconds()
                let generation = ItemSchema.newGeneration()
                do throws(StorageFailure) {
                    _ = try storage.replace(authEnvironmentId: environment, generation: generation, now: ItemSchema.persistTimestamp(),
                                            label: "L") { persistedAt in
                        waited.withLock { $0[name] = $0[name] ?? monotonicMilliseconds() - start }
                        return SessionDocument.encode(authEnvironmentId: environment, endUserId: name, token: SecretBytes.copyingUTF8(of: "t"),
                                                      generation: generation, persistedAt: persistedAt)
                    }
                } catch {
                    failures.withLock { $0.append("\(name): \(error.message)") }
                }
            }
        }
        let first = persist("first", within: 1_000)
        for _ in 0..<1_000 where PersistTurn.shared.queued(environment) < 1 { Self.sleep(milliseconds: 1) }
        let second = persist("second", within: 2_000)
        pthread_join(first, nil)
        pthread_join(second, nil)
        #expect(failures.withLock { $0 } == [])
        let times = waited.withLock { $0 }
        let firstWaited = try #require(times["first"]), secondWaited = try #require(times["second"])
        #expect(firstWaited >= 950 && firstWaited < 1_600, "a persist with a 1000 ms deadline waited \(firstWaited) ms for its turn")
        #expect(secondWaited >= 1_900 && secondWaited < 2_600, "a persist with a 2000 ms deadline waited \(secondWaited) ms for its turn")
    }
}
