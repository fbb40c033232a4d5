import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// The key of one file keyring and the item cryptography done with it, on libgcrypt
/// (`FileKeyringFormat` has the layout this follows).
///
/// The key is PBKDF2-HMAC-SHA256 of the 64-byte master secret (the Secret portal's per-app
/// secret) over the file's salt and iteration count, 16 bytes: an AES-128 key that is also the
/// HMAC-SHA256 key of the attribute hashes and the item MACs. It lives in `SecretBytes` (wiped);
/// so does every plaintext this type makes. A key belongs to the salt and iteration count it was
/// derived for (`FileKeyring.add` checks that).
final class FileKeyringKey: Sendable {
    static let keySize = 16
    static let blockSize = 16
    static let ivSize = 16
    static let macSize = 32

    let key: SecretBytes
    let salt: [UInt8]
    let iterations: UInt32

    /// Whether libgcrypt is initialized: the process's one initialization (`Libgcrypt`), shared
    /// with the transfer session, so that it happens once whichever storage runs first.
    static var ready: Bool { Libgcrypt.ready }

    /// Derives the key from `masterSecret` (any length; the portal's is 64 bytes) for `salt` and
    /// `iterations`. The cost grows with `iterations`, which a file supplies: the bounds of
    /// `FileKeyringFormat.iterationRange` keep a planted file from stalling an operation.
    init(masterSecret: SecretBytes, salt: [UInt8], iterations: UInt32) throws(FileKeyringError) {
        guard FileKeyringKey.ready else { throw .crypto("libgcrypt could not be initialized") }
        guard !salt.isEmpty, iterations > 0 else { throw .crypto("no salt or no iterations for the key derivation") }
        var status: gcry_error_t = 1
        let derived = SecretBytes(count: FileKeyringKey.keySize) { out in
            status = masterSecret.withUnsafeBytes { secret in
                salt.withUnsafeBytes { salt in
                    gcry_kdf_derive(secret.baseAddress, secret.count, Int32(GCRY_KDF_PBKDF2.rawValue),
                                    Int32(GCRY_MD_SHA256.rawValue), salt.baseAddress, salt.count,
                                    UInt(iterations), out.count, out.baseAddress)
                }
            }
        }
        guard status == 0 else { throw .crypto("PBKDF2 failed (libgcrypt error \(status))") }
        self.key = derived
        self.salt = salt
        self.iterations = iterations
    }

    /// `count` random bytes from libgcrypt's strong generator (salts and IVs).
    static func random(_ count: Int) throws(FileKeyringError) -> [UInt8] {
        guard ready else { throw .crypto("libgcrypt could not be initialized") }
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { gcry_randomize($0.baseAddress, $0.count, GCRY_STRONG_RANDOM) }
        return bytes
    }

    // MARK: - Attribute hashes

    /// HMAC-SHA256 under the key of an attribute value's UTF-8: how the file stores attribute
    /// values in clear-text items (the names stay readable).
    func hash(attributeValue value: String) throws(FileKeyringError) -> [UInt8] {
        try mac(Array(value.utf8))
    }

    // MARK: - Items

    /// The blob of an item whose serialized plaintext is `plaintext`: AES-128-CBC under the key
    /// with a fresh random IV over the PKCS#7-padded plaintext, then the IV, then HMAC-SHA256 of
    /// ciphertext ‖ IV.
    func seal(_ plaintext: SecretBytes) throws(FileKeyringError) -> [UInt8] {
        let iv = try FileKeyringKey.random(FileKeyringKey.ivSize)
        let padding = FileKeyringKey.blockSize - plaintext.count % FileKeyringKey.blockSize
        let length = plaintext.count + padding
        // Padded in wiped memory, encrypted in place: the blob then holds only ciphertext.
        var ok = false
        let padded = SecretBytes(count: length) { buffer in
            guard let base = buffer.baseAddress else { return }
            plaintext.withUnsafeBytes { source in
                if let from = source.baseAddress { memcpy(base, from, source.count) }
            }
            memset(base + plaintext.count, Int32(padding), padding)
            ok = cipher(iv: iv) { gcry_cipher_encrypt($0, base, length, nil, 0) }
        }
        guard ok else { throw .crypto("AES-128-CBC encryption failed") }
        var blob = padded.withUnsafeBytes { Array($0) }
        blob += iv
        return blob + (try mac(blob))
    }

