import CGLib
#if canImport(Glibc)
import Glibc
#endif

extension TransferSession {
    /// The primitives of `dh-ietf1024-sha256-aes128-cbc-pkcs7`, on libgcrypt. Every buffer that
    /// holds key material or plaintext is wiped before it is released (`SecretBytes`, and
    /// libgcrypt wipes its MPIs and handles when they are freed). The private exponent is an MPI
    /// in libgcrypt's secure memory (`gcry_mpi_snew`: its locked, wiped pool, and `powm`'s
    /// scratch for a secure exponent with it), not in the ordinary heap (docs/security.md, "The Diffie-Hellman exponent"); the
    /// shared value is an ordinary MPI, wiped when released, and then a `SecretBytes`. Not in a
    /// set-user-ID process (`secureMemory`): libgcrypt drops such a process's privileges when it
    /// sets up its secure pool, which is not a library's decision to make for its host.
    enum Crypto {
        static let blockSize = 16
        static let keySize = 16
        /// Bytes of the group's prime, and of a public key or shared value written out.
        static let groupSize = 128

        /// Whether the exponent goes into libgcrypt's secure memory: yes unless the
        /// process runs set-user-ID (real and effective user differ), where libgcrypt's pool set-up
        /// would reset the effective user.
        static let secureMemory: Bool = getuid() == geteuid()

        /// A new MPI of `bits` for a secret: in secure memory when `secureMemory`.
        static func secretMPI(_ bits: UInt32) -> OpaquePointer {
            secureMemory ? gcry_mpi_snew(bits) : gcry_mpi_new(bits)
        }

        /// The 1024-bit MODP group's prime, RFC 2409 §6.2 ("Second Oakley Group"), in hex.
        private static let primeHex =
            "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A0879"
            + "8E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B"
            + "0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF"

        /// A new MPI holding the prime; the caller releases it.
        private static func prime() -> OpaquePointer? {
            var mpi: OpaquePointer?
            guard gcry_mpi_scan(&mpi, GCRYMPI_FMT_HEX, primeHex, 0, nil) == 0 else { return nil }
            return mpi
        }

        /// This side's Diffie-Hellman key pair for one session.
        final class KeyPair {
            /// The private exponent, in secure memory (internal for `TransferSessionTests`).
            let secret: OpaquePointer
            /// The public value `2^secret mod p`, big-endian, padded to 128 bytes (KWallet refuses
            /// a shorter one: "Client public key size is invalid"). Never starts with 0xFF
            /// (`init(exponents:)`).
            let publicKey: [UInt8]

            /// A key pair with a random exponent below p: 1023 random bits, never zero, drawn into
            /// libgcrypt's secure memory.
            convenience init() throws(StorageFailure.Classified) {
                try self.init(exponents: {
                    let secret: OpaquePointer = Crypto.secretMPI(1024)
                    repeat {
                        gcry_mpi_randomize(secret, 1023, GCRY_STRONG_RANDOM)
                    } while gcry_mpi_cmp_ui(secret, 0) == 0
                    gcry_mpi_clear_highbit(secret, 1023)
                    return secret
                })
            }

            /// A key pair with the first exponent from `draw` (each a new MPI, owned by the key pair
            /// or released here) whose public value does not start with 0xFF.
            ///
            /// KWallet 5.103 reads the client's public value as a signed big integer and writes it
            /// back in its shortest two's-complement form: a value starting 0xFF 0x80–0xFF loses
            /// its first byte, so KWallet derives another key and no secret of the session
            /// decrypts (2 of the 5 such sessions in 2,000 CLI restores; fixed in KWallet in 2026,
            /// KDE bug 514194). About 1 draw in 256 is redrawn; any provider accepts the result.
            init(exponents draw: () -> OpaquePointer) throws(StorageFailure.Classified) {
                guard Libgcrypt.ready, let p = Crypto.prime() else {
                    throw StorageFailure.Classified(kind: .other, message: "could not set up the key exchange")
                }
                defer { gcry_mpi_release(p) }
                let generator = gcry_mpi_set_ui(nil, 2)
                let value = gcry_mpi_new(1024)
                defer {
                    gcry_mpi_release(generator)
                    gcry_mpi_release(value)
                }
                // 64 draws in a row that all start with 0xFF: 1 in 2^512 for random exponents.
                for _ in 0..<64 {
                    let secret = draw()
                    gcry_mpi_powm(value, generator, secret, p)
                    guard let bytes = Crypto.padded(value) else {
                        gcry_mpi_release(secret)
                        throw StorageFailure.Classified(kind: .other, message: "could not write the public key")
                    }
                    if bytes[0] == 0xFF {
                        gcry_mpi_release(secret)
                        continue
                    }
                    self.secret = secret
                    self.publicKey = bytes
                    return
                }
                throw StorageFailure.Classified(kind: .other, message: "could not draw a usable key pair")
            }

