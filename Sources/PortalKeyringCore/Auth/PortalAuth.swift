#if canImport(Glibc)
import Glibc
#endif

/// Client auth for one Portal auth environment: restores, persists and clears the end user's
/// session in the Secret Service keyring (docs/api.md). The Linux counterpart of PortalSwift's
/// `PortalAuth`.
///
/// Every instance with the same `authEnvironmentId`, in any process of the same user, sees the
/// same stored session. Instances are immutable and thread-safe; keyring calls block the calling
/// thread for at most the deadlines in `keyringTimeouts`.
public final class PortalAuth: Sendable {
    /// Longest accepted `authEnvironmentId`, `redirectUrl`, `apiHost` and `endUserId`, in UTF-8 bytes.
    public static let maxIdentifierBytes = ArgumentRules.maxIdentifierBytes
    /// Longest accepted Client Session Token, in UTF-8 bytes (64 KiB). Longer tokens are rejected
    /// at persist with `invalidArgument(name: "clientSessionToken")`, never truncated.
    public static let maxTokenBytes = ArgumentRules.maxTokenBytes
    /// The Portal API host used when none is given.
    public static let defaultApiHost = "api.portalhq.io"

    public let authEnvironmentId: String
    public let redirectUrl: String
    public let apiHost: String
    /// Sender and template for `sendMagicLink(email:)`; nil: magic links are not configured.
    public let magicLink: MagicLinkConfig?
    /// Sent as `isAccountAbstracted` with `sendMagicLink` and the OAuth URL request when set;
    /// nil: never sent (the auth environment's default applies).
    public let isAccountAbstracted: Bool?
    public let keyringTimeouts: KeyringTimeouts
    let storage: any SessionStorage
    let http: HTTPClient
    /// Redirect grants already exchanged by this instance (see `handleRedirect(url:)`).
    let grants: GrantLedger

    /// Creates client auth for an auth environment. Does no I/O. Sessions are kept in the Secret
    /// Service, or in the storage `PORTAL_KEYRING_BACKEND` names (`StorageBackend`: tests and odd
    /// setups), read from the environment now.
    ///
    /// - Parameters:
    ///   - authEnvironmentId: the auth environment's id from the Portal dashboard; not blank.
    ///   - redirectUrl: where sign-in redirects land: an absolute URL `scheme://…` (the app's URL
    ///     scheme, e.g. `myapp://auth`) or a private-use `scheme:/path` without an authority
    ///     (RFC 8252 §7.1, e.g. `com.example.app:/oauth2redirect`); at most `maxRedirectURLBytes`
    ///     (8192) bytes of UTF-8, no whitespace or control characters; not `javascript:`,
    ///     `vbscript:` or `data:`.
    ///   - apiHost: the Portal API host name (optionally with `:port`), default `api.portalhq.io`.
    ///   - magicLink: sender and template for `sendMagicLink(email:)` (the backend requires
    ///     both); nil (the default) makes `sendMagicLink` throw `magicLinkNotConfigured`. Each
    ///     field: not blank, at most `maxIdentifierBytes`, no control characters.
    ///   - isAccountAbstracted: asks for an account-abstracted client (true) or not (false) on
    ///     magic links and OAuth URLs; nil (the default) sends nothing and the auth environment
    ///     decides. A backend that cannot honour it answers `accountAbstractionUnavailable`.
    ///   - keyringTimeouts: deadlines for keyring calls, default `KeyringTimeouts.default`.
    /// - Throws: `PortalAuthError.invalidArgument(name:)` naming the first bad argument, checked
    ///   in the order `authEnvironmentId`, `redirectUrl`, `apiHost`, `fromEmail`, `templateId`
    ///   (docs/api.md#null-and-bad-input).
    public convenience init(authEnvironmentId: String, redirectUrl: String,
                            apiHost: String = PortalAuth.defaultApiHost,
                            magicLink: MagicLinkConfig? = nil, isAccountAbstracted: Bool? = nil,
                            keyringTimeouts: KeyringTimeouts = .default) throws(PortalAuthError) {
        try self.init(authEnvironmentId: authEnvironmentId, redirectUrl: redirectUrl, apiHost: apiHost,
                      magicLink: magicLink, isAccountAbstracted: isAccountAbstracted,
                      storage: StorageBackend.storage(timeouts: keyringTimeouts), keyringTimeouts: keyringTimeouts)
    }

