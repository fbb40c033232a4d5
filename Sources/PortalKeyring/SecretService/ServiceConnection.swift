import CLibSecret
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The process-wide `SecretService` proxy with an open (encrypted) transfer session, on a
/// session-bus connection of the library's own, created lazily and rebuilt after a failure.
///
/// The connection is private rather than GLib's shared `g_bus_get` singleton: that one belongs to
/// the host application, and once the bus goes away it stays closed for the life of the process
/// (every later call failed with "The connection is closed" until the app restarted). A closed
/// connection is detected at the start of the next call and replaced; a provider restart on a
/// live bus is handled by the one retry on a fresh proxy.
final class ServiceConnection: Sendable {
    /// This process's instance (a fork child gets its own: `ForkSafety`).
    static var shared: ServiceConnection { slot.get }
    private static let slot = ProcessLocal { ServiceConnection() }

    private struct Cache: @unchecked Sendable {
        var connection: OpaquePointer?
        var service: UnsafeMutablePointer<SecretService>?
    }
    private let cached = Lock(Cache())

    /// Runs `body` with a referenced service under the call deadline. A failure on a cached
    /// service (stale connection, provider restarted), or a provider error on any service (a
    /// transfer session the provider garbles), drops it and retries once on a new one.
    func run<T>(operation: String, timeouts: KeyringTimeouts,
                _ body: (UnsafeMutablePointer<SecretService>, Deadline) throws(StorageFailure) -> T)
        throws(StorageFailure) -> T {
        ForkSafety.install()
        if ForkSafety.dbusUnusable { throw ForkSafety.childFailure }
        return try Deadlines.shared.run(operation: operation, milliseconds: timeouts.callMilliseconds) { call throws(StorageFailure) -> T in
            var retried = false
            while true {
                let service: UnsafeMutablePointer<SecretService>
                let fromCache: Bool
                do throws(StorageFailure) {
                    (service, fromCache) = try acquire(call.cancellable)
                } catch {
                    // The provider refused to open the transfer session (KWallet rejects about 1 in
                    // 100 client public keys): once more, with new keys.
                    if case .failed = error, !retried, g_cancellable_is_cancelled(call.cancellable) == 0 {
                        retried = true
                        continue
                    }
                    throw error
                }
                defer { g_object_unref(service) }
                do throws(StorageFailure) {
                    return try body(service, call)
                } catch {
                    // Retried once on a new proxy and transfer session: a provider error (.failed:
                    // a secret that does not decrypt under this session — KWallet, about 1 in 100
                    // sessions —, an object gone), or an unavailable provider when the cached proxy
                    // may be stale (provider or bus restarted).
                    let retriable: Bool
                    switch error {
                    case .failed: retriable = true
                    case .unavailable: retriable = fromCache
                    case .locked, .refused, .noDefaultCollection, .timedOut: retriable = false
                    }
                    if retriable && !retried && g_cancellable_is_cancelled(call.cancellable) == 0 {
                        retried = true
                        drop(service)
                        continue
                    }
                    throw error
                }
            }
        }
    }

    /// Forgets the cached service (for example after the provider restarted). The connection is
    /// kept while it is open.
    func drop(_ service: UnsafeMutablePointer<SecretService>) {
        let old: Cache = cached.withLock { cache in
            guard cache.service == service else { return Cache() }
            cache.service = nil
            return Cache(connection: nil, service: service)
        }
        if let service = old.service { g_object_unref(service) }
    }

    /// Returns a service with a new reference, and whether it came from the cache.
    private func acquire(_ cancellable: UnsafeMutablePointer<GCancellable>) throws(StorageFailure)
        -> (UnsafeMutablePointer<SecretService>, Bool) {
        let current: Cache = cached.withLock { cache in
            if let connection = cache.connection, g_dbus_connection_is_closed(connection) != 0 {
                // The bus went away (or restarted): forget the connection and its proxy.
                if let service = cache.service { g_object_unref(service) }
                g_object_unref(UnsafeMutableRawPointer(connection))
                cache = Cache()
            }
            if let service = cache.service {
                g_object_ref(service)
                return Cache(connection: nil, service: service)
            }
            if let connection = cache.connection { g_object_ref(UnsafeMutableRawPointer(connection)) }
            return Cache(connection: cache.connection, service: nil)
        }
        if let service = current.service { return (service, true) }
        let connection: OpaquePointer
        if let existing = current.connection { connection = existing } else { connection = try connect(cancellable) }
        defer { g_object_unref(UnsafeMutableRawPointer(connection)) }
        let fresh = try open(on: connection, cancellable)
        // Another thread may have connected meanwhile; keep the first, use ours for this call.
        cached.withLock { cache in
            if cache.connection == nil {
                g_object_ref(UnsafeMutableRawPointer(connection))
                cache.connection = connection
            }
            if cache.service == nil && cache.connection == connection {
                g_object_ref(fresh)
                cache.service = fresh
            }
        }
        return (fresh, false)
    }

