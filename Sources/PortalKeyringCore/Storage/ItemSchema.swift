#if canImport(Glibc)
import Glibc
#endif

/// The item schema both backends store sessions under (docs/storage.md#the-item): the vendor schema
/// `io.portalhq.PortalKeyring.Session` (flags `SECRET_SCHEMA_NONE`, so `xdg:schema` must match and
/// other applications' look-alike items are never seen) with the attributes
/// `auth_environment_id`, `session_generation` and `persisted_at`, and the label and values a new
/// item gets. The Secret Service adapter (`SecretServiceStorage`) and the file keyring
/// (`FileKeyringStorage`) search, confirm and read items through it alone; persist
/// (`PortalAuth`) and the move of the host's session (`HostKeyringMigration`) name new items
/// through it.
enum ItemSchema {
    static let name = "io.portalhq.PortalKeyring.Session"
    static let authEnvironmentAttribute = "auth_environment_id"
    static let generationAttribute = "session_generation"
    static let persistedAtAttribute = "persisted_at"

    /// The search attributes for this schema's items of one auth environment: `xdg:schema` first
    /// (what `SECRET_SCHEMA_NONE` means: other schemas' look-alike items never match).
    static func match(_ authEnvironmentId: String) -> [(String, String)] {
        [("xdg:schema", name), (authEnvironmentAttribute, authEnvironmentId)]
    }

    /// Whether an item's attributes make it this schema's item of `authEnvironmentId` (restore,
    /// clear, persist's cleanup and the watch all ask this): both compared for equality,
    /// whatever the provider's search matched (KeePassXC's also returns
    /// values that are ours plus a line end: docs/providers.md "Searches that over-match").
    static func isOurs(_ attributes: [String: String], _ authEnvironmentId: String) -> Bool {
        attributes["xdg:schema"] == name && attributes[authEnvironmentAttribute] == authEnvironmentId
    }

    /// The item at `path` as its attributes describe it (`session_generation`, `persisted_at`;
    /// 0 when absent or not a number), with `secret` when it was read.
    static func storedItem(_ path: String, _ attributes: [String: String], secret: SecretBytes?) -> StoredSessionItem {
        StoredSessionItem(itemId: path, generation: attributes[generationAttribute],
                          persistedAt: attributes[persistedAtAttribute].flatMap { UInt64($0) } ?? 0, secret: secret)
    }

    // MARK: - A new item

    /// The label of a stored item (what a keyring manager shows).
    static func itemLabel(_ authEnvironmentId: String) -> String {
        "Portal session (auth environment \(authEnvironmentId))"
    }

    /// A random 128-bit sign-in name, as 32 lower-case hex digits; not derived from the token.
    static func newGeneration() -> String {
        var rng = SystemRandomNumberGenerator()
        let value = (rng.next() as UInt64, rng.next() as UInt64)
        return hex(value.0) + hex(value.1)
    }

    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// Microseconds since the Unix epoch, strictly increasing within the process.
    static func persistTimestamp() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let micros = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec / 1_000)
        return lastTimestamp.withLock { last in
            last = max(last + 1, micros)
            return last
        }
    }
    private static let lastTimestamp = Lock<UInt64>(0)
}
