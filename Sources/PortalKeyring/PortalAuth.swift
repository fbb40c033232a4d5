#if canImport(Glibc)
import Glibc
#endif

/// Client auth for one Portal auth environment: restores, persists and clears the end user's
/// session in the Secret Service keyring (SPEC §2–3). The Linux counterpart of PortalSwift's
/// `PortalAuth`.
///
/// Every instance with the same `authEnvironmentId`, in any process of the same user, sees the
/// same stored session. Instances are immutable and thread-safe; keyring calls block the calling
/// thread for at most the deadlines in `keyringTimeouts`.
public final class PortalAuth: Sendable {
    /// Longest accepted `authEnvironmentId`, `redirectUrl`, `apiHost` and `endUserId`, in UTF-8 bytes.
    public static let maxIdentifierBytes = 2048
    /// Longest accepted Client Session Token, in UTF-8 bytes (64 KiB). Longer tokens are rejected
    /// at persist with `invalidArgument(name: "clientSessionToken")`, never truncated.
    public static let maxTokenBytes = 65_536
    /// The Portal API host used when none is given.
    public static let defaultApiHost = "api.portalhq.io"

    public let authEnvironmentId: String
    public let redirectUrl: String
    public let apiHost: String
    public let keyringTimeouts: KeyringTimeouts
    let storage: any SessionStorage
    let http: HTTPClient
    /// Redirect grants already exchanged by this instance (see `handleRedirect(url:)`).
    let grants: GrantLedger

    /// Creates client auth for an auth environment. Does no I/O.
    ///
    /// - Parameters:
    ///   - authEnvironmentId: the auth environment's id from the Portal dashboard; not blank.
    ///   - redirectUrl: where sign-in redirects land: an absolute URL `scheme://…` (the app's URL
    ///     scheme, e.g. `myapp://auth`) or a private-use `scheme:/path` without an authority
    ///     (RFC 8252 §7.1, e.g. `com.example.app:/oauth2redirect`); at most `maxRedirectURLBytes`
    ///     (8192) bytes of UTF-8, no whitespace or control characters; not `javascript:`,
    ///     `vbscript:` or `data:`.
    ///   - apiHost: the Portal API host name (optionally with `:port`), default `api.portalhq.io`.
    ///   - keyringTimeouts: deadlines for keyring calls, default `KeyringTimeouts.default`.
    /// - Throws: `PortalAuthError.invalidArgument(name:)` naming the first bad argument, checked
    ///   in the order `authEnvironmentId`, `redirectUrl`, `apiHost` (SPEC §3).
    public convenience init(authEnvironmentId: String, redirectUrl: String,
                            apiHost: String = PortalAuth.defaultApiHost,
                            keyringTimeouts: KeyringTimeouts = .default) throws(PortalAuthError) {
        try self.init(authEnvironmentId: authEnvironmentId, redirectUrl: redirectUrl, apiHost: apiHost,
                      storage: LibSecretStorage(timeouts: keyringTimeouts), keyringTimeouts: keyringTimeouts)
    }

    init(authEnvironmentId: String, redirectUrl: String, apiHost: String,
         storage: any SessionStorage, keyringTimeouts: KeyringTimeouts = .default,
         http: HTTPClient = HTTPClient(), grants: GrantLedger = GrantLedger()) throws(PortalAuthError) {
        try Self.check(authEnvironmentId, name: "authEnvironmentId", refusingControl: true)
        try Self.checkRedirectURL(redirectUrl)
        try Self.checkHost(apiHost)
        self.authEnvironmentId = authEnvironmentId
        self.redirectUrl = redirectUrl
        self.apiHost = apiHost
        self.keyringTimeouts = keyringTimeouts
        self.storage = storage
        self.http = http
        self.grants = grants
    }

