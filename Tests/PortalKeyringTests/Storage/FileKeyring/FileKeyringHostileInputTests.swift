import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring
import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// A file keyring that someone else shaped — items anyone can append without
/// the key (many attributes, many items, a name twice), a file too large, an iteration count
/// above libsecret's, and things that are no keyring file at all (a FIFO, a directory, an empty
/// file, symbolic links to a FIFO, to a valid keyring, to nothing). Each is run against every
/// operation — restore, persist, clear, status and the watch's read — and each must end within
/// its deadline plus a small slack, with the outcome it promises (docs/security.md, "Hostile
/// input: planted items, crafted files"), and the real session neither lost nor swapped.
@Suite(.serialized) struct FileKeyringHostileInputTests {
    /// Both ×10 under a sanitizer (the slow fault checks), where reading and key derivation take
    /// several times longer: the bounds are wall time.
    static let timeoutMilliseconds: UInt32 = 1_000 * HostileInput.sanitizerSlowdown
    /// What an operation may take beyond its deadline (a loaded 2-core machine).
    static let slackMilliseconds = 750 * Int(HostileInput.sanitizerSlowdown)
    static let operations = ["restore", "persist", "clear", "status", "watch"]

    /// A keyring file holding the real session (end user "real"), under a 1000 ms deadline
    /// (`timeoutMilliseconds`).
    final class Setup {
        let store: FileStore
        let generation: String
        var path: String { store.path }
        var storage: FileKeyringStorage { store.storage }

        init(milliseconds: UInt32 = FileKeyringHostileInputTests.timeoutMilliseconds) throws {
            store = try FileStore(timeouts: KeyringTimeouts(callMilliseconds: milliseconds, promptMilliseconds: 1_000))
            // The real session is stored under the default deadline, not the test's: creating the
            // file derives its key, which a sanitizer slows past a short deadline.
            let writer = FileKeyringStorage(path: store.path, masterSecret: master(ourSecret),
                                            timeouts: KeyringTimeouts(callMilliseconds: 5_000 * HostileInput.sanitizerSlowdown,
                                                                      promptMilliseconds: 1_000))
            let auth = try PortalAuth(authEnvironmentId: "env", redirectUrl: "app://cb", apiHost: "api.portalhq.io",
                                      storage: writer)
            generation = try #require(try auth.persistSession(endUserId: "real", clientSessionToken: "real-token").generation)
        }

        /// The real session, as restore reads it now.
        func restoresTheRealSession() throws -> Bool {
            guard let restored = try storage.restore(authEnvironmentId: "env") else { return false }
            return restored.document.endUserId == "real" && restored.generation == generation
        }
    }

    /// One operation on `storage`: its outcome (nil: succeeded; else the failure's message) and
    /// its wall time.
    static func run(_ operation: String, _ storage: FileKeyringStorage) -> (failure: String?, milliseconds: Int) {
        let start = g_get_monotonic_time()
        var failure: String?
        do throws(StorageFailure) {
            switch operation {
            case "restore": _ = try storage.restore(authEnvironmentId: "env")
            case "persist":
                _ = try storage.replace(authEnvironmentId: "env", generation: String(repeating: "b", count: 32), now: 1,
                                        label: "L") { persistedAt in
                    SessionDocument.encode(authEnvironmentId: "env", endUserId: "new", token: SecretBytes.copyingUTF8(of: "new-token"),
                                           generation: String(repeating: "b", count: 32), persistedAt: persistedAt)
                }
            case "clear": _ = try storage.deleteAll(authEnvironmentId: "env", generation: nil)
            case "status": _ = try storage.describe()
            default: _ = try storage.observe(authEnvironmentId: "env")
            }
        } catch {
            failure = error.message
        }
        return (failure, (g_get_monotonic_time() - start) / 1000)
    }

    static func withinBound(_ milliseconds: Int) -> Bool {
        milliseconds <= Int(timeoutMilliseconds) + slackMilliseconds
    }