    init(authEnvironmentId: String, redirectUrl: String, apiHost: String,
         magicLink: MagicLinkConfig? = nil, isAccountAbstracted: Bool? = nil,
         storage: any SessionStorage, keyringTimeouts: KeyringTimeouts = .default,
         http: HTTPClient = HTTPClient(), grants: GrantLedger = GrantLedger()) throws(PortalAuthError) {
        try Self.check(authEnvironmentId, name: "authEnvironmentId", refusingControl: true)
        try Self.checkRedirectURL(redirectUrl)
        try Self.checkHost(apiHost)
        try Self.checkMagicLink(magicLink)
        self.authEnvironmentId = authEnvironmentId
        self.redirectUrl = redirectUrl
        self.apiHost = apiHost
        self.magicLink = magicLink
        self.isAccountAbstracted = isAccountAbstracted
        self.keyringTimeouts = keyringTimeouts
        self.storage = storage
        self.http = http
        self.grants = grants
    }

    private init(copying other: PortalAuth, keyringTimeouts: KeyringTimeouts? = nil,
                 magicLink: MagicLinkConfig?? = nil, isAccountAbstracted: Bool?? = nil) {
        authEnvironmentId = other.authEnvironmentId
        redirectUrl = other.redirectUrl
        apiHost = other.apiHost
        self.magicLink = magicLink ?? other.magicLink
        self.isAccountAbstracted = isAccountAbstracted ?? other.isAccountAbstracted
        self.keyringTimeouts = keyringTimeouts ?? other.keyringTimeouts
        storage = keyringTimeouts.map { other.storage.withTimeouts($0) } ?? other.storage
        http = other.http
        grants = other.grants
    }

    /// The same client auth (sharing its remembered redirect grants) with other keyring deadlines.
    @_spi(Bindings)
    public func withKeyringTimeouts(_ timeouts: KeyringTimeouts) -> PortalAuth {
        PortalAuth(copying: self, keyringTimeouts: timeouts)
    }

    /// The same client auth with another magic-link configuration (nil: none), checked as
    /// `init` checks it. For the C setter `portal_auth_set_magic_link`.
    @_spi(Bindings)
    public func withMagicLink(_ magicLink: MagicLinkConfig?) throws(PortalAuthError) -> PortalAuth {
        try Self.checkMagicLink(magicLink)
        return PortalAuth(copying: self, magicLink: .some(magicLink))
    }

    /// The same client auth with another `isAccountAbstracted` (nil: not sent).
    @_spi(Bindings)
    public func withAccountAbstraction(_ isAccountAbstracted: Bool?) -> PortalAuth {
        PortalAuth(copying: self, isAccountAbstracted: .some(isAccountAbstracted))
    }

    /// The keyring as `portal-session status` shows it, as (name, value) pairs: for the Secret
    /// Service its provider process, transfer algorithm, default collection and whether it is
    /// locked; for a file keyring (`StorageBackend`) its path and how many items it holds and
    /// cannot open; in a Flatpak sandbox (`FlatpakStorage`) first the Secret portal's version,
    /// after the host's session moved into the file (`SessionStorage.prepare`).
    /// Empty for the in-memory test store.
    @_spi(PortalKeyringCLI)
    public func describeKeyring() throws(PortalAuthError) -> [(String, String)] {
        // One operation (`OperationDeadline`): the move of the host's session and the description.
        try storageCall(authEnvironmentId) { () throws(StorageFailure) in
            try OperationDeadline.run(keyringTimeouts) { () throws(StorageFailure) in
                try storage.prepare(authEnvironmentId: authEnvironmentId)
                return try storage.describe()
            }
        }
    }

