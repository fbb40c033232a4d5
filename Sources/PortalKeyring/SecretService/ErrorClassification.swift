import CLibSecret

extension StorageFailure {
    /// How a `GError` is classified before it becomes a `StorageFailure`.
    enum Kind { case unavailable, locked, gone, cancelled, other }

    struct Classified: Error {
        let kind: Kind
        let message: String
        var storageFailure: StorageFailure {
            switch kind {
            case .unavailable: return .unavailable(message)
            case .locked: return .locked(message)
            case .gone, .cancelled, .other: return .failed(message)
            }
        }
    }

    /// Classifies and frees `error` (NULL gives `fallback`).
    init(consuming error: UnsafeMutablePointer<GError>?, default fallback: String) {
        self = StorageFailure.classify(error, fallback).storageFailure
    }

    static func classify(_ error: UnsafeMutablePointer<GError>?, _ fallback: String) -> Classified {
        guard let error else { return Classified(kind: .other, message: fallback) }
        defer { g_error_free(error) }
        let domain = error.pointee.domain
        let code = error.pointee.code
        var message = error.pointee.message.map { String(cString: $0) } ?? fallback
        // Remote errors carry "GDBus.Error:<D-Bus error name>: " before the provider's text, also
        // when libsecret registered the name under its own domain (SECRET_ERROR: IsLocked,
        // NoSuchObject): strip it in every domain, so messages read like the documented wording.
        message = Self.strippingRemoteErrorName(message)
        let kind: Kind
        if domain == g_io_error_quark() && code == Int32(G_IO_ERROR_CANCELLED.rawValue) {
            kind = .cancelled
        } else if domain == secret_error_get_quark() && code == Int32(SECRET_ERROR_IS_LOCKED.rawValue) {
            kind = .locked
        } else if domain == secret_error_get_quark() && code == Int32(SECRET_ERROR_NO_SUCH_OBJECT.rawValue) {
            kind = .gone
        } else if domain == g_dbus_error_quark() {
            switch GDBusError(rawValue: UInt32(code)) {
            case G_DBUS_ERROR_UNKNOWN_OBJECT, G_DBUS_ERROR_UNKNOWN_METHOD, G_DBUS_ERROR_UNKNOWN_INTERFACE:
                // KeePassXC answers a call on an item deleted a moment before with
                // UnknownInterface ("Interface org.freedesktop.Secret.Item was not found in object").
                kind = .gone
            case G_DBUS_ERROR_SERVICE_UNKNOWN, G_DBUS_ERROR_NAME_HAS_NO_OWNER, G_DBUS_ERROR_NO_SERVER,
                 G_DBUS_ERROR_DISCONNECTED, G_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND, G_DBUS_ERROR_SPAWN_EXEC_FAILED,
                 G_DBUS_ERROR_SPAWN_CHILD_EXITED, G_DBUS_ERROR_SPAWN_FAILED, G_DBUS_ERROR_NO_REPLY:
                kind = .unavailable
            default:
                kind = .other
            }
        } else if domain == g_io_error_quark() && code == Int32(G_IO_ERROR_CLOSED.rawValue) {
            kind = .unavailable
        } else {
            kind = .other
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
        guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "_") }) else {
            return message
        }
        let text = colon == rest.endIndex ? "" : rest[rest.index(after: colon)...].drop(while: { $0 == " " })
        return text.isEmpty ? String(name.split(separator: ".").last ?? name) : String(text)
    }
}
