import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// Reading a file keyring from a path and replacing it atomically. The file is read whole (at
/// most `FileKeyringFormat.maximumFileSize` bytes) and replaced whole: a new file beside it
/// (same directory, mode 0600), written, fsync'ed, renamed over the old one, and the directory
/// fsync'ed, so a reader sees the old file or the new one, never a part. Who writes when (two
/// processes of one app) is not decided here; a `Stamp` tells a writer whether the file is still
/// the one it read.
enum FileKeyringFile {
    /// Which file a path named when it was read: device, inode, size and change times. Every
    /// write replaces the file (a new inode, new times), so a different stamp means another
    /// writer replaced it since; nil stands for "no file".
    struct Stamp: Equatable, Sendable {
        let device: UInt64
        let inode: UInt64
        let size: Int64
        let modified: [Int]
        let changed: [Int]

        init(_ status: stat) {
            device = UInt64(status.st_dev)
            inode = UInt64(status.st_ino)
            size = Int64(status.st_size)
            modified = [Int(status.st_mtim.tv_sec), Int(status.st_mtim.tv_nsec)]
            changed = [Int(status.st_ctim.tv_sec), Int(status.st_ctim.tv_nsec)]
        }

        /// The same file, as far as a rename can tell: a rename moves the change time, not these.
        func sameFile(as other: Stamp) -> Bool {
            device == other.device && inode == other.inode && size == other.size && modified == other.modified
        }
    }

    /// The keyring at `path`; nil when there is no file there. Throws when it cannot be read or
    /// is not a well-formed keyring.
    static func load(_ path: String) throws(FileKeyringError) -> FileKeyring? {
        try loadStamped(path)?.keyring
    }

    /// The stamp of the file at `path` now; nil when there is none.
    static func stamp(_ path: String) throws(FileKeyringError) -> Stamp? {
        var status = stat()
        guard stat(path, &status) == 0 else {
            let code = errno
            if code == ENOENT { return nil }
            throw .io("stat \(path): \(describe(code))")
        }
        return Stamp(status)
    }

    /// The most symbolic links followed from the keyring's path to its file.
    static let maximumLinks = 8

    /// The file the keyring at `path` is: `path` itself, or — when `path` is a symbolic link (a
    /// dotfiles or sync setup; libsecret follows it) — the file it leads to, each relative link
    /// read from its own directory. Writers replace that file, beside it, under the lock beside
    /// it (`FileKeyringLock`), so the link stays a link. Throws at once for a link that leads
    /// nowhere (its target missing: not "no file", which would read as signed out), a loop, or
    /// more than `maximumLinks` links.
    static func target(of path: String) throws(FileKeyringError) -> String {
        var current = path
        for _ in 0...maximumLinks {
            var status = stat()
            guard lstat(current, &status) == 0 else {
                let code = errno
                if code == ENOENT && current != path {
                    throw .io("\(path) is a symbolic link to \(current), which does not exist (a dangling link: "
                              + "restore the file it names or remove the link)")
                }
                if code == ENOENT { return path }
                throw .io("lstat \(current): \(describe(code))")
            }
            guard (status.st_mode & S_IFMT) == S_IFLNK else { return current }
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let count = readlink(current, &buffer, buffer.count - 1)
            guard count > 0 else { throw .io("readlink \(current): \(describe(errno))") }
            let link = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            current = link.hasPrefix("/") ? link : directory(of: current) + "/" + link
        }
        throw .io("\(path): more than \(maximumLinks) symbolic links (a loop?)")
    }

    /// The directory part of `path` ("." when it has none).
    static func directory(of path: String) -> String {
        let slash = path.lastIndex(of: "/")
        return slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
    }

