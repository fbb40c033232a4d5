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
/// which the processes share. A turn is waited for at most the call deadline, not counted
/// against the operation's own deadline (`OperationDeadline.turnWait`). Past that (a holder
/// waiting for a person at a prompt), or without a private directory, the persist runs without
/// its turn, and `PersistOrder` alone decides which of two overlapping persists stays.
final class PersistTurn: @unchecked Sendable {
    /// This process's queues (a fork child gets its own: `ForkSafety`).
    static var shared: PersistTurn { slot.get }
    private static let slot = ProcessLocal { PersistTurn() }

    // pthread, not GMutex/GCond: GLib's futex-based mutex is invisible to ThreadSanitizer, which
    // then reports every access under it as a race (seen in the slow fault checks).
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Waits on the monotonic clock, like `g_get_monotonic_time` that the deadlines use.
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    /// Guarded by `mutex`: per auth environment, the waiting threads' tickets in arrival order;
    /// the first one holds the turn.
    private var queues: [String: [UInt64]] = [:]
    private var nextTicket: UInt64 = 0

    private init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    /// Runs `body` in this auth environment's turn, waited for at most `milliseconds`. Within an
    /// operation (`OperationDeadline`) a persist's waits are not counted against its deadline, up
    /// to `milliseconds` in all; a wait inside another operation (the sandbox's move of the host's
    /// session during a restore) is counted, and ends with the operation.
    func run<T>(_ authEnvironmentId: String, waitingAtMost milliseconds: UInt32,
                _ body: () throws(StorageFailure) -> T) throws(StorageFailure) -> T {
        let (end, over) = OperationDeadline.turnWait(milliseconds: milliseconds)
        let ticket = enter(authEnvironmentId, until: end)
        defer { if let ticket { leave(authEnvironmentId, ticket) } }
        let file = ticket == nil ? -1 : PrivateDirectory.lock(PersistOrder.lockName(authEnvironmentId), until: end)
        defer { if file >= 0 { close(file) } }
        over()
        return try body()
    }

    /// How many threads of this process hold or wait for `authEnvironmentId`'s turn (tests).
    func queued(_ authEnvironmentId: String) -> Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return queues[authEnvironmentId]?.count ?? 0
    }

    /// Queues this thread and waits until it is first: its ticket, or nil when `end` passed first
    /// (then it has left the queue).
    private func enter(_ key: String, until end: Int) -> UInt64? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        var deadline = timespec(tv_sec: end / 1_000_000, tv_nsec: (end % 1_000_000) * 1000)
        let ticket = nextTicket
        nextTicket &+= 1
        queues[key, default: []].append(ticket)
        while queues[key]?.first != ticket {
            if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT && queues[key]?.first != ticket {
                remove(key, ticket)
                return nil
            }
        }
        return ticket
    }

    private func leave(_ key: String, _ ticket: UInt64) {
        pthread_mutex_lock(mutex)
        remove(key, ticket)
        pthread_mutex_unlock(mutex)
    }

    /// Takes `ticket` out of the queue and wakes the waiters (the next one may be first now).
    /// Called with `mutex` held.
    private func remove(_ key: String, _ ticket: UInt64) {
        queues[key]?.removeAll { $0 == ticket }
        if queues[key]?.isEmpty == true { queues[key] = nil }
        pthread_cond_broadcast(condition)
    }
}
