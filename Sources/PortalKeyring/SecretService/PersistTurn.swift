import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// Persists of one auth environment take turns across this user's threads and processes
/// (docs/security.md, "Ordering sign-ins"): the later one sees the earlier one's item and removes
/// it, and both succeed in the order they stored, instead of storing at once and one failing as
/// superseded.
///
/// The threads of one process queue in arrival order (so none starves under contention); the
/// first in line takes the file lock `PersistOrder.lockName` in the library's `PrivateDirectory`,
/// which the processes share. A turn is waited for at most the call deadline, before the
/// operation's own deadline starts. Past that (a holder waiting for a person at a prompt), or
/// without a private directory, the persist runs without its turn, and `PersistOrder` alone
/// decides which of two overlapping persists stays.
final class PersistTurn: @unchecked Sendable {
    /// This process's queues (a fork child gets its own: `ForkSafety`).
    static var shared: PersistTurn { slot.get }
    private static let slot = ProcessLocal { PersistTurn() }

    private let mutex: UnsafeMutablePointer<GMutex>
    private let condition: UnsafeMutablePointer<GCond>
    /// Guarded by `mutex`: per auth environment, the waiting threads' tickets in arrival order;
    /// the first one holds the turn.
    private var queues: [String: [UInt64]] = [:]
    private var nextTicket: UInt64 = 0

    private init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: GMutex())
        g_mutex_init(mutex)
        condition = .allocate(capacity: 1)
        condition.initialize(to: GCond())
        g_cond_init(condition)
    }

    /// Runs `body` in this auth environment's turn, waited for at most `milliseconds`.
    func run<T>(_ authEnvironmentId: String, waitingAtMost milliseconds: UInt32,
                _ body: () throws(StorageFailure) -> T) throws(StorageFailure) -> T {
        let end = g_get_monotonic_time() + Int(milliseconds) * 1000
        let ticket = enter(authEnvironmentId, until: end)
        defer { if let ticket { leave(authEnvironmentId, ticket) } }
        let file = ticket == nil ? -1 : PrivateDirectory.lock(PersistOrder.lockName(authEnvironmentId), until: end)
        defer { if file >= 0 { close(file) } }
        return try body()
    }

    /// How many threads of this process hold or wait for `authEnvironmentId`'s turn (tests).
    func queued(_ authEnvironmentId: String) -> Int {
        g_mutex_lock(mutex)
        defer { g_mutex_unlock(mutex) }
        return queues[authEnvironmentId]?.count ?? 0
    }

    /// Queues this thread and waits until it is first: its ticket, or nil when `end` passed first
    /// (then it has left the queue).
    private func enter(_ key: String, until end: Int) -> UInt64? {
        g_mutex_lock(mutex)
        defer { g_mutex_unlock(mutex) }
        let ticket = nextTicket
        nextTicket &+= 1
        queues[key, default: []].append(ticket)
        while queues[key]?.first != ticket {
            if g_cond_wait_until(condition, mutex, end) == 0 && queues[key]?.first != ticket {
                remove(key, ticket)
                return nil
            }
        }
        return ticket
    }

    private func leave(_ key: String, _ ticket: UInt64) {
        g_mutex_lock(mutex)
        remove(key, ticket)
        g_mutex_unlock(mutex)
    }

    /// Takes `ticket` out of the queue and wakes the waiters (the next one may be first now).
    /// Called with `mutex` held.
    private func remove(_ key: String, _ ticket: UInt64) {
        queues[key]?.removeAll { $0 == ticket }
        if queues[key]?.isEmpty == true { queues[key] = nil }
        g_cond_broadcast(condition)
    }
}
