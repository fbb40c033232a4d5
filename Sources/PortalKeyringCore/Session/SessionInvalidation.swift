#if canImport(Glibc)
import Glibc
#endif

/// A registration made with `Portal.onSessionInvalidated(_:)`.
///
/// `cancel()` stops any pending or future delivery: once it returns, the listener is never
/// entered (if a delivery is running on another thread, `cancel()` waits for it to return;
/// called from inside the listener itself, it does not wait). Idempotent; thread-safe.
public final class SessionInvalidatedHandle: Sendable {
    /// 0 for a spent handle (a Portal built from a static API key, or after `clearSession()`).
    public let id: UInt64
    private let registration: ListenerRegistration?
    private weak let center: InvalidationCenter?

    init(id: UInt64, registration: ListenerRegistration?, center: InvalidationCenter?) {
        self.id = id
        self.registration = registration
        self.center = center
    }

    /// Whether this handle will never deliver (spent, cancelled or already delivered).
    public var isSpent: Bool { registration?.isFinished ?? true }

    public func cancel() {
        center?.remove(id)
        registration?.cancel()
    }
}

/// One listener: its callback, an optional release hook (the C destroy-notify), and the state
/// that makes delivery at-most-once and `cancel()` final.
///
/// The callback is *taken* (moved out and dropped) by the first delivery or cancel, and the
/// release hook by the first release: that is the at-most-once guard, and it also drops what
/// the closures captured as soon as the registration is finished, so a listener whose closure
/// holds its own handle is no reference cycle.
final class ListenerRegistration: @unchecked Sendable {
    private struct State {
        /// nil once delivered or cancelled.
        var callback: (@Sendable () -> Void)?
        /// nil once run (or when there is none).
        var release: (@Sendable () -> Void)?
        var deliveringThread: pthread_t?

        /// Takes the release hook (at most once over the registration's life).
        mutating func takeRelease() -> (@Sendable () -> Void)? {
            let hook = release
            release = nil
            return hook
        }
    }
    /// Broadcast when a delivery ends: cancel() may need to wait for a running delivery.
    private let state: Lock<State>

    init(callback: @escaping @Sendable () -> Void, release: (@Sendable () -> Void)?) {
        state = Lock(State(callback: callback, release: release))
    }

    var isFinished: Bool {
        state.withLock { $0.callback == nil }
    }

    /// Calls the listener once unless cancelled; releases it afterwards. No lock is held while
    /// user code runs.
    func deliver() {
        let taken = state.withLock { s -> (@Sendable () -> Void)? in
            guard let listener = s.callback else { return nil }
            s.callback = nil
            s.deliveringThread = pthread_self()
            return listener
        }
        guard let listener = taken else { return }

        listener()

        // Release before marking the delivery finished: a cancel() (or portal_free) waiting on
        // another thread must not return while destroy-notify is still to run.
        let hook = state.withLock { $0.takeRelease() }
        hook?()

        state.withLock { s in
            s.deliveringThread = nil
            state.broadcast()
        }
    }

    /// Prevents future delivery; releases once. `wait`: also waits for a delivery running on
    /// another thread (the blocking `cancel()`/`close()`); without it (the non-blocking close of
    /// `portal_free_async`) a running delivery finishes on its own and releases after it, as it
    /// does when cancelled from inside its own callback.
    func cancel(wait: Bool = true) {
        let (dropped, hook) = state.withLock(when: { s in
            // Not waited for: deliver() releases after the callback returns.
            guard let thread = s.deliveringThread else { return true }
            return !wait || pthread_equal(thread, pthread_self()) != 0
        }) { s, _ in
            let dropped = s.callback
            s.callback = nil
            return (dropped, s.deliveringThread == nil ? s.takeRelease() : nil)
        }
        // The captures of an undelivered listener go outside the lock: their deinit is user code.
        _ = consume dropped
        hook?()
    }

    /// Releases without ever delivering (spent registrations).
    func releaseUnused() {
        cancel()
    }
}

/// The at-most-once invalidation state of one credential (docs/api.md#invalidation).
///
/// Listeners run on a serial delivery owned by this center (`SerialDelivery`), one after another,
/// never on the thread that registered or reported, and never while a library lock is held.
final class InvalidationCenter: Sendable {
    /// `invalidating`: a rejection is being handled (the item is being deleted); listeners added
    /// now are delivered by `notifyListeners`, after the delete. `invalidated`: listeners were
    /// notified; one added now gets a replay.
    enum Phase: Sendable { case active, invalidating, invalidated, cleared, staticKey, closed }

