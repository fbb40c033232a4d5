import CLibSecret
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Deadlines for keyring calls, in milliseconds.
///
/// Every storage operation (one `restoreSession()`, `persistSession`, `clearPersistedSession()`)
/// runs its D-Bus round trips under `callMilliseconds`; an unlock prompt, which waits for a person,
/// gets `promptMilliseconds` of its own. When a deadline passes the pending call is cancelled and
/// the operation throws `PortalAuthError.sessionStorageFailure` (nothing is deleted). Without these
/// bounds GDBus would wait 25 s per call, and a prompt forever (SPEC §5).
public struct KeyringTimeouts: Sendable, Equatable {
    /// Bound for the provider calls of one operation. Default 5000 ms.
    public var callMilliseconds: UInt32
    /// Bound for one unlock prompt. Default 30000 ms.
    public var promptMilliseconds: UInt32

    public static let `default` = KeyringTimeouts(callMilliseconds: 5_000, promptMilliseconds: 30_000)

    public init(callMilliseconds: UInt32, promptMilliseconds: UInt32) {
        self.callMilliseconds = max(callMilliseconds, 1)
        self.promptMilliseconds = max(promptMilliseconds, 1)
    }
}

/// The Secret Service adapter: the only code in the project that calls `secret_*` (STYLE.md).
///
/// Items use the vendor schema `io.portalhq.PortalKeyring.Session` (flags `SECRET_SCHEMA_NONE`, so
/// `xdg:schema` must match and other applications' look-alike items are never seen) with the
/// attributes `auth_environment_id`, `session_generation` and `persisted_at` (SPEC §2).
///
/// The adapter keeps one `SecretService` proxy of its own (with an encrypted transfer session)
/// for the process, on GLib's shared session-bus connection. When a call fails on the cached
/// proxy, the proxy is dropped and the call retried once on a fresh one, so a provider restart
/// between calls is survived.
struct LibSecretStorage: SessionStorage {
    static let schemaName = "io.portalhq.PortalKeyring.Session"
    static let authEnvironmentAttribute = "auth_environment_id"
    static let generationAttribute = "session_generation"
    static let persistedAtAttribute = "persisted_at"

    let timeouts: KeyringTimeouts

    init(timeouts: KeyringTimeouts = .default) {
        self.timeouts = timeouts
    }

    func items(authEnvironmentId: String, withSecrets: Bool) throws(StorageFailure) -> [StoredSessionItem] {
        try ServiceConnection.shared.run(operation: "restore", timeouts: timeouts) { service, cancellable throws(StorageFailure) in
            let list = try unlockedSearch(service, [Self.authEnvironmentAttribute: authEnvironmentId], cancellable)
            defer { g_list_free_full(list, g_object_unref) }
            if withSecrets, list != nil {
                var error: UnsafeMutablePointer<GError>?
                if secret_item_load_secrets_sync(list, cancellable, &error) == 0 {
                    throw StorageFailure(consuming: error, default: "could not load secrets")
                }
            }
            var result: [StoredSessionItem] = []
            for item in GListItems(list) {
                let attributes = Attributes.of(item)
                var secret: SecretBytes?
                if withSecrets {
                    guard let value = secret_item_get_secret(item) else {
                        // An unlocked item whose secret did not arrive: unreadable, not absent.
                        throw .locked("the provider returned no secret for a stored session item")
                    }
                    defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
                    var length = 0
                    let bytes = secret_value_get(value, &length)
                    secret = SecretBytes(copying: UnsafeRawBufferPointer(start: bytes, count: bytes == nil ? 0 : length))
                }
                result.append(StoredSessionItem(
                    itemId: proxyPath(item),
                    generation: attributes[Self.generationAttribute],
                    persistedAt: attributes[Self.persistedAtAttribute].flatMap { UInt64($0) } ?? 0,
                    secret: secret))
            }
            return result
        }
    }

