// The exported non-blocking C functions (issue 12; header section "Non-blocking calls"). Each
// checks its arguments like its blocking twin in Exports.swift, then runs the same core call on a
// worker thread (AsyncOperation.swift).
import CPortalKeyring
import Synchronization
@_spi(PortalKeyringC) import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// A Swift reference that may cross to a worker (the core types are thread-safe).
private struct Shared<T>: @unchecked Sendable { let value: T }

// MARK: - Completion queues and cancellation

@c @implementation
public func portal_completion_queue_new_for_main_context(_ out: UnsafeMutablePointer<OpaquePointer?>?,
                                                         _ mainContext: UnsafeMutableRawPointer?) -> portal_status {
    exported { () throws(CFailure) in
        let out = try outArgument(out)
        out.pointee = retainHandle(CompletionQueueHandle(CompletionQueue(mainContext: mainContext)))
    }
}

@c @implementation
public func portal_completion_queue_new_pollable(_ out: UnsafeMutablePointer<OpaquePointer?>?) -> portal_status {
    exported { () throws(CFailure) in
        let out = try outArgument(out)
        guard let queue = CompletionQueue(pollable: ()) else {
            throw CFailure(status: PORTAL_ERR_INTERNAL, message: "cannot create an eventfd: \(String(cString: strerror(errno)))")
        }
        out.pointee = retainHandle(CompletionQueueHandle(queue))
    }
}

@c @implementation
public func portal_completion_queue_get_fd(_ queue: OpaquePointer?) -> Int32 {
    var fd: Int32 = -1
    _ = exported { () throws(CFailure) in
        let handle = try borrowHandle(queue, as: CompletionQueueHandle.self, "queue")
        guard let descriptor = handle.queue.fileDescriptor else {
            throw .invalidArgument("queue", "not a pollable queue (it delivers on a GMainContext)")
        }
        fd = descriptor
    }
    return fd
}

@c @implementation
public func portal_completion_queue_dispatch(_ queue: OpaquePointer?, _ ranOut: UnsafeMutablePointer<Int>?) -> portal_status {
    var ran = 0
    let status = exported { () throws(CFailure) in
        let handle = try borrowHandle(queue, as: CompletionQueueHandle.self, "queue")
        guard handle.queue.fileDescriptor != nil else {
            throw .invalidArgument("queue", "not a pollable queue (it delivers on a GMainContext)")
        }
        ran = handle.queue.dispatch()
    }
    ranOut?.pointee = ran
    return status
}

@c @implementation
public func portal_completion_queue_free(_ queue: OpaquePointer?) {
    releaseHandle(queue, as: CompletionQueueHandle.self)?.queue.close()
}

@c @implementation
public func portal_operation_cancel(_ operation: UInt64) -> portal_status {
    exported { () throws(CFailure) in
        guard let found = AsyncOperations.find(operation) else { return }
        // CANCELLED wins the race for the completion; then the work in flight is stopped.
        found.complete(.cancelled)
        found.token.cancel()
    }
}

// MARK: - portal_auth and portal_session

@c @implementation
public func portal_auth_restore_session_async(_ auth: OpaquePointer?, _ queue: OpaquePointer?,
                                              _ callback: portal_completion_cb?, _ userData: UnsafeMutableRawPointer?,
                                              _ destroyNotify: portal_destroy_notify?,
                                              _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startAsync(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        let auth = Shared(value: try borrowHandle(auth, as: AuthHandle.self, "auth").current)
        return { () throws(CFailure) in
            let session = try core { () throws(PortalAuthError) in try auth.value.restoreSession() }
            return Outcome(session: try session.map { s throws(CFailure) in try sessionHandle(s) })
        }
    }
}

