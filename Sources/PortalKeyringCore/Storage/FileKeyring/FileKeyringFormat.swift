import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// libsecret's file-keyring layout (the file a Flatpak app's `secret_password_*` calls use,
/// `$XDG_DATA_HOME/keyrings/default.keyring`), read and written with GLib's GVariant:
///
///     "GnomeKeyring\n\r\0\n"   16 bytes
///     1, 0                     major and minor version
///     (uayutua(a{say}ay))      GVariant, native byte order, to the end of the file:
///         u            salt length (the `ay` that follows)
///         ay           salt
///         u            PBKDF2 iteration count
///         t            modified, UTC seconds
///         u            usage count (libsecret adds one per stored item)
///         a(a{say}ay)  items: attribute name → HMAC-SHA256(key, value), sealed blob
///
/// (`FileKeyringKey` has the key and the blob; `FileKeyringItem` the blob's plaintext.) Nothing
/// read is trusted: the body must be a normal-form GVariant of exactly this type, and every size
/// and count is checked against the bounds below, so a truncated, padded or planted file is a
/// `FileKeyringError.malformed` naming the part, never a trap and never a silent default.
enum FileKeyringFormat {
    static let header: [UInt8] = Array("GnomeKeyring\n\r".utf8) + [0, 0x0A]
    static let version: [UInt8] = [1, 0]
    static let bodyType = "(uayutua(a{say}ay))"
    static let itemType = "(a{say}ay)"

    /// What libsecret writes, and what a new keyring gets.
    static let saltSize = 32
    static let defaultIterations: UInt32 = 100_000
    /// Salt lengths accepted on reading (libsecret and oo7 write 32).
    static let saltRange = 16...64
    /// Iteration counts accepted on reading: not below 1,000 (far weaker than anything libsecret
    /// writes), not above 100,000 — libsecret's own count, the only one it writes (and oo7's): a
    /// planted count cannot make a key derivation cost more than libsecret's (docs/security.md,
    /// "Hostile input: planted items, crafted files").
    static let iterationRange: ClosedRange<UInt32> = 1_000...defaultIterations
    /// The largest file read. An app's private keyring holds a few kilobytes (one session item of
    /// ours is under 100 KB even with the largest token); the cap keeps a planted file from
    /// exhausting memory and bounds GLib's normal-form check, the one pass that cannot stop at
    /// the deadline.
    static let maximumFileSize = 4 * 1024 * 1024
    /// The most attributes one item may carry. libsecret's schemas hold at most 32 attributes,
    /// and it adds `xdg:schema`; twice that leaves room for schema-less stores (`secret-tool`).
    /// Anyone may append an item without the key, so every count a file gives is capped.
    static let maximumAttributes = 64
    /// The most items a file may hold. libsecret sets no limit, but an app's private keyring
    /// holds a handful; 10,000 is far above any real one and keeps a crafted one's cost bounded.
    static let maximumItems = 10_000

    // MARK: - Reading

    /// The keyring `bytes` hold. `end` (the operation's deadline): when reading the items has not
    /// finished by then it stops (`FileKeyringError.outOfTime`); nil reads to the end. The work is
    /// linear in the file's size.
    static func decode(_ bytes: UnsafeRawBufferPointer, until end: MonotonicInstant? = nil) throws(FileKeyringError) -> FileKeyring {
        let prefix = header.count + version.count
        guard bytes.count >= header.count, Array(bytes[0..<header.count]) == header else {
            throw .malformed("no GnomeKeyring header (\(bytes.count) bytes)")
        }
        guard bytes.count >= prefix, bytes[header.count] == version[0], bytes[header.count + 1] == version[1] else {
            throw .malformed(bytes.count >= prefix
                ? "version \(bytes[header.count]).\(bytes[header.count + 1]), expected 1.0"
                : "truncated after the header")
        }
        guard bytes.count <= maximumFileSize else { throw .malformed("\(bytes.count) bytes, more than \(maximumFileSize)") }
        // g_bytes_new copies into memory malloc aligned, as GVariant needs.
        let body = UnsafeRawBufferPointer(rebasing: bytes[prefix...])
        let data = g_bytes_new(body.baseAddress, gsize(body.count))
        let value = g_variant_ref_sink(g_variant_new_from_bytes(Variant.type("(uayutua(a{say}ay))"), data, 0))
        g_bytes_unref(data)
        defer { g_variant_unref(value) }
        try checkCounts(value)
        if let end, end.hasPassed {
            throw .outOfTime("read none of its items (\(bytes.count) bytes) before the deadline")
        }
        guard g_variant_is_normal_form(value) != 0, Variant.has(value, type: bodyType) else {
            throw .malformed("the body (\(body.count) bytes) is not a normal-form \(bodyType)")
        }
        guard let saltLength = Variant.uint32(value, 0), let saltVariant = Variant.child(value, 1) else {
            throw .malformed("no salt")
        }
        defer { g_variant_unref(saltVariant) }
        guard let salt = Variant.bytes(saltVariant), salt.count == Int(saltLength), saltRange.contains(salt.count) else {
            throw .malformed("salt of \(Variant.bytes(saltVariant)?.count ?? -1) bytes, length field \(saltLength); accepted: \(saltRange)")
        }
        guard let iterations = Variant.uint32(value, 2), iterationRange.contains(iterations) else {
            throw .malformed("iteration count \(Variant.uint32(value, 2) ?? 0) outside \(iterationRange)")
        }
        guard let modified = Variant.uint64(value, 3), let usageCount = Variant.uint32(value, 4),
              let array = Variant.child(value, 5) else { throw .malformed("missing header fields") }
        defer { g_variant_unref(array) }
        var items: [SealedItem] = []
        let count = Int(g_variant_n_children(array))
        items.reserveCapacity(count)
        for index in 0..<count {
            if let end, end.hasPassed {
                throw .outOfTime("read \(index) of its \(count) items (\(bytes.count) bytes) before the deadline")
            }
            items.append(try item(array, index))
        }
        return FileKeyring(salt: Array(salt), iterations: iterations, modified: modified, usageCount: usageCount,
                           items: items)
    }