            deinit { gcry_mpi_release(secret) }

            /// The shared value `peer^secret mod p` for the provider's public value `peer`, as 128
            /// bytes, zero-padded on the left (the input of the session key's HKDF).
            func sharedValue(peer: UnsafeRawBufferPointer) throws(StorageFailure.Classified) -> SecretBytes {
                let failure = StorageFailure.Classified(kind: .other, message: "the provider's public key is invalid")
                // Leading zero bytes are allowed (KWallet sends 129 bytes when the value's top bit is
                // set: a sign byte); the value itself is range-checked below.
                guard let base = peer.baseAddress, peer.count > 0, peer.count <= 2 * Crypto.groupSize,
                      let p = Crypto.prime() else { throw failure }
                defer { gcry_mpi_release(p) }
                var other: OpaquePointer?
                guard gcry_mpi_scan(&other, GCRYMPI_FMT_USG, base, peer.count, nil) == 0, let other else { throw failure }
                defer { gcry_mpi_release(other) }
                // 1 < peer < p - 1 (a peer of 0, 1 or p - 1 would force a known shared value).
                let limit = gcry_mpi_new(1024)
                gcry_mpi_sub_ui(limit, p, 1)
                let acceptable = gcry_mpi_cmp_ui(other, 1) > 0 && gcry_mpi_cmp(other, limit) < 0
                gcry_mpi_release(limit)
                guard acceptable else { throw failure }
                // An ordinary MPI (libgcrypt wipes it on release): printing a secure one takes a
                // scratch buffer from the secure pool that, unlike an MPI's limbs, never comes
                // from an overflow pool, so a full pool failed the key exchange.
                let shared = gcry_mpi_new(1024)
                defer { gcry_mpi_release(shared) }
                gcry_mpi_powm(shared, other, secret, p)
                var ok = false
                let value = SecretBytes(count: Crypto.groupSize) { buffer in
                    var written = 0
                    guard gcry_mpi_print(GCRYMPI_FMT_USG, buffer.baseAddress, buffer.count, &written, shared) == 0,
                          written <= buffer.count, let start = buffer.baseAddress else { return }
                    // Right-align: the value is zero-padded on the left to the prime's length.
                    if written < buffer.count {
                        memmove(start + (buffer.count - written), start, written)
                        memset(start, 0, buffer.count - written)
                    }
                    ok = true
                }
                guard ok else { throw StorageFailure.Classified(kind: .other, message: "could not write the shared value") }
                return value
            }

            /// The AES key from the provider's public value `peer`: HKDF-SHA256 of `sharedValue(peer:)`,
            /// without salt or info, cut to 16 bytes.
            func sharedKey(peer: UnsafeRawBufferPointer) throws(StorageFailure.Classified) -> SecretBytes {
                try Crypto.sessionKey(sharedValue(peer: peer))
            }
        }

        /// The AES key of a session whose shared value is `shared`: HKDF-SHA256, no salt, no info,
        /// 16 bytes.
        static func sessionKey(_ shared: SecretBytes) throws(StorageFailure.Classified) -> SecretBytes {
            guard let key = hkdfSHA256(shared, count: keySize) else {
                throw StorageFailure.Classified(kind: .other, message: "could not derive the session key")
            }
            return key
        }

        /// `value` as unsigned big-endian bytes, left-padded with zeros to 128.
        static func padded(_ value: OpaquePointer?) -> [UInt8]? {
            var bytes = [UInt8](repeating: 0, count: groupSize)
            var written = 0
            let status = bytes.withUnsafeMutableBytes { gcry_mpi_print(GCRYMPI_FMT_USG, $0.baseAddress, groupSize, &written, value) }
            guard status == 0, written <= groupSize else { return nil }
            if written < groupSize {
                bytes = [UInt8](repeating: 0, count: groupSize - written) + bytes[0..<written]
            }
            return bytes
        }

        /// HKDF-SHA256 (RFC 5869) of `input` with an all-zero salt and empty info; `count` ≤ 32.
        static func hkdfSHA256(_ input: SecretBytes, count: Int) -> SecretBytes? {
            let hashLength = 32
            guard count > 0, count <= hashLength else { return nil }
            let salt = [UInt8](repeating: 0, count: hashLength)
            guard let pseudorandom = salt.withUnsafeBytes({ salt in
                input.withUnsafeBytes { hmacSHA256(key: salt, [$0]) }
            }) else { return nil }
            var counter: UInt8 = 1
            guard let block = pseudorandom.withUnsafeBytes({ key in
                withUnsafeBytes(of: &counter) { hmacSHA256(key: key, [$0]) }
            }) else { return nil }
            return block.withUnsafeBytes { block in
                SecretBytes(copying: UnsafeRawBufferPointer(rebasing: block[0..<count]))
            }
        }

