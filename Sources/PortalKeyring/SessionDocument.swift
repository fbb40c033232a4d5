import FoundationEssentials

/// The secret stored in each keyring item: a versioned JSON document (SPEC §2),
/// `{"v":1,"clientSessionToken":"…","endUserId":"…"}`, content type `application/json`.
///
/// Decoding is total: anything that is not exactly a version-1 document with both fields
/// non-empty (invalid UTF-8, invalid JSON, unknown `v`, a missing or empty field) is
/// *unusable*, which `restoreSession()` answers by deleting the item and reporting signed out.
enum SessionDocument {
    static let version = 1
    static let contentType = "application/json"

    private struct Wire: Codable {
        var v: Int
        var clientSessionToken: String?
        var endUserId: String?
    }

    struct Decoded {
        let endUserId: String
        let token: SecretBytes
    }

    /// Serializes a session. The returned bytes are wiped when released; the intermediate
    /// encoder buffer is wiped before this returns.
    static func encode(endUserId: String, token: SecretBytes) throws -> SecretBytes {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var data = try encoder.encode(Wire(v: version, clientSessionToken: token.string(), endUserId: endUserId))
        defer { data.withUnsafeMutableBytes { SecretBytes.wipe($0.baseAddress, $0.count) } }
        return data.withUnsafeBytes { SecretBytes(copying: $0) }
    }

    /// Decodes a stored secret, or returns nil when it is unusable.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> Decoded? {
        guard !bytes.isEmpty,
              String(validating: bytes.bindMemory(to: UInt8.self), as: UTF8.self) != nil
        else { return nil }
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
        return Decoded(endUserId: endUserId, token: tokenBytes)
    }
}
