// portal_auth_watch / portal_watch_free (docs/threading.md; header section "Watching the stored session"):
// the core's SessionWatch, its events posted to a completion queue like the non-blocking calls'
// completions.
import CPortalKeyring
import Synchronization
@_spi(Bindings) import PortalKeyringCore
#if canImport(Glibc)
import Glibc
#endif

/// The C callback and its user data. destroy_notify runs when the last reference goes: the
/// handle's, the watch's and each queued delivery's (so never while a delivery runs or waits).
private final class WatchCallbacks: @unchecked Sendable {
    let callback: portal_watch_cb?
    let userData: UnsafeMutableRawPointer?
    let destroyNotify: portal_destroy_notify?
    /// Set by portal_watch_free: queued deliveries are skipped from then on.
    let freed = Atomic(false)

    init(_ callback: portal_watch_cb?, _ userData: UnsafeMutableRawPointer?, _ destroyNotify: portal_destroy_notify?) {
        self.callback = callback
        self.userData = userData
        self.destroyNotify = destroyNotify
    }

    deinit { destroyNotify?(userData) }

    func deliver(_ change: SessionChange, _ origin: SessionChangeOrigin) {
        guard let callback, !freed.load(ordering: .acquiring) else { return }
        CurrentOrigin.during(origin) {
            switch change {
            case .signedIn(let endUserId): endUserId.withCString { callback(PORTAL_WATCH_SIGNED_IN, $0, userData) }
            case .signedOut: callback(PORTAL_WATCH_SIGNED_OUT, nil, userData)
            case .locked: callback(PORTAL_WATCH_LOCKED, nil, userData)
            case .resync: callback(PORTAL_WATCH_RESYNC, nil, userData)
            case .available: callback(PORTAL_WATCH_AVAILABLE, nil, userData)
            }
        }
    }

    /// portal_auth_watch_async's first event: STARTED, or FAILED with the message.
    func deliverStart(_ failure: PortalAuthError?) {
        guard let callback, !freed.load(ordering: .acquiring) else { return }
        guard let failure else { return callback(PORTAL_WATCH_STARTED, nil, userData) }
        DisplayText.sanitized(failure.description, limit: 1000).withCString { callback(PORTAL_WATCH_FAILED, $0, userData) }
    }
}

/// The origin of the event whose callback runs on this thread (portal_watch_current_origin):
/// set around each delivery, the previous value put back after it (a callback may dispatch
/// another queue).
private enum CurrentOrigin {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    static func during(_ origin: SessionChangeOrigin, _ body: () -> Void) {
        let previous = pthread_getspecific(key)
        let value: portal_watch_origin
        switch origin {
        case .unknown: value = PORTAL_WATCH_ORIGIN_UNKNOWN
        case .thisProcess: value = PORTAL_WATCH_ORIGIN_THIS_PROCESS
        case .otherProcess: value = PORTAL_WATCH_ORIGIN_OTHER_PROCESS
        }
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: UInt(value.rawValue)))
        defer { pthread_setspecific(key, previous) }
        body()
    }

    static var current: portal_watch_origin {
        portal_watch_origin(rawValue: UInt32(truncatingIfNeeded: UInt(bitPattern: pthread_getspecific(key))))
    }
}

@c @implementation
public func portal_watch_current_origin() -> portal_watch_origin {
    CurrentOrigin.current
}

/// What the watch thread's closures reach the callbacks through. portal_watch_free empties it
/// once the watch is stopped (no closure runs any more), so the callbacks — and destroy_notify
/// with them — are released by the freeing thread or the last queued delivery, never by the
/// watch thread, which may still be finishing a keyring read.
private final class CallbackSlot: Sendable {
    private let slot: Lock<WatchCallbacks?>
    init(_ callbacks: WatchCallbacks) { slot = Lock(callbacks) }
    var callbacks: WatchCallbacks? { slot.withLock { $0 } }
    func empty() { slot.withLock { $0 = nil } }
}

