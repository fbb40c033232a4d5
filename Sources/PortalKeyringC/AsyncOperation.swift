// The operations' machinery: the work a `prepare…` function returns (run inline by a blocking
// export, on a worker by its _async twin), completion-queue handles, the operation registry
// behind portal_operation_cancel(), and the exactly-once completion of one operation
// (Include/portal_keyring.h, "Non-blocking calls").
import CPortalKeyring
@_spi(Bindings) import PortalKeyringCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A Swift reference that may cross to a worker (the core types are thread-safe).
struct Shared<T>: @unchecked Sendable { let value: T }

/// One C operation after its arguments were read and checked on the calling thread: the work
/// that remains. Each operation has one `prepare…` function that returns it; the blocking export
/// runs it inline, the _async export hands it to `startAsync` (a worker). The work captures the
/// checked arguments; a secret one (`secretArgument`) is wiped when the work is released.
typealias PreparedWork = @Sendable () throws(CFailure) -> Outcome

/// Behind `portal_completion_queue *`.
final class CompletionQueueHandle {
    let queue: CompletionQueue
    init(_ queue: CompletionQueue) { self.queue = queue }
}

/// `user_data` and the C callbacks cross to the worker and the queue's thread; the C caller owns
/// their thread safety (documented in the header).
struct CCallbacks: @unchecked Sendable {
    /// The callback's type follows the call: a sign-in call gets a portal_sign_in_result.
    enum Callback {
        case completion(portal_completion_cb)
        case signIn(portal_sign_in_cb)
    }
    let callback: Callback
    let userData: UnsafeMutableRawPointer?
    let destroyNotify: portal_destroy_notify?
}

/// What an operation produced; owned pointers are freed unless the callback takes them. A
/// blocking export hands its outputs over with `Optional.take()` (`outcome.session.take()`), so
/// that `release()` frees only what the caller did not ask for. (A key path here made the first
/// call instantiate it: the runtime's key-path code, resident in every process that restores.)
struct Outcome: @unchecked Sendable {
    var status: portal_status = PORTAL_OK
    var message = ""
    var session: OpaquePointer?
    var httpStatus = 0
    var body: UnsafeMutablePointer<CChar>?
    var bodyLength = 0
    var invalidated = false
    // Sign-in calls (portal_sign_in_result).
    var kind = PORTAL_REDIRECT_NOT_HANDLED
    var text: UnsafeMutablePointer<CChar>?
    var autoCreateWallet = false
    var userJwt: UnsafeMutablePointer<CChar>?
    var totpLink: UnsafeMutablePointer<CChar>?

    static func failure(_ failure: CFailure) -> Outcome {
        Outcome(status: failure.status, message: failure.message)
    }

    static let cancelled = Outcome(status: PORTAL_ERR_CANCELLED, message: "the operation was cancelled")

    func release() {
        Outcome.release(portal_result(session: session, http_status: 0, body: body, body_len: 0, invalidated: false))
        Outcome.release(signInResult)
    }

    var signInResult: portal_sign_in_result {
        portal_sign_in_result(kind: kind, session: nil, text: text, auto_create_wallet: autoCreateWallet,
                              user_jwt: userJwt, totp_link: totpLink)
    }

    /// Frees what is left of a sign-in result (portal_string_free wipes the user JWT).
    static func release(_ result: portal_sign_in_result) {
        if let session = result.session { portal_session_free(session) }
        for string in [result.text, result.user_jwt, result.totp_link] { if let string { portal_string_free(string) } }
    }

    /// Frees what is left (the callback may have taken fields by setting them to NULL).
    static func release(_ result: portal_result) {
        if let session = result.session { portal_session_free(session) }
        if let body = result.body { portal_string_free(body) }
    }
}

/// One started operation. `complete` is first-wins: the cancel path and the worker race for it,
/// and the loser's results are freed.
final class AsyncOperation: Sendable {
    let id: UInt64
    let token = OperationToken()
    private let queue: CompletionQueue
    private let callbacks: CCallbacks
    private let completed = Atomic<Bool>(false)

    init(id: UInt64, queue: CompletionQueue, callbacks: CCallbacks) {
        self.id = id
        self.queue = queue
        self.callbacks = callbacks
    }

    /// Posts the completion to the queue, once; later calls free their outcome's pointers.
    func complete(_ outcome: Outcome) {
        let first = completed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        guard first else {
            outcome.release()
            return
        }
        AsyncOperations.forget(id)
        let callbacks = callbacks
        let message = outcome.message
        let status = outcome.status
        switch callbacks.callback {
        case .completion(let callback):
            var result = portal_result(session: outcome.session, http_status: outcome.httpStatus, body: outcome.body,
                                       body_len: outcome.bodyLength, invalidated: outcome.invalidated)
            queue.post(CompletionQueue.Job(run: {
                message.withCString { callback(status, &result, $0, callbacks.userData) }
                Outcome.release(result)
                callbacks.destroyNotify?(callbacks.userData)
            }, dropped: {
                Outcome.release(result)
                callbacks.destroyNotify?(callbacks.userData)
            }))
        case .signIn(let callback):
            var result = outcome.signInResult
            result.session = outcome.session
            queue.post(CompletionQueue.Job(run: {
                message.withCString { callback(status, &result, $0, callbacks.userData) }
                Outcome.release(result)
                callbacks.destroyNotify?(callbacks.userData)
            }, dropped: {
                Outcome.release(result)
                callbacks.destroyNotify?(callbacks.userData)
            }))
        }
    }
}

