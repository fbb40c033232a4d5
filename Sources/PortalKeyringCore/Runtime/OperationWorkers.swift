import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// The library's worker threads for non-blocking operations (docs/threading.md), named "portal-async",
/// started on demand and kept for the process's life, in two pools: one for work that may wait
/// on the network (requests, sign-ins: up to 30 s per request), at most `maxThreads`, and one
/// for keyring-only work (restore, persist, clear, invalidate, sign-out), at most
/// `maxKeyringThreads`, so that a sign-out never waits behind a slow Portal API. Jobs beyond a
/// pool's threads wait in FIFO order. Jobs run keyring and HTTP calls, never user code.
@_spi(Bindings)
public enum OperationWorkers {
    public static let maxThreads = 4
    public static let maxKeyringThreads = 2

    /// Which pool a job runs in.
    public enum Lane: Sendable {
        /// Work that may wait on the network (an HTTP request, a sign-in, closing a Portal).
        case network
        /// Work that talks to the keyring only: it never queues behind network work.
        case keyring
    }

    /// Queues `job` for a worker thread of `lane`'s pool; never blocks.
    public static func submit(_ lane: Lane = .network, _ job: @escaping @Sendable () -> Void) {
        switch lane {
        case .network: networkPool.submit(job)
        case .keyring: keyringPool.submit(job)
        }
    }

    private static let networkPool = Pool(mutex: poolMutex, ready: poolReady, maxThreads: maxThreads)
    private static let keyringPool = Pool(mutex: keyringMutex, ready: keyringReady, maxThreads: maxKeyringThreads)

    /// Each pool's lock and condition. Held across `fork()` (a `pthread_atfork` handler), so that a
    /// child never inherits them mid-use by a worker thread it does not have; the child gets
    /// fresh conditions (no waiter of the parent's survives).
    nonisolated(unsafe) fileprivate static let poolMutex: UnsafeMutablePointer<pthread_mutex_t> = newMutex()
    nonisolated(unsafe) fileprivate static let keyringMutex: UnsafeMutablePointer<pthread_mutex_t> = newMutex()
    nonisolated(unsafe) fileprivate static let poolReady: UnsafeMutablePointer<pthread_cond_t> = newCondition()
    nonisolated(unsafe) fileprivate static let keyringReady: UnsafeMutablePointer<pthread_cond_t> = newCondition()
    private static let forkHandlers: Void = {
        pthread_atfork({
                           pthread_mutex_lock(OperationWorkers.poolMutex)
                           pthread_mutex_lock(OperationWorkers.keyringMutex)
                       },
                       {
                           pthread_mutex_unlock(OperationWorkers.keyringMutex)
                           pthread_mutex_unlock(OperationWorkers.poolMutex)
                       },
                       {
                           pthread_cond_init(OperationWorkers.poolReady, nil)
                           pthread_cond_init(OperationWorkers.keyringReady, nil)
                           pthread_mutex_unlock(OperationWorkers.keyringMutex)
                           pthread_mutex_unlock(OperationWorkers.poolMutex)
                       })
    }()

    private static func newMutex() -> UnsafeMutablePointer<pthread_mutex_t> {
        let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        return mutex
    }

    private static func newCondition() -> UnsafeMutablePointer<pthread_cond_t> {
        let ready = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        pthread_cond_init(ready, nil)
        return ready
    }

    private final class Pool: @unchecked Sendable {
        private let ready: UnsafeMutablePointer<pthread_cond_t>
        private let mutex: UnsafeMutablePointer<pthread_mutex_t>
        private let maxThreads: Int

        init(mutex: UnsafeMutablePointer<pthread_mutex_t>, ready: UnsafeMutablePointer<pthread_cond_t>, maxThreads: Int) {
            OperationWorkers.forkHandlers
            self.mutex = mutex
            self.ready = ready
            self.maxThreads = maxThreads
        }
        /// Guarded by `mutex`. A job's slot is emptied when a worker takes it: a finished job must
        /// not keep what it captured (a Portal, its listeners, a token) alive.
        private var jobs: [(@Sendable () -> Void)?] = []
        private var head = 0
        private var threads = 0
        private var idle = 0


        /// The process whose threads `threads` counts. Threads do not survive `fork()`: in a child
        /// the count (and the jobs queued for the parent's threads) are the parent's, so the first
        /// submit there starts afresh; otherwise the child's jobs would wait forever for threads
        /// it does not have.
        private var owner = getpid()

        func submit(_ job: @escaping @Sendable () -> Void) {
            pthread_mutex_lock(mutex)
            if owner != getpid() {
                owner = getpid()
                jobs.removeAll()
                head = 0
                threads = 0
                idle = 0
            }
            jobs.append(job)
            let spawn = jobs.count - head > idle && threads < maxThreads
            if spawn { threads += 1 }
            pthread_cond_signal(ready)
            pthread_mutex_unlock(mutex)
            if spawn { start() }
        }

        private func start() {
            // A GLib thread: named "portal-async" (visible in gdb, top -H), and never joined.
            let context = Unmanaged.passRetained(self).toOpaque()
            let thread = g_thread_new("portal-async", { raw in
                Unmanaged<Pool>.fromOpaque(raw!).takeRetainedValue().work()  // trusted: our own user_data, never NULL
                return nil
            }, context)
            g_thread_unref(thread)
        }

        private func next(wait: Bool) -> (@Sendable () -> Void)? {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            while head == jobs.count {
                guard wait else { return nil }
                idle += 1
                pthread_cond_wait(ready, mutex)
                idle -= 1
            }
            let job = jobs[head].take()
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            } else if head > 64, head * 2 > jobs.count {
                jobs.removeFirst(head)
                head = 0
            }
            return job
        }

        private func work() {
            while let job = next(wait: true) { job() }
        }
    }
}
