import CGLib
#if canImport(Glibc)
import Glibc
#endif

// MARK: - The Secret Service D-Bus API

/// The Secret Service's methods, called directly on the adapter's private connection under the
/// operation's deadline (its cancellable), through `BusCall`: one blocking round trip each, no
/// proxies. Errors come back classified by their D-Bus error name (`StorageFailure.Classified`)
/// so callers can tell an object that is gone from a locked one or an unavailable provider.
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
            guard let unlocked = Variant.strings(reply, 0), let locked = Variant.strings(reply, 1) else {
                throw Self.unexpected("SearchItems")
            }
            return (unlocked, locked)
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
        guard let dictionary = Variant.child(reply, 0) else { throw Self.unexpected("GetSecrets") }
        defer { g_variant_unref(dictionary) }
        guard Variant.has(dictionary, type: "a{o(oayays)}") else { throw Self.unexpected("GetSecrets") }
        var result: [String: SecretBytes] = [:]
        for index in 0..<g_variant_n_children(dictionary) {
            guard let entry = Variant.child(dictionary, index) else { throw Self.unexpected("GetSecrets") }
            defer { g_variant_unref(entry) }
            guard let path = Variant.string(entry, 0), let encoded = Variant.child(entry, 1) else {
                throw Self.unexpected("GetSecrets")
            }
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
        var requests = [BusCall.Request(path: Self.servicePath, interface: Self.serviceInterface, method: "GetSecrets",
                                parameters: Variant.tuple([Variant.objectPaths(paths),
                                                           g_variant_new_object_path(endpoint.session.path)]),
                                replyType: "(a{o(oayays)})")]
        for path in paths { requests.append(Self.propertyRequest(path, Self.itemInterface, "Attributes")) }
        var outcomes = BusCall.sendAll(connection, destination: name, requests, .deadline(call.cancellable))
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
                return try Self.stringDictionary(dictionary)
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
        return try Self.stringDictionary(dictionary)
    }

    /// The entries of an `a{ss}` value.
    private static func stringDictionary(_ dictionary: OpaquePointer) throws(StorageFailure.Classified) -> [String: String] {
        guard let entries = Variant.stringDictionary(dictionary) else { throw unexpected("Attributes") }
        return entries
    }

    /// A reply or property whose shape is not the one the Secret Service API gives it.
    static func unexpected(_ what: String) -> StorageFailure.Classified {
        StorageFailure.Classified(kind: .other, message: "unexpected answer of the provider to \(what)")
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
        guard let item = Variant.string(reply, 0), let prompt = Variant.string(reply, 1) else {
            throw Self.unexpected("CreateItem")
        }
        return (item, prompt)
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
        guard let prompt = Variant.string(reply, 0) else { throw Self.unexpected("Delete") }
        return prompt
    }

    /// Whether the item at `path` no longer exists: Properties.Get of its Locked property answers
    /// that the object is unknown (`.gone`), rather than a value.
    func isGone(item path: String) throws(StorageFailure.Classified) -> Bool {
        do throws(StorageFailure.Classified) {
            g_variant_unref(try property(path, Self.itemInterface, "Locked", type: "b", "could not read the item"))
            return false
        } catch {
            if case .gone = error.kind { return true }
            throw error
        }
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
    private static func propertyRequest(_ path: String, _ interface: String, _ name: String) -> BusCall.Request {
        BusCall.Request(path: path, interface: "org.freedesktop.DBus.Properties", method: "Get",
                parameters: Variant.tuple([g_variant_new_string(interface), g_variant_new_string(name)]),
                replyType: "(v)")
    }

    /// The value inside a Properties.Get reply; its type must be `type`. The caller unrefs it.
    private static func unboxProperty(_ reply: OpaquePointer, _ name: String,
                                      type: String) throws(StorageFailure.Classified) -> OpaquePointer {
        guard let boxed = Variant.child(reply, 0) else { throw unexpected(name) }
        defer { g_variant_unref(boxed) }
        guard let value = Variant.unboxed(boxed) else { throw unexpected(name) }
        guard Variant.has(value, type: type) else {
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
        let reply = try BusConnection.askBus(connection, "GetConnectionUnixProcessID", Variant.tuple([g_variant_new_string(name)]),
                                             "(u)", .deadline(cancellable), "could not identify the provider")
        defer { g_variant_unref(reply) }
        guard let child = Variant.child(reply, 0) else { throw unexpected("GetConnectionUnixProcessID") }
        defer { g_variant_unref(child) }
        guard Variant.has(child, type: "u") else { throw unexpected("GetConnectionUnixProcessID") }
        let pid = g_variant_get_uint32(child)
        // argv[0]'s file name from /proc/PID/cmdline (comm is cut at 15 bytes: "gnome-keyring-d").
        var buffer = [UInt8](repeating: 0, count: 512)
        let fd = open("/proc/" + String(decimal: UInt64(pid)) + "/cmdline", O_RDONLY | O_CLOEXEC)
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
        guard let collection = Variant.string(reply, 0) else { throw Self.unexpected("ReadAlias") }
        return collection
    }

    /// One method call, bounded by the operation's deadline (its cancellable). `parameters` is
    /// consumed (floating). The reply has type `replyType`; the caller unrefs it.
    private func invoke(_ path: String, _ interface: String, _ method: String, _ parameters: OpaquePointer?,
                        _ replyType: StaticString?, _ fallback: String) throws(StorageFailure.Classified) -> OpaquePointer {
        try BusCall.call(connection, destination: name, path, interface, method, parameters, replyType,
                         .deadline(call.cancellable), fallback)
    }
}
