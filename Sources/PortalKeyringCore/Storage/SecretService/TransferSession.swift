import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// A Secret Service transfer session: the key that secrets crossing the bus are encrypted with.
///
/// Negotiated with `Service.OpenSession` as the Secret Service API specifies for the algorithm
/// `dh-ietf1024-sha256-aes128-cbc-pkcs7` ("Transfer of Secrets"): Diffie-Hellman over the
/// 1024-bit MODP group of RFC 2409 §6.2 (generator 2), the shared value (padded to 128 bytes)
/// through HKDF-SHA256 (RFC 5869, no salt, no info) into a 16-byte AES-128 key, each secret
/// encrypted with AES-128-CBC under a fresh random 16-byte IV, PKCS#7-padded. The arithmetic,
/// hash, cipher and random numbers are libgcrypt's (the library libsecret and gnome-keyring use,
/// already loaded with libsecret); only the protocol's glue is here.
///
/// The session is the library's own because libsecret's `SecretService` can only be created on
/// GLib's shared session-bus connection, which belongs to the host application (see
/// `ServiceConnection`), and a transfer session is bound to the connection that opened it.
///
/// A provider that offers no encryption (OpenSession answers NotSupported) gets no session at
/// all: every call fails with "no encrypted transfer session", unlike libsecret, which falls back
/// to `plain` and sends secrets in clear. `algorithm` is shown by `portal-session status`; `plain`
/// remains only for sessions built by tests.
///
/// Immutable after opening; `encode` and `decode` may run on any thread at once.
final class TransferSession: @unchecked Sendable {
    static let encryptedAlgorithm = "dh-ietf1024-sha256-aes128-cbc-pkcs7"
    static let plainAlgorithm = "plain"
    static let noEncryption = "the provider offers no encrypted transfer session (only plain), and the session is never sent in clear"

    /// The session's object path on the provider.
    let path: String
    /// `encryptedAlgorithm` or `plainAlgorithm`.
    let algorithm: String
    /// The AES-128 key; nil for a plain session.
    private let key: SecretBytes?

    init(path: String, algorithm: String, key: SecretBytes?) {
        self.path = path
        self.algorithm = algorithm
        self.key = key
    }

    /// Opens a session through `openSession`, which makes the `Service.OpenSession` call with the
    /// algorithm name and the (floating) input variant and returns the reply `(vo)`, nil when the
    /// provider answers NotSupported, or throws. `close` sends `Session.Close` for a session
    /// opened and then given up.
    ///
    /// A session whose shared value starts with a zero byte (1 in 256) is closed and another one
    /// opened: KWallet 5.103 drops leading zero bytes before its HKDF, so its key differs and
    /// none of the session's secrets decrypt (9 of 9 such sessions in 2,000 CLI restores; KDE bug
    /// 514194, fixed in 2026). Together with the public values `Crypto.KeyPair` never offers,
    /// that was every session KWallet garbled in that run.
    static func open(_ openSession: (String, OpaquePointer) throws(StorageFailure.Classified) -> OpaquePointer?,
                     close: (String) -> Void) throws(StorageFailure.Classified) -> TransferSession {
        guard Libgcrypt.ready else {
            throw StorageFailure.Classified(kind: .other, message: "libgcrypt is older than the version built against")
        }
        // Eight sessions in a row with a leading zero byte: 1 in 2^64.
        for _ in 0..<8 {
            let keys = try Crypto.KeyPair()
            let offered = keys.publicKey.withUnsafeBytes { Crypto.byteArray($0) }
            guard let reply = try openSession(encryptedAlgorithm, g_variant_new_variant(offered)) else {
                // Never the "plain" fallback libsecret makes: every process on the bus could read the
                // session (docs/api.md#failures-and-deadlines: the token never crosses the bus in clear).
                throw StorageFailure.Classified(kind: .other, message: noEncryption)
            }
            defer { g_variant_unref(reply) }
            guard let path = Variant.string(reply, 1) else { throw SecretBus.unexpected("OpenSession") }
            guard let boxed = Variant.child(reply, 0), let output = Variant.unboxed(boxed) else {
                close(path)
                throw SecretBus.unexpected("OpenSession")
            }
            g_variant_unref(boxed)
            defer { g_variant_unref(output) }
            guard let peer = Variant.bytes(output) else {
                close(path)
                throw StorageFailure.Classified(kind: .other, message: "the provider's session output is not a byte array")
            }
            let shared: SecretBytes
            do throws(StorageFailure.Classified) {
                shared = try keys.sharedValue(peer: peer)
            } catch {
                close(path)
                throw error
            }
            if shared.withUnsafeBytes({ $0[0] == 0 }) {
                close(path)
                continue
            }
            return TransferSession(path: path, algorithm: encryptedAlgorithm, key: try Crypto.sessionKey(shared))
        }
        throw StorageFailure.Classified(kind: .other, message: "could not agree on a transfer session key")
    }

    /// The Secret Service `Secret` struct `(oayays)` carrying `secret`, encrypted under this
    /// session, as a floating variant.
    func encode(_ secret: SecretBytes, contentType: String) throws(StorageFailure.Classified) -> OpaquePointer {
        guard let key else {
            let value = secret.withUnsafeBytes { Crypto.byteArray($0) }
            return Variant.tuple([g_variant_new_object_path(path), Crypto.byteArray(UnsafeRawBufferPointer(start: nil, count: 0)),
                                  value, g_variant_new_string(contentType)])
        }
        guard Libgcrypt.ready else { throw StorageFailure.Classified(kind: .other, message: "libgcrypt is not usable") }
        var iv = [UInt8](repeating: 0, count: Crypto.blockSize)
        gcry_create_nonce(&iv, iv.count)
        let ciphertext = try Crypto.encrypt(secret, key: key, iv: iv)
        return iv.withUnsafeBytes { iv in
            ciphertext.withUnsafeBytes { ciphertext in
                Variant.tuple([g_variant_new_object_path(path), Crypto.byteArray(iv), Crypto.byteArray(ciphertext),
                               g_variant_new_string(contentType)])
            }
        }
    }

    /// The secret carried by `secret`, a `(oayays)` struct from GetSecrets, decrypted into wiped
    /// memory. Throws when it was not made for this session or does not decrypt.
    func decode(_ secret: OpaquePointer) throws(StorageFailure.Classified) -> SecretBytes {
        guard Variant.has(secret, type: "(oayays)"), Variant.string(secret, 0) == path else {
            throw StorageFailure.Classified(kind: .other, message: "a secret arrived for another transfer session")
        }
        guard let parameters = Variant.child(secret, 1) else { throw SecretBus.unexpected("GetSecrets") }
        defer { g_variant_unref(parameters) }
        guard let value = Variant.child(secret, 2) else { throw SecretBus.unexpected("GetSecrets") }
        defer { g_variant_unref(value) }
        guard let iv = Variant.bytes(parameters), let body = Variant.bytes(value) else {
            throw SecretBus.unexpected("GetSecrets")
        }
        guard let key else { return SecretBytes(copying: body) }
        guard iv.count == Crypto.blockSize else {
            throw StorageFailure.Classified(kind: .other, message: "could not decrypt a stored secret: no 16-byte IV")
        }
        return try Crypto.decrypt(body, key: key, iv: iv)
    }
}
