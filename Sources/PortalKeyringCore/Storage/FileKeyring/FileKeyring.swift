#if canImport(Glibc)
import Glibc
#endif

/// One file keyring in memory (libsecret's format, `FileKeyringFormat`): the salt and iteration
/// count its key is derived with, its header fields, and its items as sealed in the file.
///
/// A value: load it (`FileKeyringFile.load`), change it, write it whole (`FileKeyringFile.write`).
/// The operations take the key (`key(masterSecret:)`); items that do not open under it — another
/// master secret, or changed bytes — are never returned, never removed and are written back
/// byte-exact, as is every item this value did not add. A keyring read from a file keeps that
/// file's salt and iteration count: a new salt would change the key of every item, and the
/// items under another key would be lost to their owner for good. Only a new keyring
/// (`FileKeyring()`) gets a fresh salt. Not thread-safe by itself (a value; the storage that
/// holds one decides who writes the file).
struct FileKeyring: Sendable {
    let salt: [UInt8]
    let iterations: UInt32
    /// UTC seconds of the last change (set by `add` and `remove`).
    var modified: UInt64
    /// libsecret adds one for each item it stores; so does `add`.
    var usageCount: UInt32
    private(set) var items: [SealedItem]

    init(salt: [UInt8], iterations: UInt32, modified: UInt64, usageCount: UInt32, items: [SealedItem]) {
        self.salt = salt
        self.iterations = iterations
        self.modified = modified
        self.usageCount = usageCount
        self.items = items
    }

    /// An empty keyring with a fresh random salt and libsecret's iteration count (100,000).
    init() throws(FileKeyringError) {
        self.init(salt: try FileKeyringKey.random(FileKeyringFormat.saltSize),
                  iterations: FileKeyringFormat.defaultIterations, modified: FileKeyring.now(), usageCount: 0, items: [])
    }

    /// The key of this keyring for `masterSecret` (the Secret portal's 64 bytes).
    func key(masterSecret: SecretBytes) throws(FileKeyringError) -> FileKeyringKey {
        try FileKeyringKey(masterSecret: masterSecret, salt: salt, iterations: iterations)
    }

    /// A decrypted item and its position in `items`.
    struct Found: Sendable {
        let index: Int
        let item: FileKeyringItem
    }

    /// The items whose attributes include every attribute of `query` (all items that open under
    /// `key` for an empty query), in file order: preselected by the hashed attributes, then
    /// opened and decrypted, then matched on the decrypted attributes. An item that does not
    /// open under `key`, or whose plaintext is malformed, is left out (`unreadable(key:)` counts
    /// them). Throws only when libgcrypt fails.
    func search(_ query: [String: String], key: FileKeyringKey) throws(FileKeyringError) -> [Found] {
        try check(key)
        var hashed: [String: [UInt8]] = [:]
        for (name, value) in query { hashed[name] = try key.hash(attributeValue: value) }
        var found: [Found] = []
        for (index, sealed) in items.enumerated() where sealed.mayMatch(hashed) {
            guard let plaintext = try key.open(sealed.blob), let item = FileKeyringItem(plaintext: plaintext),
                  item.matches(query) else { continue }
            found.append(Found(index: index, item: item))
        }
        return found
    }

    /// How many items (of those `including` selects, by what the file shows in clear) do not
    /// open under `key` (another master secret: a reset host keyring gives a new one) or do not
    /// decrypt to a well-formed item. They are kept as they are.
    func unreadable(key: FileKeyringKey,
                    including: (SealedItem) -> Bool = { _ in true }) throws(FileKeyringError) -> Int {
        try check(key)
        var count = 0
        for sealed in items where including(sealed) {
            guard let plaintext = try key.open(sealed.blob), FileKeyringItem(plaintext: plaintext) != nil else {
                count += 1
                continue
            }
        }
        return count
    }

    /// Appends `item`, sealed under `key`, with its attribute values hashed under `key`; returns
    /// it as the file holds it.
    @discardableResult
    mutating func add(_ item: FileKeyringItem, key: FileKeyringKey) throws(FileKeyringError) -> SealedItem {
        try check(key)
        var hashed: [SealedItem.HashedAttribute] = []
        for name in item.attributes.keys.sorted() {
            hashed.append(.init(name: name, hash: try key.hash(attributeValue: item.attributes[name]!)))  // trusted: name is one of its keys
        }
        let sealed = SealedItem(hashedAttributes: hashed, blob: try key.seal(item.serialized()))
        items.append(sealed)
        usageCount &+= 1
        modified = FileKeyring.now()
        return sealed
    }

    /// Removes the items `search(query, key:)` returns; returns how many. Items that do not open
    /// under `key` are never removed, whatever their hashed attributes say.
    @discardableResult
    mutating func remove(matching query: [String: String], key: FileKeyringKey) throws(FileKeyringError) -> Int {
        let found = try search(query, key: key)
        remove(found)
        return found.count
    }

    /// Removes the items `found` names (a `search` of this value, so only items that opened
    /// under its key).
    mutating func remove(_ found: [Found]) {
        let positions = Set(found.map { $0.index })
        guard !positions.isEmpty else { return }
        items = items.enumerated().filter { !positions.contains($0.offset) }.map { $0.element }
        modified = FileKeyring.now()
    }

    /// A key made for another salt or iteration count would seal items nobody can open.
    private func check(_ key: FileKeyringKey) throws(FileKeyringError) {
        guard key.salt == salt, key.iterations == iterations else {
            throw .crypto("the key was derived for another keyring's salt or iteration count")
        }
    }

    /// UTC seconds now (the wall clock: the file's times are informational, nothing is ordered by them).
    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return UInt64(max(time.tv_sec, 0))
    }
}
