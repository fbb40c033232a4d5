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
/// for the process, on a private session-bus connection (`ServiceConnection`). When a call fails
/// on the cached proxy, the proxy is dropped and the call retried once on a fresh one, so a
/// provider restart between calls is survived; a closed connection (the bus restarted) is
/// replaced at the start of the next call. Unlock prompts go through `UnlockPrompts`.
///
/// Items and collections are addressed by object path through the Secret Service D-Bus API
/// (`SecretBus`), never through libsecret's `SecretItem`/`SecretCollection` proxies: building one
/// costs four blocking round trips (StartServiceByName, GetNameOwner, GetAll, signal
/// subscriptions) and, in libsecret 0.20, leaks about 1 KiB. libsecret still provides the
/// transfer session: its key encrypts every secret sent (`secret_service_encode_dbus_secret`)
/// and decrypts every secret received (`secret_service_decode_dbus_secret`), so a token never
/// crosses the bus in clear. Round trips per operation (gnome-keyring, unlocked, nothing racing):
///
/// | operation | calls |
/// |---|---|
/// | restore | SearchItems, GetSecrets (one call for all matches) |
/// | … with ≥ 2 matches lacking `g`/`t` in their documents, or one usable document without `g` (stored by an earlier version) | + SearchItems, Get(Attributes) per match (`items(withSecrets: false)`) |
/// | … with a locked match | + Unlock and the prompt (`UnlockPrompts`), SearchItems |
/// | persist, nothing older stored | ReadAlias, CreateItem, SearchItems |
/// | persist, replacing k older sign-ins | + Get(Attributes) and Delete per other item |
/// | clear / invalidate | SearchItems, Delete per match |
/// | delete one unusable item | Delete |
///
/// Persist removes older sign-ins before it returns, not in the background: the command-line tool
/// and many apps exit right after persisting, other processes (and the tests) look at the keyring
/// at once, and a removal still running after the call could race a later `clearPersistedSession()`
/// or an invalidation. The Delete costs gnome-keyring a second write of the keyring file, which is
/// most of what a persist costs beyond `secret_password_store_sync` (whose replace-in-place SPEC §2
/// rules out: it would overwrite a newer sign-in stored meanwhile by another process).
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
        try ServiceConnection.shared.run(operation: "restore", timeouts: timeouts) { service, call throws(StorageFailure) in
            let bus = try SecretBus(service, call)
            let match = Self.match(authEnvironmentId)
            if !withSecrets {
                // Attributes can be read while an item is locked: no unlock, no prompt.
                let found = try bus.search(match)
                return try attributes(bus, found.unlocked + found.locked)
            }
            // An item deleted or locked by another thread or process between the search and
            // GetSecrets is searched for again (a few times) rather than reported as unreadable.
            var attempt = 0
            while true {
                attempt += 1
                if let result = try readSecrets(bus, match, lastAttempt: attempt >= 5) {
                    return result
                }
            }
        }
    }

    /// One search (unlocking what is locked) plus one GetSecrets for every match. Returns nil when
    /// an item vanished in between and the caller should search again (never on `lastAttempt`).
    /// The attributes are not read: the document carries the generation and timestamp.
    private func readSecrets(_ bus: SecretBus, _ match: [(String, String)],
                             lastAttempt: Bool) throws(StorageFailure) -> [StoredSessionItem]? {
        let paths = try unlockedSearch(bus, match)
        if paths.isEmpty { return [] }
        FaultInjectionSeam.beforeGetSecrets(bus.call.cancellable)
        let secrets: [String: SecretBytes]
        do throws(StorageFailure.Classified) {
            secrets = try bus.secrets(paths)
        } catch {
            if case .gone = error.kind, !lastAttempt { return nil }
            throw error.storageFailure
        }
        let result = paths.compactMap { path in
            secrets[path].map {
                StoredSessionItem(itemId: path, generation: nil, persistedAt: 0, secret: $0, attributesRead: false)
            }
        }
        if result.count == paths.count { return result }
        // GetSecrets silently skips items it cannot serve: deleted or locked meanwhile (another
        // thread or process). Search again, which unlocks what is locked or throws `.locked`.
        // Items that are gone were deleted: the rest is a consistent answer. Items still there
        // are read again; when that keeps failing, they are unreadable — never reported as absent.
        let missing = paths.filter { secrets[$0] == nil }
        let present = Set(try unlockedSearch(bus, match))
        if !missing.contains(where: present.contains) { return result }
        if lastAttempt { throw .locked("the provider returned no secret for a stored session item") }
        return nil
    }

    /// The attributes of the items at `paths`; items deleted meanwhile are left out, items whose
    /// attributes the provider refuses while locked come back with `attributesRead` false.
    private func attributes(_ bus: SecretBus, _ paths: [String]) throws(StorageFailure) -> [StoredSessionItem] {
        var result: [StoredSessionItem] = []
        for path in paths {
            do throws(StorageFailure.Classified) {
                let attributes = try bus.attributes(path)
                result.append(StoredSessionItem(
                    itemId: path,
                    generation: attributes[Self.generationAttribute],
                    persistedAt: attributes[Self.persistedAtAttribute].flatMap { UInt64($0) } ?? 0,
                    secret: nil))
            } catch {
                switch error.kind {
                case .gone: continue
                case .locked:
                    result.append(StoredSessionItem(itemId: path, generation: nil, persistedAt: 0, secret: nil,
                                                    attributesRead: false))
                default: throw error.storageFailure
                }
            }
        }
        return result
    }

    func store(authEnvironmentId: String, generation: String, persistedAt: UInt64,
               label: String, secret: SecretBytes) throws(StorageFailure) {
        try ServiceConnection.shared.run(operation: "persist", timeouts: timeouts) { service, call throws(StorageFailure) in
            let bus = try SecretBus(service, call)
            _ = try createItem(bus, authEnvironmentId: authEnvironmentId, generation: generation,
                               persistedAt: persistedAt, label: label, secret: secret)
        }
    }

    /// One operation under one deadline: CreateItem, then (best effort, never throwing) the
    /// removal of older sign-ins. The search runs after the new item exists, so a sign-in that
    /// another process stores concurrently is seen by at least one of the two persists and the
    /// older of the two is removed; the newer one is never touched (`isOlder` compares
    /// `persisted_at`, then `session_generation`, read from each other item's attributes).
    /// When the search finds only the new item, that is the whole cleanup: one round trip.
    func replace(authEnvironmentId: String, generation: String, persistedAt: UInt64,
                 label: String, secret: SecretBytes) throws(StorageFailure) {
        try ServiceConnection.shared.run(operation: "persist", timeouts: timeouts) { service, call throws(StorageFailure) in
            let bus = try SecretBus(service, call)
            let ours = try createItem(bus, authEnvironmentId: authEnvironmentId, generation: generation,
                                      persistedAt: persistedAt, label: label, secret: secret)
            // Stored. From here on nothing throws: a failed removal is left to the next persist or
            // clear (restore ranks the leftover below ours), and the call reports success.
            guard let found = try? bus.search(Self.match(authEnvironmentId)) else { return }
            // Locked items cannot be deleted (and gnome-keyring never prompts for a delete).
            for path in found.unlocked where path != ours {
                guard let attributes = try? bus.attributes(path) else { continue }
                let other = StoredSessionItem(
                    itemId: path, generation: attributes[Self.generationAttribute],
                    persistedAt: attributes[Self.persistedAtAttribute].flatMap { UInt64($0) } ?? 0, secret: nil)
                if other.isOlder(than: persistedAt, generation) {
                    _ = try? bus.deleteItem(path)
                }
            }
        }
    }

    /// CreateItem in the default collection. Returns the new item's path.
    ///
    /// The collection is resolved with ReadAlias first, on every persist, although CreateItem
    /// would accept the alias path: a write must not be the first message of an operation. When
    /// the provider is stopped, a queued CreateItem outlives the deadline and stores the item
    /// after the call has reported failure; the read times out instead, and nothing is sent.
    /// No collection behind the alias is `.noDefaultCollection` (never a prompt to create one).
    /// A locked collection is unlocked through `UnlockPrompts` and the call repeated once.
    private func createItem(_ bus: SecretBus, authEnvironmentId: String, generation: String, persistedAt: UInt64,
                            label: String, secret: SecretBytes) throws(StorageFailure) -> String {
        let attributes = Self.match(authEnvironmentId) + [
            (Self.generationAttribute, generation),
            (Self.persistedAtAttribute, String(persistedAt)),
        ]
        var collection = try resolveDefaultCollection(bus)
        var unlocked = false
        var resolvedAgain = false
        while true {
            let created: (item: String, prompt: String)
            do throws(StorageFailure.Classified) {
                created = try bus.createItem(in: collection, label: label, attributes: attributes, secret: secret)
            } catch {
                switch error.kind {
                case .locked where !unlocked:
                    try unlock([collection], bus, what: "the default collection")
                    unlocked = true
                    continue
                case .gone where !resolvedAgain:
                    // The collection went away meanwhile: resolve the alias once more.
                    collection = try resolveDefaultCollection(bus)
                    resolvedAgain = true
                    continue
                default:
                    throw error.storageFailure
                }
            }
            if created.item != "/" { return created.item }
            // A prompt instead of an item: the provider wants the collection unlocked first.
            // That prompt itself is never run (nor dismissed): unlock, then ask once more.
            if !unlocked {
                try unlock([collection], bus, what: "the default collection")
                unlocked = true
                continue
            }
            throw .locked("the provider asked to confirm storing the item with a prompt, which is not shown")
        }
    }

    /// The path of the collection the `default` alias names (ReadAlias).
    private func resolveDefaultCollection(_ bus: SecretBus) throws(StorageFailure) -> String {
        let path: String
        do throws(StorageFailure.Classified) {
            path = try bus.readAlias("default")
        } catch {
            throw error.storageFailure
        }
        if path == "/" { throw .noDefaultCollection }
        return path
    }

    func delete(itemId: String) throws(StorageFailure) {
        try ServiceConnection.shared.run(operation: "delete", timeouts: timeouts) { service, call throws(StorageFailure) in
            let bus = try SecretBus(service, call)
            do throws(StorageFailure.Classified) {
                _ = try bus.deleteItem(itemId)
            } catch {
                throw error.storageFailure
            }
        }
    }

    @discardableResult
    func deleteAll(authEnvironmentId: String, generation: String?) throws(StorageFailure) -> Int {
        try ServiceConnection.shared.run(operation: "clear", timeouts: timeouts) { service, call throws(StorageFailure) in
            let bus = try SecretBus(service, call)
            var match = Self.match(authEnvironmentId)
            if let generation { match.append((Self.generationAttribute, generation)) }
            var deleted = 0
            for path in try unlockedSearch(bus, match) {
                do throws(StorageFailure.Classified) {
                    if try bus.deleteItem(path) { deleted += 1 }
                } catch {
                    throw error.storageFailure
                }
            }
            return deleted
        }
    }

    // MARK: - Helpers

    /// The search attributes for this schema's items of one auth environment: `xdg:schema` first
    /// (what `SECRET_SCHEMA_NONE` means: other schemas' look-alike items never match).
    private static func match(_ authEnvironmentId: String) -> [(String, String)] {
        [("xdg:schema", schemaName), (authEnvironmentAttribute, authEnvironmentId)]
    }

    /// Searches the items matching `attributes`, in every collection, locked or not. When some
    /// are locked, asks the provider to unlock them (a prompt, under the prompt deadline) and
    /// searches again; throws `.locked` when any match stays locked. Returns the (then unlocked)
    /// paths. libsecret's password lookup returns NULL without an error in that case; this never does.
    private func unlockedSearch(_ bus: SecretBus, _ attributes: [(String, String)]) throws(StorageFailure) -> [String] {
        var unlockAttempted = false
        while true {
            let found = try bus.search(attributes)
            if found.locked.isEmpty { return found.unlocked }
            if unlockAttempted {
                throw .locked("the session item is still locked after the unlock request")
            }
            unlockAttempted = true
            try unlock(found.locked, bus, what: "the session item")
        }
    }

    /// Asks the provider to unlock the objects at `paths` (items or collections) through
    /// `UnlockPrompts`, under the prompt deadline; the call deadline is paused meanwhile, so a
    /// prompt answered in time does not make the rest of the operation time out. Throws
    /// `.locked` when the prompt is dismissed, cannot be shown or is not answered in time.
    private func unlock(_ paths: [String], _ bus: SecretBus, what: String) throws(StorageFailure) {
        if paths.isEmpty { return }
        let milliseconds = timeouts.promptMilliseconds
        let outcome = try bus.call.paused { () throws(StorageFailure) -> UnlockPrompts.Outcome in
            try UnlockPrompts.shared.unlock(paths, connection: bus.connection, busName: bus.name,
                                            milliseconds: milliseconds)
        }
        switch outcome {
        case .unlocked:
            return
        case .dismissed:
            throw .locked("\(what) is locked and the unlock prompt was dismissed or could not be shown")
        case .timedOut:
            throw .locked("\(what) is locked and the unlock prompt was not answered within \(milliseconds) ms "
                          + "(the prompt stays open; a later call waits for its answer)")
        }
    }
}

