import Synchronization

/// A signed-in end user's session: the Client Session Token plus who it belongs to.
/// PortalSwift's `PortalSession`; pass it to `Portal(credentials:)`.
///
/// A session is a credential worth trying, not proof of validity: the Portal backend decides
/// (SPEC §3). Thread-safe. The token is held in memory that is wiped when the session is
/// released or invalidated.
public final class PortalSession: Sendable {
    public let authEnvironmentId: String
    public let endUserId: String
    /// Names the sign-in this session came from (`session_generation`, SPEC §2).
    let generation: String?
    let storage: any SessionStorage

    private struct State: @unchecked Sendable { var token: SecretBytes? }
    private let state: Mutex<State>

    init(authEnvironmentId: String, endUserId: String, token: SecretBytes, generation: String?,
         storage: any SessionStorage) {
        self.authEnvironmentId = authEnvironmentId
        self.endUserId = endUserId
        self.generation = generation
        self.storage = storage
        self.state = Mutex(State(token: token))
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
    @_spi(PortalKeyringC)
    public func withTokenBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R? {
        guard let token = tokenBytes() else { return nil }
        return try token.withUnsafeBytes(body)
    }

    /// Whether `invalidate()` has run.
    public var isInvalidated: Bool { tokenBytes() == nil }
}
