#if canImport(Glibc)
import Glibc
#endif

/// Which storage a `PortalAuth` keeps sessions in (docs/storage.md#the-storage-protocol): the Secret Service; inside
/// a Flatpak sandbox (`/.flatpak-info` exists) the storage libsecret would use there
/// (`FlatpakStorage`: the file keyring at `$XDG_DATA_HOME/keyrings/default.keyring` when the
/// Secret portal answers version 1); unless the environment names another one explicitly, which
/// wins. The override is for tests and odd setups, read when the `PortalAuth` is made:
///
/// - `PORTAL_KEYRING_BACKEND` unset or empty: the choice above.
/// - `PORTAL_KEYRING_BACKEND=secret-service`: the Secret Service (`SecretServiceStorage`), also
///   in a sandbox.
/// - `PORTAL_KEYRING_BACKEND=file:/absolute/path/default.keyring`: that file keyring
///   (`FileKeyringStorage`), keyed by the master secret in the file that
///   `PORTAL_KEYRING_MASTER_SECRET_FILE` names: this user's regular file, no group or other
///   permissions, 1 to 4096 bytes taken as they are (the Secret portal's secret is 64). It is read
///   each time a key must be derived (a keyring file with a new salt) and wiped once the key is
///   made. With `PORTAL_KEYRING_MASTER_SECRET_FILE` unset, the master secret is the Secret
///   portal's (`SecretPortal.retrieveSecret`), asked for each time a key must be derived.
/// - Any other value, or a master secret variable that is set and names no absolute path: every
///   storage call fails with `StorageFailure.misconfigured` naming the variable. Never a silent
///   fall back to another keyring: the sessions would go where the caller did not ask.
///
/// The session watch listens for the Secret Service's signals and, over a file keyring, for
/// changes of the file (`FileKeyringMonitor`).
enum StorageBackend {
    static let variable = "PORTAL_KEYRING_BACKEND"
    static let masterSecretVariable = "PORTAL_KEYRING_MASTER_SECRET_FILE"
    /// The largest master secret file read.
    static let maximumSecretSize = 4096

    /// The file whose presence says the process runs in a Flatpak sandbox (libsecret's test).
    static let flatpakInfo = "/.flatpak-info"

    /// The storage the environment names (`environment`: the variables as tests set them; nil:
    /// the process's; `flatpakInfo`: the file that marks a sandbox, for tests).
    static func storage(timeouts: KeyringTimeouts, environment: [String: String]? = nil,
                        flatpakInfo: String = flatpakInfo) -> any SessionStorage {
        let value = lookup(variable, environment) ?? ""
        if value.isEmpty && access(flatpakInfo, F_OK) == 0 {
            guard let path = dataHome(environment).map({ $0 + "/keyrings/default.keyring" }) else {
                return MisconfiguredStorage(message: "in a Flatpak sandbox, neither XDG_DATA_HOME nor HOME names an absolute "
                                            + "directory for the file keyring")
            }
            return FlatpakStorage(keyringPath: path, timeouts: timeouts)
        }
        if value.isEmpty || value == "secret-service" { return SecretServiceStorage(timeouts: timeouts) }
        guard value.hasPrefix("file:/") else {
            return MisconfiguredStorage(message: "\(variable)='\(value)' is neither 'secret-service' nor 'file:' and an absolute path")
        }
        let path = String(value.dropFirst("file:".count))
        guard let secretPath = lookup(masterSecretVariable, environment) else {
            return FileKeyringStorage(path: path, masterSecret: portalSecret, timeouts: timeouts)
        }
        guard secretPath.hasPrefix("/") else {
            return MisconfiguredStorage(message: "\(variable) names a file keyring, and \(masterSecretVariable) names no "
                                        + "absolute path to its master secret")
        }
        let source: FileKeyringMasterSecret.Source = { _ throws(StorageFailure) in try readMasterSecret(secretPath) }
        return FileKeyringStorage(path: path, masterSecret: FileKeyringMasterSecret(source: source), timeouts: timeouts)
    }

    /// The Secret portal's master secret, one for the process (one app id, one secret): the key
    /// derived from it is kept for every storage over the same file.
    static let portalSecret = FileKeyringMasterSecret(source: { end throws(StorageFailure) in
        try SecretPortal.retrieveSecret(until: end)
    })

    /// The bytes of the master secret file at `path`, checked as the variable's rules say. Opened
    /// without blocking (a FIFO there would wait for a writer for ever, past every deadline: the
    /// keyring file's rule, docs/security.md "A FIFO at the keyring path") and without
    /// following a link (another user's link could point anywhere).
    static func readMasterSecret(_ path: String) throws(StorageFailure) -> SecretBytes {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else {
            let why = errno == ELOOP ? "is a symbolic link (not followed: name the file itself)" : String(cString: strerror(errno))
            throw .misconfigured("\(masterSecretVariable): open \(path): \(why)")
        }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_uid == geteuid(),
              status.st_mode & 0o077 == 0 else {
            throw .misconfigured("\(masterSecretVariable): \(path) is not a regular file of this user that only it can read "
                                 + "(mode 0600 or stricter)")
        }
        guard status.st_size > 0, status.st_size <= maximumSecretSize else {
            throw .misconfigured("\(masterSecretVariable): \(path) holds \(status.st_size) bytes, not 1 to \(maximumSecretSize)")
        }
        let size = Int(status.st_size)
        var complete = true
        let secret = SecretBytes(count: size) { out in
            var offset = 0
            while offset < size {
                let count = read(fd, out.baseAddress! + offset, size - offset)  // trusted: size > 0, our own buffer
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                offset += count
            }
            complete = offset == size
        }
        guard complete else { throw .misconfigured("\(masterSecretVariable): \(path) could not be read whole") }
        return secret
    }

    /// The user's data directory as GLib (and so libsecret) finds it: `XDG_DATA_HOME` when it
    /// is an absolute path (in a Flatpak sandbox `~/.var/app/APP_ID/data`), else
    /// `$HOME/.local/share`; nil when neither is known.
    static func dataHome(_ environment: [String: String]?) -> String? {
        if let data = lookup("XDG_DATA_HOME", environment), data.hasPrefix("/") { return data }
        guard let home = lookup("HOME", environment), home.hasPrefix("/") else { return nil }
        return home + "/.local/share"
    }

    private static func lookup(_ name: String, _ environment: [String: String]?) -> String? {
        if let environment { return environment[name] }
        guard let value = getenv(name) else { return nil }
        return String(validatingCString: value)
    }
}
