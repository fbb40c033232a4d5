import CGLib

extension StorageFailure {
    /// How a `GError` is classified before it becomes a `StorageFailure`.
    enum Kind { case unavailable, locked, gone, cancelled, timedOut, other }

    struct Classified: Error {
        let kind: Kind
        let message: String
        /// The D-Bus error name of a provider's or the bus's error reply
        /// (`org.freedesktop.Secret.Error.IsLocked`), nil for a failure of our own side.
        var name: String? = nil
        var storageFailure: StorageFailure {
            switch kind {
            case .unavailable: return .unavailable(message)
            case .locked: return .locked(message)
            case .gone, .cancelled, .timedOut, .other: return .failed(message)
            }
        }
    }

    /// Classifies and frees `error` (NULL gives `fallback`).
    init(consuming error: UnsafeMutablePointer<GError>?, default fallback: String) {
        self = StorageFailure.classify(error, fallback).storageFailure
    }

    /// What each D-Bus error name a provider or the bus daemon answers with means here. Names not
    /// listed are `.other`: the provider answered and refused.
    static let errorNames: [String: Kind] = [
        // The Secret Service API's own errors.
        "org.freedesktop.Secret.Error.IsLocked": .locked,
        "org.freedesktop.Secret.Error.NoSuchObject": .gone,
        // An object deleted a moment before. KeePassXC answers a call on such an item with
        // UnknownInterface ("Interface org.freedesktop.Secret.Item was not found in object").
        "org.freedesktop.DBus.Error.UnknownObject": .gone,
        "org.freedesktop.DBus.Error.UnknownMethod": .gone,
        "org.freedesktop.DBus.Error.UnknownInterface": .gone,
        // No provider (any more) on the other end, or the bus could not start one.
        "org.freedesktop.DBus.Error.ServiceUnknown": .unavailable,
        "org.freedesktop.DBus.Error.NameHasNoOwner": .unavailable,
        "org.freedesktop.DBus.Error.NoServer": .unavailable,
        "org.freedesktop.DBus.Error.Disconnected": .unavailable,
        "org.freedesktop.DBus.Error.NoReply": .unavailable,
        "org.freedesktop.DBus.Error.Spawn.ServiceNotFound": .unavailable,
        "org.freedesktop.DBus.Error.Spawn.ExecFailed": .unavailable,
        "org.freedesktop.DBus.Error.Spawn.ChildExited": .unavailable,
        "org.freedesktop.DBus.Error.Spawn.Failed": .unavailable,
    ]

    /// The one classification of a failed D-Bus call (`BusCall`): a provider's or the bus's error
    /// reply by its D-Bus error name (`errorNames`), whichever GError domain GLib put it in — the
    /// name is the same whether or not a library in the process (libsecret, loaded by the host
    /// application) registered it under a domain of its own; a failure of our own side by its
    /// GIO code (cancelled: the deadline or the operation's cancellation; timed out: a call's own
    /// time limit; closed: the bus went away). Frees `error`; NULL gives `fallback`.
    static func classify(_ error: UnsafeMutablePointer<GError>?, _ fallback: String) -> Classified {
        guard let error else { return Classified(kind: .other, message: fallback) }
        defer { g_error_free(error) }
        // Remote errors carry "GDBus.Error:<D-Bus error name>: " before the provider's text, in
        // every domain: strip it, so messages read like the documented wording.
        let message = Self.strippingRemoteErrorName(error.pointee.message.map { String(cString: $0) } ?? fallback)
        if let remote = g_dbus_error_get_remote_error(error) {
            defer { g_free(remote) }
            let name = String(cString: remote)
            return Classified(kind: errorNames[name] ?? .other, message: message, name: name)
        }
        let kind: Kind
        switch error.pointee.domain == g_io_error_quark() ? GIOErrorEnum(rawValue: UInt32(error.pointee.code)) : nil {
        case G_IO_ERROR_CANCELLED: kind = .cancelled
        case G_IO_ERROR_TIMED_OUT: kind = .timedOut
        case G_IO_ERROR_CLOSED: kind = .unavailable
        default: kind = .other
        }
        return Classified(kind: kind, message: message)
    }

    /// `message` without a leading `GDBus.Error:NAME: ` (NAME being a D-Bus error name); a message
    /// that is only that prefix becomes the name's last component ("IsLocked").
    static func strippingRemoteErrorName(_ message: String) -> String {
        let prefix = "GDBus.Error:"
        guard message.hasPrefix(prefix) else { return message }
        let rest = message.dropFirst(prefix.count)
        let colon = rest.firstIndex(of: ":") ?? rest.endIndex
        let name = rest[..<colon]
        guard !name.isEmpty, name.isASCII(alphanumericOr: "._") else {
            return message
        }
        let text = colon == rest.endIndex ? "" : rest[rest.index(after: colon)...].drop(while: { $0 == " " })
        return text.isEmpty ? String(name.split(separator: ".").last ?? name) : String(text)
    }
}
