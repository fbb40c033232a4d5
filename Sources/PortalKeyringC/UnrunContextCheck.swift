import CGLib
import PortalKeyringCore
#if canImport(Glibc)
import Glibc
#endif

/// A completion posted to a GMainContext that no thread iterates never runs. The typical case is
/// a NULL queue (the thread-default context, GLib's global default for most threads) in a
/// program whose loop is not GLib's: Qt with `QT_NO_GLIB=1`, libuv, asyncio, plain poll().
/// Refusing NULL there is impossible at call time (a GLib program may start a call before it
/// runs its loop), so each posted completion is checked once after `graceMicroseconds`: still
/// undelivered while no thread owns its context (`g_main_context_acquire` succeeds) means
/// nobody iterates it, and the process gets one line on stderr saying so and what to use
/// instead (Include/portal_keyring.h, "Completion queues"). The completion itself still runs
/// if a loop iterates the context later.
///
/// One thread ("portal-queue-check") sleeps on a condition until the earliest check is due; it
/// ends when none is pending, so a process whose completions run costs no wake-up beyond one per
/// completion.
enum UnrunContextCheck {
    static let graceMicroseconds = 2_000_000

    /// The job weakly: a dropped job runs its `dropped` where the header says, never here.
    private struct Pending {
        weak var job: CompletionQueue.Job?
        let context: OpaquePointer
        let due: Int
    }

    private struct State {
        var pending: [Pending] = []
        var running = false
        var warned = false
    }

    private static let state = Lock(State())

    /// Checks `job`, just posted to `context`, once the grace period is over.
    static func watch(_ job: CompletionQueue.Job, on context: OpaquePointer) {
        let start = state.withLock { s -> Bool in
            guard !s.warned else { return false }
            g_main_context_ref(context)
            s.pending.append(Pending(job: job, context: context, due: Int(g_get_monotonic_time()) + graceMicroseconds))
            state.broadcast()
            defer { s.running = true }
            return !s.running
        }
        if start { g_thread_unref(g_thread_new("portal-queue-check", { _ in UnrunContextCheck.run(); return nil }, nil)) }
    }

    private static func run() {
        while let due = next() { check(due) }
    }

    /// Waits until the earliest check is due and takes it; nil (the thread ends) when none is left.
    private static func next() -> Pending? {
        while true {
            let earliest = state.withLock { s -> Int? in
                if s.pending.isEmpty { s.running = false }
                return s.pending.map { $0.due }.min()
            }
            guard let earliest else { return nil }
            let taken = state.withLock(when: { s in s.pending.contains { $0.due <= Int(g_get_monotonic_time()) } },
                                       until: earliest) { s, ready -> Pending? in
                guard ready, let index = s.pending.firstIndex(where: { $0.due <= Int(g_get_monotonic_time()) }) else { return nil }
                return s.pending.remove(at: index)
            }
            if let taken { return taken }
        }
    }

    private static func check(_ pending: Pending) {
        defer { g_main_context_unref(pending.context) }
        guard let job = pending.job, !job.isDone, g_main_context_acquire(pending.context) != 0 else { return }
        g_main_context_release(pending.context)
        let first = state.withLock { s -> Bool in
            defer { s.warned = true }
            return !s.warned
        }
        guard first else { return }
        let text = "portal-keyring: a completion has waited over \(graceMicroseconds / 1_000_000) s for a GLib main "
            + "context that no thread iterates, so it has not run (a NULL queue means the thread-default GMainContext); "
            + "run a GLib main loop on it, or pass a pollable queue (portal_completion_queue_new_pollable) and "
            + "dispatch it from your loop. This is said once per process.\n"
        _ = text.withCString { write(2, $0, strlen($0)) }
    }
}