    func store(authEnvironmentId: String, generation: String, persistedAt: UInt64,
               label: String, secret: SecretBytes) throws(StorageFailure) {
        try ServiceConnection.shared.run(operation: "persist", timeouts: timeouts) { service, cancellable throws(StorageFailure) in
            var error: UnsafeMutablePointer<GError>?
            // Resolve the alias ourselves: given "default", libsecret would try to create a
            // collection behind a prompt when there is none (SPEC §5: say "no default keyring").
            guard let collection = secret_collection_for_alias_sync(service, "default", SECRET_COLLECTION_NONE,
                                                                    cancellable, &error) else {
                if error != nil { throw StorageFailure(consuming: error, default: "could not read the default alias") }
                throw .noDefaultCollection
            }
            defer { g_object_unref(collection) }
            if secret_collection_get_locked(collection) != 0 {
                try unlock([UnsafeMutableRawPointer(collection)], service, what: "the default collection")
            }
            let path = proxyPath(collection)
            let attributes = Attributes.table([
                Self.authEnvironmentAttribute: authEnvironmentId,
                Self.generationAttribute: generation,
                Self.persistedAtAttribute: String(persistedAt),
            ])
            defer { g_hash_table_unref(attributes) }
            let value = secret.withUnsafeBytes { bytes in
                secret_value_new(bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count,
                                 SessionDocument.contentType)
            }
            defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
            if secret_service_store_sync(service, Self.schema, attributes, path, label, value, cancellable, &error) == 0 {
                throw StorageFailure(consuming: error, default: "could not store the session item")
            }
        }
    }

    func delete(itemId: String) throws(StorageFailure) {
        try ServiceConnection.shared.run(operation: "delete", timeouts: timeouts) { service, cancellable throws(StorageFailure) in
            var error: UnsafeMutablePointer<GError>?
            guard let item = secret_item_new_for_dbus_path_sync(service, itemId, SECRET_ITEM_NONE, cancellable, &error) else {
                let failure = StorageFailure.classify(error, "could not open the item")
                if case .gone = failure.kind { return }
                throw failure.storageFailure
            }
            defer { g_object_unref(item) }
            if secret_item_delete_sync(item, cancellable, &error) == 0 {
                let failure = StorageFailure.classify(error, "could not delete the item")
                if case .gone = failure.kind { return }
                throw failure.storageFailure
            }
        }
    }

    @discardableResult
    func deleteAll(authEnvironmentId: String, generation: String?) throws(StorageFailure) -> Int {
        try ServiceConnection.shared.run(operation: "clear", timeouts: timeouts) { service, cancellable throws(StorageFailure) in
            var match = [Self.authEnvironmentAttribute: authEnvironmentId]
            if let generation { match[Self.generationAttribute] = generation }
            let list = try unlockedSearch(service, match, cancellable)
            defer { g_list_free_full(list, g_object_unref) }
            var deleted = 0
            for item in GListItems(list) {
                var error: UnsafeMutablePointer<GError>?
                if secret_item_delete_sync(item, cancellable, &error) == 0 {
                    let failure = StorageFailure.classify(error, "could not delete the item")
                    if case .gone = failure.kind { continue }
                    throw failure.storageFailure
                }
                deleted += 1
            }
            return deleted
        }
    }

    // MARK: - Helpers

    /// Searches the schema's items matching `attributes`, in every collection, locked or not.
    /// When some are locked, asks the provider to unlock them (a prompt, under the prompt
    /// deadline) and searches again; throws `.locked` when any match stays locked. libsecret's
    /// password lookup returns NULL without an error in that case; this never does.
    private func unlockedSearch(_ service: UnsafeMutablePointer<SecretService>, _ attributes: [String: String],
                                _ cancellable: UnsafeMutablePointer<GCancellable>) throws(StorageFailure) -> UnsafeMutablePointer<GList>? {
        let table = Attributes.table(attributes)
        defer { g_hash_table_unref(table) }
        var unlockAttempted = false
        while true {
            var error: UnsafeMutablePointer<GError>?
            let list = secret_service_search_sync(service, Self.schema, table, SECRET_SEARCH_ALL, cancellable, &error)
            if let error {
                g_list_free_full(list, g_object_unref)
                throw StorageFailure(consuming: error, default: "search failed")
            }
            let locked = GListItems(list).filter { secret_item_get_locked($0) != 0 }
            if locked.isEmpty { return list }
            defer { g_list_free_full(list, g_object_unref) }
            if unlockAttempted {
                throw .locked("the session item is still locked after the unlock request")
            }
            unlockAttempted = true
            // Search again afterwards: the proxies' cached Locked property is not refreshed.
            try unlock(locked.map { UnsafeMutableRawPointer($0) }, service, what: "the session item")
        }
    }

