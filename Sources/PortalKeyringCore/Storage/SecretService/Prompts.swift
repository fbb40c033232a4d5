import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// The provider's prompts, at most one at a time per process, driven at the D-Bus level
/// (`Service.Unlock`, `Prompt.Prompt`, the `Completed` signal) instead of through libsecret's
/// prompt code. Every prompt a provider returns is run: unlock prompts (all providers), and the
/// ones KeePassXC returns for every CreateItem and Item.Delete. libsecret's prompt code is not
/// used because of two faults the fault-injection suite (Tests/fault) found:
///
/// - On cancellation libsecret calls `Prompt.Dismiss`, and gnome-keyring-daemon 42 aborts
///   (`perform_next_unlock: assertion failed: (!self->current)`) when an unlock prompt that is
///   still waiting for its prompter is dismissed: a prompt deadline would crash the user's keyring.
/// - After that, libsecret 0.20's `secret_service_unlock_sync` never returned (its task completes
///   with a NULL error): an endless hang instead of a deadline.
///
/// So a prompt that is not answered within the prompt deadline is left open, never dismissed. The
/// next unlock in this process, from any thread, waits for that same prompt instead of opening
/// another (concurrent unlock prompts are another known gnome-keyring crash), and an answer given
/// meanwhile counts. Every D-Bus call and the wait are bounded by the prompt deadline.
final class Prompts: @unchecked Sendable {
    /// `unlocked`: the prompt completed and was not dismissed (for a create or delete prompt: done).
    enum Outcome: Equatable { case unlocked, dismissed, timedOut }

    /// This process's instance (a fork child gets its own: `ForkSafety`).
    static var shared: Prompts { slot.get }
    private static let slot = ProcessLocal { Prompts() }

    /// Whether a thread is running or waiting for a prompt; broadcast when it is done.
    private let busy = Lock(false)
    /// A prompt left open by a call whose deadline passed. Only the thread that set `busy` uses it.
    private var pending: PendingPrompt?

    private init() {}

    /// Unlocks the objects at `paths` through the provider's prompt, waiting at most
    /// `milliseconds` in all (for another thread's prompt, the D-Bus calls and the answer).
    func unlock(_ paths: [String], connection: OpaquePointer, busName: String,
                milliseconds: UInt32) throws(StorageFailure) -> Outcome {
        let end = MonotonicInstant.now.advanced(byMilliseconds: milliseconds)
        guard enter(until: end) else { return .timedOut }
        defer { leave() }
        if let prompt = pending {
            prompt.poll()
            if prompt.connection != connection || prompt.vanished || prompt.state.dismissed {
                // Another connection or provider, gone, or dismissed: prompt again below.
                pending = nil
                prompt.close()
            } else {
                let outcome = try prompt.wait(until: end)
                if outcome != .timedOut {
                    pending = nil
                    prompt.close()
                }
                if outcome != .dismissed { return outcome }
                // Answered "dismissed" before this call asked: fall through to a prompt of its own.
            }
        }
        let owner = try nameOwner(busName, connection, end)
        let reply = try call(connection, busName, "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Unlock",
                             Variant.tuple([Variant.objectPaths(paths)]), end)
        defer { g_variant_unref(reply) }
        guard String(cString: g_variant_get_type_string(reply)) == "(aoo)" else { throw .failed("unexpected reply to Unlock") }
        let unlocked = g_variant_get_child_value(reply, 0)
        let unlockedCount = g_variant_n_children(unlocked)
        g_variant_unref(unlocked)
        let promptValue = g_variant_get_child_value(reply, 1)
        let promptPath = String(cString: g_variant_get_string(promptValue, nil))
        g_variant_unref(promptValue)
        if promptPath == "/" { return unlockedCount >= paths.count ? .unlocked : .dismissed }

        let (outcome, prompt) = try runPrompt(promptPath, owner: owner, connection: connection, busName: busName, end: end)
        if outcome == .timedOut {
            pending = prompt
        } else {
            prompt?.close()
        }
        return outcome
    }