    // MARK: - Crafted files

    /// An item anyone can append without the key: `names` attribute names with made-up hashes,
    /// and a blob of the right shape that opens under no key.
    static func craftedItem(names: [String]) -> SealedItem {
        SealedItem(hashedAttributes: names.map { .init(name: $0, hash: [UInt8](repeating: 0xA5, count: 32)) },
                   blob: [UInt8](repeating: 0x5A, count: 64))
    }

    /// The file at `path` with `items` appended (and, when given, another iteration count),
    /// written in place as a foreign writer would — no key needed.
    static func append(_ items: [SealedItem], to path: String, iterations: UInt32? = nil) throws {
        let keyring = try #require(try FileKeyringFile.load(path))
        let crafted = FileKeyring(salt: keyring.salt, iterations: iterations ?? keyring.iterations, modified: keyring.modified,
                                  usageCount: keyring.usageCount, items: keyring.items + items)
        writeBytes(FileKeyringFormat.encode(crafted), to: path)
    }

    /// What a crafted file holds, and the message fragment every operation must fail with.
    static let craftedCases: [(name: String, expected: String)] = [
        ("many attributes", "item 1 has 50000 attributes, more than 64"),
        ("many items", "10001 items, more than 10000"),
        ("a name twice", "item 1: attribute 'a' appears twice"),
        ("oversized", "more than 4194304"),
        ("iterations above libsecret's", "iteration count 1000000 outside 1000...100000"),
        ("empty file", "no GnomeKeyring header (0 bytes)"),
    ]

    static func craft(_ name: String, at path: String) throws {
        switch name {
        case "many attributes": try append([craftedItem(names: (0..<50_000).map { "a\($0)" })], to: path)
        case "many items": try append([SealedItem](repeating: craftedItem(names: ["a"]), count: 10_000), to: path)
        case "a name twice": try append([craftedItem(names: ["a", "b", "a"])], to: path)
        case "oversized":
            var bytes = try #require(fileBytes(path))
            // One byte over the documented 4 MiB (docs/storage.md#the-file-keyring-storage-override, docs/security.md), not over the constant.
            bytes += [UInt8](repeating: 0, count: 4 * 1024 * 1024 + 1 - bytes.count)
            writeBytes(bytes, to: path)
        case "iterations above libsecret's": try append([], to: path, iterations: 1_000_000)
        default: writeBytes([], to: path)
        }
    }

    @Test(arguments: craftedCases.map(\.name), operations)
    func aCraftedFileIsRefusedAtOnceAndKeptAsItIs(_ name: String, _ operation: String) throws {
        let setup = try Setup()
        let original = try #require(fileBytes(setup.path))
        try Self.craft(name, at: setup.path)
        let crafted = try #require(fileBytes(setup.path))
        let (failure, milliseconds) = Self.run(operation, setup.storage)
        #expect(Self.withinBound(milliseconds), "\(name): \(operation) took \(milliseconds) ms")
        let expected = try #require(Self.craftedCases.first { $0.name == name }).expected
        let message = try #require(failure, "\(name): \(operation) succeeded on a crafted file")
        #expect(message.hasPrefix("file keyring \(setup.path): not a keyring file this library can read ("), "\(message)")
        #expect(message.contains(expected), "\(name): \(message)")
        #expect(fileBytes(setup.path) == crafted, "\(name): \(operation) wrote over the crafted file")
        writeBytes(original, to: setup.path)
        #expect(try setup.restoresTheRealSession())
    }

    /// A file at the caps: every item with the most attributes allowed, as many items as fit
    /// under the size cap.
    static func atTheCaps(_ path: String, items: Int) throws {
        let names = (0..<FileKeyringFormat.maximumAttributes).map { "attribute-" + String(1000 + $0) }
        try append([SealedItem](repeating: craftedItem(names: names), count: items), to: path)
    }

