import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// The file keyring as a session storage (`FileKeyringStorage`), in what the contract suite
/// (StorageContractTests) cannot show: libsecret's own file backend on the same file
/// (`secret-tool`, FileKeyringTestSupport.swift), items under another master secret, writers in
/// several threads and processes, the lock's deadline, and files that must not be overwritten.
@Suite(.serialized) struct FileKeyringStorageTests {
    static let schema = ItemSchema.name

    private func auth(_ store: FileStore, id: String = "env") throws -> PortalAuth {
        try PortalAuth(authEnvironmentId: id, redirectUrl: "app://cb", apiHost: "api.portalhq.io", storage: store.storage)
    }

    /// The items of `path` as the file holds them.
    private func sealed(_ path: String) throws -> [SealedItem] { try FileKeyringFile.load(path)?.items ?? [] }

    /// Whether `foreign` are all still in the file, byte-exact and in their order.
    private func survived(_ foreign: [SealedItem], _ path: String) throws -> Bool {
        try sealed(path).filter { foreign.contains($0) } == foreign
    }

    @Test func otherSchemasItemsSurvivePersistClearAndInvalidationByteExact() throws {
        let store = try FileStore()
        try FileKeyringFile.makeDirectory(of: store.path)
        // The app's own secret, a look-alike without `xdg:schema`, and one of another schema
        // whose other attributes are ours.
        try SecretTool.store(file: store.path, password: ourSecret, label: "app", ["xdg:schema", "org.example.App", "account", "me"],
                             secret: binarySecret)
        try SecretTool.store(file: store.path, password: ourSecret, label: "no schema", ["auth_environment_id", "env"],
                             secret: Array(#"{"v":1,"clientSessionToken":"t","endUserId":"lookalike"}"#.utf8))
        try SecretTool.store(file: store.path, password: ourSecret, label: "other schema",
                             ["xdg:schema", Self.schema + "2", "auth_environment_id", "env", "session_generation", "aa",
                              "persisted_at", "99"], secret: Array("other".utf8))
        let foreign = try sealed(store.path)
        try #require(foreign.count == 3)
        let a = try auth(store)
        #expect(try a.restoreSession() == nil, "look-alikes are not ours, and they open: signed out")
        try a.persistSession(endUserId: "u1", clientSessionToken: "t1")
        #expect(try survived(foreign, store.path))
        let session = try #require(try a.restoreSession())
        #expect(session.endUserId == "u1")
        try a.persistSession(endUserId: "u2", clientSessionToken: "t2")
        try a.persistSession(endUserId: "u3", clientSessionToken: "t3")
        try #require(try a.restoreSession()).invalidate()
        #expect(try a.restoreSession() == nil)
        #expect(try survived(foreign, store.path))
        try a.persistSession(endUserId: "u4", clientSessionToken: "t4")
        try a.clearPersistedSession()
        #expect(try sealed(store.path) == foreign, "only our items came and went")
        #expect(try SecretTool.lookup(file: store.path, password: ourSecret, ["account", "me"]) == binarySecret)
        #expect(try SecretTool.lookup(file: store.path, password: ourSecret, ["xdg:schema", Self.schema + "2"]) == Array("other".utf8))
    }

    @Test func ourItemIsReadBySecretToolAndSecretToolsByUs() throws {
        let store = try FileStore()
        let session = try auth(store).persistSession(endUserId: "u1", clientSessionToken: "t1")
        let keyring = try #require(try FileKeyringFile.load(store.path))
        let found = try keyring.search(["auth_environment_id": "env"], key: keyring.key(masterSecret: master(ourSecret)))
        try #require(found.count == 1)
        let stored = plainBytes(found[0].item.secret)
        #expect(String(decoding: stored, as: UTF8.self).hasPrefix("portal-keyring-session/2 "))
        #expect(found[0].item.attributes["session_generation"] == session.generation)
        #expect(try SecretTool.lookup(file: store.path, password: ourSecret, ["xdg:schema", Self.schema, "auth_environment_id", "env"])
                == stored)
        #expect(try SecretTool.lookup(file: store.path, password: ourSecret, ["session_generation", session.generation ?? ""])
                == stored)

        // A session libsecret stored with our attributes is restored.
        let document = SessionDocument.encode(authEnvironmentId: "env-2", endUserId: "from-libsecret",
                                              token: SecretBytes.copyingUTF8(of: "tok"), generation: "0123", persistedAt: 7)
        try SecretTool.store(file: store.path, password: ourSecret, label: "Portal session",
                             ["xdg:schema", Self.schema, "auth_environment_id", "env-2", "session_generation", "0123",
                              "persisted_at", "7"], secret: plainBytes(document))
        let restored = try #require(try auth(store, id: "env-2").restoreSession())
        #expect(restored.endUserId == "from-libsecret")
        #expect(try restored.getToken() == "tok")
        #expect(try auth(store).restoreSession()?.generation == session.generation)
    }