    /// Rebuilds the persisted session, without a network call.
    ///
    /// - Returns: the session when a usable item is stored; nil when none is stored, or when the
    ///   stored items are unusable (invalid UTF-8 or JSON, an unknown older version, a missing
    ///   field) — those are deleted first. A document written by a newer version of the library is
    ///   kept, not deleted, and reads as nil here (docs/storage.md#read-policy). When two sign-ins are briefly stored,
    ///   the newest wins.
    /// - Throws: `PortalAuthError.sessionStorageFailure(message:)` when the keyring cannot be read
    ///   this time (no bus, no provider, locked and not unlocked, timeout) or an unusable item cannot
    ///   be deleted. A failed read deletes nothing (docs/api.md#signed-out-vs-unavailable); a restore that fails while deleting
    ///   unusable items may have removed some of them, never a usable one. The read, the deletes
    ///   and every other provider call of one restore share one `keyringTimeouts.callMilliseconds`.
    public func restoreSession() throws(PortalAuthError) -> PortalSession? {
        // One storage operation, one deadline: the read, the attributes when needed and the
        // deletion of unusable items, decided by `ReadPolicy` (docs/security.md, "One read policy").
        let restored = try storageCall(authEnvironmentId) { () throws(StorageFailure) in
            try storage.restore(authEnvironmentId: authEnvironmentId)
        }
        guard let restored else { return nil }
        return PortalSession(authEnvironmentId: authEnvironmentId, endUserId: restored.document.endUserId,
                             apiHost: apiHost, token: restored.document.token, generation: restored.generation,
                             itemId: restored.itemId, storage: storage)
    }

    /// Deletes every stored session item for this auth environment. Succeeds when none is stored.
    /// Also forgets redirect grants this instance remembered, after waiting for an exchange in
    /// flight (so a sign-in racing the clear cannot be replayed afterwards). Never fires
    /// `onSessionInvalidated`.
    ///
    /// - Throws: `PortalAuthError.sessionStorageFailure(message:)`.
    public func clearPersistedSession() throws(PortalAuthError) {
        grants.forgetAll()
        OwnChanges.deleting(authEnvironmentId, generation: nil)
        _ = try storageCall(authEnvironmentId) { () throws(StorageFailure) in
            try storage.deleteAll(authEnvironmentId: authEnvironmentId, generation: nil)
        }
    }

    /// Stores a session whose CST the app's own backend issued (custodian-created client
    /// sessions) and returns it; replaces any stored session for this auth environment.
    ///
    /// The new item is stored first, then older ones are removed, so a failure never leaves the
    /// end user with no session, and a concurrent newer sign-in is never removed (docs/storage.md#persist-order).
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
    @_spi(Bindings)
    public static func checkPersistArguments(endUserId: String, clientSessionToken: String) throws(PortalAuthError) {
        try check(endUserId, name: "endUserId", refusingControl: true)
        try checkNewToken(clientSessionToken, name: "clientSessionToken")
    }

    func persist(endUserId: String, token: SecretBytes) throws(PortalAuthError) -> PortalSession {
        let generation = ItemSchema.newGeneration()
        OwnChanges.persisting(authEnvironmentId, generation: generation)
        // Stores the new item above every sign-in stored before it (whatever the clocks say:
        // PersistOrder), then removes those; the document carries copies of the generation and
        // the timestamp (SessionDocument). A failed removal leaves an item that restore ranks
        // below ours and the next persist or clear removes, so it does not fail the call.
        _ = try storageCall(authEnvironmentId) { () throws(StorageFailure) in
            try storage.replace(authEnvironmentId: authEnvironmentId, generation: generation, now: ItemSchema.persistTimestamp(),
                                label: ItemSchema.itemLabel(authEnvironmentId)) { persistedAt in
                SessionDocument.encode(authEnvironmentId: authEnvironmentId, endUserId: endUserId, token: token,
                                       generation: generation, persistedAt: persistedAt)
            }
        }
        return PortalSession(authEnvironmentId: authEnvironmentId, endUserId: endUserId, apiHost: apiHost,
                             token: token, generation: generation, storage: storage)
    }

