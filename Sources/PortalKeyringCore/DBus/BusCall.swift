import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// The one way this library calls a D-Bus method: the Secret Service's methods (`SecretBus`), the
/// bus daemon's (`BusConnection`), the transfer session's (`ServiceConnection`), the prompts'
/// (`Prompts`), the watch's (`WatchLoop`) and the Secret portal's (`SecretPortal`). A failed call comes back classified by its D-Bus
/// error name (`StorageFailure.classify`).
enum BusCall {
    /// What bounds a call: the operation's deadline — its cancellable, which the deadline thread
    /// cancels when the time is up and `OperationToken` when the operation is cancelled
    /// (`Deadline`) — or a time limit of the call's own, for calls outside a storage operation (a
    /// prompt's, which has its own deadline; the watch's subscription).
    struct Bound {
        let cancellable: UnsafeMutablePointer<GCancellable>?
        /// GDBus's timeout for the call: -1 for its default (25 s; the cancellable ends it first).
        let milliseconds: Int32

        /// The operation's deadline.
        static func deadline(_ cancellable: UnsafeMutablePointer<GCancellable>?) -> Bound {
            Bound(cancellable: cancellable, milliseconds: -1)
        }

        /// The time left until `end`, at least 1 ms.
        static func until(_ end: MonotonicInstant) -> Bound {
            Bound(cancellable: nil, milliseconds: Int32(clamping: max(end.remainingMilliseconds, 1)))
        }

        /// `milliseconds` from now.
        static func within(_ milliseconds: Int32) -> Bound {
            Bound(cancellable: nil, milliseconds: milliseconds)
        }
    }

    /// One method call for `sendAll`. `parameters` is consumed by the send.
    struct Request {
        let path: String
        let interface: String
        let method: String
        let parameters: OpaquePointer?
        /// The reply's type, checked by GDBus; nil: any.
        let replyType: StaticString?
        /// File descriptors sent with the call (the `h` arguments index into it); nil: none.
        /// Borrowed: the caller keeps its reference and unrefs it after the call.
        var fdList: UnsafeMutablePointer<GUnixFDList>? = nil
    }

    /// What `sendAll` delivered: the reply, or the error (the caller frees whichever it gets).
    struct Outcome {
        var done = false
        var reply: OpaquePointer?
        var error: UnsafeMutablePointer<GError>?
    }

    /// `interface`.`method` of the object at `path` of `destination`, waited for under `bound`.
    /// `parameters` is consumed (floating). Returns the reply (of type `replyType` when given),
    /// which the caller unrefs; throws the failure classified (`fallback` when GDBus gave no
    /// error).
    static func call(_ connection: OpaquePointer, destination: String, _ path: String, _ interface: String,
                     _ method: String, _ parameters: OpaquePointer?, _ replyType: StaticString?, _ bound: Bound,
                     _ fallback: String,
                     fdList: UnsafeMutablePointer<GUnixFDList>? = nil) throws(StorageFailure.Classified) -> OpaquePointer {
        let outcome = sendAll(connection, destination: destination,
                              [Request(path: path, interface: interface, method: method, parameters: parameters,
                                       replyType: replyType, fdList: fdList)], bound)[0]
        guard let reply = outcome.reply else { throw StorageFailure.classify(outcome.error, fallback) }
        return reply
    }

    /// `requests` sent one after the other without waiting, then every answer waited for under
    /// `bound`. The outcomes are in the order of `requests`.
    ///
    /// Made asynchronously and waited for on a main context of the calling thread's own that is
    /// kept for the thread's life (`CallContext`): `g_dbus_connection_call_sync` creates and
    /// destroys a main context (and its eventfd) per call, which measurably slowed every round
    /// trip (about 25 µs of about 350 µs with gnome-keyring). GDBus calls the callback exactly
    /// once, also on cancellation and timeout, so the wait always ends. Signal subscriptions stay
    /// on the context they were made in: a call never dispatches them.
    static func sendAll(_ connection: OpaquePointer, destination: String, _ requests: [Request],
                        _ bound: Bound) -> [Outcome] {
        let context = CallContext.current
        let outcomes = UnsafeMutablePointer<Outcome>.allocate(capacity: requests.count)
        outcomes.initialize(repeating: Outcome(), count: requests.count)
        defer {
            outcomes.deinitialize(count: requests.count)
            outcomes.deallocate()
        }
        g_main_context_push_thread_default(context)
        for (index, request) in requests.enumerated() {
            let replyType = request.replyType.map { Variant.type($0) }
            if let fdList = request.fdList {
                // The reply's own descriptors (none expected) are closed with the list at once.
                g_dbus_connection_call_with_unix_fd_list(connection, destination, request.path, request.interface,
                                                         request.method, request.parameters, replyType,
                                                         G_DBUS_CALL_FLAGS_NO_AUTO_START, bound.milliseconds, fdList,
                                                         bound.cancellable, { source, result, data in
                    guard let outcome = data?.assumingMemoryBound(to: Outcome.self) else { return }
                    var error: UnsafeMutablePointer<GError>?
                    var received: UnsafeMutablePointer<GUnixFDList>?
                    outcome.pointee.reply = g_dbus_connection_call_with_unix_fd_list_finish(OpaquePointer(source), &received,
                                                                                           result, &error)
                    if let received { g_object_unref(received) }
                    outcome.pointee.error = error
                    outcome.pointee.done = true
                }, outcomes + index)
                continue
            }
            g_dbus_connection_call(connection, destination, request.path, request.interface, request.method,
                                   request.parameters, replyType,
                                   G_DBUS_CALL_FLAGS_NO_AUTO_START, bound.milliseconds, bound.cancellable,
                                   { source, result, data in
                guard let outcome = data?.assumingMemoryBound(to: Outcome.self) else { return }
                var error: UnsafeMutablePointer<GError>?
                outcome.pointee.reply = g_dbus_connection_call_finish(OpaquePointer(source), result, &error)
                outcome.pointee.error = error
                outcome.pointee.done = true
            }, outcomes + index)
        }
        while !(0..<requests.count).allSatisfy({ outcomes[$0].done }) { g_main_context_iteration(context, 1) }
        g_main_context_pop_thread_default(context)
        return Array(UnsafeBufferPointer(start: outcomes, count: requests.count))
    }

    /// A call whose reply nobody waits for (sent with no reply expected): the provider's
    /// `Session.Close`, which it also does itself when the connection goes away.
    static func post(_ connection: OpaquePointer, destination: String, _ path: String, _ interface: String,
                     _ method: String) {
        guard g_dbus_connection_is_closed(connection) == 0 else { return }
        g_dbus_connection_call(connection, destination, path, interface, method, nil, nil,
                               G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, nil, nil, nil)
    }
}

/// A main context per thread that makes D-Bus calls, created on its first call and released
/// when the thread exits; only `BusCall.sendAll` attaches anything to it (its call replies).
enum CallContext {
    private struct Key: @unchecked Sendable { let key: pthread_key_t }
    private static let key: Key = {
        var key = pthread_key_t()
        pthread_key_create(&key) { context in
            if let context { g_main_context_unref(OpaquePointer(context)) }
        }
        return Key(key: key)
    }()

    static var current: OpaquePointer {
        if let existing = pthread_getspecific(key.key) { return OpaquePointer(existing) }
        // GLib aborts on allocation failure rather than return NULL: no outside input here.
        let context: OpaquePointer = g_main_context_new()
        pthread_setspecific(key.key, UnsafeRawPointer(context))
        return context
    }
}