    private init(copying other: PortalAuth, keyringTimeouts: KeyringTimeouts) {
        authEnvironmentId = other.authEnvironmentId
        redirectUrl = other.redirectUrl
        apiHost = other.apiHost
        self.keyringTimeouts = keyringTimeouts
        storage = other.storage is LibSecretStorage ? LibSecretStorage(timeouts: keyringTimeouts) : other.storage
        http = other.http
        grants = other.grants
    }

    /// The same client auth (sharing its remembered redirect grants) with other keyring deadlines.
    @_spi(PortalKeyringC)
    public func withKeyringTimeouts(_ timeouts: KeyringTimeouts) -> PortalAuth {
        PortalAuth(copying: self, keyringTimeouts: timeouts)
    }

    /// The keyring as `portal-session status` shows it: provider process, transfer algorithm,
    /// default collection and whether it is locked, as (name, value) pairs. Empty for a storage
    /// other than the Secret Service (tests).
    @_spi(PortalKeyringCLI)
    public func describeKeyring() throws(PortalAuthError) -> [(String, String)] {
        guard let storage = storage as? LibSecretStorage else { return [] }
        return try storageCall { () throws(StorageFailure) in try storage.describe() }
    }

    /// Rebuilds the persisted session, without a network call.
    ///
    /// - Returns: the session when a usable item is stored; nil when none is stored, or when the
    ///   stored items are unusable (invalid UTF-8 or JSON, an unknown older version, a missing
    ///   field) — those are deleted first. A document written by a newer version of the library is
    ///   kept, not deleted, and reads as nil here (SPEC §2). When two sign-ins are briefly stored,
    ///   the newest wins.
    /// - Throws: `PortalAuthError.sessionStorageFailure(message:)` when the keyring cannot be read
    ///   this time (no bus, no provider, locked and not unlocked, timeout) or an unusable item cannot
    ///   be deleted. A throw never deletes anything (SPEC §3).
    public func restoreSession() throws(PortalAuthError) -> PortalSession? {
        let items = try storageCall { () throws(StorageFailure) in
            try storage.items(authEnvironmentId: authEnvironmentId, withSecrets: true)
        }
        if items.isEmpty { return nil }
        // Trust nothing the provider returns: a document that names another auth environment was
        // over-matched by the provider's search, and is neither restored nor deleted.
        var candidates = items.map { Candidate(item: $0) }.filter { $0.namesOtherEnvironment(authEnvironmentId) == false }
        // Which sign-in each item holds, and how new it is, come from its attributes or — when the
        // storage did not read them — from the copies in its document. Attributes are read only
        // when they matter: to confirm that an item is ours before it is deleted as unusable or
        // restored from a version-1 document (which names no auth environment), to rank two or
        // more items, or to name the one usable sign-in (for `PortalSession.invalidate()`) of a
        // document without `g`.
        let count = candidates.count
        let needsAttributes = { (candidate: Candidate) -> Bool in
            if candidate.item.attributesRead { return false }
            guard let document = candidate.document else { return true }
            return document.version < 2 || (count > 1 && !candidate.ranked) || candidate.generation == nil
        }
        if candidates.contains(where: needsAttributes) {
            // The storage lists only items whose attributes confirm the schema and auth environment.
            let listed = try storageCall { () throws(StorageFailure) in
                try storage.items(authEnvironmentId: authEnvironmentId, withSecrets: false)
            }
            let byId = Dictionary(listed.map { ($0.itemId, $0) }, uniquingKeysWith: { first, _ in first })
            // An item missing from the second listing was deleted meanwhile, or is not ours: it is
            // neither restored nor deleted.
            candidates = candidates.compactMap { needsAttributes($0) ? byId[$0.item.itemId].map($0.with) : $0 }
        }
        for candidate in candidates.sorted(by: { $0.rank > $1.rank }) {
            if let document = candidate.usableDocument {
                return PortalSession(authEnvironmentId: authEnvironmentId, endUserId: document.endUserId,
                                     apiHost: apiHost, token: document.token, generation: candidate.generation,
                                     itemId: candidate.item.itemId, storage: storage)
            }
            // A newer version's document: not ours to judge, so it is kept and the end user reads
            // as signed out here (a newer copy of the library can still restore it; SPEC §2).
            if candidate.newerVersion { continue }
            // Unusable and confirmed ours: no caller action could make it readable, so it is
            // removed (SPEC §2).
            try storageCall { () throws(StorageFailure) in try storage.delete(itemId: candidate.item.itemId) }
        }
        return nil
    }

