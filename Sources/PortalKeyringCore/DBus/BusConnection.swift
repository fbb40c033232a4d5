import CGLib

/// The library's own session-bus connections and what it asks the bus daemon: the one place that
/// connects (`ServiceConnection` for keyring calls, `WatchLoop` for a watch's signals) and the one
/// name-owner lookup (`ProviderName`, `Prompts`, `WatchLoop`).
///
/// A connection is private rather than GLib's shared `g_bus_get` singleton: that one belongs to
/// the host application, terminates the process when the bus goes away (its `exit-on-close`),
/// and once closed it stays closed for the life of the process (every later call failed with
/// "The connection is closed" until the app restarted).
enum BusConnection {
    static let busDaemon = SignalSafety.busDaemon

    /// Opens a private connection to the session bus, bounded by `cancellable` (nil: GDBus's own
    /// timeouts). `exit-on-close` is off: a bus that goes away must fail the next call, not
    /// terminate the host process. The connection's `closed` signal is emitted in the
    /// thread-default main context of the calling thread. The caller owns one reference.
    static func open(_ cancellable: UnsafeMutablePointer<GCancellable>?) throws(StorageFailure) -> OpaquePointer {
        var error: UnsafeMutablePointer<GError>?
        // Resolve the address first so that "no session bus" is reported as such, quickly.
        guard let address = g_dbus_address_get_for_bus_sync(G_BUS_TYPE_SESSION, cancellable, &error) else {
            throw .unavailable("no session bus: " + StorageFailure.classify(error, "unknown error").message)
        }
        defer { g_free(address) }
        let flags = GDBusConnectionFlags(rawValue: G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT.rawValue
                                         | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION.rawValue)
        guard let connection = g_dbus_connection_new_for_address_sync(address, flags, nil, cancellable, &error) else {
            let classified = StorageFailure.classify(error, "could not connect")
            if classified.kind == .cancelled { throw .failed("cancelled") }
            throw .unavailable("no session bus: " + classified.message)
        }
        g_dbus_connection_set_exit_on_close(connection, 0)
        return connection
    }

    /// The unique name of the connection that owns `name` now (`GetNameOwner`). Nobody owns
    /// it: `.unavailable` (NameHasNoOwner). A unique name owns itself while it is connected.
    static func owner(of name: String, on connection: OpaquePointer,
                      _ bound: BusCall.Bound) throws(StorageFailure.Classified) -> String {
        let reply = try askBus(connection, "GetNameOwner", Variant.tuple([g_variant_new_string(name)]), "(s)", bound,
                               "could not ask the bus who owns \(name)")
        defer { g_variant_unref(reply) }
        guard let owner = Variant.string(reply, 0) else {
            throw StorageFailure.Classified(kind: .other, message: "unexpected answer of the bus to GetNameOwner")
        }
        return owner
    }

    /// `method` of the bus daemon (`org.freedesktop.DBus`), as `BusCall.call`.
    static func askBus(_ connection: OpaquePointer, _ method: String, _ parameters: OpaquePointer?,
                       _ replyType: StaticString?, _ bound: BusCall.Bound,
                       _ fallback: String) throws(StorageFailure.Classified) -> OpaquePointer {
        try BusCall.call(connection, destination: busDaemon, "/org/freedesktop/DBus", "org.freedesktop.DBus", method,
                         parameters, replyType, bound, fallback)
    }
}
