import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring
import CGLib
#if canImport(Glibc)
import Glibc
#endif

// The file keyring (Sources/PortalKeyringCore/Storage/FileKeyring) against libsecret 0.20.5's own file
// backend, driven through `secret-tool` (FileKeyringTestSupport.swift) without D-Bus.

/// A blob of `plaintext` (a multiple of 16 bytes, padding included as given) sealed under `key`
/// the way `FileKeyringKey.seal` does, but without padding it: for padding that must be refused.
private func sealRaw(_ plaintext: [UInt8], key: FileKeyringKey) throws -> [UInt8] {
    var block = plaintext
    let iv = [UInt8](repeating: 3, count: 16)
    var handle: OpaquePointer?
    try #require(gcry_cipher_open(&handle, Int32(GCRY_CIPHER_AES.rawValue), Int32(GCRY_CIPHER_MODE_CBC.rawValue), 0) == 0)
    _ = key.key.withUnsafeBytes { gcry_cipher_setkey(handle, $0.baseAddress, $0.count) }
    _ = iv.withUnsafeBytes { gcry_cipher_setiv(handle, $0.baseAddress, $0.count) }
    _ = block.withUnsafeMutableBytes { gcry_cipher_encrypt(handle, $0.baseAddress, $0.count, nil, 0) }
    gcry_cipher_close(handle)
    var mac: gcry_mac_hd_t?
    try #require(gcry_mac_open(&mac, Int32(GCRY_MAC_HMAC_SHA256.rawValue), 0, nil) == 0)
    _ = key.key.withUnsafeBytes { gcry_mac_setkey(mac, $0.baseAddress, $0.count) }
    let signed = block + iv
    _ = signed.withUnsafeBytes { gcry_mac_write(mac, $0.baseAddress, $0.count) }
    var tag = [UInt8](repeating: 0, count: 32)
    var length = 32
    _ = tag.withUnsafeMutableBytes { gcry_mac_read(mac, $0.baseAddress, &length) }
    gcry_mac_close(mac)
    return signed + tag
}

@Suite(.serialized) struct FileKeyringTests {
    private func item(_ attributes: [String: String], label: String, secret: [UInt8]) -> FileKeyringItem {
        FileKeyringItem(attributes: attributes, label: label, created: 1_700_000_000, modified: 1_700_000_001,
                        secret: secret.withUnsafeBytes { SecretBytes(copying: $0) })
    }

