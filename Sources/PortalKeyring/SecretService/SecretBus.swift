import CLibSecret
#if canImport(Glibc)
import Glibc
#endif

// MARK: - The Secret Service D-Bus API

/// The Secret Service's methods, called directly on the adapter's private connection under the
/// operation's deadline (its cancellable): one blocking round trip each, no proxies, no main
/// loop. Errors come back classified (`StorageFailure.Classified`) so callers can tell an object
/// that is gone from a locked one or an unavailable provider.
struct SecretBus {
    static let servicePath = "/org/freedesktop/secrets"
    static let defaultCollection = "/org/freedesktop/secrets/aliases/default"
    static let serviceInterface = "org.freedesktop.Secret.Service"
    private static let itemInterface = "org.freedesktop.Secret.Item"

    let endpoint: ServiceEndpoint
    /// The private `GDBusConnection` the endpoint lives on.
    var connection: OpaquePointer { endpoint.connection }
    /// The provider's unique bus name (the owner of `org.freedesktop.secrets` when the transfer
    /// session was opened).
    ///
    /// Calls go to it, never to the well-known name: a restarted KWallet holds other clients'
    /// sessions at the paths ours had, so a GetSecrets under our stale session path came back
    /// encrypted with another client's key ("could not decrypt a stored secret", seen in the
    /// kwallet matrix run), and a CreateItem would be decrypted with the wrong key — stored as
    /// garbage whenever the padding happens to check out. Addressed to the old instance, the call
    /// fails with ServiceUnknown instead, and `ServiceConnection` retries on a new endpoint.
    var name: String { endpoint.name }
    let call: Deadline

    init(_ endpoint: ServiceEndpoint, _ call: Deadline) {
        self.endpoint = endpoint
        self.call = call
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
        let reply: OpaquePointer
        do throws(StorageFailure.Classified) {
            reply = try invoke(Self.servicePath, Self.serviceInterface, "GetSecrets",
                               Variant.tuple([Variant.objectPaths(paths), g_variant_new_object_path(endpoint.session.path)]),
                               "(a{o(oayays)})", "could not load secrets")
        } catch {
            throw Self.getSecretsFailure(error)
        }
        defer { g_variant_unref(reply) }
        return try decodeSecrets(reply)
    }

    /// A failed GetSecrets, classified: KWallet 5.103 fails the whole call with InvalidArgs
    /// "Can't find item at path …" when one of the items was deleted after the search (where
    /// gnome-keyring skips it), so that message is an item gone, not a provider error.
    static func getSecretsFailure(_ error: StorageFailure.Classified) -> StorageFailure.Classified {
        guard error.kind == .other, error.message.hasPrefix("Can't find item at path") else { return error }
        return StorageFailure.Classified(kind: .gone, message: error.message)
    }

