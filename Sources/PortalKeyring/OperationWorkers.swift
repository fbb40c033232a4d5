import CLibSecret
#if canImport(Glibc)
import Glibc
#endif

/// The library's worker threads for non-blocking operations (issue 12): at most
/// `maxThreads` threads named "portal-async", started on demand and kept for the process's life;
/// jobs beyond them wait in FIFO order. Jobs run keyring and HTTP calls, never user code.
@_spi(PortalKeyringC)
public enum OperationWorkers {
    public static let maxThreads = 4

    /// Queues `job` for a worker thread; never blocks.
    public static func submit(_ job: @escaping @Sendable () -> Void) {
        pool.submit(job)
    }

    private static let pool = Pool()

    private final class Pool: @unchecked Sendable {
        private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        private let ready = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        /// Guarded by `mutex`. A job's slot is emptied when a worker takes it: a finished job must
        /// not keep what it captured (a Portal, its listeners, a token) alive.
        private var jobs: [(@Sendable () -> Void)?] = []
        private var head = 0
        private var threads = 0
        private var idle = 0

        init() {
            pthread_mutex_init(mutex, nil)
            pthread_cond_init(ready, nil)
        }

        func submit(_ job: @escaping @Sendable () -> Void) {
            pthread_mutex_lock(mutex)
            jobs.append(job)
            let spawn = jobs.count - head > idle && threads < OperationWorkers.maxThreads
            if spawn { threads += 1 }
            pthread_cond_signal(ready)
            pthread_mutex_unlock(mutex)
            if spawn { start() }
        }

        private func start() {
            // A GLib thread: named "portal-async" (visible in gdb, top -H), and never joined.
            let context = Unmanaged.passRetained(self).toOpaque()
            let thread = g_thread_new("portal-async", { raw in
                Unmanaged<Pool>.fromOpaque(raw!).takeRetainedValue().work()
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
