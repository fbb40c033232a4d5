import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// The library's own directory of small files that only this user can create or replace: the
/// pending-sign-in markers and their completion locks (`PendingSignIn`), the cross-process
/// prompt lock (`Prompts`) and the persist turns (`PersistTurn`; the writers of a file keyring
/// lock a file beside the keyring instead: `FileKeyringLock`). One rule for where it is and what
/// makes it safe:
///
/// `$XDG_RUNTIME_DIR/portal-keyring/` when `XDG_RUNTIME_DIR` is an absolute path to a directory
/// owned by this user with no group or other permissions (the XDG rule; tmpfs, per user, emptied
/// at logout). Inside a Flatpak sandbox (`FLATPAK_ID` set) `$XDG_RUNTIME_DIR` is a tmpfs of each
/// instance of the app, so a marker written by the instance that started a sign-in would be
/// invisible to the instance the desktop starts for the redirect; there the directory is
/// `$XDG_RUNTIME_DIR/app/$FLATPAK_ID/portal-keyring/`, in the per-app directory Flatpak shares
/// between all instances of the app (and the host), when that is a private directory of this
/// user. Otherwise `$XDG_STATE_HOME/portal-keyring-pending/` (default
/// `$HOME/.local/state/…`; missing components created 0700), whose parent must be owned by this
/// user and not writable by group or others. Never `/tmp`: another local user could create the
/// name there first (and hold a lock in it, or plant a file). The directory is created 0700,
/// opened with `O_NOFOLLOW`, and used only when it is owned by this user with no group or other
/// permissions; files in it are opened relative to it (`openat`, `O_NOFOLLOW`).
struct PrivateDirectory {
    /// Why the directory cannot be used.
    struct Failure: Error {
        let message: String
        init(_ what: String, errno withErrno: Bool = true) {
            message = what + (withErrno ? ": " + String(cString: strerror(errno)) : "")
        }
    }

    /// `XDG_RUNTIME_DIR`, `XDG_STATE_HOME`, `HOME` and `FLATPAK_ID` as tests set them; nil: the
    /// process's.
    var environment: [String: String]? = nil

    /// The directory for this process's environment, as (base, name inside base), or nil.
    static func location(runtimeDir: String?, stateHome: String?, home: String?,
                         flatpakId: String? = nil) -> (base: String, name: String, fallback: Bool)? {
        if let runtimeDir, runtimeDir.hasPrefix("/"), privateDirectory(runtimeDir) {
            if let flatpakId, !flatpakId.isEmpty, flatpakId != ".", flatpakId != "..", !flatpakId.contains("/") {
                let shared = runtimeDir + "/app/" + flatpakId
                if privateDirectory(shared) { return (shared, "portal-keyring", false) }
            }
            return (runtimeDir, "portal-keyring", false)
        }
        if let stateHome, stateHome.hasPrefix("/") { return (stateHome, "portal-keyring-pending", true) }
        if let home, home.hasPrefix("/") { return (home + "/.local/state", "portal-keyring-pending", true) }
        return nil
    }

    /// Opens the directory (creating it, and a missing fallback base, when `create`): a descriptor
    /// for `openat`, closed by the caller.
    func open(create: Bool) throws(Failure) -> Int32 {
        guard let place = Self.location(runtimeDir: variable("XDG_RUNTIME_DIR"), stateHome: variable("XDG_STATE_HOME"),
                                        home: variable("HOME") ?? (environment == nil ? Self.passwdHome() : nil),
                                        flatpakId: variable("FLATPAK_ID")) else {
            throw Failure("no XDG_RUNTIME_DIR and no home directory", errno: false)
        }
        if create && place.fallback { Self.makeDirectories(place.base) }
        if place.fallback {
            var info = stat()
            guard stat(place.base, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == geteuid(),
                  info.st_mode & 0o022 == 0 else {
                throw Failure("\(place.base) is not a directory of this user that only it can write", errno: false)
            }
        }
        let path = place.base + "/" + place.name
        if create { mkdir(path, 0o700) }
        let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw Failure("cannot open \(path)") }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_uid == geteuid(), info.st_mode & 0o077 == 0 else {
            close(fd)
            throw Failure("\(path) is not a private directory of this user (owner and mode 0700 required)", errno: false)
        }
        return fd
    }

    /// An exclusive `flock` on the file `name` in this user's directory (created 0600), waited
    /// for until `end`: the open descriptor, whose close releases the lock (also when the process
    /// dies); -1 when there is no such file to lock (then nothing is serialized across processes);
    /// -2 when the time ran out.
    /// Each call opens the file anew, so threads of one process take turns as processes do.
    static func lock(_ name: String, until end: MonotonicInstant) -> Int32 {
        guard let directory = try? PrivateDirectory().open(create: true) else { return -1 }
        let fd = openat(directory, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        close(directory)
        if fd < 0 { return -1 }
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            if errno != EWOULDBLOCK && errno != EINTR { close(fd); return -1 }
            if end.hasPassed { close(fd); return -2 }
            usleep(1_000)
        }
        return fd
    }

    /// `<prefix>-<FNV-1a 64 of id, 16 hex digits>`: a file name for an identifier of any bytes.
    /// Files that must not be confused on a hash collision also hold the id (`PendingSignIn`).
    static func hashedName(_ prefix: String, _ id: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in id.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let digits = String(hash, radix: 16)
        return prefix + "-" + String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// An existing directory owned by this user with no group or other permissions.
    private static func privateDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR && info.st_uid == geteuid()
            && info.st_mode & 0o077 == 0
    }

    /// `mkdir -p` with mode 0700 for the components that are missing.
    private static func makeDirectories(_ path: String) {
        var prefix = ""
        for component in path.split(separator: "/") {
            prefix += "/" + component
            mkdir(prefix, 0o700)
        }
    }

    private func variable(_ name: String) -> String? {
        if let environment { return environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        guard let value = getenv(name), value.pointee != 0 else { return nil }
        return String(validatingCString: value)
    }

    private static func passwdHome() -> String? {
        guard let entry = getpwuid(geteuid()), let dir = entry.pointee.pw_dir else { return nil }
        return String(validatingCString: dir)
    }
}
