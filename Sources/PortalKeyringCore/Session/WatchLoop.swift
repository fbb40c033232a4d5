import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// The GLib side of a `SessionWatch`: a private session-bus connection whose signal
/// subscriptions dispatch into a main context of its own, run by one thread ("portal-watch")
/// that sleeps in `poll()` until a message arrives. Signals only schedule a read (`observe`);
/// the read's result, compared with the last one, decides the event (`SessionChange.between`).
///
/// Coalescing: a signal schedules one read, at idle priority (so the signals already queued are
/// dispatched first and share it), no sooner than `SessionWatch.coalesceMilliseconds` after the
/// previous read ended (a one-shot timeout source; none exists while nothing happens). Signals
/// that arrive while a read is scheduled join it.
///
/// Every field below `stopped` is touched only by the starting thread before the watch thread
/// exists, then only by the watch thread. Stopping never waits for the thread (`stop()`).
final class WatchLoop: @unchecked Sendable {
    private let observe: () throws(StorageFailure) -> SessionObservation
    /// The file keyring to watch besides the signals (nil: none), asked when the watch starts.
    private let file: () throws(StorageFailure) -> String?
    private var monitor: FileKeyringMonitor?
    private let onChange: @Sendable (SessionChange, SessionChangeOrigin) -> Void
    /// Whose writes count as this process's (`OwnChanges`).
    let authEnvironmentId: String
    private let context: OpaquePointer
    /// Whether `stop()` ran, and the thread to join.
    private let stopped = Lock<(done: Bool, thread: UnsafeMutablePointer<GThread>?)>((false, nil))

    private var connection: OpaquePointer?
    private var subscriptions: [guint] = []
    private var closedHandler: gulong = 0
    private var last: SessionObservation?
    /// `OwnChanges.sequence` when `last` was first seen.
    private var lastSince: UInt64 = 0
    private var readSource: UnsafeMutablePointer<GSource>?
    private var reconnectSource: UnsafeMutablePointer<GSource>?
    /// The next read after a failed one (one a second while the keyring cannot be read).
    private var retrySource: UnsafeMutablePointer<GSource>?
    /// Whether a keyring operation of this process failed for want of the provider
    /// (`KeyringTrouble`) since the last successful read: the next successful read reports
    /// `.available` first. A failed read of the watch's own does not set it: the app saw no
    /// failure (on KWallet a read fails now and then during a burst of writes, and the app heard
    /// "available" in the middle of sign-ins).
    private var unreadable = false
    /// When the last read ended.
    private var lastReadEnd = MonotonicInstant.origin
    /// The unique name of the process that owns `org.freedesktop.secrets` ("" while nobody
    /// does): the only sender whose Secret Service signals count.
    private var provider = ""

    private static let secretsName = ProviderName.wellKnown
    /// Bound for each call to the bus daemon while connecting (the watch has no operation deadline).
    private static let busMilliseconds: Int32 = 5000

    /// How a watch starts.
    enum Start {
        /// In `init`: connect, subscribe, wait for the bus to confirm the subscriptions (one
        /// round trip), read the baseline; `init` throws what failed.
        case blocking
        /// On the watch thread: `init` returns at once; `started` runs on the watch thread once
        /// the watch is live (nil) or could not start (the failure; the watch then ends). It runs
        /// under the same rule as `onChange`: never after `stop()` returned.
        case background(started: @Sendable (StorageFailure?) -> Void)
    }

    init(authEnvironmentId: String, observe: @escaping () throws(StorageFailure) -> SessionObservation,
         file: @escaping () throws(StorageFailure) -> String? = { nil },
         onChange: @escaping @Sendable (SessionChange, SessionChangeOrigin) -> Void,
         start: Start = .blocking) throws(StorageFailure) {
        ForkSafety.install()
        if ForkSafety.dbusUnusable { throw ForkSafety.childFailure }
        self.authEnvironmentId = authEnvironmentId
        self.observe = observe
        self.file = file
        self.onChange = onChange
        // GLib aborts on allocation failure instead of returning NULL; no outside input here.
        context = g_main_context_new()
        if case .background(let started) = start {
            self.started = started
        } else {
            try begin()
        }
        let thread = g_thread_new("portal-watch", { raw in
            guard let raw else { return nil }
            let loop = Unmanaged<WatchLoop>.fromOpaque(raw).takeRetainedValue()
            loop.run()
            return nil
        }, Unmanaged.passRetained(self).toOpaque())
        stopped.withLock { $0.thread = thread }
    }

