import CGLib

/// libgcrypt, which the transfer session (`TransferSession.Crypto`), the file keyring's key
/// (`FileKeyringKey`) and the TOTP exchange key (`TotpExchangeKey`) use.
enum Libgcrypt {
    /// Whether libgcrypt is initialized (once per process, only if nobody else did it). Checked
    /// before every use: libgcrypt must be initialized before its first call from any thread.
    static let ready: Bool = portal_gcrypt_initialize() != 0
}