// MARK: - The Secret Service D-Bus API

/// The Secret Service's methods, called directly on the adapter's private connection under the
/// operation's deadline (its cancellable): one blocking round trip each, no proxies, no main
/// loop. Errors come back classified (`StorageFailure.Classified`) so callers can tell an object
/// that is gone from a locked one or an unavailable provider.
struct SecretBus {
    static let servicePath = "/org/freedesktop/secrets"
    static let defaultCollection = "/org/freedesktop/secrets/aliases/default"
    private static let serviceInterface = "org.freedesktop.Secret.Service"
    private static let itemInterface = "org.freedesktop.Secret.Item"

    let service: UnsafeMutablePointer<SecretService>
    /// The private `GDBusConnection` the service proxy lives on.
    let connection: OpaquePointer
    /// The provider's bus name (`org.freedesktop.secrets`).
    let name: String
    let call: Deadline

    init(_ service: UnsafeMutablePointer<SecretService>, _ call: Deadline) throws(StorageFailure) {
        let proxy = UnsafeMutableRawPointer(service).assumingMemoryBound(to: GDBusProxy.self)
        guard let connection = g_dbus_proxy_get_connection(proxy), let name = g_dbus_proxy_get_name(proxy) else {
            throw .unavailable("the Secret Service proxy has no connection")
        }
        self.service = service
        self.connection = connection
        self.name = String(cString: name)
        self.call = call
        if secret_service_get_session_dbus_path(service) == nil {
            // Normally opened with the proxy (SECRET_SERVICE_OPEN_SESSION); never send without one.
            var error: UnsafeMutablePointer<GError>?
            if secret_service_ensure_session_sync(service, call.cancellable, &error) == 0 {
                throw StorageFailure(consuming: error, default: "could not open a transfer session")
            }
        }
    }