    /// What a background start calls once it knows; nil for a blocking start (and once called).
    private var started: (@Sendable (StorageFailure?) -> Void)?

    /// Connects, subscribes and reads the baseline, with `context` as the thread-default context.
    private func begin() throws(StorageFailure) {
        g_main_context_push_thread_default(context)
        let connected = connect()
        g_main_context_pop_thread_default(context)
        if let failure = connected { throw failure }
        do throws(StorageFailure) {
            if let path = try file() {
                monitor = try FileKeyringMonitor(path: path, context: context) { [unowned self] in self.scheduleRead() }
            }
        } catch {
            disconnect()
            throw error
        }
        baseline()
    }

    deinit {
        g_main_context_unref(context)
    }

    /// Stops the watch without waiting for its thread: after this returns no `onChange` call
    /// runs or starts (when called from another thread, it waits for a call in progress, which
    /// only posts an event). The thread ends on its own once a keyring read in progress ends
    /// (bounded by the call deadline), then disconnects. So stopping never blocks on the keyring:
    /// from a GUI loop, an asyncio loop or a Swift executor (docs/threading.md). Called from
    /// `onChange` itself, the thread stops once that call returns.
    func stop() {
        let onWatchThread = watchThread.withLock { $0.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
        let mark = { () -> UnsafeMutablePointer<GThread>? in
            self.stopped.withLock { state -> UnsafeMutablePointer<GThread>? in
                guard !state.done else { return nil }
                state.done = true
                defer { state.thread = nil }
                return state.thread
            }
        }
        // On the watch thread, the emitting lock may be held by this very call's caller.
        guard let thread = onWatchThread ? mark() : emitting.withLock({ _ in mark() }) else { return }
        g_main_context_wakeup(context)  // the thread's iteration returns and sees `isStopped`
        g_thread_unref(thread)  // detached: the thread keeps its own reference until it returns
    }

    /// Held while `onChange` (or `started`) runs, and by `stop()` from another thread; counts
    /// the events delivered.
    private let emitting = Lock<UInt64>(0)
    /// The watch thread, once it runs (`stop()` on it must not take `emitting`).
    private let watchThread = Lock<pthread_t?>(nil)

    private var isStopped: Bool { stopped.withLock { $0.done } }

    /// The watch thread: a background start, the loop, then the teardown.
    private func run() {
        watchThread.withLock { $0 = pthread_self() }
        KeyringTrouble.register(self)
        if let started {
            self.started = nil
            var failure: StorageFailure?
            do throws(StorageFailure) { try begin() } catch { failure = error }
            emitting.withLock { _ in if !isStopped { started(failure) } }
            if failure != nil {  // nothing to tear down: connect() left nothing behind
                KeyringTrouble.unregister(self)
                drain()  // the probes posted meanwhile
                return
            }
        }
        g_main_context_push_thread_default(context)
        // Not g_main_loop_run: a g_main_loop_quit() that came between a check of `isStopped` and
        // the run was undone by the run, and the freed watch's thread ran for good (its
        // connection and its context's descriptor with it). A wakeup is never lost: one before
        // the iteration makes its poll return at once.
        while !isStopped { g_main_context_iteration(context, 1) }
        KeyringTrouble.unregister(self)
        for source in [readSource, reconnectSource, retrySource] {
            if let source {
                g_source_destroy(source)
                g_source_unref(source)
            }
        }
        readSource = nil
        reconnectSource = nil
        retrySource = nil
        monitor?.stop()
        monitor = nil
        disconnect()
        drain()
        g_main_context_pop_thread_default(context)
    }

    /// Runs what GDBus left on `context` once the connection is gone (the unsubscriptions'
    /// releases, which hold references to the context): without it the context, and its wakeup
    /// descriptor, outlived every watch (one descriptor per watch, until GLib aborted the host
    /// process at its descriptor limit).
    private func drain() {
        while g_main_context_iteration(context, 0) != 0 {}
    }

    private func emit(_ change: SessionChange, _ origin: SessionChangeOrigin = .unknown) {
        emitting.withLock { delivered in
            guard !isStopped else { return }
            delivered += 1
            onChange(change, origin)
        }
    }

    /// The state now, read as the new baseline (no event for it). A failed read is retried.
    private func baseline() {
        lastSince = OwnChanges.sequence
        do throws(StorageFailure) {
            last = try observe()
            unreadable = false
        } catch {
            last = nil
            readFailed()
        }
    }

    /// From any thread (`KeyringTrouble`): a keyring operation of this process failed; the watch
    /// thread marks the keyring unreadable and reads it. The source holds a reference to the
    /// loop until it is dispatched or destroyed (the watch thread's final drain dispatches it).
    func postProbe() {
        let source: UnsafeMutablePointer<GSource> = g_idle_source_new()  // aborts rather than NULL
        g_source_set_callback(source, { data in
            guard let data else { return 0 }
            let loop = Unmanaged<WatchLoop>.fromOpaque(data).takeUnretainedValue()
            if !loop.isStopped && loop.connection != nil {
                loop.unreadable = true
                loop.scheduleRead()
            }
            return 0  // G_SOURCE_REMOVE
        }, Unmanaged.passRetained(self).toOpaque(), { data in
            if let data { Unmanaged<WatchLoop>.fromOpaque(data).release() }
        })
        g_source_attach(source, context)
        g_source_unref(source)
    }

    /// A read failed: read again in a second while a provider owns the name (with none, its
    /// arrival is a `.resync`), until one succeeds. The only timer a watch runs while idle, and
    /// only while the keyring cannot be read.
    private func readFailed() {
        guard retrySource == nil, !provider.isEmpty else { return }
        let source: UnsafeMutablePointer<GSource> = g_timeout_source_new(1000)  // aborts rather than NULL
        g_source_set_callback(source, { data in
            guard let data else { return 0 }
            let loop = Unmanaged<WatchLoop>.fromOpaque(data).takeUnretainedValue()
            if let source = loop.retrySource { g_source_unref(source) }
            loop.retrySource = nil
            loop.scheduleRead()
            return 0  // G_SOURCE_REMOVE
        }, Unmanaged.passUnretained(self).toOpaque(), nil)
        g_source_attach(source, context)
        retrySource = source
    }

    // MARK: - The connection

    /// Opens the connection, subscribes and waits for the bus to have the match rules. Returns
    /// the failure, nil on success. Runs with `context` as the thread-default context.
    private func connect() -> StorageFailure? {
        let connection: OpaquePointer
        do throws(StorageFailure) { connection = try BusConnection.open(nil) } catch { return error }
        self.connection = connection
        let me = Unmanaged.passUnretained(self).toOpaque()
        // (sender, interface, member, path, arg0): every signal of the Secret Service API that can
        // mean our items changed, and the provider's name changing hands. The match rules name
        // no sender for the Secret Service's signals (the provider may restart under another
        // unique name), so `signalled` drops every signal that is not from the provider's current
        // unique name or not of its documented type (SignalSafety); the read decides the rest.
        let rules: [(String?, String, String?, String?, String?)] = [
            (nil, "org.freedesktop.Secret.Collection", nil, nil, nil),
            (nil, "org.freedesktop.Secret.Service", nil, nil, nil),
            (nil, "org.freedesktop.DBus.Properties", "PropertiesChanged", nil, "org.freedesktop.Secret.Collection"),
            (SignalSafety.busDaemon, "org.freedesktop.DBus", "NameOwnerChanged", "/org/freedesktop/DBus", Self.secretsName),
        ]
        for (sender, interface, member, path, arg0) in rules {
            subscriptions.append(g_dbus_connection_signal_subscribe(
                connection, sender, interface, member, path, arg0, G_DBUS_SIGNAL_FLAGS_NONE,
                { _, sender, _, interface, member, parameters, data in
                    guard let data else { return }
                    Unmanaged<WatchLoop>.fromOpaque(data).takeUnretainedValue().signalled(sender, interface, member, parameters)
                }, me, nil))
        }
        let closed: @convention(c) (OpaquePointer?, gboolean, UnsafeMutablePointer<GError>?, UnsafeMutableRawPointer?) -> Void = {
            _, _, _, data in
            guard let data else { return }
            Unmanaged<WatchLoop>.fromOpaque(data).takeUnretainedValue().connectionClosed()
        }
        closedHandler = g_signal_connect_data(UnsafeMutableRawPointer(connection), "closed",
                                              unsafeBitCast(closed, to: GCallback.self), me, nil, GConnectFlags(0))
        // A reply to a call sent after the AddMatch calls: the bus has processed them.
        do throws(StorageFailure.Classified) {
            g_variant_unref(try BusConnection.askBus(connection, "GetId", nil, nil, .within(Self.busMilliseconds),
                                                     "the bus did not answer"))
        } catch {
            disconnect()
            return .unavailable("session bus: " + error.message)
        }
        // The provider's unique name now; NameOwnerChanged keeps it current from here (the
        // subscription above is in place, so no change after this answer is missed). Nobody
        // owns the name yet: its NameOwnerChanged names the owner.
        provider = (try? BusConnection.owner(of: Self.secretsName, on: connection, .within(Self.busMilliseconds))) ?? ""
        return nil
    }

    private func disconnect() {
        guard let connection else { return }
        for id in subscriptions { g_dbus_connection_signal_unsubscribe(connection, id) }
        subscriptions = []
        if closedHandler != 0 { g_signal_handler_disconnect(UnsafeMutableRawPointer(connection), closedHandler) }
        closedHandler = 0
        if g_dbus_connection_is_closed(connection) == 0 { g_dbus_connection_close_sync(connection, nil, nil) }
        g_object_unref(UnsafeMutableRawPointer(connection))
        self.connection = nil
    }

    /// The bus went away: reconnect once a second until it is back, then `.resync`.
    private func connectionClosed() {
        disconnect()
        guard reconnectSource == nil else { return }
        let source: UnsafeMutablePointer<GSource> = g_timeout_source_new(1000)  // aborts rather than NULL
        g_source_set_callback(source, { data in
            guard let data else { return 0 }
            let loop = Unmanaged<WatchLoop>.fromOpaque(data).takeUnretainedValue()
            return loop.reconnect() ? 0 : 1  // G_SOURCE_REMOVE once connected
        }, Unmanaged.passUnretained(self).toOpaque(), nil)
        g_source_attach(source, context)
        reconnectSource = source
    }

    private func reconnect() -> Bool {
        if connect() != nil { return false }
        if let source = reconnectSource { g_source_unref(source) }
        reconnectSource = nil
        resync()
        return true
    }

    // MARK: - Signals and reads

    /// A signal of a subscription. Only the bus daemon's `NameOwnerChanged` of
    /// `org.freedesktop.secrets` and the current provider's Secret Service signals, each of its
    /// documented type, count (`SignalSafety`); anything else — another process's broadcast or
    /// a signal addressed to us, whatever its arguments — is dropped unread.
    private func signalled(_ sender: UnsafePointer<gchar>?, _ interface: UnsafePointer<gchar>?,
                           _ member: UnsafePointer<gchar>?, _ parameters: OpaquePointer?) {
        if let change = SignalSafety.nameOwnerChange(sender, parameters) {
            guard change.name == Self.secretsName, let interface, String(cString: interface) == "org.freedesktop.DBus",
                  let member, String(cString: member) == "NameOwnerChanged" else { return }
            // A provider took the name: resync. Gone: the next owner decides.
            provider = change.newOwner
            if !change.newOwner.isEmpty { resync() }
            return
        }
        guard SignalSafety.from(sender, provider), SignalSafety.isSecretServiceSignal(interface, member, parameters) else { return }
        scheduleRead()
    }

    /// `.resync`, then the state now becomes the baseline (no event for it).
    private func resync() {
        unreadable = false  // a provider's arrival is reported as .resync, never .available too
        emit(.resync)
        baseline()
        lastReadEnd = .now
    }

    private func scheduleRead() {
        guard readSource == nil else { return }
        let due = lastReadEnd.advanced(byMilliseconds: SessionWatch.coalesceMilliseconds)
        let source: UnsafeMutablePointer<GSource>
        if due.hasPassed {
            source = g_idle_source_new()  // GLib aborts rather than return NULL
            g_source_set_priority(source, 200)  // G_PRIORITY_DEFAULT_IDLE: after the queued signals
        } else {
            source = g_timeout_source_new(guint(clamping: due.remainingMilliseconds))
        }
        g_source_set_callback(source, { data in
            guard let data else { return 0 }
            Unmanaged<WatchLoop>.fromOpaque(data).takeUnretainedValue().read()
            return 0  // G_SOURCE_REMOVE
        }, Unmanaged.passUnretained(self).toOpaque(), nil)
        g_source_attach(source, context)
        readSource = source
    }

    private func read() {
        if let source = readSource { g_source_unref(source) }
        readSource = nil
        defer { lastReadEnd = .now }
        // A failed read changes nothing: the signal that ends the failure reads again.
        let mark = OwnChanges.sequence
        // A failed read changes nothing but is retried (`readFailed`): the provider may recover
        // without a signal (SIGCONT after SIGSTOP).
        guard let now = try? observe() else { return readFailed() }
        if unreadable {
            unreadable = false
            emit(.available)
        }
        if let change = SessionChange.between(last, now) {
            emit(change, OwnChanges.origin(of: change, authEnvironmentId, previous: last, now: now, since: lastSince))
            lastSince = mark
        }
        last = now
    }
}
