/// What a session watch sees of one auth environment's stored session at one moment (docs/threading.md).
/// Read without unlocking and without a prompt; compared with the previous observation to decide
/// which event, if any, to report.
enum SessionObservation: Equatable, Sendable {
    /// No item of ours, and nothing locked where one could hide.
    case signedOut
    /// The newest usable sign-in: its `session_generation` and end user id.
    case signedIn(generation: String, endUserId: String)
    /// An item of ours is locked, or the default collection is locked (it may hide one): the
    /// state cannot be read without an unlock. Never reported as signed out.
    case locked
}
