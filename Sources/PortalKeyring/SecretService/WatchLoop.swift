import CLibSecret
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
/// exists, then only by the watch thread.
final class WatchLoop: @unchecked Sendable {
    private let observe: () throws(StorageFailure) -> SessionObservation
    private let onChange: @Sendable (SessionChange) -> Void
    private let context: OpaquePointer
    private let mainLoop: OpaquePointer
    /// Whether `stop()` ran, and the thread to join.
    private let stopped = Lock<(done: Bool, thread: UnsafeMutablePointer<GThread>?)>((false, nil))

    private var connection: OpaquePointer?
    private var subscriptions: [guint] = []
    private var closedHandler: gulong = 0
    private var last: SessionObservation?
    private var readSource: UnsafeMutablePointer<GSource>?
    private var reconnectSource: UnsafeMutablePointer<GSource>?
    /// When the last read ended (g_get_monotonic_time, µs).
    private var lastReadEnd: gint64 = 0

    private static let secretsName = "org.freedesktop.secrets"

    /// Connects and subscribes, waits for the bus to confirm the subscriptions (one round trip),
    /// reads the baseline, then starts the thread.
    init(observe: @escaping () throws(StorageFailure) -> SessionObservation,
         onChange: @escaping @Sendable (SessionChange) -> Void) throws(StorageFailure) {
        ForkSafety.install()
        if ForkSafety.dbusUnusable { throw ForkSafety.childFailure }
        self.observe = observe
        self.onChange = onChange
        context = g_main_context_new()!
        mainLoop = g_main_loop_new(context, 0)!
        g_main_context_push_thread_default(context)
        let connected = connect()
        g_main_context_pop_thread_default(context)
        if let failure = connected {
            g_main_loop_unref(mainLoop)
            g_main_context_unref(context)
            throw failure
        }
        last = try? observe()
        let thread = g_thread_new("portal-watch", { raw in
            let loop = Unmanaged<WatchLoop>.fromOpaque(raw!).takeRetainedValue()
            loop.run()
            return nil
        }, Unmanaged.passRetained(self).toOpaque())
        stopped.withLock { $0.thread = thread }
    }

    deinit {
        g_main_loop_unref(mainLoop)
        g_main_context_unref(context)
    }

    /// Stops the loop and waits for the thread (unless called on it: then the thread stops once
    /// the current callback returns). No `onChange` call starts after this returns.
    func stop() {
        guard let thread = stopped.withLock({ state -> UnsafeMutablePointer<GThread>? in
            guard !state.done else { return nil }
            state.done = true
            defer { state.thread = nil }
            return state.thread
        }) else { return }
        g_main_loop_quit(mainLoop)
        if thread == g_thread_self() {
            g_thread_unref(thread)
        } else {
            _ = g_thread_join(thread)
        }
    }

    private var isStopped: Bool { stopped.withLock { $0.done } }

    /// The watch thread: the loop, then the teardown.
    private func run() {
        g_main_context_push_thread_default(context)
        if !isStopped { g_main_loop_run(mainLoop) }
        for source in [readSource, reconnectSource] {
            if let source {
                g_source_destroy(source)
                g_source_unref(source)
            }
        }
        readSource = nil
        reconnectSource = nil
        disconnect()
        g_main_context_pop_thread_default(context)
    }

    private func emit(_ change: SessionChange) {
        if !isStopped { onChange(change) }
    }

    // MARK: - The connection

