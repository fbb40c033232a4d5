import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring
import CGLib

/// What a signal handler believes (docs/security.md, "Signals from other processes"): the checks
/// of `SignalSafety` and the `Variant` readers on parameters of every shape another process can
/// send, the provider's own unique name included — the signal fuzzer (Tests/signals) sends as
/// other processes, never as the provider, so the type checks on the provider's own signals are
/// pinned here.
struct SignalSafetyTests {
    private static let provider = ":1.42"

    /// A floating GVariant made ours (the caller unrefs it), as GDBus hands parameters over.
    private func owned(_ value: OpaquePointer) -> OpaquePointer {
        g_variant_ref_sink(value)!  // trusted: our own value, just built
    }

    private func strings(_ values: [String]) -> OpaquePointer {
        owned(Variant.tuple(values.map { g_variant_new_string($0) }))
    }

    @Test func nameOwnerChangedCountsOnlyFromTheBusDaemonAsThreeStrings() {
        let genuine = strings(["org.freedesktop.secrets", ":1.1", ":1.2"])
        defer { g_variant_unref(genuine) }
        let parsed = SignalSafety.nameOwnerChange(SignalSafety.busDaemon, genuine)
        #expect(parsed?.name == "org.freedesktop.secrets" && parsed?.oldOwner == ":1.1" && parsed?.newOwner == ":1.2")
        // Spoofed by a process (even the provider), the same arguments count for nothing.
        #expect(SignalSafety.nameOwnerChange(":1.99", genuine) == nil)
        #expect(SignalSafety.nameOwnerChange(Self.provider, genuine) == nil)
        #expect(SignalSafety.nameOwnerChange(nil, genuine) == nil)
        // From the bus daemon's name but of another shape: dropped, never read past its end.
        for shape in [strings([]), strings(["a"]), strings(["a", "b"]), strings(["a", "b", "c", "d"]),
                      owned(Variant.tuple([g_variant_new_int32(1), g_variant_new_string("b"), g_variant_new_string("c")])),
                      owned(Variant.tuple([g_variant_new_object_path("/a"), g_variant_new_string("b"), g_variant_new_string("c")])),
                      owned(g_variant_new_string("not a tuple"))] {
            #expect(SignalSafety.nameOwnerChange(SignalSafety.busDaemon, shape) == nil)
            g_variant_unref(shape)
        }
        #expect(SignalSafety.nameOwnerChange(SignalSafety.busDaemon, nil) == nil)
    }

    @Test func aSecretServiceSignalCountsOnlyWithTheTypeTheAPIGivesIt() {
        let path = owned(Variant.tuple([g_variant_new_object_path("/org/freedesktop/secrets/collection/login/1")]))
        let text = strings(["/org/freedesktop/secrets/collection/login/1"])
        let empty = strings([])
        let two = owned(Variant.tuple([g_variant_new_object_path("/a"), g_variant_new_object_path("/b")]))
        defer { [path, text, empty, two].forEach { g_variant_unref($0) } }
        for member in ["ItemCreated", "ItemDeleted", "ItemChanged"] {
            #expect(SignalSafety.isSecretServiceSignal("org.freedesktop.Secret.Collection", member, path))
            for wrong in [text, empty, two] {
                #expect(!SignalSafety.isSecretServiceSignal("org.freedesktop.Secret.Collection", member, wrong))
            }
            #expect(!SignalSafety.isSecretServiceSignal("org.freedesktop.Secret.Collection", member, nil))
        }
        // A member name of another interface, or one the API does not have: not a Secret Service signal.
        #expect(!SignalSafety.isSecretServiceSignal("org.freedesktop.Secret.Service", "NameOwnerChanged", path))
        #expect(!SignalSafety.isSecretServiceSignal("org.freedesktop.Secret.Collection", "CollectionCreated", path))
        #expect(!SignalSafety.isSecretServiceSignal(nil, "ItemCreated", path))
        #expect(!SignalSafety.isSecretServiceSignal("org.freedesktop.Secret.Collection", nil, path))
        #expect(!SignalSafety.isSecretServiceSignal("org.freedesktop.DBus.Properties", "PropertiesChanged", path))
    }

    @Test func theReadersAnswerNilForEveryShapeTheyWereNotAskedFor() {
        let three = strings(["a", "b", "c"])
        let number = owned(g_variant_new_int32(7))
        defer { [three, number].forEach { g_variant_unref($0) } }
        #expect(Variant.string(three, 2) == "c")
        #expect(Variant.string(three, 3) == nil)
        #expect(Variant.string(number, 0) == nil)
        #expect(Variant.string(nil, 0) == nil)
        #expect(Variant.string(number) == nil)
        #expect(Variant.strings(three, 0) == nil)
        #expect(Variant.stringDictionary(three) == nil)
        #expect(Variant.unboxed(three) == nil)
        #expect(Variant.bytes(three) == nil)
        #expect(Variant.child(number, 0) == nil)
    }
}
