// portal_auth_watch / portal_watch_free (issue 16; header section "Watching the stored session"):
// the core's SessionWatch, its events posted to a completion queue like the non-blocking calls'
// completions.
import CPortalKeyring
import Synchronization
@_spi(PortalKeyringC) import PortalKeyring
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

    func deliver(_ change: SessionChange) {
        guard let callback, !freed.load(ordering: .acquiring) else { return }
        switch change {
        case .signedIn(let endUserId): endUserId.withCString { callback(PORTAL_WATCH_SIGNED_IN, $0, userData) }
        case .signedOut: callback(PORTAL_WATCH_SIGNED_OUT, nil, userData)
        case .locked: callback(PORTAL_WATCH_LOCKED, nil, userData)
        case .resync: callback(PORTAL_WATCH_RESYNC, nil, userData)
        }
    }
}

/// Behind `portal_watch *`.
private final class WatchHandle {
    let watch: SessionWatch
    let callbacks: WatchCallbacks
    init(_ watch: SessionWatch, _ callbacks: WatchCallbacks) {
        self.watch = watch
        self.callbacks = callbacks
    }
}

@c @implementation
public func portal_auth_watch(_ auth: OpaquePointer?, _ queue: OpaquePointer?, _ callback: portal_watch_cb?,
                              _ userData: UnsafeMutableRawPointer?, _ destroyNotify: portal_destroy_notify?,
                              _ watchOut: UnsafeMutablePointer<OpaquePointer?>?) -> portal_status {
    // Made first, so that every failure below releases it: destroy_notify before the return.
    let callbacks = WatchCallbacks(callback, userData, destroyNotify)
    return exported { () throws(CFailure) in
        let auth = try borrowHandle(auth, as: AuthHandle.self, "auth").current
        guard callback != nil else { throw .invalidArgument("callback", "must not be NULL") }
        let out = try outArgument(watchOut, "watch_out")
        let target = try completionQueue(queue)
        let watch = try core { () throws(PortalAuthError) in
            try SessionWatch(auth: auth) { change in
                target.post(CompletionQueue.Job(run: { callbacks.deliver(change) }, dropped: {}))
            }
        }
        out.pointee = retainHandle(WatchHandle(watch, callbacks))
    }
}

@c @implementation
public func portal_watch_free(_ watch: OpaquePointer?) {
    guard let handle = releaseHandle(watch, as: WatchHandle.self) else { return }
    handle.callbacks.freed.store(true, ordering: .releasing)
    handle.watch.cancel()
}