    /// Opens the connection, subscribes and waits for the bus to have the match rules. Returns
    /// the failure, nil on success. Runs with `context` as the thread-default context.
    private func connect() -> StorageFailure? {
        var error: UnsafeMutablePointer<GError>?
        guard let address = g_dbus_address_get_for_bus_sync(G_BUS_TYPE_SESSION, nil, &error) else {
            return .unavailable("no session bus: " + StorageFailure.classify(error, "unknown error").message)
        }
        defer { g_free(address) }
        let flags = GDBusConnectionFlags(rawValue: G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT.rawValue
                                         | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION.rawValue)
        guard let connection = g_dbus_connection_new_for_address_sync(address, flags, nil, nil, &error) else {
            return .unavailable("no session bus: " + StorageFailure.classify(error, "could not connect").message)
        }
        g_dbus_connection_set_exit_on_close(connection, 0)
        self.connection = connection
        let me = Unmanaged.passUnretained(self).toOpaque()
        // (sender, interface, member, path, arg0): every signal of the Secret Service API that can
        // mean our items changed, and the provider's name changing hands. The sender is not
        // filtered (a well-known name would be resolved once; the provider may restart): signals
        // are hints, and the read decides.
        let rules: [(String?, String, String?, String?, String?)] = [
            (nil, "org.freedesktop.Secret.Collection", nil, nil, nil),
            (nil, "org.freedesktop.Secret.Service", nil, nil, nil),
            (nil, "org.freedesktop.DBus.Properties", "PropertiesChanged", nil, "org.freedesktop.Secret.Collection"),
            ("org.freedesktop.DBus", "org.freedesktop.DBus", "NameOwnerChanged", "/org/freedesktop/DBus", Self.secretsName),
        ]
        for (sender, interface, member, path, arg0) in rules {
            subscriptions.append(g_dbus_connection_signal_subscribe(
                connection, sender, interface, member, path, arg0, G_DBUS_SIGNAL_FLAGS_NONE,
                { _, _, _, _, member, parameters, data in
                    let loop = Unmanaged<WatchLoop>.fromOpaque(data!).takeUnretainedValue()
                    loop.signalled(member.map { String(cString: $0) } ?? "", parameters)
                }, me, nil))
        }
        let closed: @convention(c) (OpaquePointer?, gboolean, UnsafeMutablePointer<GError>?, UnsafeMutableRawPointer?) -> Void = {
            _, _, _, data in Unmanaged<WatchLoop>.fromOpaque(data!).takeUnretainedValue().connectionClosed()
        }
        closedHandler = g_signal_connect_data(UnsafeMutableRawPointer(connection), "closed",
                                              unsafeBitCast(closed, to: GCallback.self), me, nil, GConnectFlags(0))
        // A reply to a call sent after the AddMatch calls: the bus has processed them.
        let reply = g_dbus_connection_call_sync(connection, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                "org.freedesktop.DBus", "GetId", nil, nil,
                                                G_DBUS_CALL_FLAGS_NONE, 5000, nil, &error)
        guard let reply else {
            let message = StorageFailure.classify(error, "the bus did not answer").message
            disconnect()
            return .unavailable("session bus: " + message)
        }
        g_variant_unref(reply)
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
        let source = g_timeout_source_new(1000)!
        g_source_set_callback(source, { data in
            let loop = Unmanaged<WatchLoop>.fromOpaque(data!).takeUnretainedValue()
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

    private func signalled(_ member: String, _ parameters: OpaquePointer?) {
        if member == "NameOwnerChanged", let parameters {
            // (name, old owner, new owner): a provider took the name. Gone: the next owner decides.
            if !Variant.string(parameters, 2).isEmpty { resync() }
            return
        }
        scheduleRead()
    }

    /// `.resync`, then the state now becomes the baseline (no event for it).
    private func resync() {
        emit(.resync)
        last = try? observe()
        lastReadEnd = g_get_monotonic_time()
    }

    private func scheduleRead() {
        guard readSource == nil else { return }
        let due = lastReadEnd + gint64(SessionWatch.coalesceMilliseconds) * 1000
        let now = g_get_monotonic_time()
        let source: UnsafeMutablePointer<GSource>
        if now >= due {
            source = g_idle_source_new()!
            g_source_set_priority(source, 200)  // G_PRIORITY_DEFAULT_IDLE: after the queued signals
        } else {
            source = g_timeout_source_new(guint((due - now + 999) / 1000))!
        }
        g_source_set_callback(source, { data in
            Unmanaged<WatchLoop>.fromOpaque(data!).takeUnretainedValue().read()
            return 0  // G_SOURCE_REMOVE
        }, Unmanaged.passUnretained(self).toOpaque(), nil)
        g_source_attach(source, context)
        readSource = source
    }

    private func read() {
        if let source = readSource { g_source_unref(source) }
        readSource = nil
        defer { lastReadEnd = g_get_monotonic_time() }
        // A failed read changes nothing: the signal that ends the failure reads again.
        guard let now = try? observe() else { return }
        if let change = SessionChange.between(last, now) { emit(change) }
        last = now
    }
}
