import CGLib
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// A Secret portal of the test's own on the private session bus (scripts/with-keyring.sh): it
/// owns `org.freedesktop.portal.Desktop` and answers `RetrieveSecret` as `answer` says — in
/// particular with the `Response` sent BEFORE the method's reply, which GDBus then hands to the
/// caller first: a subscription made after the reply (libsecret 0.20.5's order) misses it every
/// time, where on a real portal it misses it now and then. Its own main context runs on a thread
/// of its own.
final class FakeSecretPortal: @unchecked Sendable {
    /// How the next `RetrieveSecret` is answered.
    struct Answer {
        /// `Response`'s code; nil: no `Response` at all.
        var code: UInt32? = 0
        /// Written to the caller's descriptor before anything is sent (closed after).
        var secret: [UInt8] = Array(repeating: 0x5a, count: 64)
        /// The `Response` before the method's reply (else after it).
        var responseFirst = true
        /// A `Response` with code 0 sent first by another connection (a spoofer), to the same
        /// caller and path.
        var spoofed = false
        /// The request path answered (nil: the one the token gives).
        var otherHandle = false
        /// How long each call (`RetrieveSecret`, a read of `version`) takes before it is answered:
        /// a slow or loaded portal.
        var delayMilliseconds: UInt32 = 0
    }

    let connection: OpaquePointer
    private let spoofer: OpaquePointer
    private let context: OpaquePointer
    private let loop: OpaquePointer
    private var thread = pthread_t()
    private var registration: guint = 0
    let answer = Lock(Answer())
    /// How many RetrieveSecret calls came.
    let calls = Lock(0)
    /// The `version` property's value.
    let version = Lock<UInt32>(1)

    init() throws {
        connection = try BusConnection.open(nil)
        spoofer = try BusConnection.open(nil)
        context = g_main_context_new()
        loop = g_main_loop_new(context, 0)
        var error: UnsafeMutablePointer<GError>?
        let node = g_dbus_node_info_new_for_xml("""
            <node><interface name="org.freedesktop.portal.Secret">
              <method name="RetrieveSecret"><arg type="h" direction="in"/><arg type="a{sv}" direction="in"/>
                <arg type="o" direction="out"/></method>
              <property name="version" type="u" access="read"/>
            </interface></node>
            """, &error)!  // trusted: our own XML
        defer { g_dbus_node_info_unref(node) }
        var vtable = GDBusInterfaceVTable()
        vtable.method_call = { _, sender, _, _, _, parameters, invocation, data in
            Unmanaged<FakeSecretPortal>.fromOpaque(data!).takeUnretainedValue()  // trusted: our own user_data
                .retrieveSecret(sender.map { String(cString: $0) } ?? "", parameters, invocation)
        }
        vtable.get_property = { _, _, _, _, _, _, data in
            let portal = Unmanaged<FakeSecretPortal>.fromOpaque(data!).takeUnretainedValue()  // trusted: our own user_data
            let delay = portal.answer.withLock { $0.delayMilliseconds }
            if delay > 0 { g_usleep(gulong(delay) * 1000) }
            return g_variant_new_uint32(portal.version.withLock { $0 })
        }
        g_main_context_push_thread_default(context)
        registration = g_dbus_connection_register_object(
            connection, SecretPortal.path, g_dbus_node_info_lookup_interface(node, SecretPortal.interface), &vtable,
            Unmanaged.passUnretained(self).toOpaque(), nil, &error)
        g_main_context_pop_thread_default(context)
        let reply = try BusConnection.askBus(connection, "RequestName",
                                             Variant.tuple([g_variant_new_string(SecretPortal.busName), g_variant_new_uint32(4)]),
                                             "(u)", .within(2000), "RequestName")
        defer { g_variant_unref(reply) }
        pthread_create(&thread, nil, { loop in
            g_main_loop_run(OpaquePointer(loop))
            return nil
        }, UnsafeMutableRawPointer(loop))
        guard Variant.uint32(reply, 0) == 1 else {
            stop()
            throw FakeFailure(message: "another process owns \(SecretPortal.busName)")
        }
    }

    struct FakeFailure: Error { let message: String }

    /// Stops answering and leaves the bus.
    func stop() {
        g_dbus_connection_unregister_object(connection, registration)
        g_main_loop_quit(loop)
        pthread_join(thread, nil)
        for connection in [connection, spoofer] {
            g_dbus_connection_close_sync(connection, nil, nil)
            g_object_unref(UnsafeMutableRawPointer(connection))
        }
        g_main_loop_unref(loop)
        g_main_context_unref(context)
    }

    private func retrieveSecret(_ sender: String, _ parameters: OpaquePointer?, _ invocation: OpaquePointer?) {
        calls.withLock { $0 += 1 }
        let answer = answer.withLock { $0 }
        if answer.delayMilliseconds > 0 { g_usleep(gulong(answer.delayMilliseconds) * 1000) }
        var token = ""
        if let options = Variant.child(parameters, 1) {
            if let value = g_variant_lookup_value(options, "handle_token", Variant.type("s")) {
                token = Variant.string(value) ?? ""
                g_variant_unref(value)
            }
            g_variant_unref(options)
        }
        let path = answer.otherHandle ? SecretPortalRequest.path(sender: sender, token: "elsewhere")
            : SecretPortalRequest.path(sender: sender, token: token)
        let message = g_dbus_method_invocation_get_message(invocation)
        if let list = g_dbus_message_get_unix_fd_list(message) {
            let fd = g_unix_fd_list_get(list, 0, nil)
            if fd >= 0 {
                _ = answer.secret.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                close(fd)
            }
        }
        func respond(_ from: OpaquePointer, _ code: UInt32) {
            g_dbus_connection_emit_signal(from, sender, path, "org.freedesktop.portal.Request", "Response",
                                          Variant.tuple([g_variant_new_uint32(code), Variant.propertyDictionary([])]), nil)
        }
        if answer.spoofed { respond(spoofer, 0) }
        if let code = answer.code, answer.responseFirst { respond(connection, code) }
        g_dbus_method_invocation_return_value(invocation, Variant.tuple([g_variant_new_object_path(path)]))
        if let code = answer.code, !answer.responseFirst { respond(connection, code) }
    }
}
