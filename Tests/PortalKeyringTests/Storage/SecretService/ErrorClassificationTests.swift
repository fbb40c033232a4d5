import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring
import CGLib

/// How providers' error replies are classified: by their D-Bus error name (`StorageFailure.classify`),
/// whatever GError domain GLib put them in. An item deleted a moment before is "gone", so that a
/// restore searches again instead of failing or answering "signed out" (replaced_test.c drives the
/// race on every provider; these pin the answers a test cannot always provoke).
struct ErrorClassificationTests {
    private func classified(_ code: GDBusError, _ message: String) -> StorageFailure.Classified {
        StorageFailure.classify(g_error_new_literal(g_dbus_error_quark(), Int32(code.rawValue), message), "fallback")
    }

    /// The error GDBus makes of a provider's error reply `name` with `message`, as a caller of
    /// `g_dbus_connection_call` receives it.
    private func reply(_ name: String, _ message: String) -> StorageFailure.Classified {
        StorageFailure.classify(g_dbus_error_new_for_dbus_error(name, message), "fallback")
    }

    /// The same reply when no library in the process registered `name` under a GError domain of
    /// its own: GDBus's G_IO_ERROR_DBUS_ERROR, the name kept only in the message.
    private func unregisteredReply(_ name: String, _ message: String) -> StorageFailure.Classified {
        StorageFailure.classify(g_error_new_literal(g_io_error_quark(), Int32(G_IO_ERROR_DBUS_ERROR.rawValue),
                                                    "GDBus.Error:\(name): \(message)"), "fallback")
    }

    @Test("UnknownObject, UnknownMethod and KeePassXC's UnknownInterface are an item gone; other errors are not")
    func itemGone() {
        #expect(classified(G_DBUS_ERROR_UNKNOWN_OBJECT, "No such object").kind == .gone)
        #expect(classified(G_DBUS_ERROR_UNKNOWN_METHOD, "No such method").kind == .gone)
        #expect(classified(G_DBUS_ERROR_UNKNOWN_INTERFACE,
                           "Interface org.freedesktop.Secret.Item was not found in object /org/freedesktop/secrets/collection/portal/1").kind == .gone)
        let keepassxc = reply("org.freedesktop.DBus.Error.UnknownInterface",
                              "Interface org.freedesktop.Secret.Item was not found in object /org/freedesktop/secrets/collection/portal/1")
        #expect(keepassxc.kind == .gone)
        #expect(keepassxc.message.hasPrefix("Interface org.freedesktop.Secret.Item was not found"))
        #expect(classified(G_DBUS_ERROR_INVALID_ARGS, "Can't find item at path /x").kind == .other)
        #expect(classified(G_DBUS_ERROR_SERVICE_UNKNOWN, "gone away").kind == .unavailable)
        #expect(reply("org.freedesktop.DBus.Error.NameHasNoOwner", "Could not get owner of name").kind == .unavailable)
    }

    @Test("KWallet's GetSecrets failure for a deleted item (InvalidArgs \"Can't find item at path\") is an item gone")
    func kwalletGetSecrets() {
        let kwallet = SecretBus.getSecretsFailure(classified(G_DBUS_ERROR_INVALID_ARGS,
                                                             "Can't find item at path /org/freedesktop/secrets/collection/kdewallet/13"))
        #expect(kwallet.kind == .gone)
        #expect(SecretBus.getSecretsFailure(classified(G_DBUS_ERROR_INVALID_ARGS, "Can't find session /s/1")).kind == .other)
    }

    @Test("The Secret Service's IsLocked and NoSuchObject are classified by name, whether or not libsecret registered them")
    func secretServiceErrorNames() {
        // Nobody in the process registered the Secret Service's names (this library does not).
        let locked = unregisteredReply("org.freedesktop.Secret.Error.IsLocked", "Cannot get secret of a locked object")
        #expect(locked.kind == .locked)
        #expect(locked.name == "org.freedesktop.Secret.Error.IsLocked")
        #expect(locked.message == "Cannot get secret of a locked object")
        #expect(unregisteredReply("org.freedesktop.Secret.Error.NoSuchObject", "No such item").kind == .gone)
        #expect(unregisteredReply("org.freedesktop.Secret.Error.AlreadyExists", "exists").kind == .other)
        // A host application that uses libsecret too: libsecret registers them under its SECRET_ERROR
        // domain, "secret-error" (`secret_error_get_quark`). The library does not link libsecret, so
        // the test registers them as libsecret does, under a domain of that name.
        let secretError = g_quark_from_static_string("secret-error")
        for (code, name) in [(SECRET_ERROR_IS_LOCKED, "org.freedesktop.Secret.Error.IsLocked"),
                             (SECRET_ERROR_NO_SUCH_OBJECT, "org.freedesktop.Secret.Error.NoSuchObject")] {
            _ = g_dbus_error_register_error(secretError, Int32(code.rawValue), name)
        }
        let registered = g_dbus_error_new_for_dbus_error("org.freedesktop.Secret.Error.IsLocked", "locked")
        #expect(registered?.pointee.domain == secretError)
        #expect(StorageFailure.classify(registered, "fallback").kind == .locked)
        #expect(reply("org.freedesktop.Secret.Error.NoSuchObject", "No such item").kind == .gone)
    }

    @Test("Failures of our own side are classified by their GIO code: cancelled, timed out, closed")
    func localFailures() {
        func local(_ code: GIOErrorEnum) -> StorageFailure.Classified {
            StorageFailure.classify(g_error_new_literal(g_io_error_quark(), Int32(code.rawValue), "local"), "fallback")
        }
        #expect(local(G_IO_ERROR_CANCELLED).kind == .cancelled)
        #expect(local(G_IO_ERROR_TIMED_OUT).kind == .timedOut)
        #expect(local(G_IO_ERROR_CLOSED).kind == .unavailable)
        #expect(local(G_IO_ERROR_FAILED).kind == .other)
        #expect(local(G_IO_ERROR_CANCELLED).name == nil)
        #expect(StorageFailure.classify(nil, "fallback").message == "fallback")
    }
}