    @Test func itemsUnderAnotherMasterSecretAreNeverDeletedAndRestoreSaysSo() throws {
        let store = try FileStore()
        try FileKeyringFile.makeDirectory(of: store.path)
        try SecretTool.store(file: store.path, password: otherSecret, label: "old key",
                             ["xdg:schema", Self.schema, "auth_environment_id", "env", "session_generation", "aa",
                              "persisted_at", "5"], secret: Array("under the old key".utf8))
        let old = try sealed(store.path)
        let a = try auth(store)
        do {
            _ = try a.restoreSession()
            Issue.record("restore answered although a session item cannot be read")
        } catch {
            guard case .sessionStorageFailure(let message) = error else { throw error }
            #expect(message.hasPrefix("file keyring \(store.path): 1 session item"))
            #expect(message.contains("cannot be read, not opening under this app's master secret"))
            #expect(message.hasSuffix("Signing in again stores a new session beside it"))
            #expect(message.contains("host keyring was reset"))
        }
        #expect(try store.observe(authEnvironmentId: "env") == .locked)
        #expect(try store.describe().first { $0.0 == "unreadableItems" }?.1.hasPrefix("1 (") == true)
        // Clear, a delete by the item's own id, persist: none removes or changes it.
        #expect(try store.deleteAll(authEnvironmentId: "env", generation: nil) == 0)
        try store.delete(itemId: old[0].id)
        #expect(try sealed(store.path) == old)
        try a.persistSession(endUserId: "new", clientSessionToken: "t")
        #expect(try a.restoreSession()?.endUserId == "new", "a sign-in under the new key is restored beside it")
        try a.clearPersistedSession()
        #expect(try sealed(store.path) == old)
        #expect(try SecretTool.lookup(file: store.path, password: otherSecret, ["auth_environment_id", "env"])
                == Array("under the old key".utf8))
    }

    @Test func anotherKeysItemOfAnotherSchemaIsNoSessionItem() throws {
        let store = try FileStore()
        try FileKeyringFile.makeDirectory(of: store.path)
        try SecretTool.store(file: store.path, password: otherSecret, label: "app", ["xdg:schema", "org.example.App", "account", "me"],
                             secret: Array("app secret".utf8))
        #expect(try auth(store).restoreSession() == nil)
        #expect(try store.observe(authEnvironmentId: "env") == .signedOut)
        #expect(try store.describe().first { $0.0 == "unreadableItems" }?.1.hasPrefix("1 (") == true)
    }

    @Test(arguments: ["restore", "persist", "clear", "observe", "describe"])
    func aMalformedFileIsAStorageFailureAndIsNeverOverwritten(_ operation: String) throws {
        let store = try FileStore()
        try FileKeyringFile.makeDirectory(of: store.path)
        let garbage = FileKeyringFormat.header + FileKeyringFormat.version + Array("not a GVariant at all".utf8)
        writeBytes(garbage, to: store.path)
        do throws(StorageFailure) {
            switch operation {
            case "restore": _ = try store.restore(authEnvironmentId: "env")
            case "persist": _ = try store.replace(authEnvironmentId: "env", generation: "aa", now: 1, label: "L") { _ in master("doc") }
            case "clear": _ = try store.deleteAll(authEnvironmentId: "env", generation: nil)
            case "observe": _ = try store.observe(authEnvironmentId: "env")
            default: _ = try store.describe()
            }
            Issue.record("\(operation) succeeded on a malformed file")
        } catch {
            #expect(error.message.hasPrefix("file keyring \(store.path): not a keyring file this library can read ("), "\(error.message)")
        }
        #expect(fileBytes(store.path) == garbage)
    }

    @Test func aNewFileIsCreatedPrivateWithItsDirectoryAndDescribed() throws {
        let store = try FileStore()
        #expect(try store.describe().map { "\($0.0)=\($0.1)" }
                == ["backend=file keyring", "file=\(store.path)", "items=0 (no file yet: the first persist creates it)"])
        #expect(try store.deleteAll(authEnvironmentId: "env", generation: nil) == 0)
        #expect(access(store.directory + "/keyrings", F_OK) != 0, "nothing to clear creates nothing")
        try auth(store).persistSession(endUserId: "u", clientSessionToken: "t")
        for (path, mode) in [(store.directory + "/keyrings", 0o700), (store.path, 0o600), (store.path + ".lock", 0o600)] {
            var status = stat()
            #expect(stat(path, &status) == 0)
            #expect(Int(status.st_mode & 0o777) == mode, "\(path)")
        }
        #expect(try store.describe().map { "\($0.0)=\($0.1)" }
                == ["backend=file keyring", "file=\(store.path)", "items=1", "unreadableItems=0"])
    }

    @Test func theKeyIsDerivedOncePerSaltAndASourceFailureWritesNothing() throws {
        let directory = try temporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/default.keyring"
        let calls = Lock(0)
        let failing = Lock(false)
        let secret = FileKeyringMasterSecret { _ throws(StorageFailure) in
            if failing.withLock({ $0 }) { throw .secretPortal("no answer to RetrieveSecret (test)") }
            calls.withLock { $0 += 1 }
            return master(ourSecret)
        }
        let storage = FileKeyringStorage(path: path, masterSecret: secret)
        let a = try PortalAuth(authEnvironmentId: "env", redirectUrl: "app://cb", apiHost: "api.portalhq.io", storage: storage)
        for round in 0..<3 {
            try a.persistSession(endUserId: "u\(round)", clientSessionToken: "t")
            #expect(try a.restoreSession()?.endUserId == "u\(round)")
        }
        #expect(calls.withLock { $0 } == 1)
        unlink(path)  // a new file gets a new salt, and so a key of its own
        try a.persistSession(endUserId: "v", clientSessionToken: "t")
        #expect(calls.withLock { $0 } == 2)
        unlink(path)
        failing.withLock { $0 = true }
        #expect(throws: PortalAuthError.sessionStorageFailure(message: "Secret portal: no answer to RetrieveSecret (test)")) {
            try a.persistSession(endUserId: "w", clientSessionToken: "t")
        }
        #expect(access(path, F_OK) != 0, "nothing written without the key")
    }

    /// No file yet and no master secret to be had (the portal refusing: the host's keyring
    /// locked): restore fails as a locked keyring does, never "signed out" — so a sign-in, which
    /// restores before it spends its grant, keeps the grant for when the secret can be had.
    @Test func noFileAndNoMasterSecretIsNoSignedOut() throws {
        let directory = try temporaryDirectory()
        defer { removeDirectory(directory) }
        let failing = Lock(true)
        let secret = FileKeyringMasterSecret { _ throws(StorageFailure) in
            if failing.withLock({ $0 }) { throw .secretPortal("RetrieveSecret failed (2) (test)") }
            return master(ourSecret)
        }
        let storage = FileKeyringStorage(path: directory + "/default.keyring", masterSecret: secret)
        let a = try PortalAuth(authEnvironmentId: "env", redirectUrl: "app://cb", apiHost: "api.portalhq.io", storage: storage)
        #expect(throws: PortalAuthError.sessionStorageFailure(message: "Secret portal: RetrieveSecret failed (2) (test)")) {
            try a.restoreSession()
        }
        failing.withLock { $0 = false }
        #expect(try a.restoreSession() == nil, "signed out once the secret can be had")
    }

    @Test func aWriterHoldingTheLockPastTheDeadlineFailsTheWriteAndNotTheRead() throws {
        let store = try FileStore(timeouts: KeyringTimeouts(callMilliseconds: 300, promptMilliseconds: 300))
        // Set up without the 300 ms bound: deriving the new file's key (PBKDF2, 100,000 rounds)
        // takes longer than that under the sanitizers (the slow checks' ASan run failed here). The
        // storage with the default deadline shares the master secret, so the key is kept for the
        // bounded calls below, which test the lock's deadline only.
        try PortalAuth(authEnvironmentId: "env", redirectUrl: "app://cb", apiHost: "api.portalhq.io",
                       storage: store.storage.withTimeouts(.default)).persistSession(endUserId: "u", clientSessionToken: "t")
        let before = fileBytes(store.path)
        let lock = try FileKeyringLock.take(store.path, until: .distantFuture)
        defer { close(lock) }
        let start = monotonicMilliseconds()
        #expect(throws: PortalAuthError.self) { try auth(store).persistSession(endUserId: "v", clientSessionToken: "t") }
        let waited = monotonicMilliseconds() - start
        #expect(waited >= 290 && waited < 2_000, "a persist waited \(waited) ms: its turn and the lock are 300 ms each")
        do throws(StorageFailure) {
            _ = try store.deleteAll(authEnvironmentId: "env", generation: nil)
            Issue.record("clear wrote without the lock")
        } catch {
            #expect(error.message == "file keyring \(store.path): clear did not get the file's lock within 300 ms "
                    + "(another process of this app is writing it); nothing was written")
        }
        #expect(fileBytes(store.path) == before)
        #expect(try auth(store).restoreSession()?.endUserId == "u", "reads take no lock")
    }

    /// libsecret in the same app writes without our lock: its write between our read and our
    /// replace is seen (the file's stamp changed), and the change is made again on its file.
    @Test func aWriteByLibsecretDuringOursIsNotLost() throws {
        let store = try FileStore()
        try auth(store).persistSession(endUserId: "u", clientSessionToken: "t")
        var runs = 0
        try store.storage.transaction("test", until: store.storage.deadline(), creating: false, otherwise: ()) { keyring, key throws(StorageFailure) in
            runs += 1
            if runs == 1 {
                _ = try? SecretTool.store(file: store.path, password: ourSecret, label: "meanwhile", ["account", "me"],
                                          secret: Array("libsecret's".utf8))
            }
            keyring.remove(try store.storage.ours(keyring, key, "env", secrets: false).map(\.found))
            return ((), true)
        }
        #expect(runs == 2)
        #expect(try SecretTool.lookup(file: store.path, password: ourSecret, ["account", "me"]) == Array("libsecret's".utf8))
        #expect(try store.restore(authEnvironmentId: "env") == nil)
    }

    /// libsecret replacing the file after our writer made its new file, right before our rename
    /// (a store of libsecret takes no lock): the rename does not overwrite it; the persist starts
    /// over on libsecret's file, and both the app's item and the new sign-in are there.
    @Test func aWriteByLibsecretRightBeforeOurRenameIsNotLost() throws {
        let store = try FileStore()
        try auth(store).persistSession(endUserId: "u", clientSessionToken: "t")
        let path = store.path
        let attempts = Lock(0)
        // Only this test's file: the hook is the process's, and other suites write keyrings meanwhile.
        FileKeyringFile.beforeReplace = { replaced in
            if replaced == path, attempts.withLock({ $0 += 1; return $0 }) == 1 {
                _ = try? SecretTool.store(file: path, password: ourSecret, label: "meanwhile", ["account", "me"],
                                          secret: Array("libsecret's".utf8))
            }
        }
        defer { FileKeyringFile.beforeReplace = nil }
        try auth(store).persistSession(endUserId: "u2", clientSessionToken: "t2")
        #expect(attempts.withLock { $0 } == 2, "the persist wrote once more, on libsecret's file")
        #expect(try SecretTool.lookup(file: path, password: ourSecret, ["account", "me"]) == Array("libsecret's".utf8))
        #expect(try auth(store).restoreSession()?.endUserId == "u2")
    }

    /// Several threads persist at once, each to an auth environment of its own and all to a
    /// shared one: every persist succeeds (they take turns), none is lost, and what stays of the
    /// shared one is the persist that ranks last.
    @Test func threadsPersistingAtOnceLoseNothingAndLeaveTheNewest() throws {
        let store = try FileStore()
        let results = Lock<[Persisted]>([])
        var threads: [pthread_t] = []
        for index in 0..<6 {
            threads.append(startThread {
                let mine = persistLoop(store.storage, worker: index, rounds: 8)
                results.withLock { $0 += mine }
            })
        }
        for thread in threads { pthread_join(thread, nil) }
        try checkNothingLost(results.withLock { $0 }, store, workers: 6, rounds: 8)
    }

    /// The same across processes: copies of this test binary run `persistLoopWorker`, each with
    /// a runtime directory of its own, as two instances of a Flatpak app have: their persists do
    /// not take turns (`PersistTurn`'s lock is there), and only the file's lock keeps them apart.
    @Test func processesPersistingAtOnceLoseNothingAndLeaveTheNewest() throws {
        let store = try FileStore()
        let workers = 4, rounds = 12
        var pids: [pid_t] = []
        for index in 0..<workers {
            let job = "\(store.path)|\(index)|\(rounds)|\(store.directory)/worker-\(index).txt"
            let runtime = "\(store.directory)/run-\(index)"
            try #require(mkdir(runtime, 0o700) == 0)
            pids.append(try spawnSelf(filter: "FileKeyringStorageTests/persistLoopWorker",
                                      variables: ["PORTAL_TEST_FILE_KEYRING_WORKER=\(job)", "XDG_RUNTIME_DIR=\(runtime)",
                                                  "ASAN_OPTIONS=detect_leaks=0"],
                                      log: "\(store.directory)/worker-\(index).log"))
        }
        for (index, pid) in pids.enumerated() {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            #expect(status == 0, "worker \(index) ended with status \(status): \(String(decoding: fileBytes("\(store.directory)/worker-\(index).log") ?? [], as: UTF8.self).suffix(2000))")
        }
        var results: [Persisted] = []
        for index in 0..<workers {
            let text = String(decoding: fileBytes("\(store.directory)/worker-\(index).txt") ?? [], as: UTF8.self)
            results += text.split(separator: "\n").compactMap(Persisted.init)
        }
        try checkNothingLost(results, store, workers: workers, rounds: rounds)
    }

    /// One worker process of `processesPersistingAtOnce…`: runs only when that test starts it.
    @Test(.enabled(if: getenv("PORTAL_TEST_FILE_KEYRING_WORKER") != nil, "a worker that processesPersistingAtOnce… starts"))
    func persistLoopWorker() throws {
        let job = String(cString: try #require(getenv("PORTAL_TEST_FILE_KEYRING_WORKER"))).split(separator: "|").map(String.init)
        try #require(job.count == 4)
        let storage = FileKeyringStorage(path: job[0], masterSecret: master(ourSecret))
        let results = persistLoop(storage, worker: try #require(Int(job[1])), rounds: try #require(Int(job[2])))
        writeBytes(Array(results.map(\.line).joined().utf8), to: job[3])
    }
}

/// One persist of a concurrency test: its auth environment, generation, `persisted_at`, and the
/// failure message when it failed.
struct Persisted {
    let environment: String
    let generation: String
    let persistedAt: UInt64
    let failure: String?

    var line: String { "\(environment) \(generation) \(persistedAt) \(failure ?? "ok")\n" }

    init(environment: String, generation: String, persistedAt: UInt64, failure: String?) {
        (self.environment, self.generation, self.persistedAt, self.failure) = (environment, generation, persistedAt, failure)
    }

    init?(_ line: Substring) {
        let fields = line.split(separator: " ", maxSplits: 3).map(String.init)
        guard fields.count == 4, let persistedAt = UInt64(fields[2]) else { return nil }
        self.init(environment: fields[0], generation: fields[1], persistedAt: persistedAt, failure: fields[3] == "ok" ? nil : fields[3])
    }
}

/// `rounds` persists to "shared" and to "own-`worker`", alternately.
func persistLoop(_ storage: FileKeyringStorage, worker: Int, rounds: Int) -> [Persisted] {
    var results: [Persisted] = []
    for round in 0..<rounds {
        for environment in ["shared", "own-\(worker)"] {
            let generation = ItemSchema.newGeneration()
            do throws(StorageFailure) {
                let persistedAt = try storage.replace(authEnvironmentId: environment, generation: generation,
                                                      now: ItemSchema.persistTimestamp(), label: "L") { persistedAt in
                    SessionDocument.encode(authEnvironmentId: environment, endUserId: "w\(worker)-\(round)",
                                           token: SecretBytes.copyingUTF8(of: "t"), generation: generation, persistedAt: persistedAt)
                }
                results.append(Persisted(environment: environment, generation: generation, persistedAt: persistedAt, failure: nil))
            } catch {
                results.append(Persisted(environment: environment, generation: generation, persistedAt: 0, failure: error.message))
            }
        }
    }
    return results
}

/// Every persist succeeded; one item per auth environment; each is the persist that ranks last
/// among those of its auth environment (the last round of a worker's own one).
func checkNothingLost(_ results: [Persisted], _ store: FileStore, workers: Int, rounds: Int) throws {
    #expect(results.count == workers * rounds * 2)
    #expect(results.filter { $0.failure != nil }.map(\.line) == [])
    #expect(try store.total() == workers + 1)
    for environment in ["shared"] + (0..<workers).map({ "own-\($0)" }) {
        let newest = results.filter { $0.environment == environment }.max { ($0.persistedAt, $0.generation) < ($1.persistedAt, $1.generation) }
        #expect(try store.restore(authEnvironmentId: environment)?.generation == newest?.generation, "\(environment)")
    }
    #expect(Set(results.filter { $0.environment == "shared" }.map(\.persistedAt)).count == workers * rounds,
            "every shared persist ranked above the ones it saw")
}

