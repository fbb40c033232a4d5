import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// What the sign-in ledger (`GrantLedger`) files a TOTP exchange under: the SHA-256 digest of the
/// user JWT, computed by libgcrypt (already loaded for the transfer session). The user JWT is a
/// bearer credential, so the ledger never keeps it, only this digest (32 bytes).
///
/// Keyed on the JWT alone, not on the code: Portal spends the JWT when it accepts a code, so once
/// an exchange is accepted, a retry after a failed keyring write must finish that write whatever
/// code the end user types then (a fresh one, most likely). A rejected code leaves no entry, so
/// the same JWT with another code is exchanged. Equal for equal JWTs; immutable and thread-safe.
struct TotpExchangeKey: Hashable, Sendable {
    /// The 32-byte SHA-256 digest.
    let digest: [UInt8]

    /// nil when libgcrypt cannot be used (then no keyring write could succeed either: the
    /// transfer session needs it).
    init?(userJwt: SecretBytes) {
        var handle: gcry_md_hd_t?
        guard Libgcrypt.ready, gcry_md_open(&handle, Int32(GCRY_MD_SHA256.rawValue), 0) == 0,
              let handle else { return nil }
        defer { gcry_md_close(handle) }
        userJwt.withUnsafeBytes { if $0.count > 0 { gcry_md_write(handle, $0.baseAddress, $0.count) } }
        guard let result = gcry_md_read(handle, Int32(GCRY_MD_SHA256.rawValue)) else { return nil }
        digest = Array(UnsafeBufferPointer(start: result, count: 32))
    }
}
