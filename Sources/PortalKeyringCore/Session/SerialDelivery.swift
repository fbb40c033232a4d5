import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// Jobs run one after another, in the order they were queued, on a thread of their own (named
/// "portal-listen"), never on the thread that queued them: what a serial dispatch queue gave
/// `InvalidationCenter`, without loading libdispatch into the host process.
///
/// The thread starts when a job arrives and none is running, and ends when none is left, so an
/// idle delivery holds no thread. Jobs are user callbacks (invalidation listeners): one that
/// blocks delays only the jobs queued behind it on this delivery, never the library's workers.
/// A finished job's closure is released before the next runs (it must not keep what it captured
/// alive).
final class SerialDelivery: @unchecked Sendable {
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var running = false
        /// Jobs queued and jobs run since the start: `wait()` waits for the second to reach the first.
        var queued: UInt64 = 0
        var ran: UInt64 = 0
        /// The delivery thread while it runs (`wait()` on it must not wait for itself).
        var thread: pthread_t?
        /// The process whose thread `running` speaks of: after `fork()` the child has no such thread,
        /// so its first job starts one (the parent's queued jobs are the parent's).
        var owner = getpid()

        /// In a `fork()` child the parent's queue is not this process's: its jobs never run here, so
        /// neither may `async` count on the parent's thread nor `wait` wait for them (a child's
        /// `portal_free` waited forever for a delivery queued in the parent).
        mutating func forgetParentAfterFork() {
            guard owner != getpid() else { return }
            owner = getpid()
            jobs.removeAll()
            running = false
            thread = nil
            ran = queued
        }
    }
    /// Broadcast when a job has run.
    private let state = Lock(State())

    /// Queues `job`; never blocks and never runs it on the calling thread.
    func async(_ job: @escaping @Sendable () -> Void) {
        let start = state.withLock { s -> Bool in
            s.forgetParentAfterFork()
            s.jobs.append(job)
            s.queued += 1
            let start = !s.running
            s.running = true
            return start
        }
        if start {
            let context = Unmanaged.passRetained(self).toOpaque()
            let thread = g_thread_new("portal-listen", { raw in
                Unmanaged<SerialDelivery>.fromOpaque(raw!).takeRetainedValue().work()  // trusted: our own user_data, never NULL
                return nil
            }, context)
            g_thread_unref(thread)  // detached: it ends when no job is left
        }
    }

    /// Waits until the jobs queued before this call have run. From a job itself it returns at
    /// once (the job cannot wait for itself to finish).
    func wait() {
        let target = state.withLock { s -> UInt64? in
            s.forgetParentAfterFork()
            if let thread = s.thread, pthread_equal(thread, pthread_self()) != 0 { return nil }
            return s.queued
        }
        guard let target else { return }
        state.withLock(when: { $0.ran >= target }) { _, _ in }
    }

    private func work() {
        state.withLock { $0.thread = pthread_self() }
        var job = nextJob()
        while job != nil {
            job?()
            // Released before it counts as run: `wait()` returns with the job's captures gone.
            job = nil
            state.withLock { s in
                s.ran += 1
                state.broadcast()
            }
            job = nextJob()
        }
    }

    /// The next job, or nil when none is left (then the thread ends: `running` is false).
    private func nextJob() -> (@Sendable () -> Void)? {
        state.withLock { s in
            guard !s.jobs.isEmpty else {
                s.running = false
                s.thread = nil
                return nil
            }
            return s.jobs.removeFirst()
        }
    }
}