/// A thread of its own for `body`, joined by the caller.
func startThread(_ body: @escaping @Sendable () -> Void) -> pthread_t {
    final class Box { let body: @Sendable () -> Void; init(_ body: @escaping @Sendable () -> Void) { self.body = body } }
    var thread = pthread_t()
    let box = Unmanaged.passRetained(Box(body)).toOpaque()
    let created = pthread_create(&thread, nil, { raw in
        guard let raw else { return nil }
        Unmanaged<Box>.fromOpaque(raw).takeRetainedValue().body()
        return nil
    }, box)
    precondition(created == 0, "pthread_create")
    return thread
}

/// Starts this test binary again, running only the tests `filter` names, with `variables` set
/// in its environment (over the ones this process has) and its output in `log`.
func spawnSelf(filter: String, variables set: [String], log: String) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    let words = ["/proc/self/exe", "--testing-library", "swift-testing", "--filter", filter]
    let names = Set(set.map { $0.prefix { $0 != "=" } })
    var variables = set
    var entry = environ
    while let pointer = entry.pointee {
        let variable = String(cString: pointer)
        if !names.contains(variable.prefix { $0 != "=" }) { variables.append(variable) }
        entry += 1
    }
    let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
    let envp: [UnsafeMutablePointer<CChar>?] = variables.map { strdup($0) } + [nil]
    defer { (argv + envp).forEach { free($0) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, "/proc/self/exe", &actions, nil, argv, envp)
    try #require(spawned == 0, "posix_spawn failed: \(spawned)")
    return pid
}