@c @implementation
public func portal_auth_persist_session_async(_ auth: OpaquePointer?, _ endUserId: UnsafePointer<CChar>?,
                                              _ clientSessionToken: UnsafePointer<CChar>?, _ queue: OpaquePointer?,
                                              _ callback: portal_completion_cb?, _ userData: UnsafeMutableRawPointer?,
                                              _ destroyNotify: portal_destroy_notify?,
                                              _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startAsync(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        let auth = Shared(value: try borrowHandle(auth, as: AuthHandle.self, "auth").current)
        let user = try stringArgument(endUserId, "end_user_id", maxBytes: PortalAuth.maxIdentifierBytes)
        let token = try stringArgument(clientSessionToken, "client_session_token", maxBytes: PortalAuth.maxTokenBytes)
        try core(names: ["endUserId": "end_user_id", "clientSessionToken": "client_session_token"]) {
            () throws(PortalAuthError) in try PortalAuth.checkPersistArguments(endUserId: user, clientSessionToken: token)
        }
        return { () throws(CFailure) in
            let session = try core(names: ["endUserId": "end_user_id", "clientSessionToken": "client_session_token"]) {
                () throws(PortalAuthError) in try auth.value.persistSession(endUserId: user, clientSessionToken: token)
            }
            return Outcome(session: try sessionHandle(session))
        }
    }
}

@c @implementation
public func portal_auth_clear_persisted_session_async(_ auth: OpaquePointer?, _ queue: OpaquePointer?,
                                                      _ callback: portal_completion_cb?,
                                                      _ userData: UnsafeMutableRawPointer?,
                                                      _ destroyNotify: portal_destroy_notify?,
                                                      _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startAsync(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        let auth = Shared(value: try borrowHandle(auth, as: AuthHandle.self, "auth").current)
        return { () throws(CFailure) in
            try core { () throws(PortalAuthError) in try auth.value.clearPersistedSession() }
            return Outcome()
        }
    }
}

@c @implementation
public func portal_session_invalidate_async(_ session: OpaquePointer?, _ queue: OpaquePointer?,
                                            _ callback: portal_completion_cb?, _ userData: UnsafeMutableRawPointer?,
                                            _ destroyNotify: portal_destroy_notify?,
                                            _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startAsync(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        let session = Shared(value: try borrowHandle(session, as: SessionHandle.self, "session").session)
        // The token leaves memory before this call returns; the keyring delete runs on the worker.
        session.value.dropToken()
        return { () throws(CFailure) in
            try core { () throws(PortalAuthError) in try session.value.invalidate() }
            return Outcome()
        }
    }
}

// MARK: - portal

@c @implementation
public func portal_request_async(_ portal: OpaquePointer?, _ method: UnsafePointer<CChar>?, _ target: UnsafePointer<CChar>?,
                                 _ body: UnsafePointer<CChar>?, _ queue: OpaquePointer?, _ callback: portal_completion_cb?,
                                 _ userData: UnsafeMutableRawPointer?, _ destroyNotify: portal_destroy_notify?,
                                 _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startAsync(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        let portal = Shared(value: try borrowHandle(portal, as: Portal.self, "portal"))
        let request = try portalRequest(method, target, body)
        try core(names: ["target": "target"]) { () throws(PortalAuthError) in try portal.value.checkArguments(of: request) }
        return { () throws(CFailure) in
            let response = try core(names: ["target": "target"]) { () throws(PortalAuthError) in
                try portal.value.send(request)
            }
            let copy = try responseBody(response)
            return Outcome(httpStatus: response.status, body: copy, bodyLength: response.body.count)
        }
    }
}

@c @implementation
public func portal_report_unauthorized_async(_ portal: OpaquePointer?, _ rejectedToken: UnsafePointer<CChar>?,
                                             _ queue: OpaquePointer?, _ callback: portal_completion_cb?,
                                             _ userData: UnsafeMutableRawPointer?, _ destroyNotify: portal_destroy_notify?,
                                             _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startAsync(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        let portal = Shared(value: try borrowHandle(portal, as: Portal.self, "portal"))
        let token = try stringArgument(rejectedToken, "rejected_token", maxBytes: PortalAuth.maxTokenBytes)
        return { () throws(CFailure) in
            let invalidated = try core { () throws(PortalAuthError) in
                try portal.value.reportUnauthorized(rejectedToken: token)
            }
            return Outcome(invalidated: invalidated)
        }
    }
}

