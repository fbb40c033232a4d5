import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// The cancellation switch of one operation (docs/threading.md): `cancel()` stops the keyring call or HTTP
/// request the operation is running. While `run(_:)` executes, the token is the calling thread's
/// `current` one, so that the layers below (the keyring deadline, the prompt wait, `Portal.send`)
/// can hook into it without taking a parameter.
///
/// Hooks run once, on the thread that calls `cancel()`, outside the token's lock. Thread-safe.
@_spi(Bindings)
public final class OperationToken: Sendable {
    private struct State {
        var cancelled = false
        var next: UInt64 = 0
        var hooks: [UInt64: @Sendable () -> Void] = [:]
    }

    private let state = Lock(State())

    public init() {}

    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Cancels the operation: runs every hook once. A second call does nothing.
    public func cancel() {
        let hooks = state.withLock { s -> [@Sendable () -> Void] in
            guard !s.cancelled else { return [] }
            s.cancelled = true
            defer { s.hooks = [:] }
            return Array(s.hooks.values)
        }
        for hook in hooks { hook() }
    }

    /// Adds `hook`, run on cancellation; runs it at once when already cancelled. Returns the
    /// function that removes it (call it when the guarded work is over).
    func onCancel(_ hook: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
        let id = state.withLock { s -> UInt64? in
            guard !s.cancelled else { return nil }
            s.next += 1
            s.hooks[s.next] = hook
            return s.next
        }
        guard let id else {
            hook()
            return {}
        }
        return { [state] in _ = state.withLock { $0.hooks.removeValue(forKey: id) } }
    }

    /// Cancelling the token cancels `cancellable` (referenced until the returned remover runs).
    func cancels(_ cancellable: UnsafeMutablePointer<GCancellable>) -> @Sendable () -> Void {
        let held = HeldCancellable(cancellable)
        return onCancel { g_cancellable_cancel(held.pointer) }
    }

    /// Runs `body` with this token as the calling thread's `current` one.
    public func run<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        let previous = pthread_getspecific(Self.key)
        pthread_setspecific(Self.key, Unmanaged.passUnretained(self).toOpaque())
        defer { pthread_setspecific(Self.key, previous) }
        return try body()
    }

    /// The token of the operation running on this thread, if any.
    static var current: OperationToken? {
        guard let raw = pthread_getspecific(key) else { return nil }
        return Unmanaged<OperationToken>.fromOpaque(raw).takeUnretainedValue()
    }

    /// Whether the operation running on this thread was cancelled.
    static var currentIsCancelled: Bool { current?.isCancelled ?? false }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()
}

/// A GCancellable reference that may cross threads (GCancellable is thread-safe).
private final class HeldCancellable: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<GCancellable>
    init(_ pointer: UnsafeMutablePointer<GCancellable>) {
        self.pointer = pointer
        g_object_ref(pointer)
    }
    deinit { g_object_unref(pointer) }
}