    /// The secrets of a GetSecrets reply, decrypted into wiped memory.
    private func decodeSecrets(_ reply: OpaquePointer) throws(StorageFailure.Classified) -> [String: SecretBytes] {
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
            result[path] = try endpoint.session.decode(encoded)
        }
        return result
    }

    /// Service.GetSecrets for `paths` (as `secrets`), and each item's attributes (as
    /// `attributes(_:)`), asked in one go: all the calls are sent before any answer is waited
    /// for, GetSecrets first. The provider answers one connection's calls in order, so the
    /// attributes are read after the secrets, and a restore waits one round trip for both
    /// instead of two (each round trip is about a tenth of a warm restore on gnome-keyring).
    /// Throws what GetSecrets failed with; an item whose attributes could not be read has the
    /// classified error in its place.
    func secretsAndAttributes(_ paths: [String]) throws(StorageFailure.Classified)
        -> (secrets: [String: SecretBytes], attributes: [String: Result<[String: String], StorageFailure.Classified>]) {
        var requests = [Request(path: Self.servicePath, interface: Self.serviceInterface, method: "GetSecrets",
                                parameters: Variant.tuple([Variant.objectPaths(paths),
                                                           g_variant_new_object_path(endpoint.session.path)]),
                                replyType: "(a{o(oayays)})")]
        for path in paths { requests.append(Self.propertyRequest(path, Self.itemInterface, "Attributes")) }
        var outcomes = Self.sendAll(connection, destination: name, requests, call.cancellable)
        defer { for index in outcomes.indices { if let reply = outcomes[index].reply { g_variant_unref(reply) } } }
        var attributes: [String: Result<[String: String], StorageFailure.Classified>] = [:]
        for (index, path) in paths.enumerated() {
            let outcome = outcomes[index + 1]
            outcomes[index + 1].error = nil
            attributes[path] = Result { () throws(StorageFailure.Classified) in
                guard let reply = outcome.reply else {
                    throw StorageFailure.classify(outcome.error, "could not read the item's attributes")
                }
                let dictionary = try Self.unboxProperty(reply, "Attributes", type: "a{ss}")
                defer { g_variant_unref(dictionary) }
                return Self.stringDictionary(dictionary)
            }
        }
        guard let reply = outcomes[0].reply else {
            let error = outcomes[0].error
            outcomes[0].error = nil
            throw Self.getSecretsFailure(StorageFailure.classify(error, "could not load secrets"))
        }
        return (try decodeSecrets(reply), attributes)
    }

    /// Properties.Get(Item.Attributes) of the item at `path`.
    func attributes(_ path: String) throws(StorageFailure.Classified) -> [String: String] {
        let dictionary = try property(path, Self.itemInterface, "Attributes", type: "a{ss}",
                                      "could not read the item's attributes")
        defer { g_variant_unref(dictionary) }
        return Self.stringDictionary(dictionary)
    }

    /// The entries of an `a{ss}` value.
    private static func stringDictionary(_ dictionary: OpaquePointer) -> [String: String] {
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
        let encoded = try endpoint.session.encode(secret, contentType: SessionDocument.contentType)
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

    /// Item.Delete. Returns the prompt's path when the provider wants one run first ("/" when
    /// deleted at once; KeePassXC always returns a prompt), nil when the item was already gone.
    func deleteItem(_ path: String) throws(StorageFailure.Classified) -> String? {
        let reply: OpaquePointer
        do throws(StorageFailure.Classified) {
            reply = try invoke(path, Self.itemInterface, "Delete", nil, "(o)", "could not delete the item")
        } catch {
            if case .gone = error.kind { return nil }
            throw error
        }
        defer { g_variant_unref(reply) }
        return Variant.string(reply, 0)
    }

    /// Properties.Get(Collection.Locked) of the collection at `path`.
    func isLocked(collection path: String) throws(StorageFailure.Classified) -> Bool {
        let value = try property(path, "org.freedesktop.Secret.Collection", "Locked", type: "b",
                                 "could not read whether the collection is locked")
        defer { g_variant_unref(value) }
        return g_variant_get_boolean(value) != 0
    }

    /// Properties.Get of `interface`.`name` at `path`, unboxed; its type must be `type`. The
    /// caller unrefs the value.
    private func property(_ path: String, _ interface: String, _ name: String, type: String,
                          _ fallback: String) throws(StorageFailure.Classified) -> OpaquePointer {
        let request = Self.propertyRequest(path, interface, name)
        let reply = try invoke(path, request.interface, request.method, request.parameters, request.replyType, fallback)
        defer { g_variant_unref(reply) }
        return try Self.unboxProperty(reply, name, type: type)
    }

    /// Properties.Get of `interface`.`name` at `path`.
    private static func propertyRequest(_ path: String, _ interface: String, _ name: String) -> Request {
        Request(path: path, interface: "org.freedesktop.DBus.Properties", method: "Get",
                parameters: Variant.tuple([g_variant_new_string(interface), g_variant_new_string(name)]),
                replyType: "(v)")
    }

    /// The value inside a Properties.Get reply; its type must be `type`. The caller unrefs it.
    private static func unboxProperty(_ reply: OpaquePointer, _ name: String,
                                      type: String) throws(StorageFailure.Classified) -> OpaquePointer {
        let boxed = g_variant_get_child_value(reply, 0)!
        defer { g_variant_unref(boxed) }
        let value = g_variant_get_variant(boxed)!
        guard String(cString: g_variant_get_type_string(value)) == type else {
            g_variant_unref(value)
            throw StorageFailure.Classified(kind: .other, message: "unexpected type of the \(name) property")
        }
        return value
    }

    /// The provider: its program name (argv[0] in `/proc/PID/cmdline`) and pid, from the bus daemon.
    func provider() throws(StorageFailure.Classified) -> (name: String, pid: UInt32) {
        try Self.provider(connection, name, call.cancellable)
    }

    /// `provider()` for the owner `name` of `org.freedesktop.secrets` on `connection`.
    static func provider(_ connection: OpaquePointer, _ name: String,
                         _ cancellable: UnsafeMutablePointer<GCancellable>?) throws(StorageFailure.Classified)
        -> (name: String, pid: UInt32) {
        let outcome = send(connection, destination: "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                           "GetConnectionUnixProcessID", Variant.tuple([g_variant_new_string(name)]), "(u)", cancellable)
        guard let reply = outcome.reply else { throw StorageFailure.classify(outcome.error, "could not identify the provider") }
        defer { g_variant_unref(reply) }
        let child = g_variant_get_child_value(reply, 0)!
        defer { g_variant_unref(child) }
        let pid = g_variant_get_uint32(child)
        // argv[0]'s file name from /proc/PID/cmdline (comm is cut at 15 bytes: "gnome-keyring-d").
        var buffer = [UInt8](repeating: 0, count: 512)
        let fd = open("/proc/\(pid)/cmdline", O_RDONLY | O_CLOEXEC)
        let count = fd < 0 ? 0 : max(read(fd, &buffer, buffer.count), 0)
        if fd >= 0 { close(fd) }
        let argv0 = buffer[0..<count].split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false).first ?? []
        let path = String(decoding: argv0, as: UTF8.self)
        let processName = String(path.split(separator: "/").last ?? "")
        return (processName.isEmpty ? "unknown" : processName, pid)
    }

    /// The transfer session's algorithm (`dh-ietf1024-sha256-aes128-cbc-pkcs7`, or `plain` when the
    /// provider offers no encryption).
    var transferAlgorithm: String { endpoint.session.algorithm }

    /// Service.ReadAlias.
    func readAlias(_ alias: String) throws(StorageFailure.Classified) -> String {
        let reply = try invoke(Self.servicePath, Self.serviceInterface, "ReadAlias",
                               Variant.tuple([g_variant_new_string(alias)]), "(o)", "could not read the default alias")
        defer { g_variant_unref(reply) }
        return Variant.string(reply, 0)
    }

    /// One method call, bounded by the operation's deadline (its cancellable). `parameters` is
    /// consumed (floating). The reply has type `replyType`; the caller unrefs it.
    private func invoke(_ path: String, _ interface: String, _ method: String, _ parameters: OpaquePointer?,
                        _ replyType: StaticString, _ fallback: String,
                        destination: String? = nil) throws(StorageFailure.Classified) -> OpaquePointer {
        let outcome = Self.send(connection, destination: destination ?? name, path, interface, method, parameters,
                                replyType, call.cancellable)
        guard let reply = outcome.reply else { throw StorageFailure.classify(outcome.error, fallback) }
        return reply
    }

    /// One method call for `sendAll`. `parameters` is consumed by the send.
    struct Request {
        let path: String
        let interface: String
        let method: String
        let parameters: OpaquePointer?
        let replyType: StaticString
    }

    /// What `send` delivered: the reply, or the error (the caller frees whichever it gets).
    struct Outcome {
        var done = false
        var reply: OpaquePointer?
        var error: UnsafeMutablePointer<GError>?
    }

    /// One method call on `connection`, waited for under `cancellable`. `parameters` is consumed.
    ///
    /// Made asynchronously and waited for on a main context of the calling thread's own that is
    /// kept for the thread's life (`CallContext`): `g_dbus_connection_call_sync` creates and
    /// destroys a main context (and its eventfd) per call, which measurably slowed every round
    /// trip (about 25 µs of about 350 µs with gnome-keyring). GDBus calls the callback exactly
    /// once, also on cancellation, so the wait always ends.
    static func send(_ connection: OpaquePointer, destination: String, _ path: String, _ interface: String,
                     _ method: String, _ parameters: OpaquePointer?, _ replyType: StaticString,
                     _ cancellable: UnsafeMutablePointer<GCancellable>?) -> Outcome {
        sendAll(connection, destination: destination,
                [Request(path: path, interface: interface, method: method, parameters: parameters, replyType: replyType)],
                cancellable)[0]
    }

    /// `requests` sent one after the other without waiting, then every answer waited for under
    /// `cancellable` (as `send`). The outcomes are in the order of `requests`.
    static func sendAll(_ connection: OpaquePointer, destination: String, _ requests: [Request],
                        _ cancellable: UnsafeMutablePointer<GCancellable>?) -> [Outcome] {
        let context = CallContext.current
        let outcomes = UnsafeMutablePointer<Outcome>.allocate(capacity: requests.count)
        outcomes.initialize(repeating: Outcome(), count: requests.count)
        defer {
            outcomes.deinitialize(count: requests.count)
            outcomes.deallocate()
        }
        g_main_context_push_thread_default(context)
        for (index, request) in requests.enumerated() {
            g_dbus_connection_call(connection, destination, request.path, request.interface, request.method,
                                   request.parameters, Variant.type(request.replyType),
                                   G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, cancellable, { source, result, data in
                guard let outcome = data?.assumingMemoryBound(to: Outcome.self) else { return }
                var error: UnsafeMutablePointer<GError>?
                outcome.pointee.reply = g_dbus_connection_call_finish(OpaquePointer(source), result, &error)
                outcome.pointee.error = error
                outcome.pointee.done = true
            }, outcomes + index)
        }
        while !(0..<requests.count).allSatisfy({ outcomes[$0].done }) { g_main_context_iteration(context, 1) }
        g_main_context_pop_thread_default(context)
        return Array(UnsafeBufferPointer(start: outcomes, count: requests.count))
    }
}

/// A main context per thread that makes keyring calls, created on its first call and released
/// when the thread exits; only `SecretBus.invoke` attaches anything to it (its call replies).
enum CallContext {
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