    /// A stored item being restored: its decoded document (nil when unusable) and what names and
    /// ranks its sign-in.
    private struct Candidate {
        let item: StoredSessionItem
        let document: SessionDocument.Decoded?
        /// Attributes read separately (`items(withSecrets: false)`), when the item came without.
        var attributes: StoredSessionItem?

        /// Unusable to this library because a newer version wrote it (never deleted).
        let newerVersion: Bool

        init(item: StoredSessionItem) {
            self.item = item
            document = item.secret.flatMap { secret in secret.withUnsafeBytes { SessionDocument.decode($0) } }
            newerVersion = document == nil
                && (item.secret.map { secret in secret.withUnsafeBytes { SessionDocument.isNewerVersion($0) } } ?? false)
        }

        /// The document, unless it names another sign-in than its item's `session_generation`
        /// attribute (when both are known). Such an item is damaged: the provider serves one
        /// sign-in's secret under another's attributes (seen on KeePassXC 2.7.4 after an outside
        /// lock and unlock: the newest item's attributes with an older sign-in's document). Its
        /// document may be another end user's, so it is never restored; it is unusable, and
        /// removed like any unusable item of ours.
        var usableDocument: SessionDocument.Decoded? {
            guard let document else { return nil }
            if let read, let stored = document.generation, read.generation != stored { return nil }
            return document
        }

        /// Whether the document names an auth environment other than `id` (version 2 only).
        func namesOtherEnvironment(_ id: String) -> Bool {
            guard let named = document?.authEnvironmentId else { return false }
            return named != id
        }

        func with(_ attributes: StoredSessionItem) -> Candidate {
            var copy = self
            copy.attributes = attributes
            return copy
        }

        /// The attributes, when read: authoritative, since invalidation deletes by them.
        private var read: StoredSessionItem? { item.attributesRead ? item : attributes }

        /// `session_generation`: the attribute when read, else the document's copy.
        var generation: String? { read.map(\.generation) ?? document?.generation }
        /// Whether `rank` is known (attributes read, or both copies in the document).
        var ranked: Bool { read != nil || (document?.persistedAt != nil && document?.generation != nil) }
        /// (`persisted_at`, `session_generation`): the newest sign-in wins. Unknown ranks lowest.
        var rank: (UInt64, String) {
            if let read { return (read.persistedAt, read.generation ?? "") }
            return (document?.persistedAt ?? 0, document?.generation ?? "")
        }
    }

    /// Deletes every stored session item for this auth environment. Succeeds when none is stored.
    /// Also forgets redirect grants this instance remembered, after waiting for an exchange in
    /// flight (so a sign-in racing the clear cannot be replayed afterwards). Never fires
    /// `onSessionInvalidated`.
    ///
    /// - Throws: `PortalAuthError.sessionStorageFailure(message:)`.
    public func clearPersistedSession() throws(PortalAuthError) {
        grants.forgetAll()
        _ = try storageCall { () throws(StorageFailure) in
            try storage.deleteAll(authEnvironmentId: authEnvironmentId, generation: nil)
        }
    }