    // MARK: - Argument checks and helpers

    /// An identifier (`ArgumentRules.isIdentifier`), refused as the argument `name`.
    static func check(_ value: String, name: String, refusingControl: Bool = false) throws(PortalAuthError) {
        if !ArgumentRules.isIdentifier(value, refusingControl: refusingControl) { throw .invalidArgument(name: name) }
    }

    /// A magic-link configuration's fields go into a JSON body, never a header, but are held to
    /// the identifier rules (`check` with `refusingControl`): not blank, bounded, no control
    /// characters, so a pasted value with a line end fails here and not at the backend.
    static func checkMagicLink(_ config: MagicLinkConfig?) throws(PortalAuthError) {
        guard let config else { return }
        try check(config.fromEmail, name: "fromEmail", refusingControl: true)
        try check(config.templateId, name: "templateId", refusingControl: true)
    }

    /// A token a caller hands in (a CST to persist, a user JWT, an API key): `checkToken`, and
    /// no whitespace or control character anywhere (`isWhiteSpaceOrControl`). Each goes out as a
    /// bearer: a line end in it would start another header line. Checked on the caller's string,
    /// before any wiped copy is made. Stored tokens are not held to it (restore reads old items).
    static func checkNewToken(_ token: String, name: String) throws(PortalAuthError) {
        if token.unicodeScalars.contains(where: { $0.isWhiteSpaceOrControl }) { throw .invalidArgument(name: name) }
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
        if url.unicodeScalars.contains(where: { $0.isWhiteSpaceOrControl }) { throw .invalidArgument(name: name) }
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
        // On bytes: every byte allowed below is ASCII, so anything else fails.
        let bytes = Array(host.utf8)
        var rest = bytes[...]
        if rest.first == UInt8(ascii: "[") {
            let inside = rest.startIndex + 1
            guard let close = rest.firstIndex(of: UInt8(ascii: "]")), close > inside,
                  rest[inside..<close].allSatisfy({ $0.isASCIIHexDigit || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") })
            else { throw .invalidArgument(name: name) }
            rest = rest[(close + 1)...]
        } else {
            let end = rest.firstIndex(of: UInt8(ascii: ":")) ?? rest.endIndex
            let hostname = rest[..<end]
            guard let first = hostname.first, first != UInt8(ascii: "-"), first != UInt8(ascii: "."),
                  hostname.allSatisfy({ $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") })
            else { throw .invalidArgument(name: name) }
            rest = rest[end...]
        }
        if rest.isEmpty { return }
        // ":" and a port 1–65535 in decimal digits (leading zeros allowed).
        let digits = rest.dropFirst()
        var port = 0
        for digit in digits where digit.isASCIIDigit && port <= 65_535 { port = port * 10 + Int(digit - UInt8(ascii: "0")) }
        guard rest.first == UInt8(ascii: ":"), !digits.isEmpty, digits.allSatisfy({ $0.isASCIIDigit }),
              (1...65_535).contains(port) else {
            throw .invalidArgument(name: name)
        }
    }

    /// A token (`ArgumentRules.isToken`), refused as the argument `name`.
    static func checkToken(_ token: SecretBytes, name: String) throws(PortalAuthError) {
        if !ArgumentRules.isToken(token) { throw .invalidArgument(name: name) }
    }
}

import Synchronization

/// Runs a storage call for `authEnvironmentId`, turning its failure into the public error; a
/// failure for want of the provider makes that auth environment's watches read until they can
/// (`KeyringTrouble`).
func storageCall<T>(_ authEnvironmentId: String, _ body: () throws(StorageFailure) -> T) throws(PortalAuthError) -> T {
    do {
        return try body()
    } catch {
        if error.meansUnreadable { KeyringTrouble.report(authEnvironmentId: authEnvironmentId) }
        throw .sessionStorageFailure(message: error.message)
    }
}
