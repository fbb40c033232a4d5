/// Invalidation listeners for `@MainActor` code (docs/threading.md): the listener is isolated to the main
/// actor, so a Swift 6 app registers its UI update directly, without a `Task { @MainActor in … }`
/// of its own.
extension Portal {
    /// Registers `listener` to run once, on the main actor, when the backend rejects this
    /// credential; the same rules as `onSessionInvalidated(_:)` (at most once, replayed to a late
    /// registration, never fired by `clearSession()`, the listener-lifetime rule of
    /// docs/threading.md) except one, shared with the C ABI's queued listeners: the library's
    /// delivery only hands the call to the main actor, and once handed over it runs there even if
    /// the handle is cancelled or the Portal closed meanwhile.
    ///
    /// - Parameter listener: runs on the main actor; the main actor must be running (an app's
    ///   main run loop, or `await` on the main actor) for it to run.
    /// - Returns: as `onSessionInvalidated(_:)`. Thread-safe.
    @discardableResult
    public func onSessionInvalidated(onMainActor listener: @escaping @MainActor @Sendable () -> Void)
        -> SessionInvalidatedHandle {
        onSessionInvalidated { Task { @MainActor in listener() } }
    }
}