    /// Stores a session whose CST the app's own backend issued (custodian-created client
    /// sessions) and returns it; replaces any stored session for this auth environment.
    ///
    /// The new item is stored first, then older ones are removed, so a failure never leaves the
    /// end user with no session, and a concurrent newer sign-in is never removed (SPEC §2).
    ///
    /// - Parameters:
    ///   - endUserId: the Portal end user id; not blank, at most `maxIdentifierBytes`.
    ///   - clientSessionToken: the CST: 1 … `maxTokenBytes` bytes of UTF-8 with no whitespace
    ///     or control character anywhere (a token pasted with a space, tab, CR or LF is refused,
    ///     not trimmed: it would go out as a broken bearer). Stored byte-exact. Only persist
    ///     checks this: a session stored by an earlier version is restored whatever its token holds.
    /// - Throws: `invalidArgument(name:)` for a bad argument; `sessionStorageFailure(message:)`
    ///   when the item cannot be stored (the previous session, if any, is left intact).
    @discardableResult
    public func persistSession(endUserId: String, clientSessionToken: String) throws(PortalAuthError) -> PortalSession {
        try Self.checkPersistArguments(endUserId: endUserId, clientSessionToken: clientSessionToken)
        return try persist(endUserId: endUserId, token: SecretBytes.copyingUTF8(of: clientSessionToken))
    }

    /// What `persistSession` checks before anything else (the non-blocking C call checks the
    /// same before it returns): `endUserId` an identifier without control characters, the token
    /// a new token (`checkNewToken`).
    @_spi(PortalKeyringC)
    public static func checkPersistArguments(endUserId: String, clientSessionToken: String) throws(PortalAuthError) {
        try check(endUserId, name: "endUserId", refusingControl: true)
        try checkNewToken(clientSessionToken, name: "clientSessionToken")
    }

    func persist(endUserId: String, token: SecretBytes) throws(PortalAuthError) -> PortalSession {
        let generation = Self.newGeneration()
        let persistedAt = Self.persistTimestamp()
        // The document carries copies of the generation and timestamp (SessionDocument).
        let document = SessionDocument.encode(authEnvironmentId: authEnvironmentId, endUserId: endUserId, token: token,
                                              generation: generation, persistedAt: persistedAt)
        // Stores the new item, then removes older sign-ins only (a newer one stored meanwhile by
        // another process stays). A failed removal leaves an older item that restore ranks below
        // ours and the next persist or clear removes, so it does not fail the call.
        try storageCall { () throws(StorageFailure) in
            try storage.replace(authEnvironmentId: authEnvironmentId, generation: generation, persistedAt: persistedAt,
                                label: "Portal session (auth environment \(authEnvironmentId))", secret: document)
        }
        return PortalSession(authEnvironmentId: authEnvironmentId, endUserId: endUserId, apiHost: apiHost,
                             token: token, generation: generation, storage: storage)
    }

    // MARK: - Argument checks and helpers

    /// An identifier: not blank, no NUL, at most `maxIdentifierBytes`. With `refusingControl`
    /// (new values: the auth environment id, which also goes into a request header, and a
    /// persisted end user id), no control character either (C0 — tab, CR, LF … —, DEL, C1).
    /// Restore checks stored values without it, so items stored by earlier versions still read.
    static func check(_ value: String, name: String, refusingControl: Bool = false) throws(PortalAuthError) {
        if value.utf8.count > maxIdentifierBytes || value.utf8.contains(0)
            || value.allSatisfy({ $0.isWhitespace })
            || (refusingControl && value.unicodeScalars.contains { $0.properties.generalCategory == .control }) {
            throw .invalidArgument(name: name)
        }
    }

    /// A token a caller hands in (a CST to persist, a user JWT, an API key): `checkToken`, and
    /// no whitespace or control character anywhere (`isWhitespaceOrControl`). Each goes out as a
    /// bearer: a line end in it would start another header line. Checked on the caller's string,
    /// before any wiped copy is made. Stored tokens are not held to it (restore reads old items).
    static func checkNewToken(_ token: String, name: String) throws(PortalAuthError) {
        if token.unicodeScalars.contains(where: isWhitespaceOrControl) { throw .invalidArgument(name: name) }
        try checkToken(SecretBytes.copyingUTF8(of: token), name: name)
    }

