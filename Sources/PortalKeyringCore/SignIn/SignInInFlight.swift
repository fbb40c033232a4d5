import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// The desktop sign-ins (`signInWithGoogle` / `signInWithApple`, DesktopSignIn.swift) waiting in
/// this process for their redirect: at most one per auth environment (the single flight), and
/// what may end each one's wait. `handleRedirect` reports to the waiting sign-in of its auth
/// environment (an in-process delivery), the sign-in's `SessionWatch` reports a sign-in stored
/// by any process, and cancellation reports itself.
///
/// One `Lock` for every waiter: a change wakes them all and each checks its own state.
final class SignInInFlight: @unchecked Sendable {
    /// This process's sign-ins (a fork child starts with none: `ProcessLocal`).
    static var shared: SignInInFlight { slot.get }
    private static let slot = ProcessLocal { SignInInFlight() }

    /// One waiting sign-in. Its fields are guarded by the registry's `waiting` lock.
    final class Waiter: @unchecked Sendable {
        fileprivate let authEnvironmentId: String
        /// How the wait ends without the keyring: an in-process delivery's result or error, or
        /// `.cancelled`. The first one set stays.
        fileprivate var outcome: Result<AuthResult, PortalAuthError>?
        /// The watch saw a new sign-in stored since the waiter last looked.
        fileprivate var stored = false
        /// `handleRedirect` calls of this auth environment running in this process: while one
        /// runs, a stored sign-in is its own persist, and its result (with the client the API
        /// named) is awaited instead of a restore.
        fileprivate var deliveries = 0
        /// The `state` parameter of the authorize URL this sign-in opened (Portal's single-use
        /// OAuth `state`), once it is known: an `error` redirect ends the wait only when it
        /// carries it (`endDelivery`).
        fileprivate var state: String?
        fileprivate init(_ authEnvironmentId: String) { self.authEnvironmentId = authEnvironmentId }
    }

    /// An `error` redirect (`handleRedirect` threw for its `error` parameter) and the `state`
    /// parameter it carried, if any.
    struct ErrorRedirect {
        let state: String?
    }

    /// What ended a wait.
    enum Wake {
        case outcome(Result<AuthResult, PortalAuthError>)
        /// A sign-in was stored and no in-process delivery is running: restore it.
        case stored
        case timedOut
    }

    /// The waiting sign-in of each auth environment; broadcast on every change of a waiter.
    private let waiting = Lock<[String: Waiter]>([:])

    private init() {}

    private func locked<T>(_ body: (inout [String: Waiter]) -> T) -> T {
        waiting.withLock(body)
    }

    /// Registers the sign-in of `authEnvironmentId`.
    /// - Throws: `signInInProgress` when one is waiting already (nothing else is done).
    func claim(_ authEnvironmentId: String) throws(PortalAuthError) -> Waiter {
        let waiter = locked { waiting -> Waiter? in
            guard waiting[authEnvironmentId] == nil else { return nil }
            let waiter = Waiter(authEnvironmentId)
            waiting[authEnvironmentId] = waiter
            return waiter
        }
        guard let waiter else { throw .signInInProgress }
        return waiter
    }

    /// Ends `waiter`'s registration: a new sign-in of its auth environment may start.
    func release(_ waiter: Waiter) {
        locked { waiting in
            if waiting[waiter.authEnvironmentId] === waiter { waiting[waiter.authEnvironmentId] = nil }
        }
    }

    /// Records the `state` of the authorize URL `waiter`'s sign-in is about to open.
    func expect(state: String?, for waiter: Waiter) {
        locked { _ in waiter.state = state }
    }

    /// A `handleRedirect` of `authEnvironmentId` starts: the waiting sign-in, if any, to report
    /// its outcome to with `endDelivery`.
    func beginDelivery(_ authEnvironmentId: String) -> Waiter? {
        locked { waiting -> Waiter? in
            guard let waiter = waiting[authEnvironmentId] else { return nil }
            waiter.deliveries += 1
            return waiter
        }
    }

    /// The `handleRedirect` that `beginDelivery` announced ended. A result ends the wait with it,
    /// and so does an error (a rejected grant, another end user, a keyring failure: the app's own
    /// call got the same), except `.notHandled` (not this app's URL), `unsolicitedRedirect` (a
    /// grant no sign-in asked for: refused, the wait goes on) and `cancelled` (the app's call was
    /// cancelled, not the sign-in).
    ///
    /// An `error` redirect (`errorRedirect`) ends the wait only when it carries this sign-in's
    /// `state`: any web page can navigate to the app's scheme with `?error=access_denied`, and
    /// the end user's real redirect may still follow (docs/security.md, "A web page ends a desktop sign-in"). One without it, or with
    /// another, is reported to the `handleRedirect` caller alone; the wait goes on.
    func endDelivery(_ waiter: Waiter, _ outcome: Result<RedirectResult, PortalAuthError>,
                     errorRedirect: ErrorRedirect? = nil) {
        let ending: Result<AuthResult, PortalAuthError>?
        switch outcome {
        case .success(.authenticated(let result)): ending = .success(.authenticated(result))
        case .success(.totpRequired(let step)): ending = .success(.totpRequired(step))
        case .success(.notHandled), .failure(.unsolicitedRedirect), .failure(.cancelled): ending = nil
        case .failure(let error): ending = .failure(error)
        }
        locked { _ in
            waiter.deliveries -= 1
            let ours = errorRedirect.map { $0.state != nil && $0.state == waiter.state } ?? true
            if waiter.outcome == nil, ours, let ending { waiter.outcome = ending }
            waiting.broadcast()
        }
    }

    /// The sign-in's watch saw a new sign-in stored (by this process or another).
    func signInStored(_ waiter: Waiter) {
        locked { _ in
            waiter.stored = true
            waiting.broadcast()
        }
    }

    /// Ends `waiter`'s wait with `.cancelled` (unless it ended already) and its registration at
    /// once: the `async` caller is resumed before the worker thread has unwound, and a sign-in
    /// started right after the cancel must not find this one still in flight.
    func cancel(_ waiter: Waiter) {
        locked { waiting in
            if waiter.outcome == nil { waiter.outcome = .failure(.cancelled) }
            if waiting[waiter.authEnvironmentId] === waiter { waiting[waiter.authEnvironmentId] = nil }
            self.waiting.broadcast()
        }
    }

    /// Waits until `waiter` has an outcome, a sign-in was stored while no in-process delivery
    /// runs (the flag is then taken), or `end` passes.
    func wait(_ waiter: Waiter, until end: MonotonicInstant) -> Wake {
        waiting.withLock(when: { _ in waiter.outcome != nil || (waiter.stored && waiter.deliveries == 0) },
                         until: end) { _, _ -> Wake in
            if let outcome = waiter.outcome { return .outcome(outcome) }
            if waiter.stored && waiter.deliveries == 0 {
                waiter.stored = false
                return .stored
            }
            return .timedOut
        }
    }
}