    private struct State: @unchecked Sendable {
        var phase: Phase
        var listeners: [UInt64: ListenerRegistration] = [:]
        var nextId: UInt64 = 1
    }

    private let state: Lock<State>
    private let queue = SerialDelivery()

    init(phase: Phase) {
        state = Lock(State(phase: phase))
    }

    var phase: Phase { state.withLock { $0.phase } }

    /// Registers a listener; replays the invalidation to it when it already happened.
    func add(_ callback: @escaping @Sendable () -> Void, release: (@Sendable () -> Void)?) -> SessionInvalidatedHandle {
        let registration = ListenerRegistration(callback: callback, release: release)
        let (id, replay): (UInt64, Bool) = state.withLock { s in
            switch s.phase {
            case .staticKey, .cleared, .closed:
                return (0, false)
            case .active, .invalidating, .invalidated:
                let id = s.nextId
                s.nextId += 1
                s.listeners[id] = registration
                return (id, s.phase == .invalidated)
            }
        }
        if id == 0 {
            registration.releaseUnused()
            return SessionInvalidatedHandle(id: 0, registration: nil, center: nil)
        }
        if replay { queue.async { registration.deliver() } }
        return SessionInvalidatedHandle(id: id, registration: registration, center: self)
    }

    /// The handle's registration, for the C ABI, which cancels by id.
    func registration(_ id: UInt64) -> ListenerRegistration? {
        state.withLock { $0.listeners[id] }
    }

    func remove(_ id: UInt64) {
        _ = state.withLock { $0.listeners.removeValue(forKey: id) }
    }

    /// Moves from active to invalidating; returns false when that already happened (or the
    /// credential was cleared), so the caller's side effects run exactly once.
    func beginInvalidation() -> Bool {
        state.withLock { s in
            guard s.phase == .active else { return false }
            s.phase = .invalidating
            return true
        }
    }

    /// Once the side effects are done (the item deleted): moves to invalidated and delivers to
    /// every listener registered so far, in one step, so that each listener is either in this
    /// delivery or gets `add`'s replay, and none runs before the delete returned (a listener that
    /// restores must not find the rejected session).
    func notifyListeners() {
        let listeners = state.withLock { s -> [ListenerRegistration] in
            if s.phase == .invalidating { s.phase = .invalidated }
            return s.listeners.sorted { $0.key < $1.key }.map { $0.value }
        }
        queue.async { listeners.forEach { $0.deliver() } }
    }

    /// Host-initiated sign-out: no listener will ever fire. Returns false if already invalidated.
    func clear() -> Bool {
        state.withLock { s in
            guard s.phase == .active else { return false }
            s.phase = .cleared
            return true
        }
    }

    /// Cancels every registration (releasing each once), for example when the Portal is freed;
    /// `wait` as in `ListenerRegistration.cancel(wait:)`.
    func cancelAll(wait: Bool = true) {
        let all = state.withLock { s -> [ListenerRegistration] in
            let all = Array(s.listeners.values)
            s.listeners.removeAll()
            return all
        }
        all.forEach { $0.cancel(wait: wait) }
    }

    /// Explicit close (listener-lifetime rule): from now on nothing invalidates (a 401 seen later
    /// deletes nothing and tells nobody; the next Portal built from the stored session detects it),
    /// and every registration is cancelled. `wait: false` leaves a delivery already running to
    /// finish on its own (`drain()` waits for it).
    ///
    /// An invalidation whose delete is running is not undone: the item will be deleted, so the
    /// listeners it will tell are left registered (each gets its call, then its release) — both
    /// or neither, also across a close. Once its deliveries are queued, a close (a listener that
    /// frees the portal included) cancels the ones not yet run, as before.
    func close(wait: Bool = true) {
        let begun = state.withLock { s -> Bool in
            if s.phase == .active { s.phase = .closed }
            return s.phase == .invalidating
        }
        if begun { return }
        cancelAll(wait: wait)
    }

    /// The Portal's last reference is gone: after an invalidation every registration has its
    /// delivery queued already (notifyListeners, or add's replay), and it runs, then releases;
    /// otherwise nothing can invalidate any more, so every registration is released uncalled.
    func releaseOnDrop() {
        if phase == .invalidated || phase == .invalidating { return }
        cancelAll()
    }

    /// Waits until deliveries queued so far have run (tests and orderly shutdown).
    func drain() {
        queue.wait()
    }
}