    /// Runs a prompt that a provider returned for another call than Unlock (KeePassXC answers
    /// every CreateItem and Item.Delete with one; with its confirmations off it completes without
    /// a dialog in about 200 ms): `Prompt.Prompt` with an empty window id, then waits for
    /// `Completed`, at most `milliseconds` in all. Returns the outcome and, when it completed, the
    /// object path its result names (CreateItem's prompt: the new item), or nil.
    ///
    /// Serialized with unlock prompts. A prompt not answered in time is left open, never
    /// dismissed (see the type's notes); it is not waited for again.
    ///
    /// `unlessGone`: a delete prompt's item. Delete prompts are also serialized across this
    /// library's processes (a file lock in `$XDG_RUNTIME_DIR`), and when the item is gone by the
    /// time this prompt's turn comes (another thread's or process's delete prompt for it ran
    /// first), the prompt is not run and the outcome is `.unlocked` (deleted). KeePassXC 2.7.4
    /// crashes (SIGSEGV) when a second delete prompt for an item it already deleted is run
    /// (docs/providers.md).
    func run(_ promptPath: String, connection: OpaquePointer, busName: String, milliseconds: UInt32,
             unlessGone item: String? = nil) throws(StorageFailure) -> (Outcome, resultPath: String?) {
        let end = MonotonicInstant.now.advanced(byMilliseconds: milliseconds)
        guard enter(until: end) else { return (.timedOut, nil) }
        defer { leave() }
        var lock: Int32 = -1
        if item != nil {
            // Other processes of this library too: their delete prompts for the same item must
            // not be queued behind ours before ours has run.
            lock = Self.lockAcrossProcesses(until: end)
            if lock == -2 { return (.timedOut, nil) }
        }
        defer { if lock >= 0 { close(lock) } }
        if let item, try isGone(item, connection, busName, end) { return (.unlocked, nil) }
        let owner = try nameOwner(busName, connection, end)
        let (outcome, prompt) = try runPrompt(promptPath, owner: owner, connection: connection, busName: busName, end: end,
                                              seam: true)
        let path = prompt?.state.resultPath
        prompt?.close()
        return (outcome, path)
    }

    /// `Prompt.Prompt("")` on `promptPath` and the wait for `Completed` until `end`. The caller
    /// closes the returned prompt (nil when the Prompt call itself failed with a timeout).
    ///
    /// A prompt can complete before our Prompt call reaches it (dismissed by the person or another
    /// program; KeePassXC then removes the object, and the call fails with UnknownObject). Its
    /// `Completed` signal, subscribed to before the call, is the answer then: a dismissal is
    /// reported as one, never as an unrelated failure.
    private func runPrompt(_ promptPath: String, owner: String, connection: OpaquePointer, busName: String,
                           end: MonotonicInstant, seam: Bool = false) throws(StorageFailure) -> (Outcome, PendingPrompt?) {
        let prompt = PendingPrompt(connection: connection, owner: owner, path: promptPath)
        if seam { FaultInjectionSeam.beforePrompt(promptPath) }
        do throws(StorageFailure) {
            let window = g_variant_new_string("")
            g_variant_unref(try call(connection, busName, promptPath, "org.freedesktop.Secret.Prompt", "Prompt",
                                     Variant.tuple([window]), end))
        } catch {
            prompt.poll()
            if prompt.state.completed { return (prompt.state.dismissed ? .dismissed : .unlocked, prompt) }
            prompt.close()
            if case .timedOut = error { return (.timedOut, nil) }
            throw error
        }
        do {
            return (try prompt.wait(until: end), prompt)
        } catch {
            prompt.close()
            throw error
        }
    }

    private func enter(until end: MonotonicInstant) -> Bool {
        busy.withLock(when: { !$0 }, until: end) { busy, free in
            if free { busy = true }
            return free
        }
    }

    private func leave() {
        busy.withLock { busy in
            busy = false
            self.busy.broadcast()
        }
    }