    /// Asks the provider to unlock `objects` (items or collections). Runs under the prompt
    /// deadline; throws `.locked` when the prompt is dismissed, refused or times out.
    private func unlock(_ objects: [UnsafeMutableRawPointer], _ service: UnsafeMutablePointer<SecretService>,
                        what: String) throws(StorageFailure) {
        if objects.isEmpty { return }
        var list: UnsafeMutablePointer<GList>?
        for object in objects.reversed() { list = g_list_prepend(list, object) }
        defer { g_list_free(list) }
        let unlockedCount: Int32
        do {
            unlockedCount = try Deadlines.shared.run(operation: "the unlock prompt", milliseconds: timeouts.promptMilliseconds) {
                prompt throws(StorageFailure) -> Int32 in
                var error: UnsafeMutablePointer<GError>?
                var unlocked: UnsafeMutablePointer<GList>?
                let count = secret_service_unlock_sync(service, list, prompt, &unlocked, &error)
                g_list_free_full(unlocked, g_object_unref)
                if let error { throw StorageFailure(consuming: error, default: "unlock failed") }
                return count
            }
        } catch .timedOut(_, let ms) {
            throw .locked("\(what) is locked and the unlock prompt was not answered within \(ms) ms")
        }
        if unlockedCount < Int32(objects.count) {
            throw .locked("\(what) is locked and the unlock prompt was dismissed or could not be shown")
        }
    }

    private func proxyPath(_ object: UnsafeMutableRawPointer) -> String {
        String(cString: g_dbus_proxy_get_object_path(object.assumingMemoryBound(to: GDBusProxy.self)))
    }

    private func proxyPath<T>(_ object: UnsafeMutablePointer<T>) -> String {
        proxyPath(UnsafeMutableRawPointer(object))
    }

    /// The schema, created once and kept for the life of the process.
    nonisolated(unsafe) static let schema: UnsafeMutablePointer<SecretSchema> = {
        let types = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, nil)
        for name in [authEnvironmentAttribute, generationAttribute, persistedAtAttribute] {
            // SECRET_SCHEMA_ATTRIBUTE_STRING is 0, i.e. a NULL value in the table.
            g_hash_table_insert(types, g_strdup(name),
                                UnsafeMutableRawPointer(bitPattern: Int(SECRET_SCHEMA_ATTRIBUTE_STRING.rawValue)))
        }
        defer { g_hash_table_unref(types) }
        return secret_schema_newv(schemaName, SECRET_SCHEMA_NONE, types)
    }()
}

// MARK: - GLib glue

/// Iterates a `GList` of `SecretItem`s without taking ownership.
private struct GListItems: Sequence {
    let head: UnsafeMutablePointer<GList>?
    init(_ head: UnsafeMutablePointer<GList>?) { self.head = head }
    func makeIterator() -> AnyIterator<UnsafeMutablePointer<SecretItem>> {
        var node = head
        return AnyIterator {
            while let current = node {
                node = current.pointee.next
                if let data = current.pointee.data { return data.assumingMemoryBound(to: SecretItem.self) }
            }
            return nil
        }
    }
}

