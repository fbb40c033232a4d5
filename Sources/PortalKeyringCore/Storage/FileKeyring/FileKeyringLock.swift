import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// The lock the writers of one file keyring take turns on: an exclusive `flock` on the file
/// `<keyring path>.lock` beside the keyring (created 0600, never replaced, never removed), held
/// across a whole read–change–write (`FileKeyringStorage`).
///
/// Beside the keyring, not in the library's `PrivateDirectory`: the lock must be shared by every
/// process that writes the keyring, and the keyring's directory is, by definition — in a Flatpak
/// sandbox it is the app's data directory, shared by all its instances, while
/// `$XDG_RUNTIME_DIR` is private to each instance. The keyring file itself cannot carry the
/// lock: every write replaces it (a new inode), so a lock on the old one would exclude no one.
///
/// Each call opens the lock file anew, so the threads of one process exclude each other as
/// processes do; the descriptor's close releases the lock, also when the process dies.
/// libsecret takes no lock: its writes are caught by the writer's stamp check instead
/// (`FileKeyringFile.Stamp`).
enum FileKeyringLock {
    enum Failure: Error {
        /// The lock was still held by another writer at the deadline.
        case timedOut
        /// The operation was cancelled (`OperationToken`) while it waited.
        case cancelled
        /// The lock file could not be opened or locked: the call and `strerror`.
        case io(String)
    }

    /// The lock file of the keyring at `path`.
    static func path(of keyringPath: String) -> String { keyringPath + ".lock" }

    /// Takes the lock of the keyring at `keyringPath` (whose directory must exist), waiting until
    /// `end`: the open descriptor, whose close releases the lock.
    static func take(_ keyringPath: String, until end: MonotonicInstant) throws(Failure) -> Int32 {
        let name = path(of: keyringPath)
        let fd = open(name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0o600)
        guard fd >= 0 else { throw .io("open \(name): \(String(cString: strerror(errno)))") }
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code != EWOULDBLOCK && code != EINTR {
                close(fd)
                throw .io("flock \(name): \(String(cString: strerror(code)))")
            }
            if OperationToken.currentIsCancelled {
                close(fd)
                throw .cancelled
            }
            if end.hasPassed {
                close(fd)
                throw .timedOut
            }
            usleep(1_000)
        }
        return fd
    }
}