/// Behind `portal_watch *`.
private final class WatchHandle {
    let watch: SessionWatch
    let callbacks: WatchCallbacks
    let slot: CallbackSlot
    init(_ watch: SessionWatch, _ callbacks: WatchCallbacks, _ slot: CallbackSlot) {
        self.watch = watch
        self.callbacks = callbacks
        self.slot = slot
    }
}

/// The arguments both watch exports check, in their order (destroy_notify runs on a failure,
/// when `callbacks` is released).
private func watchArguments(_ auth: OpaquePointer?, _ queue: OpaquePointer?, _ callback: portal_watch_cb?,
                            _ watchOut: UnsafeMutablePointer<OpaquePointer?>?) throws(CFailure)
    -> (auth: PortalAuth, target: CompletionQueue, out: UnsafeMutablePointer<OpaquePointer?>) {
    let auth = try borrowHandle(auth, as: AuthHandle.self, "auth").current
    guard callback != nil else { throw .invalidArgument("callback", "must not be NULL") }
    let out = try outArgument(watchOut, "watch_out")
    return (auth, try completionQueue(queue), out)
}

@c @implementation
public func portal_auth_watch(_ auth: OpaquePointer?, _ queue: OpaquePointer?, _ callback: portal_watch_cb?,
                              _ userData: UnsafeMutableRawPointer?, _ destroyNotify: portal_destroy_notify?,
                              _ watchOut: UnsafeMutablePointer<OpaquePointer?>?) -> portal_status {
    // Made first, so that every failure below releases it: destroy_notify before the return.
    let callbacks = WatchCallbacks(callback, userData, destroyNotify)
    return exported { () throws(CFailure) in
        let (auth, target, out) = try watchArguments(auth, queue, callback, watchOut)
        let slot = CallbackSlot(callbacks)
        let watch = try core { () throws(PortalAuthError) in
            try SessionWatch(auth: auth) { change, origin in post(slot, target) { $0.deliver(change, origin) } }
        }
        out.pointee = retainHandle(WatchHandle(watch, callbacks, slot))
    }
}

@c @implementation
public func portal_auth_watch_async(_ auth: OpaquePointer?, _ queue: OpaquePointer?, _ callback: portal_watch_cb?,
                                    _ userData: UnsafeMutableRawPointer?, _ destroyNotify: portal_destroy_notify?,
                                    _ watchOut: UnsafeMutablePointer<OpaquePointer?>?) -> portal_status {
    let callbacks = WatchCallbacks(callback, userData, destroyNotify)
    return exported { () throws(CFailure) in
        let (auth, target, out) = try watchArguments(auth, queue, callback, watchOut)
        let slot = CallbackSlot(callbacks)
        let watch = try core { () throws(PortalAuthError) in
            try SessionWatch(auth: auth, started: { failure in post(slot, target) { $0.deliverStart(failure) } },
                             onEvent: { change, origin in post(slot, target) { $0.deliver(change, origin) } })
        }
        out.pointee = retainHandle(WatchHandle(watch, callbacks, slot))
    }
}

/// Posts `deliver` to `target` for the callbacks in `slot` (nothing once the watch was freed).
private func post(_ slot: CallbackSlot, _ target: CompletionQueue, _ deliver: @escaping @Sendable (WatchCallbacks) -> Void) {
    guard let callbacks = slot.callbacks else { return }
    target.post(CompletionQueue.Job(run: { deliver(callbacks) }, dropped: {}))
}

@c @implementation
public func portal_watch_free(_ watch: OpaquePointer?) {
    guard let handle = releaseHandle(watch, as: WatchHandle.self) else { return }
    handle.callbacks.freed.store(true, ordering: .releasing)
    handle.watch.cancel()  // never waits for the keyring; no watch closure runs after it
    handle.slot.empty()
}
