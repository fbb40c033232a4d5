import CGLib

/// One request to a portal (`org.freedesktop.portal.Request`): the `Response` signal of the
/// request's object path, subscribed BEFORE the method that starts the request is called.
///
/// The portal answers a method with the request's path at once and sends `Response(u code,
/// a{sv} results)` later, addressed to the caller. GDBus hands a signal only to the
/// subscriptions that exist when it reads the signal, so a subscription made after the method's
/// reply misses a `Response` that came quickly and waits forever (libsecret 0.20.5 does that:
/// about 1 call in 10–30 hung). SecretPortalBusTests has a portal answer before its reply;
/// Tests/flatpak/run.sh calls the real one 200 times. The path is known before the call: the
/// portal derives it from the caller's unique name and the `handle_token` option
/// (`path(sender:token:)`). The one subscription takes the portal's `Response` on any path and
/// keeps each code by path, so that when the portal answers with another path (an old portal)
/// a `Response` that came before the reply named it still counts (`follow`).
///
/// A `Response` is believed only from the portal's unique name and with the type `(ua{sv})`
/// (SignalSafety.swift says why); anything else is dropped unread. The subscription lives on a
/// main context of the request's own, iterated only by `wait` and `close` on the calling
/// thread, so no other code dispatches it.
final class SecretPortalRequest {
    /// What the portal answered: `Response`'s code (0 success, 1 cancelled, 2 failed, or
    /// anything else it sends) by request path, the first one of each path.
    final class State: @unchecked Sendable {
        let sender: String
        private(set) var codes: [String: UInt32] = [:]

        init(sender: String) { self.sender = sender }

        func response(_ sender: UnsafePointer<gchar>?, _ path: UnsafePointer<gchar>?, _ parameters: OpaquePointer?) {
            guard SignalSafety.from(sender, self.sender), let path, Variant.has(parameters, type: "(ua{sv})"),
                  let code = Variant.uint32(parameters, 0) else { return }
            let key = String(cString: path)
            if codes[key] == nil { codes[key] = code }
        }

        /// The code answered on the first of `paths` that has one.
        func code(for paths: [String]) -> UInt32? {
            paths.lazy.compactMap { self.codes[$0] }.first
        }
    }

    static let requestInterface = "org.freedesktop.portal.Request"

    let connection: OpaquePointer
    let path: String
    let token: String
    let state: State
    private let context: OpaquePointer
    private var subscription: guint = 0
    /// The request's paths: `path`, and the one the portal answered when it differs.
    private var paths: [String]

    /// Subscribes to the `Response`s of the portal whose unique name is `portal`, for the
    /// request `token` that this connection is about to make.
    init(connection: OpaquePointer, portal: String) {
        g_object_ref(UnsafeMutableRawPointer(connection))
        self.connection = connection
        token = Self.newToken()
        // A connection to a message bus always has a unique name (GDBus's `Hello` is done when
        // the connection is made).
        let sender = g_dbus_connection_get_unique_name(connection).map { String(cString: $0) } ?? ""
        path = Self.path(sender: sender, token: token)
        paths = [path]
        state = State(sender: portal)
        context = g_main_context_new()
        subscribe()
    }

    /// The object path of the request `token` of the caller `sender` (a unique name such as
    /// `:1.42`): `/org/freedesktop/portal/desktop/request/1_42/TOKEN` (the portal API's
    /// `org.freedesktop.portal.Request`).
    static func path(sender: String, token: String) -> String {
        let name = String(sender.drop(while: { $0 == ":" }).map { $0 == "." ? "_" : $0 })
        return "/org/freedesktop/portal/desktop/request/\(name)/\(token)"
    }

    /// A `handle_token` of this library's: a valid object path element, new for each request.
    static func newToken() -> String {
        "portal_keyring_" + String(UInt64.random(in: 1...UInt64.max), radix: 16)
    }

    /// Also takes a `Response` on `path` (the portal named another path for the request).
    func follow(_ path: String) {
        if !paths.contains(path) { paths.append(path) }
    }

    /// The portal's `Response` signals on any path, to this connection, from now on.
    private func subscribe() {
        g_main_context_push_thread_default(context)
        defer { g_main_context_pop_thread_default(context) }
        subscription = g_dbus_connection_signal_subscribe(
            connection, state.sender, Self.requestInterface, "Response", nil, nil, G_DBUS_SIGNAL_FLAGS_NONE,
            { _, sender, path, _, _, parameters, data in
                guard let data else { return }
                Unmanaged<State>.fromOpaque(data).takeUnretainedValue().response(sender, path, parameters)
            }, Unmanaged.passRetained(state).toOpaque(), { Unmanaged<State>.fromOpaque($0!).release() })  // trusted: our own user_data, never NULL
    }

    /// Waits for the `Response` until `cancellable` is cancelled (the operation's deadline, or
    /// its cancellation): its code, or nil when none came.
    func wait(_ cancellable: UnsafeMutablePointer<GCancellable>) -> UInt32? {
        // Wakes the context up when the cancellable is cancelled (at once when it already is).
        // A handler rather than g_cancellable_source_new(): GLib 2.74 leaks that source when the
        // deadline thread cancels while this thread destroys it (LeakSanitizer, 120 bytes).
        let wake: @convention(c) (UnsafeMutablePointer<GCancellable>?, gpointer?) -> Void = { _, context in
            g_main_context_wakeup(OpaquePointer(context))
        }
        let handler = g_cancellable_connect(cancellable, unsafeBitCast(wake, to: GCallback.self),
                                            UnsafeMutableRawPointer(context), nil)
        defer { g_cancellable_disconnect(cancellable, handler) }
        while state.code(for: paths) == nil && g_cancellable_is_cancelled(cancellable) == 0 {
            g_main_context_iteration(context, 1)
        }
        // A Response read in the same iteration as the cancellation still counts.
        while state.code(for: paths) == nil && g_main_context_iteration(context, 0) != 0 {}
        return state.code(for: paths)
    }

    /// Unsubscribes; a request that got no `Response` is closed (`Request.Close`, not waited
    /// for), so the portal stops it.
    func close() {
        if state.code(for: paths) == nil {
            for path in paths {
                BusCall.post(connection, destination: state.sender, path, Self.requestInterface, "Close")
            }
        }
        g_dbus_connection_signal_unsubscribe(connection, subscription)
        // The subscription's data is released in `context`.
        while g_main_context_iteration(context, 0) != 0 {}
        g_main_context_unref(context)
        g_object_unref(UnsafeMutableRawPointer(connection))
    }
}
