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

    private static let networkPool = Pool(state: networkState, maxThreads: maxThreads)
    private static let keyringPool = Pool(state: keyringState, maxThreads: maxKeyringThreads)

    /// Each pool's lock. Held across `fork()` (a `pthread_atfork` handler), so that a child never
    /// inherits it mid-use by a worker thread it does not have; the child gets a fresh condition
    /// (no waiter of the parent's survives).
    fileprivate static let networkState = Lock(PoolState())
    fileprivate static let keyringState = Lock(PoolState())
    private static let forkHandlers: Void = {
        pthread_atfork({
                           OperationWorkers.networkState.lockBeforeFork()
                           OperationWorkers.keyringState.lockBeforeFork()
                       },
                       {
                           OperationWorkers.keyringState.unlockAfterFork(inChild: false)
                           OperationWorkers.networkState.unlockAfterFork(inChild: false)
                       },
                       {
                           OperationWorkers.keyringState.unlockAfterFork(inChild: true)
                           OperationWorkers.networkState.unlockAfterFork(inChild: true)
                       })
    }()

    /// A pool's jobs and threads; signalled when a job is queued.
    fileprivate struct PoolState {
        /// A job's slot is emptied when a worker takes it: a finished job must not keep what it
        /// captured (a Portal, its listeners, a token) alive.
        var jobs: [(@Sendable () -> Void)?] = []
        var head = 0
        var threads = 0
        var idle = 0
        /// The process whose threads `threads` counts. Threads do not survive `fork()`: in a child
        /// the count (and the jobs queued for the parent's threads) are the parent's, so the first
        /// submit there starts afresh; otherwise the child's jobs would wait forever for threads
        /// it does not have.
        var owner = getpid()

        /// Queues `job`: whether a thread is to be started for it.
        mutating func add(_ job: @escaping @Sendable () -> Void, maxThreads: Int) -> Bool {
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
            return spawn
        }

        /// Takes the first queued job (there is one).
        mutating func take() -> (@Sendable () -> Void)? {
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
    }

    private final class Pool: Sendable {
        private let state: Lock<PoolState>
        private let maxThreads: Int

        init(state: Lock<PoolState>, maxThreads: Int) {
            OperationWorkers.forkHandlers
            self.state = state
            self.maxThreads = maxThreads
        }

        func submit(_ job: @escaping @Sendable () -> Void) {
            let spawn = state.withLock { s in
                let spawn = s.add(job, maxThreads: maxThreads)
                state.signal()
                return spawn
            }
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

        /// The next job, waited for (counted in `idle` while it waits).
        private func next() -> (@Sendable () -> Void)? {
            var waiting = false
            return state.withLock(when: { s in
                let ready = s.head < s.jobs.count
                if !ready && !waiting {
                    s.idle += 1
                    waiting = true
                } else if ready && waiting {
                    s.idle -= 1
                    waiting = false
                }
                return ready
            }) { s, _ in s.take() }
        }

        private func work() {
            while let job = next() { job() }
        }
    }
}