    /// Opens a private connection to the session bus. `exit-on-close` is off: a bus that goes away
    /// must fail the next keyring call, not terminate the host process.
    private func connect(_ cancellable: UnsafeMutablePointer<GCancellable>) throws(StorageFailure)
        -> OpaquePointer {
        var error: UnsafeMutablePointer<GError>?
        // Resolve the address first so that "no session bus" is reported as such, quickly.
        guard let address = g_dbus_address_get_for_bus_sync(G_BUS_TYPE_SESSION, cancellable, &error) else {
            throw .unavailable("no session bus: " + Self.message(consuming: error))
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

    /// Opens a new `SecretService` proxy on `connection` (not libsecret's process-wide singleton,
    /// which would be shared with the host application) with an encrypted transfer session.
    private func open(on connection: OpaquePointer,
                      _ cancellable: UnsafeMutablePointer<GCancellable>) throws(StorageFailure) -> UnsafeMutablePointer<SecretService> {
        guard let object = PrivateSecretService.new(on: connection) else {
            throw .failed("could not create a Secret Service proxy")
        }
        var error: UnsafeMutablePointer<GError>?
        if g_initable_init(OpaquePointer(object), cancellable, &error) == 0 {
            g_object_unref(object)
            let classified = StorageFailure.classify(error, "could not open a Secret Service session")
            switch classified.kind {
            case .cancelled: throw .failed("cancelled")
            case .unavailable: throw .unavailable(classified.message)
            default:
                // The provider answered, and refused (e.g. KWallet: "Client public key size is invalid").
                throw .failed("could not open a transfer session: " + classified.message)
            }
        }
        return UnsafeMutableRawPointer(object).assumingMemoryBound(to: SecretService.self)
    }

    private static func message(consuming error: UnsafeMutablePointer<GError>?) -> String {
        StorageFailure.classify(error, "unknown error").message
    }
}

/// A `SecretService` subclass whose D-Bus proxy uses the connection given as "g-connection".
/// libsecret's constructor always selects GLib's shared session bus ("g-bus-type"); this one
/// undoes that after chaining up (construct-only properties may still be set inside a
/// constructor), and turns off property loading and signal subscriptions, which the adapter
/// does not use (their callbacks would be queued to contexts nobody runs).
enum PrivateSecretService {
    typealias Constructor = @convention(c) (GType, guint, UnsafeMutablePointer<GObjectConstructParam>?)
        -> UnsafeMutablePointer<GObject>?
    nonisolated(unsafe) static var parentConstructor: Constructor?

    static let type: GType = {
        var query = GTypeQuery()
        g_type_query(secret_service_get_type(), &query)
        return g_type_register_static_simple(secret_service_get_type(), "PortalKeyringSecretService", query.class_size, { klass, _ in
            guard let objectClass = klass?.assumingMemoryBound(to: GObjectClass.self) else { return }
            // The class structure starts as a copy of the parent's: this is libsecret's constructor.
            PrivateSecretService.parentConstructor = objectClass.pointee.constructor
            objectClass.pointee.constructor = { type, count, parameters in
                guard let object = PrivateSecretService.parentConstructor?(type, count, parameters) else { return nil }
                var value = GValue()
                g_value_init(&value, g_bus_type_get_type())
                g_value_set_enum(&value, G_BUS_TYPE_NONE.rawValue)
                g_object_set_property(object, "g-bus-type", &value)
                g_value_unset(&value)
                g_value_init(&value, g_dbus_proxy_flags_get_type())
                g_value_set_flags(&value, G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES.rawValue
                                  | G_DBUS_PROXY_FLAGS_DO_NOT_CONNECT_SIGNALS.rawValue)
                g_object_set_property(object, "g-flags", &value)
                g_value_unset(&value)
                return object
            }
        }, query.instance_size, nil, GTypeFlags(rawValue: 0))
    }()

    /// `SecretServiceFlags`, registered once. libsecret 0.20's generated enum getters are not
    /// thread-safe: when two threads register the type at once, the loser stores 0 and every
    /// later call fails ("cannot register existing type"), so services were created without
    /// their flags (no transfer session) for the rest of the process. The class is initialized
    /// here too, since its class_init calls the same getter.
    private static let flagsType: GType = {
        g_type_class_unref(g_type_class_ref(type))
        return secret_service_flags_get_type()
    }()

    /// A new, not yet initialized proxy on `connection` that opens a transfer session when
    /// initialized (`g_initable_init`).
    static func new(on connection: OpaquePointer) -> UnsafeMutablePointer<GObject>? {
        let flagsType = Self.flagsType
        var values = [GValue](repeating: GValue(), count: 2)
        return values.withUnsafeMutableBufferPointer { values -> UnsafeMutablePointer<GObject>? in
            guard let base = values.baseAddress else { return nil }
            g_value_init(base, g_dbus_connection_get_type())
            g_value_set_object(base, UnsafeMutableRawPointer(connection))
            g_value_init(base + 1, flagsType)
            g_value_set_flags(base + 1, SECRET_SERVICE_OPEN_SESSION.rawValue)
            defer {
                g_value_unset(base)
                g_value_unset(base + 1)
            }
            var names: [UnsafePointer<CChar>?] = [cString("g-connection"), cString("flags")]
            return g_object_new_with_properties(type, 2, &names, base)
        }
    }

    private static func cString(_ literal: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(literal.utf8Start).assumingMemoryBound(to: CChar.self)
    }
}