/// Operations started and not completed, by id (portal_operation_cancel()).
enum AsyncOperations {
    private static let live = Lock<(next: UInt64, operations: [UInt64: AsyncOperation])>((0, [:]))

    static func start(queue: CompletionQueue, callbacks: CCallbacks) -> AsyncOperation {
        live.withLock { state in
            state.next += 1
            let operation = AsyncOperation(id: state.next, queue: queue, callbacks: callbacks)
            state.operations[state.next] = operation
            return operation
        }
    }

    static func find(_ id: UInt64) -> AsyncOperation? { live.withLock { $0.operations[id] } }

    static func forget(_ id: UInt64) { _ = live.withLock { $0.operations.removeValue(forKey: id) } }
}

/// The queue an *_async call names: a live handle, or NULL for the calling thread's
/// thread-default GMainContext now.
func completionQueue(_ pointer: OpaquePointer?) throws(CFailure) -> CompletionQueue {
    guard let pointer else { return CompletionQueue(mainContext: nil) }
    return try borrowHandle(pointer, as: CompletionQueueHandle.self, "queue").queue
}

/// Starts an operation: `prepare` (the operation's `prepare…` function) checks the arguments on
/// the calling thread and returns the work, which then runs on a worker thread under the
/// operation's token. On a failed check destroy_notify runs before the error is recorded; the
/// callback never runs.
/// `lane`: `.keyring` for keyring-only work, which never waits behind requests on the network pool.
func startAsync(_ queue: OpaquePointer?, _ callback: portal_completion_cb?, _ userData: UnsafeMutableRawPointer?,
                _ destroyNotify: portal_destroy_notify?, _ operationOut: UnsafeMutablePointer<UInt64>?,
                lane: OperationWorkers.Lane = .network,
                _ prepare: () throws(CFailure) -> PreparedWork) -> portal_status {
    startAsync(queue, callback.map { .completion($0) }, userData, destroyNotify, operationOut, lane, prepare)
}

/// startAsync for the sign-in calls (portal_sign_in_cb).
func startSignIn(_ queue: OpaquePointer?, _ callback: portal_sign_in_cb?, _ userData: UnsafeMutableRawPointer?,
                 _ destroyNotify: portal_destroy_notify?, _ operationOut: UnsafeMutablePointer<UInt64>?,
                 _ prepare: () throws(CFailure) -> PreparedWork) -> portal_status {
    startAsync(queue, callback.map { .signIn($0) }, userData, destroyNotify, operationOut, .network, prepare)
}

private func startAsync(_ queue: OpaquePointer?, _ callback: CCallbacks.Callback?, _ userData: UnsafeMutableRawPointer?,
                        _ destroyNotify: portal_destroy_notify?, _ operationOut: UnsafeMutablePointer<UInt64>?,
                        _ lane: OperationWorkers.Lane, _ prepare: () throws(CFailure) -> PreparedWork) -> portal_status {
    exported { () throws(CFailure) in
        let work: PreparedWork
        let target: CompletionQueue
        let checked: CCallbacks.Callback
        do throws(CFailure) {
            guard let callback else { throw .invalidArgument("callback", "must not be NULL") }
            checked = callback
            target = try completionQueue(queue)
            work = try prepare()
        } catch {
            destroyNotify?(userData)
            throw error
        }
        let operation = AsyncOperations.start(
            queue: target, callbacks: CCallbacks(callback: checked, userData: userData, destroyNotify: destroyNotify))
        operationOut?.pointee = operation.id
        let box = WorkBox(work)
        OperationWorkers.submit(lane) {
            // The work (and the secret arguments it captured) is released before the completion
            // is posted, so a caller that scans its memory after the callback finds no copy.
            // Cancelled while queued: the cancel already completed it.
            guard let outcome = box.run(operation) else { return }
            if operation.token.isCancelled {
                // Cancelled while running: whatever the work produced is freed, the status is CANCELLED.
                outcome.release()
                operation.complete(.cancelled)
            } else {
                operation.complete(outcome)
            }
        }
    }
}

/// An operation's work, taken once by the worker that runs it (then only the worker holds it).
private final class WorkBox: @unchecked Sendable {
    private let work: Lock<PreparedWork?>
    init(_ work: @escaping PreparedWork) {
        self.work = Lock(work)
    }
    private func take() -> PreparedWork? {
        work.withLock { work in
            defer { work = nil }
            return work
        }
    }

    /// Runs the work under the operation's token; nil when it was cancelled while queued. The
    /// work is released when this returns (its only reference is this function's local).
    func run(_ operation: AsyncOperation) -> Outcome? {
        guard let work = take() else { return nil }
        if operation.token.isCancelled { return nil }
        do throws(CFailure) {
            return try operation.token.run { () throws(CFailure) -> Outcome in try work() }
        } catch {
            return .failure(error)
        }
    }
}
