import CGLib
import PortalKeyringCore
#if canImport(Glibc)
import Glibc
#endif

/// Where the completions of the non-blocking C calls run (Include/portal_keyring.h,
/// "Non-blocking calls"; the Swift API has its own `async` forms): from a GLib main context
/// (one idle source per completion, run by the thread that iterates the context), or from a
/// pollable pipe whose `dispatch()` runs the ready ones on the caller's thread.
///
/// A completion that cannot run (its pollable queue was closed, or its context was destroyed
/// with the source pending) is dropped: its `dropped` closure runs instead, once. Thread-safe.
final class CompletionQueue: @unchecked Sendable {
    /// One completion: `run` on delivery, or `dropped` (from `deinit`) when it never runs.
    final class Job: @unchecked Sendable {
        private var run: (() -> Void)?
        private var dropped: (() -> Void)?
        init(run: @escaping () -> Void, dropped: @escaping () -> Void) {
            self.run = run
            self.dropped = dropped
        }
        fileprivate func deliver() {
            let body = run
            run = nil
            dropped = nil
            body?()
        }
        deinit { dropped?() }
    }

    private enum Target {
        case context(OpaquePointer)
        /// A non-blocking pipe: read end polled by the caller, write end signalled by `post`.
        case pollable(read: Int32, write: Int32)
    }

    private let target: Target
    /// Pollable mode: ready jobs and whether `close()` ran.
    private let pending = Lock<(jobs: [Job], closed: Bool)>(([], false))

    /// A queue for `context` (a GMainContext; referenced), or for the calling thread's
    /// thread-default context now when nil.
    init(mainContext: UnsafeMutableRawPointer?) {
        if let mainContext {
            let context = OpaquePointer(mainContext)
            g_main_context_ref(context)
            target = .context(context)
        } else {
            target = .context(g_main_context_ref_thread_default())
        }
    }

    /// A pollable queue; nil when no pipe can be made.
    init?(pollable: Void) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return nil }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        target = .pollable(read: fds[0], write: fds[1])
    }

    deinit {
        switch target {
        case .context(let context): g_main_context_unref(context)
        case .pollable(let reader, let writer):
            Glibc.close(reader)
            Glibc.close(writer)
        }
    }

    /// The file descriptor to poll of a pollable queue, else nil.
    var fileDescriptor: Int32? {
        if case .pollable(let fd, _) = target { return fd }
        return nil
    }

    /// Queues `job` for delivery; from any thread, never blocks.
    func post(_ job: Job) {
        switch target {
        case .context(let context):
            let source = g_idle_source_new()!  // trusted: GLib allocates or aborts, never NULL
            g_source_set_priority(source, 0) // G_PRIORITY_DEFAULT
            g_source_set_callback(source, { data in
                Unmanaged<Job>.fromOpaque(data!).takeUnretainedValue().deliver()  // trusted: our own user_data, never NULL
                return 0 // G_SOURCE_REMOVE
            }, Unmanaged.passRetained(job).toOpaque(), { data in
                Unmanaged<Job>.fromOpaque(data!).release()  // trusted: our own user_data, never NULL
            })
            g_source_attach(source, context)
            g_source_unref(source)
        case .pollable(_, let fd):
            let accepted = pending.withLock { state -> Bool in
                guard !state.closed else { return false }
                state.jobs.append(job)
                return true
            }
            // A closed queue drops the job here (its last reference is the caller's).
            // A full pipe (EAGAIN) is readable already.
            if accepted {
                var one: UInt8 = 1
                _ = write(fd, &one, 1)
            }
        }
    }

    /// Pollable mode: runs the jobs ready now on the calling thread; returns how many ran.
    func dispatch() -> Int {
        guard case .pollable(let fd, _) = target else { return 0 }
        // Drain the pipe first: a job posted after this is signalled again.
        var buffer = [UInt8](repeating: 0, count: 256)
        while read(fd, &buffer, buffer.count) > 0 {}
        let jobs = pending.withLock { state -> [Job] in
            defer { state.jobs = [] }
            return state.jobs
        }
        var ran = 0
        for job in jobs {
            // A callback of this round freed the queue (`close()`): the rest are dropped as the
            // header promises (destroy_notify only), never delivered into an app that let go.
            if pending.withLock({ $0.closed }) { break }
            job.deliver()
            ran += 1
        }
        return ran
    }

    /// Pollable mode: drops the ready jobs and every later one.
    func close() {
        guard case .pollable = target else { return }
        let jobs = pending.withLock { state -> [Job] in
            state.closed = true
            defer { state.jobs = [] }
            return state.jobs
        }
        withExtendedLifetime(jobs) {}
    }
}