    /// The serialized plaintext of `blob` when it was sealed under this key; nil when its MAC
    /// does not verify (another key, or a changed byte) or its padding is not strict PKCS#7. The
    /// MAC is checked first, in constant time (`gcry_mac_verify`), and nothing is decrypted
    /// unless it verifies. Throws only when libgcrypt itself fails. The blob's sizes are checked
    /// here too (ciphertext a non-empty multiple of 16, IV 16, MAC 32), whatever the caller did.
    func open(_ blob: [UInt8]) throws(FileKeyringError) -> SecretBytes? {
        guard FileKeyringKey.isWellFormed(blob: blob.count) else { return nil }
        let cipherLength = blob.count - FileKeyringKey.ivSize - FileKeyringKey.macSize
        guard try verify(blob, signedCount: cipherLength + FileKeyringKey.ivSize) else { return nil }
        let iv = Array(blob[cipherLength..<(cipherLength + FileKeyringKey.ivSize)])
        var length = -1
        var failed = false
        let padded = SecretBytes(count: cipherLength) { buffer in
            guard let base = buffer.baseAddress else { return }
            _ = blob.withUnsafeBytes { memcpy(base, $0.baseAddress!, cipherLength) }  // trusted: cipherLength ≥ 16 checked above
            guard cipher(iv: iv, { gcry_cipher_decrypt($0, base, cipherLength, nil, 0) }) else {
                failed = true
                return
            }
            let padding = Int(base[cipherLength - 1])
            guard padding >= 1, padding <= FileKeyringKey.blockSize,
                  buffer[(cipherLength - padding)...].allSatisfy({ Int($0) == padding }) else { return }
            length = cipherLength - padding
        }
        if failed { throw .crypto("AES-128-CBC decryption failed") }
        guard length >= 0 else { return nil }
        return padded.withUnsafeBytes { SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
    }

    /// Whether a blob of `count` bytes has the layout ciphertext (a non-empty multiple of the
    /// block size) ‖ IV (16) ‖ MAC (32).
    static func isWellFormed(blob count: Int) -> Bool {
        let cipherLength = count - ivSize - macSize
        return cipherLength >= blockSize && cipherLength % blockSize == 0
    }

    // MARK: - libgcrypt

    /// HMAC-SHA256 under the key of `message`.
    private func mac(_ message: [UInt8]) throws(FileKeyringError) -> [UInt8] {
        let tag = message.withUnsafeBytes { message in
            withMAC(message) { handle -> [UInt8]? in
                var tag = [UInt8](repeating: 0, count: FileKeyringKey.macSize)
                var length = tag.count
                let status = tag.withUnsafeMutableBytes { gcry_mac_read(handle, $0.baseAddress, &length) }
                return status == 0 && length == FileKeyringKey.macSize ? tag : nil
            }
        }
        guard let tag = tag ?? nil else { throw .crypto("HMAC-SHA256 failed") }
        return tag
    }

    /// Whether the last 32 bytes of `blob` are HMAC-SHA256 under the key of its first
    /// `signedCount` bytes, compared in constant time by libgcrypt (`gcry_mac_verify`).
    private func verify(_ blob: [UInt8], signedCount: Int) throws(FileKeyringError) -> Bool {
        guard blob.count == signedCount + FileKeyringKey.macSize else { return false }
        let verified = blob.withUnsafeBytes { all in
            withMAC(UnsafeRawBufferPointer(rebasing: all[0..<signedCount])) { handle in
                gcry_mac_verify(handle, all.baseAddress! + signedCount, FileKeyringKey.macSize) == 0  // trusted: count checked above
            }
        }
        guard let verified else { throw .crypto("HMAC-SHA256 failed") }
        return verified
    }

    /// `body` run on an HMAC-SHA256 handle keyed with the key and fed `message`; nil when
    /// libgcrypt fails before `body` runs.
    private func withMAC<R>(_ message: UnsafeRawBufferPointer, _ body: (gcry_mac_hd_t) -> R) -> R? {
        var handle: gcry_mac_hd_t?
        guard FileKeyringKey.ready, gcry_mac_open(&handle, Int32(GCRY_MAC_HMAC_SHA256.rawValue), 0, nil) == 0,
              let handle else { return nil }
        defer { gcry_mac_close(handle) }
        guard key.withUnsafeBytes({ gcry_mac_setkey(handle, $0.baseAddress, $0.count) }) == 0 else { return nil }
        if message.count > 0 {
            guard gcry_mac_write(handle, message.baseAddress, message.count) == 0 else { return nil }
        }
        return body(handle)
    }

    /// Runs `body` with an AES-128-CBC handle keyed with the key and `iv`; false on any failure.
    private func cipher(iv: [UInt8], _ body: (OpaquePointer) -> gcry_error_t) -> Bool {
        var handle: OpaquePointer?
        guard FileKeyringKey.ready,
              gcry_cipher_open(&handle, Int32(GCRY_CIPHER_AES.rawValue), Int32(GCRY_CIPHER_MODE_CBC.rawValue), 0) == 0,
              let handle else { return false }
        defer { gcry_cipher_close(handle) }
        guard key.withUnsafeBytes({ gcry_cipher_setkey(handle, $0.baseAddress, $0.count) }) == 0,
              iv.withUnsafeBytes({ gcry_cipher_setiv(handle, $0.baseAddress, $0.count) }) == 0 else { return false }
        return body(handle) == 0
    }
}