    /// A redirect URL is `scheme://rest` or, for a private-use scheme without an authority
    /// (RFC 8252 §7.1), `scheme:/path` (`com.example.app:/oauth2redirect`): the scheme a letter
    /// then letters, digits, `+`, `-`, `.` (RFC 3986), then `:/`; not a script or inline-data
    /// scheme (`javascript`, `vbscript`, `data`, any case); no whitespace or control characters
    /// anywhere (a URL with them would not reach the app's handler unchanged); at most
    /// `maxRedirectURLBytes` bytes, like the redirects it receives.
    static func checkRedirectURL(_ url: String, name: String = "redirectUrl") throws(PortalAuthError) {
        let bytes = Array(url.utf8)
        guard bytes.count <= maxRedirectURLBytes else { throw .invalidArgument(name: name) }
        // The scheme: ASCII letter, then letters, digits, "+", "-", "."; then ":/" (":/path" or "://authority").
        var end = 0
        while end < bytes.count, Self.isSchemeByte(bytes[end], first: end == 0) { end += 1 }
        guard end > 0, bytes.count >= end + 2, bytes[end] == 0x3A, bytes[end + 1] == 0x2F else {
            throw .invalidArgument(name: name)
        }
        let scheme = String(decoding: bytes[..<end], as: UTF8.self).lowercased()
        if ["javascript", "vbscript", "data"].contains(scheme) { throw .invalidArgument(name: name) }
        if url.unicodeScalars.contains(where: isWhitespaceOrControl) { throw .invalidArgument(name: name) }
    }

    /// Unicode whitespace (space, tab, CR, LF, U+0085, U+00A0, U+2028, …) or a control character
    /// (C0, DEL, C1).
    static func isWhitespaceOrControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.isWhitespace || scalar.properties.generalCategory == .control
    }

    private static func isSchemeByte(_ byte: UInt8, first: Bool) -> Bool {
        let letter = (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
        if first { return letter }
        return letter || (0x30...0x39).contains(byte) || byte == 0x2B || byte == 0x2D || byte == 0x2E
    }

    /// A Portal API host is a host name or IPv4 address, or a bracketed IPv6 literal, optionally
    /// followed by `:port` (1–65535): nothing that could move the request elsewhere (`/`, `@`, `?`,
    /// `#`, `\`, whitespace). Checked without libcurl, which is loaded only for requests.
    static func checkHost(_ host: String, name: String = "apiHost") throws(PortalAuthError) {
        try check(host, name: name)
        var rest = Substring(host)
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]"), close > rest.index(after: rest.startIndex),
                  rest[rest.index(after: rest.startIndex)..<close].allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." })
            else { throw .invalidArgument(name: name) }
            rest = rest[rest.index(after: close)...]
        } else {
            let end = rest.firstIndex(of: ":") ?? rest.endIndex
            let hostname = rest[..<end]
            guard !hostname.isEmpty, !hostname.hasPrefix("-"), !hostname.hasPrefix("."),
                  hostname.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") })
            else { throw .invalidArgument(name: name) }
            rest = rest[end...]
        }
        if rest.isEmpty { return }
        guard rest.first == ":", let port = Int(rest.dropFirst()), (1...65_535).contains(port),
              rest.dropFirst().allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw .invalidArgument(name: name)
        }
    }

    static func checkToken(_ token: SecretBytes, name: String) throws(PortalAuthError) {
        let ok = token.withUnsafeBytes { bytes -> Bool in
            bytes.count > 0 && bytes.count <= maxTokenBytes && !bytes.contains(0)
                && bytes.contains(where: { !($0 == 0x20 || (0x09...0x0D).contains($0)) })
        }
        if !ok { throw .invalidArgument(name: name) }
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

import Synchronization

/// Runs a storage call, turning its failure into the public error.
func storageCall<T>(_ body: () throws(StorageFailure) -> T) throws(PortalAuthError) -> T {
    do {
        return try body()
    } catch {
        throw .sessionStorageFailure(message: error.message)
    }
}