/// Attribute tables (`GHashTable` of strings) in and out of libsecret.
private enum Attributes {
    static func table(_ attributes: [String: String]) -> OpaquePointer {
        let table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free)!
        for (key, value) in attributes { g_hash_table_insert(table, g_strdup(key), g_strdup(value)) }
        return table
    }

    /// The attributes of `item`, from the proxy's cached property (no round trip).
    static func of(_ item: UnsafeMutablePointer<SecretItem>) -> [String: String] {
    guard let table = secret_item_get_attributes(item) else { return [:] }
    defer { g_hash_table_unref(table) }
    var result: [String: String] = [:]
    var iter = GHashTableIter()
    g_hash_table_iter_init(&iter, table)
    var key: gpointer?
    var value: gpointer?
    while g_hash_table_iter_next(&iter, &key, &value) != 0 {
        guard let key, let value else { continue }
        result[String(cString: key.assumingMemoryBound(to: CChar.self))] =
            String(cString: value.assumingMemoryBound(to: CChar.self))
    }
    return result
    }
}

extension StorageFailure {
    /// How a `GError` is classified before it becomes a `StorageFailure`.
    enum Kind { case unavailable, locked, gone, cancelled, other }

    struct Classified {
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
        if domain == g_dbus_error_quark() {
            // Strip GDBus's "GDBus.Error:org.freedesktop…: " prefix from remote errors.
            if let remote = g_dbus_error_get_remote_error(error) {
                g_free(remote)
                var copy = g_error_copy(error)
                g_dbus_error_strip_remote_error(copy)
                message = copy?.pointee.message.map { String(cString: $0) } ?? message
                g_clear_error(&copy)
            }
        }
        let kind: Kind
        if domain == g_io_error_quark() && code == Int32(G_IO_ERROR_CANCELLED.rawValue) {
            kind = .cancelled
        } else if domain == secret_error_get_quark() && code == Int32(SECRET_ERROR_IS_LOCKED.rawValue) {
            kind = .locked
        } else if domain == secret_error_get_quark() && code == Int32(SECRET_ERROR_NO_SUCH_OBJECT.rawValue) {
            kind = .gone
        } else if domain == g_dbus_error_quark() {
            switch GDBusError(rawValue: UInt32(code)) {
            case G_DBUS_ERROR_UNKNOWN_OBJECT, G_DBUS_ERROR_UNKNOWN_METHOD:
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
}

/// The process-wide `SecretService` proxy with an open (encrypted) transfer session, created
/// lazily and rebuilt after a failure.
final class ServiceConnection: Sendable {
    static let shared = ServiceConnection()

    private struct ServiceRef: @unchecked Sendable { var service: UnsafeMutablePointer<SecretService>? }
    private let cached = Mutex(ServiceRef(service: nil))

    /// Runs `body` with a referenced service under the call deadline. A failure on a cached
    /// service (stale connection, provider restarted) drops it and retries once on a new one.
    func run<T>(operation: String, timeouts: KeyringTimeouts,
                _ body: (UnsafeMutablePointer<SecretService>, UnsafeMutablePointer<GCancellable>) throws(StorageFailure) -> T)
        throws(StorageFailure) -> T {
        try Deadlines.shared.run(operation: operation, milliseconds: timeouts.callMilliseconds) { cancellable throws(StorageFailure) -> T in
            var retried = false
            while true {
                let (service, fromCache) = try acquire(cancellable)
                defer { g_object_unref(service) }
                do throws(StorageFailure) {
                    return try body(service, cancellable)
                } catch {
                    let retriable: Bool
                    switch error {
                    case .failed, .unavailable: retriable = true
                    case .locked, .noDefaultCollection, .timedOut: retriable = false
                    }
                    if retriable && fromCache && !retried && g_cancellable_is_cancelled(cancellable) == 0 {
                        retried = true
                        drop(service)
                        continue
                    }
                    throw error
                }
            }
        }
    }

    /// Forgets the cached service (for example after the provider restarted).
    func drop(_ service: UnsafeMutablePointer<SecretService>) {
        let old: ServiceRef = cached.withLock { ref in
            guard ref.service == service else { return ServiceRef(service: nil) }
            ref.service = nil
            return ServiceRef(service: service)
        }
        if let service = old.service { g_object_unref(service) }
    }

    /// Returns a service with a new reference, and whether it came from the cache.
    private func acquire(_ cancellable: UnsafeMutablePointer<GCancellable>) throws(StorageFailure)
        -> (UnsafeMutablePointer<SecretService>, Bool) {
        let current: ServiceRef = cached.withLock { ref in
            guard let service = ref.service else { return ServiceRef(service: nil) }
            let connection = g_dbus_proxy_get_connection(UnsafeMutableRawPointer(service).assumingMemoryBound(to: GDBusProxy.self))
            if connection == nil || g_dbus_connection_is_closed(connection) != 0 {
                ref.service = nil
                g_object_unref(service)
                return ServiceRef(service: nil)
            }
            g_object_ref(service)
            return ServiceRef(service: service)
        }
        if let service = current.service { return (service, true) }
        let fresh = try open(cancellable)
        // Another thread may have connected meanwhile; keep the first, use ours for this call.
        cached.withLock { ref in
            if ref.service == nil {
                g_object_ref(fresh)
                ref.service = fresh
            }
        }
        return (fresh, false)
    }

    /// Opens a new `SecretService` proxy (not libsecret's process-wide singleton, which would be
    /// shared with the host application) with an encrypted transfer session.
    private func open(_ cancellable: UnsafeMutablePointer<GCancellable>) throws(StorageFailure) -> UnsafeMutablePointer<SecretService> {
        var error: UnsafeMutablePointer<GError>?
        // Resolve the address first so that "no session bus" is reported as such, quickly.
        guard let address = g_dbus_address_get_for_bus_sync(G_BUS_TYPE_SESSION, cancellable, &error) else {
            throw .unavailable("no session bus: " + Self.message(consuming: error))
        }
        g_free(address)
        guard let service = secret_service_open_sync(secret_service_get_type(), nil, SECRET_SERVICE_OPEN_SESSION,
                                                     cancellable, &error) else {
            let classified = StorageFailure.classify(error, "could not open a Secret Service session")
            if classified.kind == .cancelled { throw .failed("cancelled") }
            throw .unavailable(classified.message)
        }
        return service
    }

    private static func message(consuming error: UnsafeMutablePointer<GError>?) -> String {
        StorageFailure.classify(error, "unknown error").message
    }
}

/// Cancels keyring calls whose deadline passed. One GLib thread, started on first use, runs a
/// private main context with one timeout source per pending operation.
final class Deadlines: Sendable {
    static let shared = Deadlines()

    private struct Context: @unchecked Sendable { let pointer: OpaquePointer }
    private let context: Context

    private init() {
        let context = g_main_context_new()!
        let loop = g_main_loop_new(context, 0)
        let thread = g_thread_new("portal-keyring-deadline", { loop in
            g_main_loop_run(OpaquePointer(loop))
            return nil
        }, UnsafeMutableRawPointer(loop))
        g_thread_unref(thread)
        self.context = Context(pointer: context)
    }

    /// Runs `body` with a cancellable that is cancelled after `milliseconds`; a failure after
    /// the deadline passed becomes `.timedOut`.
    func run<T>(operation: String, milliseconds: UInt32,
                _ body: (UnsafeMutablePointer<GCancellable>) throws(StorageFailure) -> T) throws(StorageFailure) -> T {
        let cancellable = g_cancellable_new()!
        defer { g_object_unref(cancellable) }
        let source = g_timeout_source_new(milliseconds)!
        g_source_set_callback(source, { data in
            g_cancellable_cancel(data?.assumingMemoryBound(to: GCancellable.self))
            return 0 // G_SOURCE_REMOVE
        }, g_object_ref(cancellable), { g_object_unref($0) })
        g_source_attach(source, context.pointer)
        defer {
            g_source_destroy(source)
            g_source_unref(source)
        }
        do {
            return try body(cancellable)
        } catch {
            if g_cancellable_is_cancelled(cancellable) != 0, !error.isTimeout {
                throw .timedOut(operation: operation, milliseconds: milliseconds)
            }
            throw error
        }
    }
}

private extension StorageFailure {
    var isTimeout: Bool { if case .timedOut = self { return true } else { return false } }
}
