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
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let finished = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// Guarded by `mutex`.
    private var jobs: [@Sendable () -> Void] = []
    private var running = false
    /// Jobs queued and jobs run since the start: `wait()` waits for the second to reach the first.
    private var queued: UInt64 = 0
    private var ran: UInt64 = 0
    /// The delivery thread while it runs (`wait()` on it must not wait for itself).
    private var thread: pthread_t?
    /// The process whose thread `running` speaks of: after `fork()` the child has no such thread,
    /// so its first job starts one (the parent's queued jobs are the parent's).
    private var owner = getpid()

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(finished, nil)
    }

    deinit {
        pthread_cond_destroy(finished)
        pthread_mutex_destroy(mutex)
        finished.deallocate()
        mutex.deallocate()
    }

    /// Queues `job`; never blocks and never runs it on the calling thread.
    func async(_ job: @escaping @Sendable () -> Void) {
        pthread_mutex_lock(mutex)
        forgetParentAfterFork()
        jobs.append(job)
        queued += 1
        let start = !running
        running = true
        pthread_mutex_unlock(mutex)
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
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        forgetParentAfterFork()
        if let thread, pthread_equal(thread, pthread_self()) != 0 { return }
        let target = queued
        while ran < target { pthread_cond_wait(finished, mutex) }
    }

    /// In a `fork()` child the parent's queue is not this process's: its jobs never run here, so
    /// neither may `async` count on the parent's thread nor `wait` wait for them (a child's
    /// `portal_free` waited forever for a delivery queued in the parent). Called with `mutex` held.
    private func forgetParentAfterFork() {
        guard owner != getpid() else { return }
        owner = getpid()
        jobs.removeAll()
        running = false
        thread = nil
        ran = queued
    }

    private func work() {
        pthread_mutex_lock(mutex)
        thread = pthread_self()
        while !jobs.isEmpty {
            var job: (@Sendable () -> Void)? = jobs.removeFirst()
            pthread_mutex_unlock(mutex)
            job?()
            job = nil
            pthread_mutex_lock(mutex)
            ran += 1
            pthread_cond_broadcast(finished)
        }
        running = false
        thread = nil
        pthread_mutex_unlock(mutex)
    }
}