    /// Service.SearchItems: the matching items' paths, unlocked and locked (any collection).
    func search(_ attributes: [(String, String)]) throws(StorageFailure) -> (unlocked: [String], locked: [String]) {
        do throws(StorageFailure.Classified) {
            let reply = try invoke(Self.servicePath, Self.serviceInterface, "SearchItems",
                                   Variant.tuple([Variant.stringDictionary(attributes)]), "(aoao)", "search failed")
            defer { g_variant_unref(reply) }
            return (Variant.strings(reply, 0), Variant.strings(reply, 1))
        } catch {
            throw error.storageFailure
        }
    }

    /// Service.GetSecrets for `paths`, decrypted with the transfer session's key into wiped
    /// memory. Items the provider cannot serve (deleted, locked) are absent from the result.
    func secrets(_ paths: [String]) throws(StorageFailure.Classified) -> [String: SecretBytes] {
        guard let session = secret_service_get_session_dbus_path(service) else {
            throw StorageFailure.Classified(kind: .other, message: "no transfer session is open")
        }
        let reply = try invoke(Self.servicePath, Self.serviceInterface, "GetSecrets",
                               Variant.tuple([Variant.objectPaths(paths), g_variant_new_object_path(session)]),
                               "(a{o(oayays)})", "could not load secrets")
        defer { g_variant_unref(reply) }
        let dictionary = g_variant_get_child_value(reply, 0)!
        defer { g_variant_unref(dictionary) }
        var result: [String: SecretBytes] = [:]
        for index in 0..<g_variant_n_children(dictionary) {
            let entry = g_variant_get_child_value(dictionary, index)!
            defer { g_variant_unref(entry) }
            let key = g_variant_get_child_value(entry, 0)!
            let path = String(cString: g_variant_get_string(key, nil))
            g_variant_unref(key)
            let encoded = g_variant_get_child_value(entry, 1)!
            defer { g_variant_unref(encoded) }
            guard let value = secret_service_decode_dbus_secret(service, encoded) else {
                throw StorageFailure.Classified(kind: .other, message: "could not decrypt a stored secret")
            }
            defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
            var length = 0
            let bytes = secret_value_get(value, &length)
            result[path] = SecretBytes(copying: UnsafeRawBufferPointer(start: bytes, count: bytes == nil ? 0 : length))
        }
        return result
    }

