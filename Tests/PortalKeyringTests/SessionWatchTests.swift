import Testing
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// `auth.sessionChanges` (issue 16) against the real keyring: the changes another `PortalAuth`
/// makes arrive in order; cancelling the iterating task ends the sequence and stops the watch
/// thread; a lock is never a sign-out.
@Suite(.serialized) struct SessionWatchTests {
    private func newAuth(_ tag: String) throws -> PortalAuth {
        _ = try KeyringControl.environment()
        return try PortalAuth(authEnvironmentId: "swift-watch-\(tag)-\(getpid())", redirectUrl: "app://cb")
    }

    /// Threads of this process named "portal-watch".
    private func watchThreads() -> Int {
        guard let dir = opendir("/proc/self/task") else { return -1 }
        defer { closedir(dir) }
        var count = 0
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasPrefix(".") { continue }
            guard let file = fopen("/proc/self/task/\(name)/comm", "r") else { continue }
            var buffer = [CChar](repeating: 0, count: 64)
            if fgets(&buffer, 64, file) != nil,
               String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) == "portal-watch\n" {
                count += 1
            }
            fclose(file)
        }
        return count
    }

    /// Waits (up to 2 s) until `watchThreads()` is `count`: a GLib thread names itself once it
    /// runs, and a joined thread leaves /proc shortly after.
    private func threadsBecome(_ count: Int) async -> Bool {
        for _ in 0..<200 {
            if watchThreads() == count { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    @Test func changesByAnotherAuthArriveInOrder() async throws {
        let auth = try newAuth("order")
        let writer = try PortalAuth(authEnvironmentId: auth.authEnvironmentId, redirectUrl: "app://cb")
        let other = try PortalAuth(authEnvironmentId: auth.authEnvironmentId + "-other", redirectUrl: "app://cb")
        let changes = try await auth.sessionChanges
        var events = changes.makeAsyncIterator()
        _ = try await writer.persistSession(endUserId: "eu-swift-1", clientSessionToken: "tok-1")
        #expect(await events.next() == .signedIn(endUserId: "eu-swift-1"))
        _ = try await other.persistSession(endUserId: "eu-other", clientSessionToken: "tok-o")
        try await writer.clearPersistedSession()
        #expect(await events.next() == .signedOut) // the other environment gave nothing
        try await other.clearPersistedSession()
        changes.cancel()
        #expect(await events.next() == nil)
    }

    /// A damaged item (its document names another sign-in than its `session_generation`;
    /// docs/providers.md) is not restored, so the watch announces no sign-in for it either: the
    /// first event is the intact sign-in stored after it.
    @Test func aDamagedItemIsNoSignIn() async throws {
        let auth = try newAuth("damaged")
        let id = auth.authEnvironmentId
        let changes = try await auth.sessionChanges
        var events = changes.makeAsyncIterator()
        let document = SessionDocument.encode(authEnvironmentId: id, endUserId: "older-user",
                                              token: SecretBytes.copyingUTF8(of: "older-token"), generation: "0a", persistedAt: 1)
        #expect(try KeyringControl.run(["store", "--schema", LibSecretStorage.schemaName, "auth_environment_id=\(id)",
                                        "session_generation=0b", "persisted_at=1"],
                                       input: document.withUnsafeBytes { Array($0) }).status == 0)
        let writer = try PortalAuth(authEnvironmentId: id, redirectUrl: "app://cb")
        _ = try await writer.persistSession(endUserId: "eu-intact", clientSessionToken: "tok-intact")
        #expect(await events.next() == .signedIn(endUserId: "eu-intact"))
        try await writer.clearPersistedSession()
        changes.cancel()
    }

    @Test func cancellingTheIteratingTaskStopsTheWatch() async throws {
        let auth = try newAuth("cancel")
        let before = watchThreads()
        let changes = try await auth.sessionChanges
        #expect(await threadsBecome(before + 1))
        let consumer = Task { () -> Int in
            var count = 0
            for await _ in changes { count += 1 }
            return count
        }
        consumer.cancel()
        #expect(await consumer.value == 0)
        #expect(await threadsBecome(before))
    }

    @Test func aLockIsNotASignOut() {
        #expect(SessionChange.between(.signedIn(generation: "g", endUserId: "u"), .locked) == .locked)
        #expect(SessionChange.between(.locked, .signedIn(generation: "g", endUserId: "u")) == .signedIn(endUserId: "u"))
        #expect(SessionChange.between(.signedIn(generation: "g", endUserId: "u"), .signedIn(generation: "g", endUserId: "u")) == nil)
        #expect(SessionChange.between(nil, .signedOut) == .signedOut)
    }
}
