import CLibSecret

/// The unique bus name of the process that owns `org.freedesktop.secrets`: every keyring call of
/// an endpoint goes to it (see `SecretBus`). When nobody owns the name, the bus is asked to start
/// the provider (D-Bus activation: a desktop whose keyring daemon starts on first use), as
/// libsecret's proxy did; the wait is bounded by the operation's deadline (`cancellable`).
enum ProviderName {
    static let wellKnown = "org.freedesktop.secrets"

    static func resolve(on connection: OpaquePointer,
                        _ cancellable: UnsafeMutablePointer<GCancellable>) throws(StorageFailure) -> String {
        var started = false
        while true {
            let outcome = busCall(connection, "GetNameOwner", "(s)", cancellable)
            if let reply = outcome.reply {
                defer { g_variant_unref(reply) }
                return Variant.string(reply, 0)
            }
            let failure = StorageFailure.classify(outcome.error, "could not ask the bus who owns \(wellKnown)")
            if failure.kind == .cancelled { throw .failed("cancelled") }
            guard failure.kind == .unavailable, !started else {
                throw .unavailable("no provider owns \(wellKnown): " + failure.message)
            }
            started = true
            let start = busCall(connection, "StartServiceByName", "(u)", cancellable, flags: true)
            if let reply = start.reply {
                g_variant_unref(reply)
                continue
            }
            let startFailure = StorageFailure.classify(start.error, "could not start a provider")
            if startFailure.kind == .cancelled { throw .failed("cancelled") }
            throw .unavailable("no provider owns \(wellKnown): " + startFailure.message)
        }
    }

    private static func busCall(_ connection: OpaquePointer, _ method: String, _ replyType: StaticString,
                                _ cancellable: UnsafeMutablePointer<GCancellable>,
                                flags: Bool = false) -> SecretBus.Outcome {
        let parameters = flags ? Variant.tuple([g_variant_new_string(wellKnown), g_variant_new_uint32(0)])
                               : Variant.tuple([g_variant_new_string(wellKnown)])
        return SecretBus.send(connection, destination: "org.freedesktop.DBus", "/org/freedesktop/DBus",
                              "org.freedesktop.DBus", method, parameters, replyType, cancellable)
    }
}
