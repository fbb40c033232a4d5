/// The secret stored in each keyring item (docs/storage.md#the-document), version 2:
///
///     portal-keyring-session/2 e=<auth environment> u=<end user id> g=<generation> t=<persisted_at> c=<CST>
///
/// One line of printable ASCII without a line end: `e`, `u` and `c` are base64url without padding
/// (RFC 4648 §5) of the UTF-8 bytes, `g` is the item's `session_generation` (lower-case hex), `t`
/// its `persisted_at` (decimal microseconds since the Unix epoch). Content type
/// `application/octet-stream`.
///
/// Why this shape (docs/providers.md): providers rewrite what they take for text. KeePassXC turns a secret
/// whose content type is `text/*`, or derives from `text/plain` in shared-mime-info (as
/// `application/json` does), into an entry password; gnome-keyring's passwordless keyring writes
/// secrets raw into a key file and unescapes `\\`, `\n` and `\t` on load. A base64url document
/// has no backslash, line end or tab, so every token of 1–65536 bytes comes back byte-exact.
/// It names its auth environment, so a provider whose search over-matches cannot make a restore
/// return another environment's session, and `g`/`t` let a restore name and rank the sign-in it
/// read from the one GetSecrets call, without reading attributes.
///
/// Version 1 (`{"clientSessionToken":…,"endUserId":…,"g":…,"t":…,"v":1}`, `application/json`,
/// written by 0.1.0) is still read; the next persist writes version 2. It does not name its auth
/// environment, so the caller confirms that from the item's attributes.
///
/// Decoding is total: anything that is not exactly a version-2 or version-1 document with a
/// non-empty end user id and token (valid UTF-8, passing the checks persist applies) is
/// *unusable*, which `restoreSession()` answers by deleting the item (once its attributes show it
/// is ours) and reporting signed out — except a document of a *newer* version (`isNewerVersion`),
/// which is not ours to judge: it is reported as signed out and kept, for the newer copy of the
/// library that wrote it (docs/storage.md#read-policy).
enum SessionDocument {
    static let contentType = "application/octet-stream"
    /// The newest version this library reads and writes.
    static let currentVersion = 2
    private static let magicPrefix = "portal-keyring-session/"
    private static let magic = magicPrefix + String(decimal: UInt64(currentVersion))

    struct Decoded {
        /// 2, or 1 for a document written by 0.1.0.
        let version: Int
        /// The auth environment the document names; nil for version 1 (it names none).
        let authEnvironmentId: String?
        let endUserId: String
        let token: SecretBytes
        /// The sign-in's `session_generation`, nil when absent (version 1 may lack it).
        var generation: String? = nil
        /// The sign-in's `persisted_at` (microseconds since the Unix epoch), nil when absent.
        var persistedAt: UInt64? = nil
    }