        /// HMAC-SHA256 under `key` of the concatenated `parts`.
        private static func hmacSHA256(key: UnsafeRawBufferPointer, _ parts: [UnsafeRawBufferPointer]) -> SecretBytes? {
            var handle: gcry_md_hd_t?
            guard Libgcrypt.ready, gcry_md_open(&handle, Int32(GCRY_MD_SHA256.rawValue), GCRY_MD_FLAG_HMAC.rawValue) == 0,
                  let handle else { return nil }
            defer { gcry_md_close(handle) }
            guard gcry_md_setkey(handle, key.baseAddress, key.count) == 0 else { return nil }
            for part in parts where part.count > 0 { gcry_md_write(handle, part.baseAddress, part.count) }
            guard let digest = gcry_md_read(handle, Int32(GCRY_MD_SHA256.rawValue)) else { return nil }
            return SecretBytes(copying: UnsafeRawBufferPointer(start: digest, count: 32))
        }

        /// AES-128-CBC of `plaintext`, PKCS#7-padded, under `key` and `iv`.
        static func encrypt(_ plaintext: SecretBytes, key: SecretBytes, iv: [UInt8]) throws(StorageFailure.Classified) -> SecretBytes {
            let padding = blockSize - plaintext.count % blockSize
            var ok = false
            let output = SecretBytes(count: plaintext.count + padding) { buffer in
                guard let base = buffer.baseAddress else { return }
                plaintext.withUnsafeBytes { source in
                    if let from = source.baseAddress { memcpy(base, from, source.count) }
                }
                memset(base + plaintext.count, Int32(padding), padding)
                ok = cipher(key: key, iv: iv) { gcry_cipher_encrypt($0, base, buffer.count, nil, 0) }
            }
            guard ok else { throw StorageFailure.Classified(kind: .other, message: "could not encrypt the secret") }
            return output
        }

        /// The plaintext of AES-128-CBC `ciphertext` under `key` and `iv`, its PKCS#7 padding checked
        /// and removed.
        static func decrypt(_ ciphertext: UnsafeRawBufferPointer, key: SecretBytes,
                            iv: UnsafeRawBufferPointer) throws(StorageFailure.Classified) -> SecretBytes {
            let failure = StorageFailure.Classified(kind: .other, message: "could not decrypt a stored secret")
            guard ciphertext.count > 0, ciphertext.count % blockSize == 0, let source = ciphertext.baseAddress else { throw failure }
            var length = -1
            let padded = SecretBytes(count: ciphertext.count) { buffer in
                guard let base = buffer.baseAddress else { return }
                memcpy(base, source, buffer.count)
                guard cipher(key: key, iv: Array(iv), { gcry_cipher_decrypt($0, base, buffer.count, nil, 0) }) else { return }
                let padding = Int(base[buffer.count - 1])
                guard padding >= 1, padding <= blockSize,
                      buffer[(buffer.count - padding)...].allSatisfy({ Int($0) == padding }) else { return }
                length = buffer.count - padding
            }
            guard length >= 0 else { throw failure }
            return padded.withUnsafeBytes { SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
        }

        /// Runs `body` with an AES-128-CBC handle keyed with `key` and `iv`; false on any failure.
        private static func cipher(key: SecretBytes, iv: [UInt8], _ body: (OpaquePointer) -> gcry_error_t) -> Bool {
            var handle: OpaquePointer?
            guard Libgcrypt.ready, gcry_cipher_open(&handle, Int32(GCRY_CIPHER_AES.rawValue), Int32(GCRY_CIPHER_MODE_CBC.rawValue), 0) == 0,
                  let handle else { return false }
            defer { gcry_cipher_close(handle) }
            let keyed = key.withUnsafeBytes { gcry_cipher_setkey(handle, $0.baseAddress, $0.count) } == 0
            guard keyed, iv.withUnsafeBytes({ gcry_cipher_setiv(handle, $0.baseAddress, $0.count) }) == 0 else { return false }
            return body(handle) == 0
        }

        /// A floating `ay` variant holding a copy of `bytes`.
        static func byteArray(_ bytes: UnsafeRawBufferPointer) -> OpaquePointer {
            g_variant_new_fixed_array(Variant.type("y"), bytes.baseAddress, gsize(bytes.count), 1)
        }
    }
}