    /// Properties.Get(Item.Attributes) of the item at `path`.
    func attributes(_ path: String) throws(StorageFailure.Classified) -> [String: String] {
        let reply = try invoke(path, "org.freedesktop.DBus.Properties", "Get",
                               Variant.tuple([g_variant_new_string(Self.itemInterface), g_variant_new_string("Attributes")]),
                               "(v)", "could not read the item's attributes")
        defer { g_variant_unref(reply) }
        let boxed = g_variant_get_child_value(reply, 0)!
        defer { g_variant_unref(boxed) }
        let dictionary = g_variant_get_variant(boxed)!
        defer { g_variant_unref(dictionary) }
        guard String(cString: g_variant_get_type_string(dictionary)) == "a{ss}" else {
            throw StorageFailure.Classified(kind: .other, message: "unexpected attributes of a stored item")
        }
        var result: [String: String] = [:]
        for index in 0..<g_variant_n_children(dictionary) {
            let entry = g_variant_get_child_value(dictionary, index)!
            let key = g_variant_get_child_value(entry, 0)!
            let value = g_variant_get_child_value(entry, 1)!
            result[String(cString: g_variant_get_string(key, nil))] = String(cString: g_variant_get_string(value, nil))
            g_variant_unref(value)
            g_variant_unref(key)
            g_variant_unref(entry)
        }
        return result
    }

    /// Collection.CreateItem (never replacing), the secret encrypted with the session's key.
    /// Returns the new item's path and the prompt's ("/" for none; the item is "/" with a prompt).
    func createItem(in collection: String, label: String, attributes: [(String, String)],
                    secret: SecretBytes) throws(StorageFailure.Classified) -> (item: String, prompt: String) {
        let value = secret.withUnsafeBytes { bytes in
            secret_value_new(bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count,
                             SessionDocument.contentType)
        }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        guard let encoded = secret_service_encode_dbus_secret(service, value) else {
            throw StorageFailure.Classified(kind: .other, message: "could not encrypt the secret")
        }
        let properties = Variant.propertyDictionary([
            ("org.freedesktop.Secret.Item.Label", g_variant_new_string(label)),
            ("org.freedesktop.Secret.Item.Attributes", Variant.stringDictionary(attributes)),
        ])
        let reply = try invoke(collection, "org.freedesktop.Secret.Collection", "CreateItem",
                               Variant.tuple([properties, encoded, g_variant_new_boolean(0)]), "(oo)",
                               "could not store the session item")
        defer { g_variant_unref(reply) }
        return (Variant.string(reply, 0), Variant.string(reply, 1))
    }

    /// Item.Delete. True when deleted, false when it was already gone. A provider that answers
    /// with a prompt (gnome-keyring never does) gets `.locked`: the prompt is not run.
    func deleteItem(_ path: String) throws(StorageFailure.Classified) -> Bool {
        let reply: OpaquePointer
        do throws(StorageFailure.Classified) {
            reply = try invoke(path, Self.itemInterface, "Delete", nil, "(o)", "could not delete the item")
        } catch {
            if case .gone = error.kind { return false }
            throw error
        }
        defer { g_variant_unref(reply) }
        if Variant.string(reply, 0) != "/" {
            throw StorageFailure.Classified(
                kind: .locked, message: "the provider asked to confirm deleting the item with a prompt, which is not shown")
        }
        return true
    }

    /// Service.ReadAlias.
    func readAlias(_ alias: String) throws(StorageFailure.Classified) -> String {
        let reply = try invoke(Self.servicePath, Self.serviceInterface, "ReadAlias",
                               Variant.tuple([g_variant_new_string(alias)]), "(o)", "could not read the default alias")
        defer { g_variant_unref(reply) }
        return Variant.string(reply, 0)
    }