    @Test("an item we write into a new file is read byte-exact by secret-tool lookup (libsecret's file backend)")
    func oursReadBySecretTool() throws {
        let directory = try temporaryDirectory()
        defer { removeDirectory(directory) }
        let path = "\(directory)/default.keyring"
        #expect(try FileKeyringFile.load(path) == nil)
        var keyring = try FileKeyring()
        let key = try keyring.key(masterSecret: master(ourSecret))
        try keyring.add(item(["service": "portal", "session_generation": "00ff"], label: "Portal session", secret: binarySecret),
                        key: key)
        try FileKeyringFile.write(keyring, to: path)

        var status = stat()
        #expect(stat(path, &status) == 0)
        #expect(status.st_mode & 0o777 == 0o600)
        #expect(try SecretTool.lookup(file: path, password: ourSecret, ["service", "portal"]) == binarySecret)
        #expect(try SecretTool.lookup(file: path, password: ourSecret, ["session_generation", "00ff", "service", "portal"])
                == binarySecret)
        #expect(try SecretTool.lookup(file: path, password: ourSecret, ["service", "other"]) == nil)
        // Under another master secret libsecret finds nothing of ours.
        #expect(try SecretTool.lookup(file: path, password: otherSecret, ["service", "portal"]) == nil)
    }

    @Test("an item secret-tool stored is found by its attributes and decrypted byte-exact, label and all")
    func secretToolsReadByUs() throws {
        let directory = try temporaryDirectory()
        defer { removeDirectory(directory) }
        let path = "\(directory)/default.keyring"
        try SecretTool.store(file: path, password: ourSecret, label: "Written by libsecret",
                             ["service", "portal", "auth_environment_id", "env-1"], secret: binarySecret)
        let keyring = try #require(try FileKeyringFile.load(path))
        #expect(keyring.salt.count == 32)
        #expect(keyring.iterations == 100_000)
        let key = try keyring.key(masterSecret: master(ourSecret))
        let found = try keyring.search(["auth_environment_id": "env-1"], key: key)
        try #require(found.count == 1)
        #expect(plainBytes(found[0].item.secret) == binarySecret)
        #expect(found[0].item.label == "Written by libsecret")
        #expect(found[0].item.attributes == ["service": "portal", "auth_environment_id": "env-1"])
        #expect(found[0].item.created > 0)
        #expect(try keyring.search(["auth_environment_id": "env-2"], key: key).isEmpty)
        #expect(try keyring.search(["unknown": "env-1"], key: key).isEmpty)
        #expect(try keyring.search([:], key: key).count == 1)
        #expect(try keyring.unreadable(key: key) == 0)
        // Our write of libsecret's file (unchanged) is the same file, byte for byte.
        let original = try #require(fileBytes(path))
        #expect(FileKeyringFormat.encode(keyring) == original)
    }

    @Test("another schema's item survives our add and remove byte-exact, and libsecret still reads it")
    func foreignItemSurvives() throws {
        let directory = try temporaryDirectory()
        defer { removeDirectory(directory) }
        let path = "\(directory)/default.keyring"
        try SecretTool.store(file: path, password: ourSecret, label: "The app's own password",
                             ["xdg:schema", "org.example.App", "account", "me"], secret: Array("app secret".utf8))
        let foreign = try #require(try FileKeyringFile.load(path)).items
        try #require(foreign.count == 1)

        var keyring = try #require(try FileKeyringFile.load(path))
        let key = try keyring.key(masterSecret: master(ourSecret))
        try keyring.add(item(["service": "portal"], label: "ours", secret: [1, 2, 3]), key: key)
        try FileKeyringFile.write(keyring, to: path)
        var reread = try #require(try FileKeyringFile.load(path))
        #expect(reread.items.count == 2)
        #expect(reread.items[0] == foreign[0])
        #expect(try SecretTool.lookup(file: path, password: ourSecret, ["account", "me"]) == Array("app secret".utf8))
        #expect(try SecretTool.lookup(file: path, password: ourSecret, ["service", "portal"]) == [1, 2, 3])

        #expect(try reread.remove(matching: ["service": "portal"], key: key) == 1)
        try FileKeyringFile.write(reread, to: path)
        let final = try #require(try FileKeyringFile.load(path))
        #expect(final.items == foreign)
        #expect(try SecretTool.lookup(file: path, password: ourSecret, ["account", "me"]) == Array("app secret".utf8))
        #expect(try SecretTool.lookup(file: path, password: ourSecret, ["service", "portal"]) == nil)
    }

    @Test("items under another master secret are never returned or removed as ours, and survive byte-exact")
    func otherKeySurvives() throws {
        let directory = try temporaryDirectory()
        defer { removeDirectory(directory) }
        let path = "\(directory)/default.keyring"
        // The same attributes as ours, stored under another key (a reset host keyring).
        try SecretTool.store(file: path, password: otherSecret, label: "old key",
                             ["service", "portal"], secret: Array("under the old key".utf8))
        var keyring = try #require(try FileKeyringFile.load(path))
        let before = keyring.items
        let key = try keyring.key(masterSecret: master(ourSecret))
        #expect(try keyring.search(["service": "portal"], key: key).isEmpty)
        #expect(try keyring.search([:], key: key).isEmpty)
        #expect(try keyring.unreadable(key: key) == 1)
        #expect(try keyring.remove(matching: [:], key: key) == 0)
        #expect(try keyring.remove(matching: ["service": "portal"], key: key) == 0)

        try keyring.add(item(["service": "portal"], label: "new key", secret: Array("ours".utf8)), key: key)
        try FileKeyringFile.write(keyring, to: path)
        var reread = try #require(try FileKeyringFile.load(path))
        #expect(reread.salt == keyring.salt)  // kept: a new salt would lose the other key's items
        #expect(reread.items[0] == before[0])
        #expect(try reread.search(["service": "portal"], key: key).map { plainBytes($0.item.secret) } == [Array("ours".utf8)])
        #expect(try SecretTool.lookup(file: path, password: otherSecret, ["service", "portal"]) == Array("under the old key".utf8))
        #expect(try SecretTool.lookup(file: path, password: ourSecret, ["service", "portal"]) == Array("ours".utf8))

        #expect(try reread.remove(matching: [:], key: key) == 1)
        try FileKeyringFile.write(reread, to: path)
        #expect(try #require(try FileKeyringFile.load(path)).items == before)
        #expect(try SecretTool.lookup(file: path, password: otherSecret, ["service", "portal"]) == Array("under the old key".utf8))
    }

    @Test("a truncated, padded or garbage file is a malformed-file error, at every length")
    func malformedFiles() throws {
        let directory = try temporaryDirectory()
        defer { removeDirectory(directory) }
        let path = "\(directory)/default.keyring"
        try SecretTool.store(file: path, password: ourSecret, label: "L", ["a", "1", "b", "2"], secret: Array("s".utf8))
        let valid = try #require(fileBytes(path))
        func decode(_ bytes: [UInt8]) -> FileKeyringError? {
            do {
                _ = try bytes.withUnsafeBytes { try FileKeyringFormat.decode($0) }
                return nil
            } catch let error as FileKeyringError {
                return error
            } catch {
                return .io("unexpected \(error)")
            }
        }
        #expect(decode(valid) == nil)
        for length in 0..<valid.count {
            let error = decode(Array(valid[0..<length]))
            guard case .malformed = error else {
                Issue.record("a file cut to \(length) of \(valid.count) bytes gave \(String(describing: error))")
                continue
            }
        }
        // Bytes appended, a wrong version, garbage after a good header.
        #expect(decode(valid + [0]) != nil)
        var version = valid
        version[16] = 2
        #expect(decode(version) == .malformed("version 2.0, expected 1.0"))
        var random = FileKeyringFormat.header + FileKeyringFormat.version
        random += try FileKeyringKey.random(4096)
        #expect(decode(random) != nil)
        #expect(decode(Array("not a keyring at all".utf8)) == .malformed("no GnomeKeyring header (20 bytes)"))

        // Through the file API the error names the path; nothing traps.
        writeBytes(Array(valid[0..<(valid.count / 2)]), to: path)
        #expect(throws: FileKeyringError.self) { try FileKeyringFile.load(path) }
    }

    @Test("header fields outside their bounds are refused: iteration count, salt length")
    func headerBounds() throws {
        var keyring = try FileKeyring()
        let key = try keyring.key(masterSecret: master(ourSecret))
        try keyring.add(item(["k": "v"], label: "L", secret: [9]), key: key)
        func decoded(_ k: FileKeyring) -> Result<FileKeyring, FileKeyringError> {
            FileKeyringFormat.encode(k).withUnsafeBytes { bytes in
                Result { () throws(FileKeyringError) in try FileKeyringFormat.decode(bytes) }
            }
        }
        #expect((try? decoded(keyring).get())?.items == keyring.items)
        for iterations: UInt32 in [0, 1, 999, 100_001, 1_000_000, .max] {
            let bad = FileKeyring(salt: keyring.salt, iterations: iterations, modified: 0, usageCount: 0, items: keyring.items)
            #expect(throws: FileKeyringError.self) { try decoded(bad).get() }
        }
        for saltLength in [0, 8, 65] {
            let bad = FileKeyring(salt: [UInt8](repeating: 7, count: saltLength), iterations: 100_000, modified: 0,
                                  usageCount: 0, items: [])
            #expect(throws: FileKeyringError.self) { try decoded(bad).get() }
        }
    }

    @Test("a changed byte anywhere in a blob, a bad padding or a malformed plaintext under a valid MAC hides the item; it is kept")
    func tamperedItems() throws {
        var keyring = try FileKeyring()
        let key = try keyring.key(masterSecret: master(ourSecret))
        try keyring.add(item(["k": "v"], label: "L", secret: Array("secret".utf8)), key: key)
        let blob = keyring.items[0].blob
        #expect(try key.open(blob) != nil)
        for index in blob.indices {
            var changed = blob
            changed[index] ^= 0x01
            #expect(try key.open(changed) == nil, "byte \(index) of \(blob.count) changed")
        }
        // Blobs MAC'ed with the key whose plaintext's padding is not PKCS#7: refused.
        for last in [[UInt8](repeating: 0, count: 16),                      // padding 0
                     [UInt8](repeating: 17, count: 16),                     // longer than a block
                     [UInt8](repeating: 0x41, count: 12) + [3, 4, 4, 4]] {  // bytes that disagree
            #expect(try key.open(sealRaw(last, key: key)) == nil, "padding \(last)")
        }
        #expect(try key.open(sealRaw([UInt8](repeating: 0x41, count: 12) + [4, 4, 4, 4], key: key)).map(plainBytes)
                == [UInt8](repeating: 0x41, count: 12))  // the same construction, padded right, opens

        // A blob that opens under the key but whose plaintext is not a normal-form (a{ss}sttay):
        // not an item, and counted as unreadable rather than trapping or being removed.
        let garbage = try sealRaw([UInt8](repeating: 0xEE, count: 28) + [4, 4, 4, 4], key: key)
        #expect(try key.open(garbage) != nil)
        let nonsense = try #require(try key.open(garbage))
        #expect(FileKeyringItem(plaintext: nonsense) == nil)
        var unreadable = FileKeyring(salt: keyring.salt, iterations: keyring.iterations, modified: 0, usageCount: 0,
                                     items: [SealedItem(hashedAttributes: [], blob: garbage)])
        #expect(try unreadable.search([:], key: key).isEmpty)
        #expect(try unreadable.remove(matching: [:], key: key) == 0)
        #expect(try unreadable.unreadable(key: key) == 1)

        // In a keyring, a tampered item is neither found nor removed, and is written back as it is.
        var tampered = blob
        tampered[0] ^= 0x80
        var planted = FileKeyring(salt: keyring.salt, iterations: keyring.iterations, modified: 0, usageCount: 0,
                                  items: [SealedItem(hashedAttributes: keyring.items[0].hashedAttributes, blob: tampered)])
        #expect(try planted.search(["k": "v"], key: key).isEmpty)
        #expect(try planted.remove(matching: ["k": "v"], key: key) == 0)
        #expect(try planted.unreadable(key: key) == 1)
        #expect(planted.items[0].blob == tampered)
        // Wrong sizes never reach the cipher.
        #expect(try key.open(Array(blob.dropLast())) == nil)
        #expect(try key.open([UInt8](repeating: 0, count: 48)) == nil)
    }

    @Test("a write leaves a 0600 file and no temporary file; a write into a missing directory is an I/O error")
    func atomicWrite() throws {
        let directory = try temporaryDirectory()
        defer { removeDirectory(directory) }
        let path = "\(directory)/default.keyring"
        let keyring = try FileKeyring()
        _ = umask(0o022)
        try FileKeyringFile.write(keyring, to: path)
        try FileKeyringFile.write(keyring, to: path)
        var status = stat()
        #expect(stat(path, &status) == 0)
        #expect(status.st_mode & 0o777 == 0o600)
        let entries = try #require(opendir(directory))
        var names: [String] = []
        while let entry = readdir(entries) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        closedir(entries)
        #expect(names == ["default.keyring"])
        #expect(throws: FileKeyringError.self) { try FileKeyringFile.write(keyring, to: "\(directory)/missing/default.keyring") }
    }

    @Test("a key made for another keyring's salt is refused rather than sealing items nobody could open")
    func keyBelongsToItsKeyring() throws {
        var first = try FileKeyring()
        let second = try FileKeyring()
        let key = try second.key(masterSecret: master(ourSecret))
        #expect(throws: FileKeyringError.self) { try first.add(item(["k": "v"], label: "L", secret: [1]), key: key) }
        #expect(first.items.isEmpty)
    }
}
