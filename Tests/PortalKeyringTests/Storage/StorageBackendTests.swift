import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// The explicit storage override (`StorageBackend`: `PORTAL_KEYRING_BACKEND`,
/// `PORTAL_KEYRING_MASTER_SECRET_FILE`), and the file keyring through it from the command-line
/// tool, several processes at once.
@Suite(.serialized) struct StorageBackendTests {
    private func secretFile(_ directory: String, _ bytes: [UInt8], mode: mode_t = 0o600) -> String {
        let path = directory + "/master-secret"
        unlink(path)
        writeBytes(bytes, to: path)
        chmod(path, mode)
        return path
    }

    private func misconfiguration(_ storage: any SessionStorage) -> String? {
        (storage as? MisconfiguredStorage)?.message
    }

    @Test func theEnvironmentChoosesTheStorageAndNeverFallsBackSilently() throws {
        let timeouts = KeyringTimeouts(callMilliseconds: 1234, promptMilliseconds: 1)
        for value in [nil, "", "secret-service"] {
            let environment = value.map { ["PORTAL_KEYRING_BACKEND": $0] } ?? [:]
            #expect(StorageBackend.storage(timeouts: timeouts, environment: environment) is SecretServiceStorage)
        }
        let file = StorageBackend.storage(timeouts: timeouts, environment: [
            "PORTAL_KEYRING_BACKEND": "file:/data/keyrings/default.keyring", "PORTAL_KEYRING_MASTER_SECRET_FILE": "/run/secret"])
        let chosen = try #require(file as? FileKeyringStorage)
        #expect(chosen.path == "/data/keyrings/default.keyring")
        #expect(chosen.timeouts == timeouts)
        #expect(misconfiguration(StorageBackend.storage(timeouts: timeouts, environment: ["PORTAL_KEYRING_BACKEND": "kwallet"]))
                == "PORTAL_KEYRING_BACKEND='kwallet' is neither 'secret-service' nor 'file:' and an absolute path")
        #expect(misconfiguration(StorageBackend.storage(timeouts: timeouts, environment: ["PORTAL_KEYRING_BACKEND": "file:k"])) != nil)
        // Without a master secret file, the Secret portal's secret.
        let portal = try #require(StorageBackend.storage(timeouts: timeouts, environment: ["PORTAL_KEYRING_BACKEND": "file:/k"])
                                  as? FileKeyringStorage)
        #expect(portal.masterSecret === StorageBackend.portalSecret)
        for secret in ["", "relative/secret"] {
            var environment = ["PORTAL_KEYRING_BACKEND": "file:/k"]
            environment["PORTAL_KEYRING_MASTER_SECRET_FILE"] = secret
            #expect(misconfiguration(StorageBackend.storage(timeouts: timeouts, environment: environment))
                    == "PORTAL_KEYRING_BACKEND names a file keyring, and PORTAL_KEYRING_MASTER_SECRET_FILE names no absolute path to its master secret")
        }
        let broken = MisconfiguredStorage(message: "m")
        #expect(throws: PortalAuthError.sessionStorageFailure(message: "keyring backend misconfigured: m")) {
            try PortalAuth(authEnvironmentId: "env", redirectUrl: "app://cb", apiHost: "api.portalhq.io", storage: broken)
                .restoreSession()
        }
    }

    @Test func insideAFlatpakSandboxTheFileKeyringIsInTheAppsDataDirectoryAndTheOverrideWins() throws {
        let directory = try temporaryDirectory()
        defer { removeDirectory(directory) }
        let info = directory + "/.flatpak-info"
        writeBytes(Array("[Application]\nname=org.example.App\n".utf8), to: info)
        let timeouts = KeyringTimeouts(callMilliseconds: 1234, promptMilliseconds: 1)
        func storage(_ environment: [String: String], _ marker: String = info) -> any SessionStorage {
            StorageBackend.storage(timeouts: timeouts, environment: environment, flatpakInfo: marker)
        }
        let data = "/home/u/.var/app/org.example.App/data"
        let inside = try #require(storage(["XDG_DATA_HOME": data, "HOME": "/home/u"]) as? FlatpakStorage)
        #expect(inside.keyringPath == data + "/keyrings/default.keyring")
        #expect(inside.timeouts == timeouts)
        #expect((inside.withTimeouts(.default) as? FlatpakStorage)?.timeouts == .default)
        // GLib's rule: XDG_DATA_HOME when absolute, else ~/.local/share.
        for value in [nil, "", "relative"] {
            var environment = ["HOME": "/home/u"]
            environment["XDG_DATA_HOME"] = value
            #expect((storage(environment) as? FlatpakStorage)?.keyringPath == "/home/u/.local/share/keyrings/default.keyring")
        }
        #expect(misconfiguration(storage([:]))?.hasPrefix("in a Flatpak sandbox, neither XDG_DATA_HOME nor HOME") == true)
        // The explicit override wins; outside a sandbox, the Secret Service.
        #expect(storage(["PORTAL_KEYRING_BACKEND": "secret-service", "XDG_DATA_HOME": data]) is SecretServiceStorage)
        #expect((storage(["PORTAL_KEYRING_BACKEND": "file:/k", "XDG_DATA_HOME": data]) as? FileKeyringStorage)?.path == "/k")
        #expect(storage(["XDG_DATA_HOME": data], directory + "/absent") is SecretServiceStorage)
    }

    @Test func theMasterSecretFileMustBeThisUsersAndPrivate() throws {
        let directory = try temporaryDirectory()
        defer { removeDirectory(directory) }
        let bytes = Array(ourSecret.utf8)
        #expect(try plainBytes(StorageBackend.readMasterSecret(secretFile(directory, bytes))) == bytes)
        let binary: [UInt8] = Array(0...63)
        #expect(try plainBytes(StorageBackend.readMasterSecret(secretFile(directory, binary))) == binary)
        let refused: [(() -> String, String)] = [
            ({ secretFile(directory, bytes, mode: 0o640) }, "is not a regular file of this user that only it can read"),
            ({ secretFile(directory, []) }, "holds 0 bytes, not 1 to 4096"),
            ({ secretFile(directory, [UInt8](repeating: 1, count: 4097)) }, "holds 4097 bytes, not 1 to 4096"),
            ({ directory }, "is not a regular file"),
            ({ directory + "/missing" }, "No such file or directory"),
        ]
        for (make, reason) in refused {
            let path = make()
            do throws(StorageFailure) {
                _ = try StorageBackend.readMasterSecret(path)
                Issue.record("\(path) was read as a master secret")
            } catch {
                #expect(error.message.hasPrefix("keyring backend misconfigured: PORTAL_KEYRING_MASTER_SECRET_FILE: "))
                #expect(error.message.contains(reason), "\(error.message)")
            }
        }
        // A symbolic link is not followed (another user's link could point anywhere), and says so.
        let target = secretFile(directory, bytes)
        symlink(target, directory + "/link")
        #expect(throws: StorageFailure.misconfigured("PORTAL_KEYRING_MASTER_SECRET_FILE: open \(directory)/link: "
                                                     + "is a symbolic link (not followed: name the file itself)")) {
            try StorageBackend.readMasterSecret(directory + "/link")
        }
        // A FIFO is refused at once: opening one for reading would wait for a writer for ever.
        #expect(mkfifo(directory + "/fifo", 0o600) == 0)
        #expect(throws: StorageFailure.self) { try StorageBackend.readMasterSecret(directory + "/fifo") }
    }

    /// `portal-session persist` in three loops of five at once, each loop with a runtime
    /// directory of its own (two instances of a Flatpak app do not share one), into a file
    /// keyring that also holds another application's item: every persist succeeds, the one
    /// item left is the newest, `restore` and libsecret read it, and the other item is intact.
    @Test func theCommandLineToolPersistsFromSeveralProcessesIntoTheFileKeyring() throws {
        let directory = try temporaryDirectory()
        defer { removeDirectory(directory) }
        let keyring = directory + "/keyrings/default.keyring"
        let secret = secretFile(directory, Array(ourSecret.utf8))
        try FileKeyringFile.makeDirectory(of: keyring)
        try SecretTool.store(file: keyring, password: ourSecret, label: "app", ["xdg:schema", "org.example.App", "account", "me"],
                             secret: binarySecret)
        let foreign = try #require(try FileKeyringFile.load(keyring)).items
        let tool = try portalSession()
        let environment = "PORTAL_KEYRING_BACKEND='file:\(keyring)' PORTAL_KEYRING_MASTER_SECRET_FILE='\(secret)' "
            + "DBUS_SESSION_BUS_ADDRESS= PORTAL_AUTH_ENVIRONMENT_ID=env PORTAL_REDIRECT_URL=app://cb "
            // Under the slow checks' sanitizers (Tests/fault/run.sh --slow) the tool is
            // instrumented too; its exit status is about the keyring here, not about leaks.
            + "ASAN_OPTIONS=detect_leaks=0"
        let script = """
            cd '\(directory)' || exit 9
            for w in 0 1 2; do
              mkdir -m 700 run-$w
              ( for i in 1 2 3 4 5; do
                  printf tok-$w-$i | env \(environment) XDG_RUNTIME_DIR="$PWD/run-$w" timeout 60 '\(tool)' \
                    persist --end-user-id w$w-$i >/dev/null 2>>errors || echo "w$w-$i" >> failures
                done ) &
            done
            wait
            env \(environment) timeout 60 '\(tool)' restore > restored 2>> errors
            """
        #expect(system(script) == 0)
        #expect(fileBytes(directory + "/failures") == nil, "failed: \(String(decoding: fileBytes(directory + "/errors") ?? [], as: UTF8.self))")
        let file = try #require(try FileKeyringFile.load(keyring))
        #expect(file.items.count == 2)
        #expect(file.items.filter { foreign.contains($0) } == foreign)
        let ours = try file.search(["auth_environment_id": "env"], key: file.key(masterSecret: master(ourSecret)))
        try #require(ours.count == 1)
        let document = try #require(ours[0].item.secret.withUnsafeBytes { SessionDocument.decode($0) })
        #expect(document.endUserId.hasSuffix("-5"), "a loop's last persist ranks above its earlier ones")
        #expect(String(decoding: fileBytes(directory + "/restored") ?? [], as: UTF8.self) == document.endUserId + "\n")
        #expect(try SecretTool.lookup(file: keyring, password: ourSecret, ["xdg:schema", ItemSchema.name])
                == plainBytes(ours[0].item.secret))
        #expect(try SecretTool.lookup(file: keyring, password: ourSecret, ["account", "me"]) == binarySecret)
    }
}