    /// An exclusive `flock` on `prompt.lock` in the library's `PrivateDirectory` (only this user
    /// can create it: never `/tmp`, where another user could hold it and stall our deletes),
    /// waited for until `end`: the open descriptor (closing it releases the lock), -1 when there
    /// is no such file to lock (then nothing is serialized across processes), -2 when the time
    /// ran out. Released by close, also when the process dies.
    private static func lockAcrossProcesses(until end: MonotonicInstant) -> Int32 {
        PrivateDirectory.lock("prompt.lock", until: end)
    }

    /// Whether the item at `path` no longer exists (Properties.Get of its Locked property answers
    /// UnknownObject or NoSuchObject), bounded by `end`.
    private func isGone(_ path: String, _ connection: OpaquePointer, _ busName: String,
                        _ end: MonotonicInstant) throws(StorageFailure) -> Bool {
        do throws(StorageFailure.Classified) {
            g_variant_unref(try BusCall.call(connection, destination: busName, path, "org.freedesktop.DBus.Properties", "Get",
                                             Variant.tuple([g_variant_new_string("org.freedesktop.Secret.Item"),
                                                            g_variant_new_string("Locked")]),
                                             nil, .until(end), "could not read the item"))
            return false
        } catch {
            if case .gone = error.kind { return true }
            throw error.storageFailure
        }
    }

    /// The unique bus name that owns `busName` now (the prompt's Completed signal comes from it).
    private func nameOwner(_ busName: String, _ connection: OpaquePointer,
                           _ end: MonotonicInstant) throws(StorageFailure) -> String {
        let bound = BusCall.Bound.until(end)
        do throws(StorageFailure.Classified) {
            return try BusConnection.owner(of: busName, on: connection, bound)
        } catch {
            throw Self.failure(error, bound)
        }
    }

    /// One method call bounded by `end` (`BusCall`). Its reply is unreffed by the caller.
    private func call(_ connection: OpaquePointer, _ destination: String, _ path: String,
                      _ interface: String, _ method: String, _ parameters: OpaquePointer?,
                      _ end: MonotonicInstant) throws(StorageFailure) -> OpaquePointer {
        let bound = BusCall.Bound.until(end)
        do throws(StorageFailure.Classified) {
            return try BusCall.call(connection, destination: destination, path, interface, method, parameters, nil,
                                    bound, "\(method) failed")
        } catch {
            throw Self.failure(error, bound)
        }
    }

    /// A failed call of a prompt: `.timedOut` when the prompt deadline ran out.
    private static func failure(_ error: StorageFailure.Classified, _ bound: BusCall.Bound) -> StorageFailure {
        guard case .timedOut = error.kind else { return error.storageFailure }
        return .timedOut(operation: "the unlock prompt", milliseconds: UInt32(clamping: bound.milliseconds))
    }
}

/// One open prompt: its Completed signal and the provider's disconnection, delivered to a
/// private main context that the waiting thread runs.
final class PendingPrompt {
    final class State: @unchecked Sendable {
        var completed = false
        var dismissed = false
        var vanished = false
        /// The object path in the `Completed` result, when it holds one (`o`, or `ao` of one).
        var resultPath: String?
        /// The provider's unique name: the only sender whose `Completed` counts.
        var owner = ""

        /// `Completed(b dismissed, v result)`. Only the provider's own signal of that type counts
        /// (any process can send a signal to our connection: `SignalSafety`).
        func completed(_ sender: UnsafePointer<gchar>?, _ parameters: OpaquePointer?) {
            guard SignalSafety.from(sender, owner) else { return }
            // The provider's own Completed ends the wait; one of another shape reads as dismissed.
            completed = true
            dismissed = true
            guard Variant.has(parameters, type: "(bv)"), let flag = Variant.child(parameters, 0),
                  let boxed = Variant.child(parameters, 1) else { return }
            defer { g_variant_unref(boxed) }
            dismissed = g_variant_get_boolean(flag) != 0
            g_variant_unref(flag)
            guard let result = Variant.unboxed(boxed) else { return }
            defer { g_variant_unref(result) }
            if let path = Variant.string(result), Variant.has(result, type: "o") {
                resultPath = path
            } else if Variant.has(result, type: "ao"), g_variant_n_children(result) == 1 {
                resultPath = Variant.string(result, 0)
            }
        }

