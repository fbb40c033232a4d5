import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// One operation's deadline: a cancellable that the deadline thread cancels when the time is up.
/// `paused` stops the clock while a person answers an unlock prompt (which has its own deadline).
final class Deadline {
    let cancellable: UnsafeMutablePointer<GCancellable>
    private let context: OpaquePointer
    private var source: UnsafeMutablePointer<GSource>?
    /// When the cancellable is cancelled.
    private var end: MonotonicInstant

    fileprivate init(until end: MonotonicInstant, context: OpaquePointer) {
        cancellable = g_cancellable_new()!  // trusted: GLib allocates or aborts, never NULL
        self.context = context
        self.end = end
        arm()
    }

    deinit {
        disarm()
        g_object_unref(cancellable)
    }

    /// Runs `body` with the deadline stopped; the time left before it is left afterwards. The
    /// operation's own end (`OperationDeadline`) moves on by as long as `body` took, too.
    func paused<T>(_ body: () throws(StorageFailure) -> T) throws(StorageFailure) -> T {
        let remaining = max(MonotonicInstant.now.duration(to: end), .zero)
        disarm()
        defer {
            end = MonotonicInstant.now.advanced(by: remaining)
            arm()
        }
        return try OperationDeadline.paused(body)
    }

    /// Cancels the cancellable at `end`.
    private func arm() {
        let source = g_timeout_source_new(guint(clamping: end.remainingMilliseconds))!  // trusted: GLib allocates or aborts, never NULL
        g_source_set_callback(source, { data in
            g_cancellable_cancel(data?.assumingMemoryBound(to: GCancellable.self))
            return 0 // G_SOURCE_REMOVE
        }, g_object_ref(cancellable), { g_object_unref($0) })
        g_source_attach(source, context)
        self.source = source
    }

    private func disarm() {
        guard let source else { return }
        g_source_destroy(source)
        g_source_unref(source)
        self.source = nil
    }
}

/// Cancels keyring calls whose deadline passed. One GLib thread, started on first use, runs a
/// private main context with one timeout source per pending operation.
final class Deadlines: Sendable {
    /// This process's instance (a fork child gets its own: `ForkSafety`).
    static var shared: Deadlines { slot.get }
    private static let slot = ProcessLocal { Deadlines() }

    private struct Context: @unchecked Sendable { let pointer: OpaquePointer }
    private let context: Context

    private init() {
        let context = g_main_context_new()!  // trusted: GLib allocates or aborts, never NULL
        let loop = g_main_loop_new(context, 0)
        let thread = g_thread_new("portal-keyring-deadline", { loop in
            g_main_loop_run(OpaquePointer(loop))
            return nil
        }, UnsafeMutableRawPointer(loop))
        g_thread_unref(thread)
        self.context = Context(pointer: context)
    }

    /// Runs `body` with a deadline whose cancellable is cancelled at `end`; a failure after the
    /// deadline passed becomes `.timedOut`, naming `reporting` (the bound, in milliseconds, that
    /// `end` came from: the operation's whole one when `end` is its end).
    func run<T>(operation: String, until end: MonotonicInstant, reporting: UInt32,
                _ body: (Deadline) throws(StorageFailure) -> T) throws(StorageFailure) -> T {
        let deadline = Deadline(until: end, context: context.pointer)
        // Cancelling the operation this thread runs cancels the deadline's cancellable.
        let unhook = OperationToken.current?.cancels(deadline.cancellable)
        defer { unhook?(); withExtendedLifetime(deadline) {} }
        do {
            return try body(deadline)
        } catch {
            if g_cancellable_is_cancelled(deadline.cancellable) != 0, !error.isTimeout {
                throw .timedOut(operation: operation, milliseconds: reporting)
            }
            throw error
        }
    }
}

private extension StorageFailure {
    var isTimeout: Bool { if case .timedOut = self { return true } else { return false } }
}
