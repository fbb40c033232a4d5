import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// One item of a file keyring as the file holds it: its attribute names in clear, each mapped to
/// HMAC-SHA256 of its value under the keyring's key, and the sealed blob (`FileKeyringKey.seal`).
/// An item is kept exactly as read until it is removed: items this library does not decrypt
/// (another key, another schema) are written back byte-exact.
struct SealedItem: Equatable, Sendable {
    struct HashedAttribute: Equatable, Sendable {
        let name: String
        let hash: [UInt8]
    }

    let hashedAttributes: [HashedAttribute]
    let blob: [UInt8]

    /// The item's identity across reads and rewrites of the file: SHA-256 of its blob, 64 hex
    /// digits. The blob is written back byte-exact and holds a random IV, so the id stays while
    /// the item does and two items stored apart never share one. (Its position in the file is
    /// no identity: another writer's removal shifts it.) Needs libgcrypt initialized, as every
    /// use of the key does (`FileKeyringKey.ready`).
    var id: String {
        var digest = [UInt8](repeating: 0, count: 32)
        digest.withUnsafeMutableBytes { out in
            blob.withUnsafeBytes { gcry_md_hash_buffer(Int32(GCRY_MD_SHA256.rawValue), out.baseAddress, $0.baseAddress, $0.count) }
        }
        return digest.map { byte in
            let digits = String(byte, radix: 16)
            return digits.count == 1 ? "0" + digits : digits
        }.joined()
    }

    /// Whether the file shows, in clear, every attribute name of `names` for this item (its
    /// values cannot be told without the key it was stored under).
    func shows(_ names: [String]) -> Bool {
        names.allSatisfy { name in hashedAttributes.contains { $0.name == name } }
    }

    /// Whether every attribute of `query` is one of this item's, with the same value, as far as
    /// the hashes tell (`query` hashed under the key, name → HMAC). An item of another key never
    /// matches a non-empty query. The decrypted attributes have the last word (`FileKeyring.search`).
    func mayMatch(_ hashedQuery: [String: [UInt8]]) -> Bool {
        hashedQuery.allSatisfy { name, hash in
            hashedAttributes.contains { $0.name == name && $0.hash == hash }
        }
    }
}

/// One decrypted item of a file keyring: what the sealed blob holds, the GVariant
/// `(a{ss}sttay)` — attributes, label, created and modified (UTC seconds), secret.
/// The secret stays in `SecretBytes`, and so does the serialized plaintext on either side.
struct FileKeyringItem: Sendable {
    let attributes: [String: String]
    let label: String
    let created: UInt64
    let modified: UInt64
    let secret: SecretBytes

    static let plaintextType = "(a{ss}sttay)"

    /// Whether every attribute of `query` is one of this item's, with the same value.
    func matches(_ query: [String: String]) -> Bool {
        query.allSatisfy { attributes[$0.key] == $0.value }
    }

    /// The serialized plaintext, written by GLib straight into wiped memory; the secret is
    /// referenced in place, never copied into GLib's heap. Attributes are written in name order.
    func serialized() -> SecretBytes {
        let names = attributes.keys.sorted()
        return secret.withUnsafeBytes { secret in
            // An `ay` over our own memory: GLib keeps the pointer, so the tuple must be gone
            // before `secret` is (it is unref'd below, inside this closure).
            let secretVariant: OpaquePointer = secret.count == 0
                ? g_variant_new_fixed_array(Variant.type("y"), nil, 0, 1)
                : g_variant_new_from_data(Variant.type("ay"), secret.baseAddress, gsize(secret.count), 1, nil, nil)
            let tuple = g_variant_ref_sink(Variant.tuple([
                Variant.stringDictionary(names.map { ($0, attributes[$0]!) }),  // trusted: names are attributes' own keys
                g_variant_new_string(label),
                g_variant_new_uint64(guint64(created)),
                g_variant_new_uint64(guint64(modified)),
                secretVariant,
            ]))
            defer { g_variant_unref(tuple) }
            let size = Int(g_variant_get_size(tuple))
            return SecretBytes(count: size) { out in g_variant_store(tuple, out.baseAddress) }
        }
    }

    /// The item whose serialized plaintext is `plaintext`, or nil when it is not a normal-form
    /// `(a{ss}sttay)` with distinct attribute names. `plaintext` comes from a file: it is read in
    /// place with GLib's checked accessors, and only the secret is copied (into `SecretBytes`).
    init?(plaintext: SecretBytes) {
        guard let decoded = plaintext.withUnsafeBytes({ bytes -> FileKeyringItem? in
            // GLib reads our memory in place (no copy: SecretBytes is page- or slot-aligned);
            // the variant and its children are released before this closure returns.
            let value = g_variant_ref_sink(g_variant_new_from_data(Variant.type("(a{ss}sttay)"), bytes.baseAddress,
                                                                   gsize(bytes.count), 0, nil, nil))
            defer { g_variant_unref(value) }
            guard g_variant_is_normal_form(value) != 0, Variant.has(value, type: FileKeyringItem.plaintextType),
                  let dictionary = Variant.child(value, 0) else { return nil }
            defer { g_variant_unref(dictionary) }
            let count = Int(g_variant_n_children(dictionary))
            guard let attributes = Variant.stringDictionary(dictionary), attributes.count == count,
                  let label = Variant.string(value, 1),
                  let created = Variant.uint64(value, 2), let modified = Variant.uint64(value, 3),
                  let secretVariant = Variant.child(value, 4) else { return nil }
            defer { g_variant_unref(secretVariant) }
            guard let secret = Variant.bytes(secretVariant) else { return nil }
            return FileKeyringItem(attributes: attributes, label: label, created: created, modified: modified,
                                   secret: SecretBytes(copying: secret))
        }) else { return nil }
        self = decoded
    }

    init(attributes: [String: String], label: String, created: UInt64, modified: UInt64, secret: SecretBytes) {
        self.attributes = attributes
        self.label = label
        self.created = created
        self.modified = modified
        self.secret = secret
    }
}
