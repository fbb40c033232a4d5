import Testing
@testable import PortalKeyring
import CLibSecret

/// How providers' answers about an item deleted a moment before are classified: "gone", so that
/// a restore searches again instead of failing or answering "signed out" (replaced_test.c drives
/// the race on every provider; these pin the answers a test cannot always provoke).
struct ErrorClassificationTests {
    private func classified(_ code: GDBusError, _ message: String) -> StorageFailure.Classified {
        StorageFailure.classify(g_error_new_literal(g_dbus_error_quark(), Int32(code.rawValue), message), "fallback")
    }

    @Test("UnknownObject, UnknownMethod and KeePassXC's UnknownInterface are an item gone; other errors are not")
    func itemGone() {
        #expect(classified(G_DBUS_ERROR_UNKNOWN_OBJECT, "No such object").kind == .gone)
        #expect(classified(G_DBUS_ERROR_UNKNOWN_METHOD, "No such method").kind == .gone)
        #expect(classified(G_DBUS_ERROR_UNKNOWN_INTERFACE,
                           "Interface org.freedesktop.Secret.Item was not found in object /org/freedesktop/secrets/collection/portal/1").kind == .gone)
        #expect(classified(G_DBUS_ERROR_INVALID_ARGS, "Can't find item at path /x").kind == .other)
        #expect(classified(G_DBUS_ERROR_SERVICE_UNKNOWN, "gone away").kind == .unavailable)
    }

    @Test("KWallet's GetSecrets failure for a deleted item (InvalidArgs \"Can't find item at path\") is an item gone")
    func kwalletGetSecrets() {
        let kwallet = SecretBus.getSecretsFailure(classified(G_DBUS_ERROR_INVALID_ARGS,
                                                             "Can't find item at path /org/freedesktop/secrets/collection/kdewallet/13"))
        #expect(kwallet.kind == .gone)
        #expect(SecretBus.getSecretsFailure(classified(G_DBUS_ERROR_INVALID_ARGS, "Can't find session /s/1")).kind == .other)
    }
}
