import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring
import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// `SecretPortal` against a portal of the test's own (`FakeSecretPortal`) on the private bus of
/// scripts/with-keyring.sh: the answers a real portal gives rarely or never on demand — the
/// `Response` before the method's reply (what libsecret 0.20.5 misses), cancelled, a secret of
/// another size, a spoofed `Response`, none at all. The real portal, in a sandbox, is
/// Tests/flatpak/run.sh's.
@Suite(.serialized) struct SecretPortalBusTests {
    private func withPortal(_ body: (FakeSecretPortal) throws -> Void) throws {
        _ = try #require(getenv("PORTAL_TEST_KEYRING_DIR"), "run inside scripts/with-keyring.sh (a private session bus)")
        let portal = try FakeSecretPortal()
        defer { portal.stop() }
        try body(portal)
    }

    private func soon(_ milliseconds: UInt32 = 2000) -> MonotonicInstant { .now.advanced(byMilliseconds: milliseconds) }

    /// The failure's message of `SecretPortal.retrieveSecret`, nil when it returned a secret.
    private func failure(_ milliseconds: UInt32 = 2000) -> String? {
        do {
            _ = try SecretPortal.retrieveSecret(until: soon(milliseconds))
            return nil
        } catch {
            return error.message
        }
    }

    @Test func aResponseSentBeforeTheReplyIsNeverMissed() throws {
        try withPortal { portal in
            #expect(try SecretPortal.version(until: soon()) == 1)
            for _ in 0..<20 {
                let secret = try SecretPortal.retrieveSecret(until: soon())
                #expect(plainBytes(secret) == Array(repeating: 0x5a, count: 64))
            }
            portal.answer.withLock { $0.responseFirst = false }
            #expect(try plainBytes(SecretPortal.retrieveSecret(until: soon())) == Array(repeating: 0x5a, count: 64))
            #expect(portal.calls.withLock { $0 } == 21)
        }
    }

    /// In a Flatpak sandbox the file keyring is chosen only when the
    /// portal answers `version` 1 exactly, as libsecret does; any other version (a later portal
    /// whose secrets libsecret 0.20.5 would not use) keeps the sessions in the Secret Service.
    @Test func theFileKeyringIsChosenOnlyForVersion1() throws {
        try withPortal { portal in
            let kept = FlatpakStorage.chosen.withLock { $0 }
            defer { FlatpakStorage.chosen.withLock { $0 = kept } }
            let storage = FlatpakStorage(keyringPath: "/nonexistent/keyrings/default.keyring", timeouts: .default)
            let expected: [(UInt32, FlatpakStorage.Choice)] = [
                (2, .secretService(portalVersion: 2)), (1, .fileKeyring(portalVersion: 1)),
                (3, .secretService(portalVersion: 3)), (UInt32.max, .secretService(portalVersion: UInt32.max)),
            ]
            for (version, choice) in expected {
                portal.version.withLock { $0 = version }
                FlatpakStorage.chosen.withLock { $0 = nil }
                #expect(try storage.choice() == choice, "portal version \(version)")
                let chosen = try storage.storage()
                #expect(version == 1 ? chosen is FileKeyringStorage : chosen is SecretServiceStorage, "portal version \(version)")
            }
        }
    }

    @Test func cancelledAndFailedAreStorageFailuresNamingThePortal() throws {
        try withPortal { portal in
            portal.answer.withLock { $0.code = 1 }
            #expect(failure()?.hasPrefix("Secret portal: RetrieveSecret cancelled (1)") == true)
            portal.answer.withLock { $0.code = 2 }
            #expect(failure()?.hasPrefix("Secret portal: RetrieveSecret failed (2)") == true)
            // A Response with 0 from another connection, to the same request, counts for nothing.
            portal.answer.withLock { $0.spoofed = true }
            #expect(failure()?.hasPrefix("Secret portal: RetrieveSecret failed (2)") == true)
        }
    }

    @Test func aSecretOfAnotherSizeIsAnError() throws {
        try withPortal { portal in
            for count in [0, 32, 63, 65, 128] {
                portal.answer.withLock { $0.secret = Array(repeating: 1, count: count) }
                #expect(failure()?.contains("the master secret is not 64 bytes") == true, "\(count) bytes")
            }
        }
    }

    @Test func noResponseEndsAtTheDeadline() throws {
        try withPortal { portal in
            portal.answer.withLock { $0.code = nil }
            let started = g_get_monotonic_time()
            #expect(failure(700) == "Secret portal: no answer to RetrieveSecret within 700 ms; nothing was read")
            let elapsed = (g_get_monotonic_time() - started) / 1000
            #expect(elapsed >= 650 && elapsed < 1700, "\(elapsed) ms")
            // The portal answers again: the next call works.
            portal.answer.withLock { $0.code = 0 }
            #expect(failure() == nil)
        }
    }

    @Test func aRequestPathOtherThanTheTokensIsFollowed() throws {
        try withPortal { portal in
            portal.answer.withLock {
                $0.otherHandle = true
                $0.responseFirst = false
            }
            #expect(failure() == nil)
        }
    }

    @Test func noPortalOnTheBusIsAStorageFailureNamingIt() throws {
        _ = try #require(getenv("PORTAL_TEST_KEYRING_DIR"), "run inside scripts/with-keyring.sh (a private session bus)")
        #expect(failure()?.hasPrefix("Secret portal: not reachable: no provider owns org.freedesktop.portal.Desktop") == true)
        #expect(throws: StorageFailure.self) { try SecretPortal.version(until: soon()) }
    }
}