@c @implementation
public func portal_clear_session_async(_ portal: OpaquePointer?, _ queue: OpaquePointer?, _ callback: portal_completion_cb?,
                                       _ userData: UnsafeMutableRawPointer?, _ destroyNotify: portal_destroy_notify?,
                                       _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startAsync(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        let portal = Shared(value: try borrowHandle(portal, as: Portal.self, "portal"))
        return { () throws(CFailure) in
            try core { () throws(PortalAuthError) in try portal.value.clearSession() }
            return Outcome()
        }
    }
}

@c @implementation
public func portal_on_session_invalidated_queued(_ portal: OpaquePointer?, _ queue: OpaquePointer?,
                                                 _ callback: portal_session_invalidated_cb?,
                                                 _ userData: UnsafeMutableRawPointer?,
                                                 _ destroyNotify: portal_destroy_notify?,
                                                 _ out: UnsafeMutablePointer<UInt64>?) -> portal_status {
    let data = Shared(value: userData)
    return exported { () throws(CFailure) in
        do throws(CFailure) {
            let portal = try borrowHandle(portal, as: Portal.self, "portal")
            guard let callback else { throw .invalidArgument("callback", "must not be NULL") }
            let out = try outArgument(out)
            let target = Shared(value: try completionQueue(queue))
            let registration = QueuedListener(callback: callback, destroyNotify: destroyNotify, userData: data.value)
            let handle = portal.onSessionInvalidated({ target.value.post(registration.job()) },
                                                     release: { registration.release() })
            out.pointee = handle.id
        } catch {
            destroyNotify?(data.value)
            throw error
        }
    }
}

@c @implementation
public func portal_free_async(_ portal: OpaquePointer?, _ queue: OpaquePointer?, _ callback: portal_completion_cb?,
                              _ userData: UnsafeMutableRawPointer?, _ destroyNotify: portal_destroy_notify?) -> portal_status {
    let data = Shared(value: userData)
    return exported { () throws(CFailure) in
        let target: CompletionQueue?
        do throws(CFailure) {
            guard portal != nil else { throw .invalidArgument("portal", "must not be NULL") }
            target = callback == nil ? nil : try completionQueue(queue)
        } catch {
            destroyNotify?(data.value)
            throw error
        }
        guard let object = releaseHandle(portal, as: Portal.self) else {
            destroyNotify?(data.value)
            throw .invalidArgument("portal", "not a live portal handle (freed already, or another kind of handle)")
        }
        object.beginClose()
        let closing = Shared(value: object)
        let callbacks = Shared(value: (callback, destroyNotify))
        OperationWorkers.submit {
            closing.value.finishClose()
            guard let target = target, let callback = callbacks.value.0 else {
                callbacks.value.1?(data.value)
                return
            }
            let operation = AsyncOperations.start(
                queue: target, callbacks: CCallbacks(callback: .completion(callback), userData: data.value,
                                                     destroyNotify: callbacks.value.1))
            operation.complete(Outcome())
        }
    }
}

/// A listener registration delivered through a completion queue. The core's delivery only
/// queues the job; once queued, the callback runs on the queue (or is dropped with the queue).
/// destroy_notify runs once: after that job (or its drop), or on release before any delivery.
private final class QueuedListener: @unchecked Sendable {
    private let callback: portal_session_invalidated_cb
    private let destroyNotify: portal_destroy_notify?
    private let userData: UnsafeMutableRawPointer?
    /// Set by the core's delivery, which always happens before the core's release (or not at all).
    private let delivered = Atomic<Bool>(false)

    init(callback: @escaping portal_session_invalidated_cb, destroyNotify: portal_destroy_notify?,
         userData: UnsafeMutableRawPointer?) {
        self.callback = callback
        self.destroyNotify = destroyNotify
        self.userData = userData
    }

    /// The delivery for the queue.
    func job() -> CompletionQueue.Job {
        delivered.store(true, ordering: .releasing)
        return CompletionQueue.Job(run: { [self] in
            callback(userData)
            destroyNotify?(userData)
        }, dropped: { [self] in destroyNotify?(userData) })
    }

    /// The core's release hook: after its delivery (the job then notifies), on cancel or on free.
    func release() {
        if !delivered.load(ordering: .acquiring) { destroyNotify?(userData) }
    }
}