    /// Refuses a file with more items than `maximumItems` or an item with more attributes than
    /// `maximumAttributes`, before anything else is read: GLib reads the counts from the framing
    /// (safely, whatever the bytes), so a crafted count costs nothing — the normal-form check,
    /// which cannot stop at the deadline, runs only on counts within the caps.
    private static func checkCounts(_ body: OpaquePointer?) throws(FileKeyringError) {
        guard let array = Variant.child(body, 5) else { return }  // the normal-form check says what is wrong
        defer { g_variant_unref(array) }
        let count = Int(g_variant_n_children(array))
        guard count <= maximumItems else { throw .malformed("\(count) items, more than \(maximumItems)") }
        for index in 0..<count {
            guard let entry = Variant.child(array, gsize(index)) else { continue }
            defer { g_variant_unref(entry) }
            guard let dictionary = Variant.child(entry, 0) else { continue }
            defer { g_variant_unref(dictionary) }
            let attributes = Int(g_variant_n_children(dictionary))
            guard attributes <= maximumAttributes else {
                throw .malformed("item \(index) has \(attributes) attributes, more than \(maximumAttributes)")
            }
        }
    }

    /// Item `index` of the items array: attribute names distinct and non-empty, each hash 32
    /// bytes, the blob of `FileKeyringKey`'s layout.
    private static func item(_ array: OpaquePointer, _ index: Int) throws(FileKeyringError) -> SealedItem {
        guard let entry = Variant.child(array, gsize(index)), Variant.has(entry, type: itemType) else {
            throw .malformed("item \(index) is not a \(itemType)")
        }
        defer { g_variant_unref(entry) }
        guard let dictionary = Variant.child(entry, 0), let blobVariant = Variant.child(entry, 1) else {
            throw .malformed("item \(index) is incomplete")
        }
        defer {
            g_variant_unref(dictionary)
            g_variant_unref(blobVariant)
        }
        let count = Int(g_variant_n_children(dictionary))  // at most `maximumAttributes`: `checkCounts`
        var attributes: [SealedItem.HashedAttribute] = []
        attributes.reserveCapacity(count)
        var names = Set<String>(minimumCapacity: count)
        for position in 0..<gsize(count) {
            guard let pair = Variant.child(dictionary, position) else { throw .malformed("item \(index): no attribute \(position)") }
            defer { g_variant_unref(pair) }
            guard let name = Variant.string(pair, 0), !name.isEmpty, let hashVariant = Variant.child(pair, 1) else {
                throw .malformed("item \(index): attribute \(position) has no name")
            }
            defer { g_variant_unref(hashVariant) }
            guard let hash = Variant.bytes(hashVariant), hash.count == FileKeyringKey.macSize else {
                throw .malformed("item \(index): the hash of attribute '\(name)' is not \(FileKeyringKey.macSize) bytes")
            }
            guard names.insert(name).inserted else {
                throw .malformed("item \(index): attribute '\(name)' appears twice")
            }
            attributes.append(.init(name: name, hash: Array(hash)))
        }
        guard let blob = Variant.bytes(blobVariant), FileKeyringKey.isWellFormed(blob: blob.count) else {
            throw .malformed("item \(index): a blob of \(Variant.bytes(blobVariant)?.count ?? -1) bytes is not"
                + " ciphertext (a multiple of 16) ‖ IV (16) ‖ MAC (32)")
        }
        return SealedItem(hashedAttributes: attributes, blob: Array(blob))
    }

    // MARK: - Writing

    /// The bytes of the file holding `keyring`, as libsecret lays them out (native byte order).
    static func encode(_ keyring: FileKeyring) -> [UInt8] {
        let items: [OpaquePointer?] = keyring.items.map { item in
            var pairs: [OpaquePointer?] = item.hashedAttributes.map { attribute in
                attribute.hash.withUnsafeBytes { g_variant_new_dict_entry(g_variant_new_string(attribute.name), byteArray($0)) }
            }
            let dictionary = g_variant_new_array(Variant.type("{say}"), &pairs, gsize(pairs.count))
            return item.blob.withUnsafeBytes { Variant.tuple([dictionary, byteArray($0)]) }
        }
        var children = items
        let array = g_variant_new_array(Variant.type("(a{say}ay)"), &children, gsize(children.count))
        let body = g_variant_ref_sink(keyring.salt.withUnsafeBytes { salt in
            Variant.tuple([
                g_variant_new_uint32(UInt32(keyring.salt.count)),
                byteArray(salt),
                g_variant_new_uint32(keyring.iterations),
                g_variant_new_uint64(guint64(keyring.modified)),
                g_variant_new_uint32(keyring.usageCount),
                array,
            ])
        })
        defer { g_variant_unref(body) }
        // GLib serializes into memory aligned for the type (the body's place in the file, after
        // 18 bytes, is not), then it is copied after the header.
        let size = Int(g_variant_get_size(body))
        guard size > 0, let data = g_variant_get_data(body) else { return header + version }
        return header + version + Array(UnsafeRawBufferPointer(start: data, count: size))
    }

    /// A floating `ay` holding a copy of `bytes`.
    private static func byteArray(_ bytes: UnsafeRawBufferPointer) -> OpaquePointer {
        g_variant_new_fixed_array(Variant.type("y"), bytes.baseAddress, gsize(bytes.count), 1)
    }
}
