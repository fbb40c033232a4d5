import Synchronization

/// A signed-in end user's session: the Client Session Token plus who it belongs to.
/// PortalSwift's `PortalSession`; pass it to `Portal(credentials:)`.
///
/// A session is a credential worth trying, not proof of validity: the Portal backend decides
/// (docs/api.md#invalidation). Thread-safe. The token is held in memory that is wiped when the session is
/// released or invalidated.
public final class PortalSession: Sendable {
    public let authEnvironmentId: String
    public let endUserId: String
    /// The Portal API host of the `PortalAuth` this session came from.
    public let apiHost: String
    /// Names the sign-in this session came from (`session_generation`, docs/storage.md#the-item).
    let generation: String?
    /// The stored item, for items that lack a generation.
    let itemId: String?
    let storage: any SessionStorage

    private struct State: @unchecked Sendable {
        var token: SecretBytes?
        var storedItemRemoved = false
    }
    private let state: Lock<State>

    init(authEnvironmentId: String, endUserId: String, apiHost: String, token: SecretBytes, generation: String?,
         itemId: String? = nil, storage: any SessionStorage) {
        self.authEnvironmentId = authEnvironmentId
        self.endUserId = endUserId
        self.apiHost = apiHost
        self.generation = generation
        self.itemId = itemId
        self.storage = storage
        self.state = Lock(State(token: token))
    }

    /// Invalidates the session: drops the in-memory token first, then deletes the stored item
    /// only if it still holds this sign-in (keyed by `session_generation`, one provider search and
    /// delete), so a newer sign-in stored meanwhile by this or another process is never wiped.
    /// Idempotent: a repeat after a failed delete retries the delete. Blocks (keyring I/O).
    ///
    /// - Throws: `PortalAuthError.sessionStorageFailure(message:)` when the delete fails; the token
    ///   is gone from memory regardless, and `getToken()` throws `sessionInvalidated` (docs/api.md#invalidation).
    public func invalidate() throws(PortalAuthError) {
        let needsDelete = state.withLock { s in
            s.token = nil
            return !s.storedItemRemoved
        }
        guard needsDelete else { return }
        OwnChanges.deleting(authEnvironmentId, generation: generation)
        try storageCall(authEnvironmentId) { () throws(StorageFailure) in
            if let generation {
                try storage.deleteAll(authEnvironmentId: authEnvironmentId, generation: generation)
            } else if let itemId {
                try storage.delete(itemId: itemId)
            }
        }
        state.withLock { $0.storedItemRemoved = true }
    }

    /// Whether `token` is this session's current token (constant-time comparison).
    func holds(token candidate: SecretBytes) -> Bool {
        guard let token = tokenBytes(), token.count == candidate.count else { return false }
        return token.withUnsafeBytes { a in
            candidate.withUnsafeBytes { b in
                var difference: UInt8 = 0
                for index in 0..<a.count { difference |= a[index] ^ b[index] }
                return difference == 0
            }
        }
    }

    /// The Client Session Token.
    /// - Throws: `PortalAuthError.sessionInvalidated` after `invalidate()`.
    public func getToken() throws(PortalAuthError) -> String {
        guard let token = tokenBytes() else { throw .sessionInvalidated }
        return token.string()
    }

    /// The token's bytes, or nil once invalidated. Callers that copy it wipe their copy.
    func tokenBytes() -> SecretBytes? {
        state.withLock { $0.token }
    }

    /// Calls `body` with the token's bytes (UTF-8, no terminator), or returns nil once the session
    /// is invalidated. For the C ABI, which copies the bytes without making a `String`.
    @_spi(Bindings)
    public func withTokenBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R? {
        guard let token = tokenBytes() else { return nil }
        return try token.withUnsafeBytes(body)
    }

    /// Whether `invalidate()` has run.
    public var isInvalidated: Bool { tokenBytes() == nil }

    /// Drops the token from memory only; `invalidate()` then deletes the stored item (the C ABI's
    /// `portal_session_invalidate_async` drops before it returns and deletes on a worker).
    @_spi(Bindings)
    public func dropToken() { state.withLock { $0.token = nil } }
}
