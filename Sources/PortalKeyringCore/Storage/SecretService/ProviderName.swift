import CGLib

/// The unique bus name of the process that owns `org.freedesktop.secrets`: every keyring call of
/// an endpoint goes to it (see `SecretBus`). When nobody owns the name, the bus is asked to start
/// the provider (D-Bus activation: a desktop whose keyring daemon starts on first use), as
/// libsecret's proxy did; the wait is bounded by the operation's deadline (`cancellable`). The
/// Secret portal's owner (`org.freedesktop.portal.Desktop`, `SecretPortal`) is found the same way.
enum ProviderName {
    static let wellKnown = "org.freedesktop.secrets"

    static func resolve(_ name: String = wellKnown, on connection: OpaquePointer,
                        _ cancellable: UnsafeMutablePointer<GCancellable>) throws(StorageFailure) -> String {
        var started = false
        while true {
            let failure: StorageFailure.Classified
            do throws(StorageFailure.Classified) {
                return try BusConnection.owner(of: name, on: connection, .deadline(cancellable))
            } catch {
                failure = error
            }
            if failure.kind == .cancelled { throw .failed("cancelled") }
            guard failure.kind == .unavailable, !started else {
                throw .unavailable("no provider owns \(name): " + failure.message)
            }
            started = true
            do throws(StorageFailure.Classified) {
                let reply = try BusConnection.askBus(connection, "StartServiceByName",
                                                     Variant.tuple([g_variant_new_string(name), g_variant_new_uint32(0)]),
                                                     "(u)", .deadline(cancellable), "could not start a provider")
                g_variant_unref(reply)
            } catch {
                if error.kind == .cancelled { throw .failed("cancelled") }
                throw .unavailable("no provider owns \(name): " + error.message)
            }
        }
    }
}