    /// The keyring at `path` and the stamp of the file it was read from; nil when there is no
    /// file there. Throws as `load`. The file is opened without blocking (a FIFO or a device in
    /// its place would hang `open` for ever) and read only when it is a regular file; `end`
    /// bounds the reading and decoding (`FileKeyringError.outOfTime`).
    static func loadStamped(_ path: String, until end: MonotonicInstant? = nil) throws(FileKeyringError) -> (keyring: FileKeyring, stamp: Stamp)? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        if fd < 0 {
            let code = errno
            if code == ENOENT { return nil }
            throw .io("open \(path): \(describe(code))")
        }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw .io("fstat \(path): \(describe(errno))") }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            throw .io("\(path) is \(kind(status.st_mode)), not a keyring file; nothing was read or written (remove it, "
                      + "or put the keyring file there)")
        }
        guard status.st_size <= FileKeyringFormat.maximumFileSize else {
            throw .malformed("\(path) is \(status.st_size) bytes, more than \(FileKeyringFormat.maximumFileSize)")
        }
        // One read of the size fstat gave, plus one byte to notice a file that grew meanwhile.
        var bytes = [UInt8](repeating: 0, count: Int(status.st_size) + 1)
        var filled = 0
        while filled < bytes.count {
            if let end, end.hasPassed {
                throw .outOfTime("read \(filled) of its \(status.st_size) bytes before the deadline")
            }
            let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, min($0.count - filled, 1 << 20)) }  // trusted: filled < count
            if count < 0 {
                if errno == EINTR { continue }
                throw .io("read \(path): \(describe(errno))")
            }
            if count == 0 { break }
            filled += count
        }
        guard filled <= Int(status.st_size) else {
            throw .io("\(path) grew while it was read (it is written in place, not replaced)")
        }
        let decoded = bytes.withUnsafeBytes { bytes in
            Result { () throws(FileKeyringError) in
                try FileKeyringFormat.decode(UnsafeRawBufferPointer(rebasing: bytes[0..<filled]), until: end)
            }
        }
        switch decoded {
        case .success(let keyring): return (keyring, Stamp(status))
        case .failure(.malformed(let detail)): throw .malformed("\(path): \(detail)")
        case .failure(let error): throw error
        }
    }

    /// What a file of mode `mode` is, for messages.
    static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFDIR: return "a directory"
        case S_IFIFO: return "a FIFO (named pipe)"
        case S_IFSOCK: return "a socket"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFLNK: return "a symbolic link"
        default: return "not a regular file"
        }
    }

    /// Creates the directory of `path` and its missing parents, mode 0700 (as libsecret does for
    /// `$XDG_DATA_HOME/keyrings`).
    static func makeDirectory(of path: String) throws(FileKeyringError) {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return }
        var prefix = ""
        for component in path[..<slash].split(separator: "/") {
            prefix += (prefix.isEmpty && !path.hasPrefix("/") ? "" : "/") + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST { throw .io("mkdir \(prefix): \(describe(errno))") }
        }
    }

    /// Replaces the file at `path` with `keyring` (the directory must exist), whatever is there.
    /// On failure the old file is untouched and the temporary file removed.
    static func write(_ keyring: FileKeyring, to path: String) throws(FileKeyringError) {
        let (temporary, directory) = try temporaryFile(with: keyring, beside: path)
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw .io("rename \(temporary) to \(path): \(describe(code))")
        }
        syncDirectory(directory)
    }

    /// Replaces the file at `path` with `keyring` only while the file there is still the one
    /// `expected` stamps (nil: still no file). False, with the file there left as it is, when
    /// another writer replaced it meanwhile — libsecret in the same app, which takes no lock,
    /// however late: the check and the replacement are one step (`renameat2` RENAME_EXCHANGE,
    /// then a look at the file that came out, put back when it is not the expected one;
    /// RENAME_NOREPLACE for a new file). A filesystem without them gets a stamp check right before
    /// the rename.
    static func write(_ keyring: FileKeyring, to path: String, over expected: Stamp?) throws(FileKeyringError) -> Bool {
        let (temporary, directory) = try temporaryFile(with: keyring, beside: path)
        beforeReplace?(path)
        var keep = false  // whether `temporary` names a file to keep (it is unlinked otherwise)
        defer { if !keep { unlink(temporary) } }
        if portal_renameat2(temporary, path, expected == nil ? PORTAL_RENAME_NOREPLACE : PORTAL_RENAME_EXCHANGE) != 0 {
            let code = errno
            // EEXIST: a file appeared; ENOENT: the file went away. Either way, not the one read.
            if code == EEXIST || code == ENOENT { return false }
            guard code == EINVAL || code == ENOSYS else { throw .io("rename \(temporary) to \(path): \(describe(code))") }
            guard try stamp(path) == expected else { return false }
            guard rename(temporary, path) == 0 else { throw .io("rename \(temporary) to \(path): \(describe(errno))") }
            keep = true
            syncDirectory(directory)
            return true
        }
        guard let expected else {
            keep = true
            syncDirectory(directory)
            return true
        }
        // `temporary` now names the file that was at `path` (renamed: its ctime moved, not its identity).
        var status = stat()
        if lstat(temporary, &status) == 0 && Stamp(status).sameFile(as: expected) {
            syncDirectory(directory)
            return true  // the old file is unlinked
        }
        // Another writer's file: it goes back (ours was never announced), and the caller starts
        // over on it. Anything but a regular file (a symbolic link put there since the caller
        // resolved the path, a FIFO) goes back too, but is an error at once: another round would
        // meet it again, until the deadline.
        keep = true
        guard rename(temporary, path) == 0 else {
            throw .io("rename \(temporary) back to \(path): \(describe(errno)); another writer's file is left at \(temporary)")
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            throw .io("\(path) is \(kind(status.st_mode)), not the keyring file read; it is left as it is, nothing was written")
        }
        return false
    }

    /// A test's hook between writing the new file and putting it in place (nil in production).
    nonisolated(unsafe) static var beforeReplace: ((String) -> Void)?

    /// A new file beside `path` (same directory, mode 0600) holding `keyring`, written and
    /// fsync'ed; its path and the directory's.
    private static func temporaryFile(with keyring: FileKeyring, beside path: String)
        throws(FileKeyringError) -> (path: String, directory: String) {
        let bytes = FileKeyringFormat.encode(keyring)
        let slash = path.lastIndex(of: "/")
        let directory = directory(of: path)
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        var template = Array("\(directory)/.\(name).XXXXXX".utf8CString)
        // mkstemp creates the file with mode 0600, exclusively.
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }  // trusted: a non-empty array of our own
        guard fd >= 0 else { throw .io("create a file in \(directory): \(describe(errno))") }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        let temporary = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let written = Result { () throws(FileKeyringError) in try fill(fd, with: bytes, name: temporary) }
        close(fd)
        do throws(FileKeyringError) {
            try written.get()
        } catch {
            unlink(temporary)
            throw error
        }
        return (temporary, directory)
    }

    /// A rename is durable once its directory is; a failure here leaves a complete file.
    private static func syncDirectory(_ directory: String) {
        let directoryFd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFd >= 0 {
            _ = fsync(directoryFd)
            close(directoryFd)
        }
    }

    /// Writes all of `bytes` to `fd` (mode 0600) and flushes them to the disk.
    private static func fill(_ fd: Int32, with bytes: [UInt8], name: String) throws(FileKeyringError) {
        guard fchmod(fd, 0o600) == 0 else { throw .io("fchmod \(name): \(describe(errno))") }
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, bytes.count - offset) }  // trusted: offset < count
            if count < 0 {
                if errno == EINTR { continue }
                throw .io("write \(name): \(describe(errno))")
            }
            offset += count
        }
        guard fsync(fd) == 0 else { throw .io("fsync \(name): \(describe(errno))") }
    }

    private static func describe(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}