    /// One method call, bounded by the operation's deadline (its cancellable). `parameters` is
    /// consumed (floating). The reply has type `replyType`; the caller unrefs it.
    ///
    /// Made asynchronously and waited for on a main context of the calling thread's own that is
    /// kept for the thread's life (`CallContext`): `g_dbus_connection_call_sync` creates and
    /// destroys a main context (and its eventfd) per call, which measurably slowed every round
    /// trip (about 25 µs of about 350 µs with gnome-keyring). GDBus calls the callback exactly
    /// once, also on cancellation, so the wait always ends.
    private func invoke(_ path: String, _ interface: String, _ method: String, _ parameters: OpaquePointer?,
                        _ replyType: StaticString, _ fallback: String) throws(StorageFailure.Classified) -> OpaquePointer {
        let context = CallContext.current
        var outcome = CallOutcome()
        withUnsafeMutablePointer(to: &outcome) { outcome in
            g_main_context_push_thread_default(context)
            defer { g_main_context_pop_thread_default(context) }
            g_dbus_connection_call(connection, name, path, interface, method, parameters, Variant.type(replyType),
                                   G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, call.cancellable, { source, result, data in
                guard let outcome = data?.assumingMemoryBound(to: CallOutcome.self) else { return }
                var error: UnsafeMutablePointer<GError>?
                outcome.pointee.reply = g_dbus_connection_call_finish(OpaquePointer(source), result, &error)
                outcome.pointee.error = error
                outcome.pointee.done = true
            }, outcome)
            while !outcome.pointee.done { g_main_context_iteration(context, 1) }
        }
        guard let reply = outcome.reply else { throw StorageFailure.classify(outcome.error, fallback) }
        return reply
    }
}

/// What an asynchronous call in `SecretBus.invoke` delivered.
private struct CallOutcome {
    var done = false
    var reply: OpaquePointer?
    var error: UnsafeMutablePointer<GError>?
}

/// A main context per thread that makes keyring calls, created on its first call and released
/// when the thread exits; only `SecretBus.invoke` attaches anything to it (its call replies).
private enum CallContext {
    private struct Key: @unchecked Sendable { let key: pthread_key_t }
    private static let key: Key = {
        var key = pthread_key_t()
        pthread_key_create(&key) { context in
            if let context { g_main_context_unref(OpaquePointer(context)) }
        }
        return Key(key: key)
    }()

    static var current: OpaquePointer {
        if let existing = pthread_getspecific(key.key) { return OpaquePointer(existing) }
        let context = g_main_context_new()!
        pthread_setspecific(key.key, UnsafeRawPointer(context))
        return context
    }
}

/// GVariant construction and reading for `SecretBus` (GLib's variadic constructors are not
/// callable from Swift).
private enum Variant {
    /// `G_VARIANT_TYPE(literal)`: a type string is its own `GVariantType`.
    static func type(_ literal: StaticString) -> OpaquePointer {
        OpaquePointer(UnsafeRawPointer(literal.utf8Start))
    }

    static func tuple(_ children: [OpaquePointer?]) -> OpaquePointer {
        var children = children
        return g_variant_new_tuple(&children, gsize(children.count))
    }

    /// `a{ss}`.
    static func stringDictionary(_ pairs: [(String, String)]) -> OpaquePointer {
        var entries: [OpaquePointer?] = pairs.map { g_variant_new_dict_entry(g_variant_new_string($0.0), g_variant_new_string($0.1)) }
        return g_variant_new_array(type("{ss}"), &entries, gsize(entries.count))
    }

    /// `a{sv}`; the values are wrapped in variants.
    static func propertyDictionary(_ pairs: [(String, OpaquePointer?)]) -> OpaquePointer {
        var entries: [OpaquePointer?] = pairs.map { g_variant_new_dict_entry(g_variant_new_string($0.0), g_variant_new_variant($0.1)) }
        return g_variant_new_array(type("{sv}"), &entries, gsize(entries.count))
    }

    /// `ao`.
    static func objectPaths(_ paths: [String]) -> OpaquePointer {
        var children: [OpaquePointer?] = paths.map { g_variant_new_object_path($0) }
        return g_variant_new_array(type("o"), &children, gsize(children.count))
    }

    /// The string (or object path) that is child `index` of `tuple`.
    static func string(_ tuple: OpaquePointer, _ index: gsize) -> String {
        let child = g_variant_get_child_value(tuple, index)!
        defer { g_variant_unref(child) }
        return String(cString: g_variant_get_string(child, nil))
    }

    /// The strings (or object paths) of the array that is child `index` of `tuple`.
    static func strings(_ tuple: OpaquePointer, _ index: gsize) -> [String] {
        let array = g_variant_get_child_value(tuple, index)!
        defer { g_variant_unref(array) }
        return (0..<g_variant_n_children(array)).map { string(array, $0) }
    }
}

/// A no-op call of `secret_item_load_secrets_sync` (an empty list: no D-Bus traffic) right
/// before GetSecrets, made only when that symbol is interposed: the fault-injection suite
/// (`Tests/fault/fault_test.c`, condition 5) defines it in the test program to lock or delete
/// items exactly between the search and GetSecrets. Production processes never pay for it.
private enum FaultInjectionSeam {
    private struct Flag: @unchecked Sendable { let interposed: Bool }
    private static let flag: Flag = {
        let name = "secret_item_load_secrets_sync"
        // RTLD_DEFAULT (NULL) finds the first definition in the process, an interposer first;
        // libsecret's handle finds its own.
        guard let global = dlsym(nil, name),
              let library = dlopen("libsecret-1.so.0", RTLD_LAZY | RTLD_NOLOAD) else { return Flag(interposed: false) }
        defer { dlclose(library) }
        return Flag(interposed: dlsym(library, name) != global)
    }()