    /// Serializes a version-2 document. The returned bytes are wiped when released; no other
    /// copy of the token is made.
    static func encode(authEnvironmentId: String, endUserId: String, token: SecretBytes,
                       generation: String, persistedAt: UInt64) -> SecretBytes {
        var head = Array(magic.utf8)
        head += Array(" e=".utf8) + Base64URL.encode(Array(authEnvironmentId.utf8))
        head += Array(" u=".utf8) + Base64URL.encode(Array(endUserId.utf8))
        head += Array(" g=".utf8) + Array(generation.utf8)
        head += Array(" t=".utf8) + Array(String(persistedAt).utf8)
        head += Array(" c=".utf8)
        let total = head.count + Base64URL.encodedCount(token.count)
        return SecretBytes(count: total) { out in
            out.baseAddress!.initialize(from: head, count: head.count)  // trusted: our own buffer, never empty (head alone is > 0 bytes)
            token.withUnsafeBytes { Base64URL.encode($0, into: UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: out[head.count...]))) }
        }
    }

    /// The longest version-2 document: every field at its longest (an identifier of
    /// `ArgumentRules.maxIdentifierBytes`, a token of `ArgumentRules.maxTokenBytes`, base64url;
    /// `g` 64 hex digits, `t` 20 digits): 92,967 bytes.
    static let maximumVersion2Bytes = magic.utf8.count + 5 * 3 + 2 * Base64URL.encodedCount(ArgumentRules.maxIdentifierBytes)
        + 64 + 20 + Base64URL.encodedCount(ArgumentRules.maxTokenBytes)
    /// The longest version-1 (JSON) document read: the token and end user id at their longest
    /// with every byte written as a `\u00XX` escape (6 bytes), plus 4 KiB for the keys, `v`,
    /// `g`, `t` and white space: 409,600 bytes (400 KiB). 0.1.0 wrote nothing longer.
    static let maximumVersion1Bytes = 6 * (ArgumentRules.maxTokenBytes + ArgumentRules.maxIdentifierBytes) + 4096

    /// What a stored secret is to this library, judged in one pass (docs/security.md, "A planted oversized item": an
    /// unusable document used to be parsed twice, once to decode it and once to ask whether a
    /// newer version wrote it).
    enum Reading {
        /// A document this version restores.
        case usable(Decoded)
        /// A newer version's document: not ours to judge, never deleted (docs/storage.md#read-policy).
        case newerVersion
        /// Anything else: deleted by a restore when it ranks above the usable sign-in.
        case unusable
    }

    /// Judges a stored secret. A document longer than its form's longest (`maximumVersion2Bytes`,
    /// `maximumVersion1Bytes`) is unusable without being parsed, so a planted one costs no more
    /// than reading its length; the text form of a newer version is recognized by its first
    /// bytes whatever its length, a JSON one only within the cap (no version writes JSON since 1).
    static func read(_ bytes: UnsafeRawBufferPointer) -> Reading {
        guard !bytes.isEmpty else { return .unusable }
        if bytes.first == UInt8(ascii: "{") {
            guard bytes.count <= maximumVersion1Bytes else { return .unusable }
            return readVersion1(bytes)
        }
        if bytes.count <= maximumVersion2Bytes, let decoded = decodeVersion2(bytes) { return .usable(decoded) }
        return isNewerTextVersion(bytes) ? .newerVersion : .unusable
    }

    /// Decodes a stored secret, or returns nil when it is unusable (`read`).
    static func decode(_ bytes: UnsafeRawBufferPointer) -> Decoded? {
        if case .usable(let decoded) = read(bytes) { return decoded }
        return nil
    }

    /// Whether `bytes` is a document of a version newer than `currentVersion`: the text form
    /// `portal-keyring-session/<N>` (N > 2, followed by a space or the end), or a JSON document
    /// (within `maximumVersion1Bytes`) whose `v` is an integer above 2. Such a document is never
    /// deleted as unusable (`read`).
    static func isNewerVersion(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if case .newerVersion = read(bytes) { return true }
        return false
    }

    /// The text form of a newer version: `portal-keyring-session/<N>`, N > 2, then a space or the end.
    private static func isNewerTextVersion(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let prefix = Array(magicPrefix.utf8)
        guard bytes.count > prefix.count, bytes.starts(with: prefix) else { return false }
        let digits = bytes[prefix.count...].prefix { (0x30...0x39).contains($0) }
        let end = prefix.count + digits.count
        guard !digits.isEmpty, end == bytes.count || bytes[end] == UInt8(ascii: " ") else { return false }
        // A version too long for Int is newer than any we know.
        guard let version = Int(String(decoding: digits, as: UTF8.self)) else { return digits.first != 0x30 }
        return version > currentVersion
    }

    // MARK: - Version 2

    private static func decodeVersion2(_ bytes: UnsafeRawBufferPointer) -> Decoded? {
        // Fields are split on single spaces; base64url and the other fields contain none.
        var fields: [UnsafeRawBufferPointer] = []
        var start = 0
        for index in 0...bytes.count where index == bytes.count || bytes[index] == UInt8(ascii: " ") {
            fields.append(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
            start = index + 1
        }
        guard fields.count == 6, equal(fields[0], magic) else { return nil }
        func value(_ field: UnsafeRawBufferPointer, _ key: UInt8) -> UnsafeRawBufferPointer? {
            guard field.count >= 2, field[0] == key, field[1] == UInt8(ascii: "=") else { return nil }
            return UnsafeRawBufferPointer(rebasing: field[2...])
        }
        guard let e = value(fields[1], UInt8(ascii: "e")), let u = value(fields[2], UInt8(ascii: "u")),
              let g = value(fields[3], UInt8(ascii: "g")), let t = value(fields[4], UInt8(ascii: "t")),
              let c = value(fields[5], UInt8(ascii: "c")),
              let environment = Base64URL.decodeString(e), let endUserId = Base64URL.decodeString(u),
              !g.isEmpty, g.count <= 64, g.allSatisfy({ isLowerHex($0) }),
              !t.isEmpty, t.count <= 20, t.allSatisfy({ (0x30...0x39).contains($0) }),
              let persistedAt = UInt64(String(decoding: t, as: UTF8.self)),
              let token = Base64URL.decode(c), isValidUTF8(token)
        else { return nil }
        return usable(Decoded(version: 2, authEnvironmentId: environment, endUserId: endUserId, token: token,
                              generation: String(decoding: g, as: UTF8.self), persistedAt: persistedAt))
    }

    private static func isLowerHex(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x61...0x66).contains(byte)
    }

    private static func equal(_ bytes: UnsafeRawBufferPointer, _ string: String) -> Bool {
        bytes.elementsEqual(string.utf8)
    }

    // MARK: - Version 1 (0.1.0), read only

    /// Version 1, `{"v":1,"clientSessionToken":…,"endUserId":…,"g":…,"t":…}` (JSONText): `v`
    /// must be the integer 1; the token and end user, when present, strings (another type makes
    /// the document unusable); `g` and `t` tolerant (a wrong type reads as absent, never as
    /// unusable). The token goes from the stored bytes straight into `SecretBytes`.
    /// A JSON document, parsed once: a `v` above 2 is a newer version's (never deleted).
    private static func readVersion1(_ bytes: UnsafeRawBufferPointer) -> Reading {
        guard isValidUTF8(bytes) else { return .unusable }
        let reading = try? JSONText.read(bytes) { root -> Reading in
            let version = root.member("v")?.int64
            if let version, version > Int64(currentVersion) { return .newerVersion }
            guard version == 1,
                  let token = root.member("clientSessionToken"), let count = token.unescapedCount,
                  let endUserId = root.member("endUserId")?.string
            else { return .unusable }
            let generation = root.member("g")?.string.flatMap { isGeneration($0) ? $0 : nil }
            let persistedAt = root.member("t")?.int64.flatMap { $0 >= 0 ? UInt64($0) : nil }
            let decoded = Decoded(version: 1, authEnvironmentId: nil, endUserId: endUserId,
                                  token: SecretBytes(count: count) { token.unescape(into: UnsafeMutableRawBufferPointer($0)) },
                                  generation: generation, persistedAt: persistedAt)
            return usable(decoded).map { .usable($0) } ?? .unusable
        }
        return reading ?? .unusable
    }

    /// What a version-1 `g` field must look like to be used: the attribute value a search by
    /// `session_generation` would match (non-empty, at most 256 bytes, no control characters).
    private static func isGeneration(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= 256 && !value.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }

    // MARK: - Shared checks

    /// What restore hands out must pass the checks persist applies (`ArgumentRules`: no NUL, not
    /// blank, within the size limits): a C caller could not receive it whole, and truncating is
    /// not allowed.
    private static func usable(_ decoded: Decoded) -> Decoded? {
        if let environment = decoded.authEnvironmentId, !ArgumentRules.isIdentifier(environment) { return nil }
        guard ArgumentRules.isIdentifier(decoded.endUserId), ArgumentRules.isToken(decoded.token) else { return nil }
        return decoded
    }

    /// Whether `bytes` are well-formed UTF-8 (no overlong forms, surrogates or values above
    /// U+10FFFF), checked in place: `String(validating:)` would leave a copy of the whole
    /// document, token included, in a freed heap block that is never wiped.
    static func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
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

    static func isValidUTF8(_ bytes: SecretBytes) -> Bool {
        bytes.withUnsafeBytes { isValidUTF8($0) }
    }
}