        /// The bus daemon's `NameOwnerChanged(s name, s old, s new)` for the provider's unique
        /// name with an empty new owner: the provider's connection is gone.
        func ownerChanged(_ sender: UnsafePointer<gchar>?, _ parameters: OpaquePointer?) {
            guard let change = SignalSafety.nameOwnerChange(sender, parameters), change.name == owner,
                  change.newOwner.isEmpty else { return }
            vanished = true
        }
    }

    let connection: OpaquePointer
    let state = State()
    private let context: OpaquePointer
    private var subscriptions: [guint] = []

    var vanished: Bool { state.vanished || g_dbus_connection_is_closed(connection) != 0 }

    init(connection: OpaquePointer, owner: String, path: String) {
        g_object_ref(UnsafeMutableRawPointer(connection))
        self.connection = connection
        context = g_main_context_new()
        g_main_context_push_thread_default(context)
        defer { g_main_context_pop_thread_default(context) }
        state.owner = owner
        subscriptions.append(g_dbus_connection_signal_subscribe(
            connection, owner, "org.freedesktop.Secret.Prompt", "Completed", path, nil, G_DBUS_SIGNAL_FLAGS_NONE,
            { _, sender, _, _, _, parameters, data in
                guard let data else { return }
                Unmanaged<State>.fromOpaque(data).takeUnretainedValue().completed(sender, parameters)
            }, Unmanaged.passRetained(state).toOpaque(), { Unmanaged<State>.fromOpaque($0!).release() }))  // trusted: our own user_data, never NULL
        // NameOwnerChanged(owner, owner, "") when the provider's connection goes away.
        subscriptions.append(g_dbus_connection_signal_subscribe(
            connection, "org.freedesktop.DBus", "org.freedesktop.DBus", "NameOwnerChanged", "/org/freedesktop/DBus",
            owner, G_DBUS_SIGNAL_FLAGS_NONE,
            { _, sender, _, _, _, parameters, data in
                guard let data else { return }
                Unmanaged<State>.fromOpaque(data).takeUnretainedValue().ownerChanged(sender, parameters)
            }, Unmanaged.passRetained(state).toOpaque(), { Unmanaged<State>.fromOpaque($0!).release() }))  // trusted: our own user_data, never NULL
    }

    /// Delivers whatever arrived meanwhile.
    func poll() {
        while g_main_context_iteration(context, 0) != 0 {}
    }

    /// Waits for the answer until `end`.
    func wait(until end: MonotonicInstant) throws(StorageFailure) -> Prompts.Outcome {
        while true {
            poll()
            if state.completed { return state.dismissed ? .dismissed : .unlocked }
            if vanished { throw .unavailable("the Secret Service provider went away during the unlock prompt") }
            // A cancelled operation stops waiting like a passed deadline (prompt left open).
            if end.hasPassed || OperationToken.currentIsCancelled { return .timedOut }
            // Wake up at least every 250 ms to notice a closed connection.
            let slice = min(end, MonotonicInstant.now.advanced(byMilliseconds: 250))
            let timer = g_timeout_source_new(guint(clamping: slice.remainingMilliseconds))!  // trusted: GLib allocates or aborts, never NULL
            g_source_set_callback(timer, { _ in 0 }, nil, nil)
            g_source_attach(timer, context)
            g_main_context_iteration(context, 1)
            g_source_destroy(timer)
            g_source_unref(timer)
        }
    }

    /// Unsubscribes and releases everything (the subscriptions' data is released in `context`).
    func close() {
        for id in subscriptions { g_dbus_connection_signal_unsubscribe(connection, id) }
        subscriptions = []
        poll()
        g_main_context_unref(context)
        g_object_unref(UnsafeMutableRawPointer(connection))
    }
}