    static func beforeGetSecrets(_ cancellable: UnsafeMutablePointer<GCancellable>) {
        guard flag.interposed else { return }
        var error: UnsafeMutablePointer<GError>?
        _ = secret_item_load_secrets_sync(nil, cancellable, &error)
        if let error { g_error_free(error) }
    }
}

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

/// The process-wide `SecretService` proxy with an open (encrypted) transfer session, on a
/// session-bus connection of the library's own, created lazily and rebuilt after a failure.
///
/// The connection is private rather than GLib's shared `g_bus_get` singleton: that one belongs to
/// the host application, and once the bus goes away it stays closed for the life of the process
/// (every later call failed with "The connection is closed" until the app restarted). A closed
/// connection is detected at the start of the next call and replaced; a provider restart on a
/// live bus is handled by the one retry on a fresh proxy.
final class ServiceConnection: Sendable {
    static let shared = ServiceConnection()

    private struct Cache: @unchecked Sendable {
        var connection: OpaquePointer?
        var service: UnsafeMutablePointer<SecretService>?
    }
    private let cached = Mutex(Cache())

    /// Runs `body` with a referenced service under the call deadline. A failure on a cached
    /// service (stale connection, provider restarted) drops it and retries once on a new one.
    func run<T>(operation: String, timeouts: KeyringTimeouts,
                _ body: (UnsafeMutablePointer<SecretService>, Deadline) throws(StorageFailure) -> T)
        throws(StorageFailure) -> T {
        try Deadlines.shared.run(operation: operation, milliseconds: timeouts.callMilliseconds) { call throws(StorageFailure) -> T in
            var retried = false
            while true {
                let (service, fromCache) = try acquire(call.cancellable)
                defer { g_object_unref(service) }
                do throws(StorageFailure) {
                    return try body(service, call)
                } catch {
                    let retriable: Bool
                    switch error {
                    case .failed, .unavailable: retriable = true
                    case .locked, .noDefaultCollection, .timedOut: retriable = false
                    }
                    if retriable && fromCache && !retried && g_cancellable_is_cancelled(call.cancellable) == 0 {
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
            if classified.kind == .cancelled { throw .failed("cancelled") }
            throw .unavailable(classified.message)
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
private enum PrivateSecretService {
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

/// Unlock prompts, at most one at a time per process, driven at the D-Bus level
/// (`Service.Unlock`, `Prompt.Prompt`, the `Completed` signal) instead of through libsecret's
/// prompt code, because of two faults the fault-injection suite (Tests/fault) found:
///
/// - On cancellation libsecret calls `Prompt.Dismiss`, and gnome-keyring-daemon 42 aborts
///   (`perform_next_unlock: assertion failed: (!self->current)`) when an unlock prompt that is
///   still waiting for its prompter is dismissed: a prompt deadline would crash the user's keyring.
/// - After that, libsecret 0.20's `secret_service_unlock_sync` never returned (its task completes
///   with a NULL error): an endless hang instead of a deadline.
///
/// So a prompt that is not answered within the prompt deadline is left open, never dismissed. The
/// next unlock in this process, from any thread, waits for that same prompt instead of opening
/// another (concurrent unlock prompts are another known gnome-keyring crash), and an answer given
/// meanwhile counts. Every D-Bus call and the wait are bounded by the prompt deadline.
final class UnlockPrompts: @unchecked Sendable {
    enum Outcome: Equatable { case unlocked, dismissed, timedOut }

    static let shared = UnlockPrompts()

    private let mutex: UnsafeMutablePointer<GMutex>
    private let condition: UnsafeMutablePointer<GCond>
    /// Guarded by `mutex`: a thread is running or waiting for a prompt.
    private var busy = false
    /// A prompt left open by a call whose deadline passed. Only the thread that set `busy` uses it.
    private var pending: PendingPrompt?

    private init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: GMutex())
        g_mutex_init(mutex)
        condition = .allocate(capacity: 1)
        condition.initialize(to: GCond())
        g_cond_init(condition)
    }

    /// Unlocks the objects at `paths` through the provider's prompt, waiting at most
    /// `milliseconds` in all (for another thread's prompt, the D-Bus calls and the answer).
    func unlock(_ paths: [String], connection: OpaquePointer, busName: String,
                milliseconds: UInt32) throws(StorageFailure) -> Outcome {
        let end = g_get_monotonic_time() + Int(milliseconds) * 1000
        guard enter(until: end) else { return .timedOut }
        defer { leave() }
        if let prompt = pending {
            prompt.poll()
            if prompt.connection != connection || prompt.vanished || prompt.state.dismissed {
                // Another connection or provider, gone, or dismissed: prompt again below.
                pending = nil
                prompt.close()
            } else {
                let outcome = try prompt.wait(until: end)
                if outcome != .timedOut {
                    pending = nil
                    prompt.close()
                }
                if outcome != .dismissed { return outcome }
                // Answered "dismissed" before this call asked: fall through to a prompt of its own.
            }
        }
        let owner = try nameOwner(busName, connection, end)
        var failure: StorageFailure?
        let reply = call(connection, busName, "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Unlock",
                         Self.objectPaths(paths), end, &failure)
        guard let reply else { throw failure ?? .failed("unlock failed") }
        defer { g_variant_unref(reply) }
        guard String(cString: g_variant_get_type_string(reply)) == "(aoo)" else { throw .failed("unexpected reply to Unlock") }
        let unlocked = g_variant_get_child_value(reply, 0)
        let unlockedCount = g_variant_n_children(unlocked)
        g_variant_unref(unlocked)
        let promptValue = g_variant_get_child_value(reply, 1)
        let promptPath = String(cString: g_variant_get_string(promptValue, nil))
        g_variant_unref(promptValue)
        if promptPath == "/" { return unlockedCount >= paths.count ? .unlocked : .dismissed }

        let prompt = PendingPrompt(connection: connection, owner: owner, path: promptPath)
        var promptFailure: StorageFailure?
        let window = g_variant_new_string("")
        var arguments: [OpaquePointer?] = [window]
        guard let promptReply = call(connection, busName, promptPath, "org.freedesktop.Secret.Prompt", "Prompt",
                                     g_variant_new_tuple(&arguments, 1), end, &promptFailure) else {
            prompt.close()
            if case .timedOut = promptFailure { return .timedOut }
            throw promptFailure ?? .failed("the unlock prompt failed")
        }
        g_variant_unref(promptReply)
        let outcome = try prompt.wait(until: end)
        if outcome == .timedOut {
            pending = prompt
        } else {
            prompt.close()
        }
        return outcome
    }

    private func enter(until end: Int) -> Bool {
        g_mutex_lock(mutex)
        defer { g_mutex_unlock(mutex) }
        while busy {
            if g_cond_wait_until(condition, mutex, end) == 0 && busy { return false }
        }
        busy = true
        return true
    }

    private func leave() {
        g_mutex_lock(mutex)
        busy = false
        g_cond_broadcast(condition)
        g_mutex_unlock(mutex)
    }

    /// The unique bus name that owns `busName` now (the prompt's Completed signal comes from it).
    private func nameOwner(_ busName: String, _ connection: OpaquePointer,
                           _ end: Int) throws(StorageFailure) -> String {
        var failure: StorageFailure?
        let name = g_variant_new_string(busName)
        var arguments: [OpaquePointer?] = [name]
        guard let reply = call(connection, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                               "GetNameOwner", g_variant_new_tuple(&arguments, 1), end, &failure) else {
            throw failure ?? .unavailable("the Secret Service provider has no owner")
        }
        defer { g_variant_unref(reply) }
        guard String(cString: g_variant_get_type_string(reply)) == "(s)" else { throw .failed("unexpected reply to GetNameOwner") }
        let owner = g_variant_get_child_value(reply, 0)
        defer { g_variant_unref(owner) }
        return String(cString: g_variant_get_string(owner, nil))
    }

    /// One method call bounded by `end`. On failure returns nil and sets `failure`
    /// (`.timedOut` when the time ran out).
    private func call(_ connection: OpaquePointer, _ destination: String, _ path: String,
                      _ interface: String, _ method: String, _ parameters: OpaquePointer?, _ end: Int,
                      _ failure: inout StorageFailure?) -> OpaquePointer? {
        let remaining = max((end - g_get_monotonic_time()) / 1000, 1)
        var error: UnsafeMutablePointer<GError>?
        let reply = g_dbus_connection_call_sync(connection, destination, path, interface, method, parameters, nil,
                                                G_DBUS_CALL_FLAGS_NO_AUTO_START, Int32(clamping: remaining), nil, &error)
        if reply == nil {
            if let error, error.pointee.domain == g_io_error_quark(),
               error.pointee.code == Int32(G_IO_ERROR_TIMED_OUT.rawValue) {
                g_error_free(error)
                failure = .timedOut(operation: "the unlock prompt", milliseconds: UInt32(clamping: remaining))
            } else {
                failure = StorageFailure(consuming: error, default: "\(method) failed")
            }
        }
        return reply
    }

    /// `(ao)` from object paths (as the provider gave them to us).
    private static func objectPaths(_ paths: [String]) -> OpaquePointer? {
        let copies = paths.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        var pointers: [UnsafePointer<gchar>?] = copies.map { UnsafePointer($0) }
        let array = pointers.withUnsafeMutableBufferPointer { g_variant_new_objv($0.baseAddress, Int($0.count)) }
        var arguments: [OpaquePointer?] = [array]
        return g_variant_new_tuple(&arguments, 1)
    }
}

/// One open unlock prompt: its Completed signal and the provider's disconnection, delivered to a
/// private main context that the waiting thread runs.
private final class PendingPrompt {
    final class State: @unchecked Sendable {
        var completed = false
        var dismissed = false
        var vanished = false
    }

    let connection: OpaquePointer
    let state = State()
    private let context: OpaquePointer
    private var subscriptions: [guint] = []

    var vanished: Bool { state.vanished || g_dbus_connection_is_closed(connection) != 0 }

    init(connection: OpaquePointer, owner: String, path: String) {
        g_object_ref(UnsafeMutableRawPointer(connection))
        self.connection = connection
        context = g_main_context_new()
        g_main_context_push_thread_default(context)
        defer { g_main_context_pop_thread_default(context) }
        subscriptions.append(g_dbus_connection_signal_subscribe(
            connection, owner, "org.freedesktop.Secret.Prompt", "Completed", path, nil, G_DBUS_SIGNAL_FLAGS_NONE,
            { _, _, _, _, _, parameters, data in
                guard let data else { return }
                let state = Unmanaged<State>.fromOpaque(data).takeUnretainedValue()
                state.completed = true
                state.dismissed = true
                guard let parameters, String(cString: g_variant_get_type_string(parameters)) == "(bv)" else { return }
                let flag = g_variant_get_child_value(parameters, 0)
                state.dismissed = g_variant_get_boolean(flag) != 0
                g_variant_unref(flag)
            }, Unmanaged.passRetained(state).toOpaque(), { Unmanaged<State>.fromOpaque($0!).release() }))
        // NameOwnerChanged(owner, owner, "") when the provider's connection goes away.
        subscriptions.append(g_dbus_connection_signal_subscribe(
            connection, "org.freedesktop.DBus", "org.freedesktop.DBus", "NameOwnerChanged", "/org/freedesktop/DBus",
            owner, G_DBUS_SIGNAL_FLAGS_NONE,
            { _, _, _, _, _, _, data in
                guard let data else { return }
                Unmanaged<State>.fromOpaque(data).takeUnretainedValue().vanished = true
            }, Unmanaged.passRetained(state).toOpaque(), { Unmanaged<State>.fromOpaque($0!).release() }))
    }

    /// Delivers whatever arrived meanwhile.
    func poll() {
        while g_main_context_iteration(context, 0) != 0 {}
    }

    /// Waits for the answer until `end` (monotonic microseconds).
    func wait(until end: Int) throws(StorageFailure) -> UnlockPrompts.Outcome {
        while true {
            poll()
            if state.completed { return state.dismissed ? .dismissed : .unlocked }
            if vanished { throw .unavailable("the Secret Service provider went away during the unlock prompt") }
            let now = g_get_monotonic_time()
            if now >= end { return .timedOut }
            // Wake up at least every 250 ms to notice a closed connection.
            let slice = UInt32(clamping: min(end - now, 250_000) / 1000 + 1)
            let timer = g_timeout_source_new(slice)!
            g_source_set_callback(timer, { _ in 0 }, nil, nil)
            g_source_attach(timer, context)
            g_main_context_iteration(context, 1)
            g_source_destroy(timer)
            g_source_unref(timer)
        }
    }

    /// Unsubscribes and releases everything (the subscriptions' data is released in `context`).
    func close() {
        for id in subscriptions { g_dbus_connection_signal_unsubscribe(connection, id) }
        subscriptions = []
        poll()
        g_main_context_unref(context)
        g_object_unref(UnsafeMutableRawPointer(connection))
    }
}

/// One operation's deadline: a cancellable that the deadline thread cancels when the time is up.
/// `paused` stops the clock while a person answers an unlock prompt (which has its own deadline).
final class Deadline {
    let cancellable: UnsafeMutablePointer<GCancellable>
    private let context: OpaquePointer
    private var source: UnsafeMutablePointer<GSource>?
    /// Monotonic time (microseconds) at which the cancellable is cancelled.
    private var end: Int

    fileprivate init(milliseconds: UInt32, context: OpaquePointer) {
        cancellable = g_cancellable_new()!
        self.context = context
        end = g_get_monotonic_time() + Int(milliseconds) * 1000
        arm(milliseconds)
    }

    deinit {
        disarm()
        g_object_unref(cancellable)
    }

    /// Runs `body` with the deadline stopped; the time left before it is left afterwards.
    func paused<T>(_ body: () throws(StorageFailure) -> T) throws(StorageFailure) -> T {
        let remaining = max(end - g_get_monotonic_time(), 0)
        disarm()
        defer {
            end = g_get_monotonic_time() + remaining
            arm(UInt32(clamping: (remaining + 999) / 1000))
        }
        return try body()
    }

    private func arm(_ milliseconds: UInt32) {
        let source = g_timeout_source_new(milliseconds)!
        g_source_set_callback(source, { data in
            g_cancellable_cancel(data?.assumingMemoryBound(to: GCancellable.self))
            return 0 // G_SOURCE_REMOVE
        }, g_object_ref(cancellable), { g_object_unref($0) })
        g_source_attach(source, context)
        self.source = source
    }

    private func disarm() {
        guard let source else { return }
        g_source_destroy(source)
        g_source_unref(source)
        self.source = nil
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

    /// Runs `body` with a deadline whose cancellable is cancelled after `milliseconds`; a failure
    /// after the deadline passed becomes `.timedOut`.
    func run<T>(operation: String, milliseconds: UInt32,
                _ body: (Deadline) throws(StorageFailure) -> T) throws(StorageFailure) -> T {
        let deadline = Deadline(milliseconds: milliseconds, context: context.pointer)
        defer { withExtendedLifetime(deadline) {} }
        do {
            return try body(deadline)
        } catch {
            if g_cancellable_is_cancelled(deadline.cancellable) != 0, !error.isTimeout {
                throw .timedOut(operation: operation, milliseconds: milliseconds)
            }
            throw error
        }
    }
}

private extension StorageFailure {
    var isTimeout: Bool { if case .timedOut = self { return true } else { return false } }
}
