import CGLib

/// The checks every signal handler makes before it reads a signal (docs/security.md, "Signals
/// from other processes").
///
/// Any process on the session bus can send a signal with any interface, member, path and
/// arguments — as a broadcast that matches our subscriptions, or addressed to our connection,
/// which bypasses match rules altogether. GDBus hands such a signal to every subscription whose
/// interface and member match, whatever its sender and argument types. So a handler believes a
/// signal only when it comes from the one sender that may send it — the provider's unique name,
/// or the bus daemon (`org.freedesktop.DBus`) for `NameOwnerChanged` — and has the type the
/// API gives it; anything else is dropped without being read.
enum SignalSafety {
    /// The bus daemon's name: the sender of every genuine `NameOwnerChanged`.
    static let busDaemon = "org.freedesktop.DBus"

    /// Whether `sender` is exactly `expected` (a unique name; an empty `expected` matches nobody).
    static func from(_ sender: UnsafePointer<gchar>?, _ expected: String) -> Bool {
        guard let sender, !expected.isEmpty else { return false }
        return String(cString: sender) == expected
    }

    /// The arguments of a genuine `NameOwnerChanged(s name, s old_owner, s new_owner)`: sent by
    /// the bus daemon, of type `(sss)`. Nil for anything else.
    static func nameOwnerChange(_ sender: UnsafePointer<gchar>?,
                                _ parameters: OpaquePointer?) -> (name: String, oldOwner: String, newOwner: String)? {
        guard from(sender, busDaemon), Variant.has(parameters, type: "(sss)"),
              let name = Variant.string(parameters, 0), let old = Variant.string(parameters, 1),
              let new = Variant.string(parameters, 2) else { return nil }
        return (name, old, new)
    }

    /// The signals of the Secret Service API that can mean an item of ours changed, with the
    /// argument types the API gives them (`org.freedesktop.Secret.Collection` and `.Service`, and
    /// `PropertiesChanged` of a collection).
    static let secretServiceSignals: [String: [String: String]] = [
        "org.freedesktop.Secret.Collection": ["ItemCreated": "(o)", "ItemDeleted": "(o)", "ItemChanged": "(o)"],
        "org.freedesktop.Secret.Service": ["CollectionCreated": "(o)", "CollectionDeleted": "(o)", "CollectionChanged": "(o)"],
        "org.freedesktop.DBus.Properties": ["PropertiesChanged": "(sa{sv}as)"],
    ]

    /// Whether `interface`.`member` with `parameters` is one of `secretServiceSignals`, of its
    /// type.
    static func isSecretServiceSignal(_ interface: UnsafePointer<gchar>?, _ member: UnsafePointer<gchar>?,
                                      _ parameters: OpaquePointer?) -> Bool {
        guard let interface, let member,
              let type = secretServiceSignals[String(cString: interface)]?[String(cString: member)] else { return false }
        return Variant.has(parameters, type: type)
    }
}
