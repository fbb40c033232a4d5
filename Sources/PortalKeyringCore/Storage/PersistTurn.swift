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

    private struct Queues {
        /// Per auth environment, the waiting threads' tickets in arrival order; the first one
        /// holds the turn.
        var waiting: [String: [UInt64]] = [:]
        var nextTicket: UInt64 = 0

        /// Takes `ticket` out of the queue (the next one may be first now).
        mutating func remove(_ key: String, _ ticket: UInt64) {
            waiting[key]?.removeAll { $0 == ticket }
            if waiting[key]?.isEmpty == true { waiting[key] = nil }
        }
    }
    /// Broadcast when a ticket leaves a queue. A `Lock`, which ThreadSanitizer sees (Lock.swift
    /// says why not GLib's mutex); it waits on the monotonic clock, like the deadlines.
    private let queues = Lock(Queues())

    private init() {}

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
        queues.withLock { $0.waiting[authEnvironmentId]?.count ?? 0 }
    }

    /// Queues this thread and waits until it is first: its ticket, or nil when `end` passed first
    /// (then it has left the queue).
    private func enter(_ key: String, until end: MonotonicInstant) -> UInt64? {
        let ticket = queues.withLock { q -> UInt64 in
            let ticket = q.nextTicket
            q.nextTicket &+= 1
            q.waiting[key, default: []].append(ticket)
            return ticket
        }
        return queues.withLock(when: { $0.waiting[key]?.first == ticket }, until: end) { q, first -> UInt64? in
            if first { return ticket }
            q.remove(key, ticket)
            queues.broadcast()
            return nil
        }
    }

    private func leave(_ key: String, _ ticket: UInt64) {
        queues.withLock { q in
            q.remove(key, ticket)
            queues.broadcast()
        }
    }
}
