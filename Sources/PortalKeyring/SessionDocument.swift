import FoundationEssentials

/// The secret stored in each keyring item: a versioned JSON document (SPEC §2),
/// `{"clientSessionToken":"…","endUserId":"…","g":"…","t":…,"v":1}`, content type
/// `application/json`.
///
/// `g` and `t` are optional copies of the item's non-secret `session_generation` and
/// `persisted_at` attributes (absent from documents stored by earlier versions). They let a restore
/// learn which sign-in it read, and rank two stored sign-ins, from the one GetSecrets call that
/// reads the secrets, without a D-Bus round trip per item for its attributes. A reader that does
/// not know them ignores them (older versions of this library decode only `v`, `clientSessionToken`
/// and `endUserId`). Both are written from the same values as the attributes, in the same
/// CreateItem; invalidation still deletes by the attribute (`{id, generation}`), so a `g` that
/// disagreed would make it delete nothing, never another sign-in. (Naming the sign-in by the
/// item's object path instead, and reading its generation only at invalidation, would not be
/// safe: gnome-keyring reuses item numbers after a restart, so a path can later name a newer
/// sign-in.)
///
/// Decoding is total: anything that is not exactly a version-1 document with both fields
/// non-empty (invalid UTF-8, invalid JSON, unknown `v`, a missing or empty field) is
/// *unusable*, which `restoreSession()` answers by deleting the item and reporting signed out.
/// `g` and `t` never make a document unusable: when missing, of the wrong type or malformed they
/// are treated as absent (the caller then reads the item's attributes instead).
enum SessionDocument {
    static let version = 1
    static let contentType = "application/json"

    private struct Wire: Codable {
        var v: Int
        var clientSessionToken: String?
        var endUserId: String?
        var g: String?
        var t: UInt64?

        init(v: Int, clientSessionToken: String?, endUserId: String?, g: String?, t: UInt64?) {
            self.v = v
            self.clientSessionToken = clientSessionToken
            self.endUserId = endUserId
            self.g = g
            self.t = t
        }

        private enum CodingKeys: String, CodingKey { case v, clientSessionToken, endUserId, g, t }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            v = try container.decode(Int.self, forKey: .v)
            clientSessionToken = try container.decodeIfPresent(String.self, forKey: .clientSessionToken)
            endUserId = try container.decodeIfPresent(String.self, forKey: .endUserId)
            // Tolerant: a wrong type is "absent", never "unusable".
            g = (try? container.decodeIfPresent(String.self, forKey: .g)) ?? nil
            t = (try? container.decodeIfPresent(UInt64.self, forKey: .t)) ?? nil
        }
    }

    struct Decoded {
        let endUserId: String
        let token: SecretBytes
        /// The `g` field: the sign-in's `session_generation`, nil when absent or malformed.
        var generation: String? = nil
        /// The `t` field: the sign-in's `persisted_at` (microseconds since the Unix epoch), nil when absent.
        var persistedAt: UInt64? = nil
    }

    /// Serializes a session; `generation` and `persistedAt` (the item's attributes) are included
    /// as `g` and `t` when given. The returned bytes are wiped when released; the intermediate
    /// encoder buffer is wiped before this returns.
    static func encode(endUserId: String, token: SecretBytes, generation: String? = nil,
                       persistedAt: UInt64? = nil) throws -> SecretBytes {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var data = try encoder.encode(Wire(v: version, clientSessionToken: token.string(), endUserId: endUserId,
                                           g: generation, t: persistedAt))
        defer { data.withUnsafeMutableBytes { SecretBytes.wipe($0.baseAddress, $0.count) } }
        return data.withUnsafeBytes { SecretBytes(copying: $0) }
    }

    /// Decodes a stored secret, or returns nil when it is unusable.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> Decoded? {
        guard !bytes.isEmpty, isValidUTF8(bytes) else { return nil }
        var data = Data(bytes)
        defer { data.withUnsafeMutableBytes { SecretBytes.wipe($0.baseAddress, $0.count) } }
        guard let wire = try? JSONDecoder().decode(Wire.self, from: data),
              wire.v == version,
              let token = wire.clientSessionToken,
              let endUserId = wire.endUserId
        else { return nil }
        // What restore hands out must pass the checks persist applies (no NUL, not blank, within
        // the size limits): a C caller could not receive it whole, and truncating is not allowed.
        let tokenBytes = SecretBytes.copyingUTF8(of: token)
        do {
            try PortalAuth.check(endUserId, name: "endUserId")
            try PortalAuth.checkToken(tokenBytes, name: "clientSessionToken")
        } catch {
            return nil
        }
        return Decoded(endUserId: endUserId, token: tokenBytes,
                       generation: wire.g.flatMap { isGeneration($0) ? $0 : nil }, persistedAt: wire.t)
    }

    /// Whether `bytes` are well-formed UTF-8 (no overlong forms, surrogates or values above
    /// U+10FFFF), checked in place: `String(validating:)` would leave a copy of the whole
    /// document, token included, in a freed heap block that is never wiped.
    private static func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var iterator = bytes.makeIterator()
        var parser = Unicode.UTF8.ForwardParser()
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }

    /// What a `g` field must look like to be used: the attribute value a search by
    /// `session_generation` would match (non-empty, at most 256 bytes, no control characters).
    private static func isGeneration(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= 256 && !value.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }
}
