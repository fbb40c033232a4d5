#if canImport(Glibc)
import Glibc
#endif

/// The pending sign-in marker: the login-CSRF ("redirect hijacking") defence (docs/security.md, "Redirect hijacking").
///
/// `sendMagicLink`, `loginWithGoogle` and `loginWithApple` record that this user started a
/// sign-in for an auth environment; `handleRedirect(url:)` exchanges a grant only while such a
/// marker exists and is younger than `lifetimeSeconds`, and a completed sign-in consumes it. The
/// desktop URL handler is a separate process from the app that started the sign-in, so the marker
/// is a small file, not process memory.
///
/// Where: the library's `PrivateDirectory` (never `/tmp`). No usable place → recording fails
/// (`sessionStorageFailure`), and the sign-in is not started.
///
/// Safety: the marker directory is created 0700 and opened with `O_NOFOLLOW`; it must be owned
/// by this user with no group or other permissions, else it is not used. Marker files live only
/// in it (`openat`), are written to a temporary name (`O_EXCL | O_NOFOLLOW`, 0600) and renamed
/// into place, and are read with `O_NOFOLLOW | O_NONBLOCK` only when they are regular files owned
/// by this user with no group or other permissions, at most 4 KiB: a symlink, FIFO or another
/// user's file is no marker. The marker is not secret: "the auth environment X had a sign-in
/// started at time T". Another process of the same user can plant one (it can equally write the
/// keyring), which the different-end-user check still covers.
struct PendingSignIn {
    /// 15 minutes: long enough for an email to arrive and be opened, or for an OAuth consent
    /// screen with a password manager or second factor; short enough that a forgotten sign-in
    /// does not leave the door open for long. Portal's magic links and OAuth grants are
    /// themselves short-lived.
    static let lifetimeSeconds: Int64 = 15 * 60
    /// A marker from the future by more than this (clock moved back) is no marker.
    static let clockSkewSeconds: Int64 = 60
    static let magic = "portal-keyring-pending-sign-in/1"

    let authEnvironmentId: String
    /// `XDG_RUNTIME_DIR`, `XDG_STATE_HOME` and `HOME` as tests set them; nil: the process's.
    var environment: [String: String]? = nil

    /// Records a sign-in started now (or at `time`, seconds since the epoch: tests only).
    func record(at time: Int64? = nil) throws(PortalAuthError) {
        let dir = try openDirectory(create: true)
        defer { close(dir) }
        let content = Array("\(Self.magic)\n\(time ?? Int64(Glibc.time(nil)))\n\(authEnvironmentId)".utf8)
        var rng = SystemRandomNumberGenerator()
        let temporary = fileName + ".tmp.\(getpid()).\(rng.next() as UInt32)"
        let fd = openat(dir, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Self.failure("cannot create \(temporary)") }
        let written = content.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let closed = close(fd)
        guard written == content.count, closed == 0, renameat(dir, temporary, dir, fileName) == 0 else {
            let error = Self.failure("cannot write \(fileName)")
            unlinkat(dir, temporary, 0)
            throw error
        }
    }

    /// Whether a sign-in for this auth environment was started by this user less than
    /// `lifetimeSeconds` ago and not completed since. Any doubt (no directory, no file, a file
    /// that fails a check, unreadable, malformed, expired) is false.
    func isPending(now: Int64 = Int64(time(nil))) -> Bool {
        guard let dir = try? openDirectory(create: false) else { return false }
        defer { close(dir) }
        let fd = openat(dir, fileName, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid(),
              info.st_mode & 0o077 == 0, info.st_size <= 4096 else { return false }
        var buffer = [UInt8](repeating: 0, count: 4097)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0, count <= 4096 else { return false }
        let lines = buffer[..<count].split(separator: UInt8(ascii: "\n"), maxSplits: 2, omittingEmptySubsequences: false)
        guard lines.count == 3, String(decoding: lines[0], as: UTF8.self) == Self.magic,
              let started = Int64(String(decoding: lines[1], as: UTF8.self)),
              Array(lines[2]) == Array(authEnvironmentId.utf8) else { return false }
        return started <= now + Self.clockSkewSeconds && now - started < Self.lifetimeSeconds
    }

    /// Runs `body` holding this auth environment's completion lock: an exclusive `flock` on
    /// `<fileName>.lock` in the marker directory, shared by every process of this user. Sign-ins
    /// completing at once (two redirects, a redirect and a TOTP verification) check the stored
    /// end user and persist one after the other, so the first to finish wins and the second sees
    /// its session. Without the directory, `body` runs unlocked (the marker check has failed or
    /// was opted out of; the keyring's own order still applies).
    func withCompletionLock<T>(_ body: () throws(PortalAuthError) -> T) throws(PortalAuthError) -> T {
        guard let dir = try? openDirectory(create: true) else { return try body() }
        let fd = openat(dir, fileName + ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        close(dir)
        guard fd >= 0 else { return try body() }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 && errno == EINTR {}
        defer { flock(fd, LOCK_UN) }
        return try body()
    }

    /// Removes the marker (a completed sign-in). Errors are ignored: an undeletable marker
    /// still expires.
    func consume() {
        guard let dir = try? openDirectory(create: false) else { return }
        unlinkat(dir, fileName, 0)
        close(dir)
    }

    /// `signin-<FNV-1a 64 of the auth environment id, hex>`; the file also holds the id, which is
    /// compared, so a hash collision is no marker.
    var fileName: String { PrivateDirectory.hashedName("signin", authEnvironmentId) }

    // MARK: - The directory

    /// Opens the marker directory (`PrivateDirectory`), creating it when `create`.
    func openDirectory(create: Bool) throws(PortalAuthError) -> Int32 {
        do throws(PrivateDirectory.Failure) {
            return try PrivateDirectory(environment: environment).open(create: create)
        } catch {
            throw .sessionStorageFailure(message: "pending sign-in marker: \(error.message)")
        }
    }

    private static func failure(_ what: String, errno withErrno: Bool = true) -> PortalAuthError {
        let reason = withErrno ? ": " + String(cString: strerror(errno)) : ""
        return .sessionStorageFailure(message: "pending sign-in marker: \(what)\(reason)")
    }
}
