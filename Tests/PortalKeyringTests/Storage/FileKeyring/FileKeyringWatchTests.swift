import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// The session watch over a file keyring (a Flatpak sandbox; `FileKeyringMonitor`): a sign-in or
/// sign-out written into the file by another writer is announced, without a Secret Service signal
/// (the file keyring sends none); a write that changes nothing of ours gives no event. Runs inside
/// scripts/with-keyring.sh (the watch still connects to the session bus).
@Suite(.serialized) struct FileKeyringWatchTests {
    func auth(_ path: String, _ id: String) throws -> PortalAuth {
        try PortalAuth(authEnvironmentId: id, redirectUrl: "app://cb", apiHost: "api.portalhq.io",
                       storage: FileKeyringStorage(path: path, masterSecret: master(ourSecret)))
    }

    /// Ends the watch after 20 s, so a missed event fails the test (`next()` gives nil) instead
    /// of hanging it.
    static func bounded(_ changes: SessionChanges) -> Task<Void, Never> {
        Task {
            try? await Task.sleep(for: .seconds(20))
            changes.cancel()
        }
    }

    @Test func aSignInAndASignOutWrittenIntoTheFileAreAnnounced() async throws {
        _ = try KeyringControl.environment()
        let directory = try temporaryDirectory()
        defer { removeDirectory(directory) }
        // The keyrings directory does not exist yet: the watch starts before the first sign-in.
        let path = directory + "/data/keyrings/default.keyring"
        let id = "file-watch-\(getpid())"
        let watcher = try auth(path, id), writer = try auth(path, id)
        let changes = try await watcher.sessionChanges
        let bound = Self.bounded(changes)
        defer { bound.cancel() }
        var events = changes.makeAsyncIterator()
        _ = try await writer.persistSession(endUserId: "eu-file-1", clientSessionToken: "tok-1")
        #expect(await events.next() == .signedIn(endUserId: "eu-file-1"))
        // libsecret's own write of another schema's item: read again, nothing of ours changed.
        let other = try auth(path, id + "-other")
        _ = try await other.persistSession(endUserId: "eu-other", clientSessionToken: "tok-o")
        _ = try await writer.persistSession(endUserId: "eu-file-2", clientSessionToken: "tok-2")
        #expect(await events.next() == .signedIn(endUserId: "eu-file-2"), "the other environment gave nothing")
        try await writer.clearPersistedSession()
        #expect(await events.next() == .signedOut)
        changes.cancel()
        #expect(await events.next() == nil)
    }

    @Test func aWriteByAnotherProcessIsAnnounced() async throws {
        _ = try KeyringControl.environment()
        let directory = try temporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/default.keyring"
        let id = "file-watch-process-\(getpid())"
        let secretFile = directory + "/master"
        writeBytes(Array(ourSecret.utf8), to: secretFile)
        chmod(secretFile, 0o600)
        let cli = try portalSession()
        let changes = try await auth(path, id).sessionChanges
        let bound = Self.bounded(changes)
        defer { bound.cancel() }
        var events = changes.makeAsyncIterator()
        let status = system("printf 'tok-cli\\n' | ASAN_OPTIONS=detect_leaks=0 PORTAL_KEYRING_BACKEND='file:\(path)' PORTAL_KEYRING_MASTER_SECRET_FILE='\(secretFile)' "
                            + "'\(cli)' --env '\(id)' --redirect-url app://cb persist --end-user-id eu-cli >/dev/null")
        #expect(status == 0)
        #expect(await events.next() == .signedIn(endUserId: "eu-cli"))
        changes.cancel()
    }
}