    /// Within the caps reading is linear: 1,000 items at the attribute cap (3.3 MB), the real
    /// session among them, restore under the default deadline.
    @Test func aFileWithinTheCapsIsRead() throws {
        let setup = try Setup(milliseconds: KeyringTimeouts.default.callMilliseconds)
        try Self.atTheCaps(setup.path, items: 1_000)
        let start = g_get_monotonic_time()
        #expect(try setup.restoresTheRealSession())
        let milliseconds = (g_get_monotonic_time() - start) / 1000
        #expect(milliseconds <= Int(KeyringTimeouts.default.callMilliseconds) + Self.slackMilliseconds, "\(milliseconds) ms")
    }

    /// The largest file within every cap (4 MiB: 1,250 items of 64 attributes) under a deadline
    /// that falls in the middle of reading it: every operation stops reading at the deadline,
    /// says so, and writes nothing.
    ///
    /// The deadline is measured, not guessed: a third of what reading this file (`loadStamped`,
    /// the operations' first step, before key derivation and decryption) takes on this machine
    /// and build (a third: the read under test may run faster than the measured one on a machine
    /// whose load changes). A sanitizer slows reading several-fold and the rest of an operation by other
    /// factors, so a fixed deadline, or one set from a whole operation's time, fell after the
    /// read under one sanitizer or the other.
    @Test(arguments: operations)
    func readingStopsAtTheDeadline(_ operation: String) throws {
        let setup = try Setup()
        try Self.atTheCaps(setup.path, items: 1_250)
        let crafted = try #require(fileBytes(setup.path))
        #expect(crafted.count > 4_000_000 && crafted.count <= FileKeyringFormat.maximumFileSize, "\(crafted.count) bytes")
        // The fastest of three reads: one read slowed by other work on the machine (the test
        // command runs two suites at once) set a deadline after the operation's own, faster read
        // had finished, and the operation succeeded.
        var reading = Int.max
        for _ in 0..<3 {
            let start = g_get_monotonic_time()
            let read = try FileKeyringFile.loadStamped(setup.path)
            reading = min(reading, Int((g_get_monotonic_time() - start) / 1000))
            try #require(read?.keyring.items.count == 1_251)
        }
        // Reading must be long enough that a deadline can fall inside it.
        try #require(reading >= 30, "reading took \(reading) ms")
        let deadline = UInt32(reading / 3)
        let storage = FileKeyringStorage(path: setup.path, masterSecret: master(ourSecret),
                                         timeouts: KeyringTimeouts(callMilliseconds: deadline, promptMilliseconds: 1_000))
        let (failure, milliseconds) = Self.run(operation, storage)
        #expect(milliseconds <= Int(deadline) + Self.slackMilliseconds, "\(operation) took \(milliseconds) ms")
        #expect(failure?.contains("reading it did not finish within \(deadline) ms (read ") == true,
                "\(operation): \(failure ?? "succeeded") (deadline \(deadline) ms; reading took \(reading) ms)")
        #expect(fileBytes(setup.path) == crafted)
    }

    // MARK: - Things that are no keyring file

    /// What takes the keyring's place; the real file is kept aside (`aside`) meanwhile.
    static let placeCases: [(name: String, expected: String)] = [
        ("FIFO", "is a FIFO (named pipe), not a keyring file"),
        ("symlink to a FIFO", "is a FIFO (named pipe), not a keyring file"),
        ("directory", "is a directory, not a keyring file"),
        ("dangling symlink", "which does not exist (a dangling link"),
    ]

    static func place(_ name: String, at path: String, aside: String) throws {
        try #require(rename(path, aside) == 0)
        let fifo = aside + ".fifo"
        switch name {
        case "FIFO": try #require(mkfifo(path, 0o600) == 0)
        case "symlink to a FIFO":
            try #require(mkfifo(fifo, 0o600) == 0)
            try #require(symlink(fifo, path) == 0)
        case "directory": try #require(mkdir(path, 0o700) == 0)
        default: try #require(symlink(aside + ".missing", path) == 0)
        }
    }

    @Test(arguments: placeCases.map(\.name), operations)
    func aFileThatIsNoKeyringIsAStorageFailureAtOnce(_ name: String, _ operation: String) throws {
        let setup = try Setup()
        let aside = setup.store.directory + "/real.keyring"
        let original = try #require(fileBytes(setup.path))
        try Self.place(name, at: setup.path, aside: aside)
        var before = stat()
        try #require(lstat(setup.path, &before) == 0)
        let (failure, milliseconds) = Self.run(operation, setup.storage)
        #expect(Self.withinBound(milliseconds), "\(name): \(operation) took \(milliseconds) ms")
        let message = try #require(failure, "\(name): \(operation) succeeded")
        let expected = try #require(Self.placeCases.first { $0.name == name }).expected
        #expect(message.hasPrefix("file keyring \(setup.path): cannot be accessed: "), "\(message)")
        #expect(message.contains(expected), "\(name): \(message)")
        // Nothing replaced, nothing created: what is there stays, the link still leads nowhere.
        var after = stat()
        #expect(lstat(setup.path, &after) == 0 && after.st_ino == before.st_ino && after.st_mode == before.st_mode)
        #expect(access(aside + ".missing", F_OK) != 0)
        #expect(fileBytes(aside) == original)
        if (after.st_mode & S_IFMT) == S_IFDIR { rmdir(setup.path) } else { unlink(setup.path) }
        try #require(rename(aside, setup.path) == 0)
        #expect(try setup.restoresTheRealSession())
    }

    /// A symbolic link to a valid keyring (a dotfiles or sync setup; libsecret follows it): every
    /// operation works on the file it leads to, at once, and the link stays a link.
    @Test(arguments: operations)
    func aSymlinkToAKeyringIsFollowed(_ operation: String) throws {
        let setup = try Setup()
        let elsewhere = setup.store.directory + "/dotfiles"
        try #require(mkdir(elsewhere, 0o700) == 0)
        let target = elsewhere + "/synced.keyring"
        try #require(rename(setup.path, target) == 0)
        // A relative link, as a dotfiles manager makes them.
        try #require(symlink("../dotfiles/synced.keyring", setup.path) == 0)
        unlink(setup.path + ".lock")  // the first persist's, before the link
        let (failure, milliseconds) = Self.run(operation, setup.storage)
        #expect(failure == nil, "\(operation): \(failure ?? "")")
        #expect(Self.withinBound(milliseconds), "\(operation) took \(milliseconds) ms")
        var status = stat()
        #expect(lstat(setup.path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFLNK, "the link stays a link")
        let restored = try setup.storage.restore(authEnvironmentId: "env")
        switch operation {
        case "persist":
            #expect(restored?.document.endUserId == "new")
            #expect(try FileKeyringFile.load(target)?.items.count == 1, "written beside the target, the old session replaced")
            #expect(access(target + ".lock", F_OK) == 0, "the lock is beside the target")
            #expect(access(setup.path + ".lock", F_OK) != 0)
        case "clear":
            #expect(restored == nil)
            #expect(try FileKeyringFile.load(target)?.items.isEmpty == true)
        default:
            #expect(restored?.document.endUserId == "real" && restored?.generation == setup.generation)
        }
        if operation == "status" {
            #expect(try setup.storage.describe().contains { $0.0 == "linkedTo" && $0.1.hasSuffix("/dotfiles/synced.keyring") })
        }
    }

    /// A symbolic link put in the file's place while a writer works (after it resolved the path):
    /// its exchange brings the link out, puts it back and fails at once — another round would
    /// meet the same link until the deadline. Nothing is written; the file it leads to is intact.
    @Test(arguments: ["persist", "clear"])
    func aLinkPutInPlaceDuringAWriteFailsAtOnce(_ operation: String) throws {
        let setup = try Setup()
        let copy = setup.store.directory + "/copy.keyring"
        let original = try #require(fileBytes(setup.path))
        writeBytes(original, to: copy)
        FileKeyringFile.beforeReplace = { path in
            unlink(path)
            _ = symlink(copy, path)
        }
        defer { FileKeyringFile.beforeReplace = nil }
        let (failure, milliseconds) = Self.run(operation, setup.storage)
        FileKeyringFile.beforeReplace = nil
        #expect(milliseconds < 500 * Int(HostileInput.sanitizerSlowdown), "\(operation) took \(milliseconds) ms")
        let message = try #require(failure, "\(operation) succeeded over a link")
        #expect(message.contains("is a symbolic link, not the keyring file read"), "\(message)")
        var status = stat()
        #expect(lstat(setup.path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFLNK, "the link is put back")
        #expect(fileBytes(copy) == original)
        #expect(try setup.restoresTheRealSession())
    }

    /// The watch over a linked keyring hears a write to the file the link leads to, and a watch
    /// whose keyring is a FIFO starts and stops at once.
    @Test func theWatchFollowsTheLinkAndIsNotStuckOnAFIFO() async throws {
        _ = try KeyringControl.environment()
        let setup = try Setup()
        let elsewhere = setup.store.directory + "/dotfiles"
        try #require(mkdir(elsewhere, 0o700) == 0)
        try #require(rename(setup.path, elsewhere + "/synced.keyring") == 0)
        try #require(symlink(elsewhere + "/synced.keyring", setup.path) == 0)
        let auth = try PortalAuth(authEnvironmentId: "env", redirectUrl: "app://cb", apiHost: "api.portalhq.io",
                                  storage: setup.storage)
        let changes = try await auth.sessionChanges
        let bound = FileKeyringWatchTests.bounded(changes)
        defer { bound.cancel() }
        var events = changes.makeAsyncIterator()
        try await auth.clearPersistedSession()
        #expect(await events.next() == .signedOut)
        changes.cancel()

        unlink(setup.path)
        try #require(mkfifo(setup.path, 0o600) == 0)
        let start = g_get_monotonic_time()
        let stuck = try await auth.sessionChanges
        stuck.cancel()
        let milliseconds = (g_get_monotonic_time() - start) / 1000
        #expect(Self.withinBound(milliseconds), "the watch took \(milliseconds) ms to start and stop")
    }

    // MARK: - Measurements (docs/security.md's figures; only with PORTAL_HOSTILE_CORPUS set)

    /// Writes the measured files into `$PORTAL_HOSTILE_CORPUS`: a keyring with the real session
    /// of auth environment "env" under `ourSecret`, and one item of 25k, 100k or 370k attribute
    /// names appended; and the largest file within every cap (1,250 items of 64 attributes, 4 MiB).
    /// Run by hand; the figures are in docs/security.md, "A crafted keyring file".
    @Test(.enabled(if: getenv("PORTAL_HOSTILE_CORPUS") != nil))
    func writeTheMeasuredCorpus() throws {
        let directory = String(cString: getenv("PORTAL_HOSTILE_CORPUS"))
        for count in [25_000, 50_000, 100_000, 370_000] {
            let setup = try Setup()
            try Self.append([Self.craftedItem(names: (0..<count).map { "a\($0)" })], to: setup.path)
            writeBytes(try #require(fileBytes(setup.path)), to: "\(directory)/attributes-\(count).keyring")
        }
        let setup = try Setup()
        writeBytes(try #require(fileBytes(setup.path)), to: "\(directory)/valid.keyring")
        try Self.atTheCaps(setup.path, items: 1_250)
        writeBytes(try #require(fileBytes(setup.path)), to: "\(directory)/at-the-caps.keyring")
    }
}
