// The exports of the non-blocking calls' machinery (Include/portal_keyring.h, "Non-blocking
// calls"): completion queues, cancellation, the queued listener and portal_free_async. The _async
// forms of the operations sit next to their blocking twins and share their `prepare…` function
// (SessionOperations.swift, PortalOperations.swift, SignInOperations.swift).
import CPortalKeyring
import Synchronization
@_spi(Bindings) import PortalKeyringCore
#if canImport(Glibc)
import Glibc
#endif

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

// MARK: - portal

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
            let target = Shared(value: try completionQueue(queue))
            let registration = QueuedListener(callback: callback, destroyNotify: destroyNotify, userData: data.value)
            let handle = portal.onSessionInvalidated({ target.value.post(registration.job()) },
                                                     release: { registration.release() })
            out?.pointee = handle.id
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
