import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring
import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// The Secret portal's pieces that need no bus: the request path subscribed before the call,
/// which `Response` signals are believed, and the pipe that must hold exactly 64 bytes. The
/// portal itself is exercised in a sandbox by Tests/flatpak/run.sh.
struct SecretPortalTests {
    private static let portal = ":1.7"

    private func owned(_ value: OpaquePointer) -> OpaquePointer {
        g_variant_ref_sink(value)!  // trusted: our own value, just built
    }

    private func response(_ code: UInt32) -> OpaquePointer {
        owned(Variant.tuple([g_variant_new_uint32(code), Variant.propertyDictionary([])]))
    }

    @Test func theRequestPathIsTheCallersUniqueNameAndTheToken() {
        #expect(SecretPortalRequest.path(sender: ":1.42", token: "t1")
                == "/org/freedesktop/portal/desktop/request/1_42/t1")
        #expect(SecretPortalRequest.path(sender: ":12.345.6", token: "x")
                == "/org/freedesktop/portal/desktop/request/12_345_6/x")
        let token = SecretPortalRequest.newToken()
        #expect(token != SecretPortalRequest.newToken())
        // An object path element: letters, digits and '_' only.
        #expect(g_variant_is_object_path(SecretPortalRequest.path(sender: ":1.1", token: token)) != 0)
        #expect(token.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") })
    }

    @Test func aResponseCountsOnlyFromThePortalAndOfItsType() {
        let state = SecretPortalRequest.State(sender: Self.portal)
        let path = SecretPortalRequest.path(sender: ":1.3", token: "t")
        let failed = response(2)
        defer { g_variant_unref(failed) }
        // From anyone else, without a sender or without a path: dropped.
        state.response(":1.99", path, failed)
        state.response(nil, path, failed)
        state.response(Self.portal, nil, failed)
        #expect(state.code(for: [path]) == nil)
        // Of another shape, even from the portal: dropped, never read past its end.
        for shape in [owned(Variant.tuple([g_variant_new_uint32(0)])),
                      owned(Variant.tuple([g_variant_new_int32(0), Variant.propertyDictionary([])])),
                      owned(Variant.tuple([g_variant_new_uint32(0), Variant.stringDictionary([])])),
                      owned(g_variant_new_uint32(0))] {
            state.response(Self.portal, path, shape)
            g_variant_unref(shape)
        }
        state.response(Self.portal, path, nil)
        #expect(state.code(for: [path]) == nil)
        state.response(Self.portal, path, failed)
        #expect(state.code(for: [path]) == 2)
        // The first genuine answer of a path stays; another path's is kept apart.
        let success = response(0)
        defer { g_variant_unref(success) }
        state.response(Self.portal, path, success)
        #expect(state.code(for: [path]) == 2)
        state.response(Self.portal, "/other", success)
        #expect(state.code(for: ["/other", path]) == 0)
        #expect(state.code(for: ["/unknown"]) == nil)
        // An empty expected sender matches nobody.
        let nobody = SecretPortalRequest.State(sender: "")
        nobody.response("", path, success)
        #expect(nobody.code(for: [path]) == nil)
    }

    @Test func thePipeGivesExactly64BytesAndNothingElse() throws {
        func pipeHolding(_ count: Int, closing: Bool) throws -> SecretPipe {
            let pipe = try SecretPipe()
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &+ 1) }
            #expect(write(pipe.writeEnd, bytes, count) == count)
            if closing { pipe.closeWriteEnd() }
            return pipe
        }
        let cancellable = g_cancellable_new()!  // trusted: GLib allocates or aborts, never NULL
        defer { g_object_unref(cancellable) }
        func soon(_ ms: UInt32 = 300) -> MonotonicInstant { .now.advanced(byMilliseconds: ms) }

        // 64 bytes, the writer's end still open (gnome-keyring's, until it lets go): read at once.
        let started = g_get_monotonic_time()
        let secret = try pipeHolding(64, closing: false).read(exactly: 64, until: soon(5000), cancellable)
        #expect(g_get_monotonic_time() - started < 1_000_000)
        #expect(secret.withUnsafeBytes { Array($0) } == (0..<64).map { UInt8($0 + 1) })
        #expect(try pipeHolding(64, closing: true).read(exactly: 64, until: soon(), cancellable).count == 64)
        // More or fewer: a failure, whether or not the writer closed its end.
        for (count, closing) in [(65, true), (65, false), (200, false), (63, true), (0, true)] {
            #expect(throws: SecretPipe.Failure.self) {
                _ = try pipeHolding(count, closing: closing).read(exactly: 64, until: soon(), cancellable)
            }
        }
        // Fewer with the writer's end open: waits for the rest until the deadline, no longer.
        let waited = g_get_monotonic_time()
        #expect(throws: SecretPipe.Failure.self) {
            _ = try pipeHolding(63, closing: false).read(exactly: 64, until: soon(300), cancellable)
        }
        let elapsed = g_get_monotonic_time() - waited
        #expect(elapsed >= 290_000 && elapsed < 1_500_000)
        // The rest arriving before the deadline completes it.
        let late = try pipeHolding(32, closing: false)
        let writer = late.writeEnd
        let thread = startThread { usleep(100_000); _ = write(writer, [UInt8](repeating: 9, count: 32), 32) }
        #expect(try late.read(exactly: 64, until: soon(3000), cancellable).count == 64)
        pthread_join(thread, nil)
        // A cancelled operation stops the wait.
        g_cancellable_cancel(cancellable)
        let cancelledAt = g_get_monotonic_time()
        #expect(throws: SecretPipe.Failure.self) {
            _ = try pipeHolding(10, closing: false).read(exactly: 64, until: soon(5000), cancellable)
        }
        #expect(g_get_monotonic_time() - cancelledAt < 1_000_000)
    }

    @Test func theRefusalsSayTheKeyringCannotBeReadNow() {
        #expect(SecretPortal.refusal(1).hasPrefix("RetrieveSecret cancelled (1)"))
        #expect(SecretPortal.refusal(2).hasPrefix("RetrieveSecret failed (2)"))
        #expect(SecretPortal.refusal(7).hasPrefix("RetrieveSecret answered 7"))
        for code: UInt32 in [1, 2, 7] {
            #expect(SecretPortal.refusal(code).hasSuffix("the keyring cannot be read now, nothing was read or deleted"))
            #expect(StorageFailure.secretPortal(SecretPortal.refusal(code)).message.hasPrefix("Secret portal: "))
        }
    }
}