/// base64url without padding (RFC 4648 §5), for the session document: the token is decoded
/// straight into wiped memory (`SecretBytes`), with no intermediate copy.
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encodedCount(_ count: Int) -> Int { (count * 4 + 2) / 3 }

    static func encode(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: encodedCount(bytes.count))
        bytes.withUnsafeBytes { source in out.withUnsafeMutableBytes { encode(source, into: $0) } }
        return out
    }

    /// Writes `encodedCount(source.count)` bytes to `out`.
    static func encode(_ source: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) {
        var o = 0
        var i = 0
        while i + 3 <= source.count {
            let n = UInt32(source[i]) << 16 | UInt32(source[i + 1]) << 8 | UInt32(source[i + 2])
            for shift in [18, 12, 6, 0] { out[o] = alphabet[Int(n >> UInt32(shift) & 63)]; o += 1 }
            i += 3
        }
        let rest = source.count - i
        if rest > 0 {
            let n = UInt32(source[i]) << 16 | (rest == 2 ? UInt32(source[i + 1]) << 8 : 0)
            for shift in [18, 12, 6].prefix(rest + 1) { out[o] = alphabet[Int(n >> UInt32(shift) & 63)]; o += 1 }
        }
    }

    private static func value(_ byte: UInt8) -> UInt32? {
        switch byte {
        case 0x41...0x5A: return UInt32(byte - 0x41)
        case 0x61...0x7A: return UInt32(byte - 0x61 + 26)
        case 0x30...0x39: return UInt32(byte - 0x30 + 52)
        case UInt8(ascii: "-"): return 62
        case UInt8(ascii: "_"): return 63
        default: return nil
        }
    }

    /// Decodes into wiped memory; nil for anything but canonical unpadded base64url.
    static func decode(_ text: UnsafeRawBufferPointer) -> SecretBytes? {
        if text.count % 4 == 1 { return nil }
        let count = text.count / 4 * 3 + max(text.count % 4 - 1, 0)
        var ok = true
        let result = SecretBytes(count: count) { out in
            var o = 0
            var i = 0
            while i < text.count && ok {
                let chunk = min(4, text.count - i)
                var n: UInt32 = 0
                for k in 0..<4 {
                    guard k < chunk else { n <<= 6; continue }
                    guard let v = value(text[i + k]) else { ok = false; break }
                    n = n << 6 | v
                }
                if !ok { break }
                let produced = chunk - 1
                for k in 0..<produced { out[o + k] = UInt8(truncatingIfNeeded: n >> UInt32(16 - 8 * k)) }
                // Canonical: the unused low bits of the last character are zero.
                if chunk < 4, n & (chunk == 2 ? 0xFFFF : 0xFF) != 0 { ok = false }
                o += produced
                i += 4
            }
        }
        return ok ? result : nil
    }

    /// Decodes a non-secret UTF-8 string.
    static func decodeString(_ text: UnsafeRawBufferPointer) -> String? {
        guard let bytes = decode(text), SessionDocument.isValidUTF8(bytes) else { return nil }
        return bytes.string()
    }
}
