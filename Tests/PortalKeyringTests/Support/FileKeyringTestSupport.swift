import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

// What the file keyring's tests share (FileKeyringTests, FileKeyringStorageTests,
// StorageContractTests): master secrets, scratch directories, and libsecret 0.20.5's own file
// backend driven through `secret-tool` with its test hooks (SECRET_BACKEND=file,
// SECRET_FILE_TEST_PATH, SECRET_FILE_TEST_PASSWORD) in an environment without D-Bus.
// SECRET_FILE_TEST_PASSWORD's bytes are used as the master secret as they are (found by
// decrypting secret-tool's files with PBKDF2 over exactly those bytes): a 64-byte password
// stands for the Secret portal's 64-byte secret.

/// A 64-byte master secret (printable: an environment variable cannot hold a NUL).
let ourSecret = String(repeating: "portal-keyring-test-master-secret-", count: 2).prefix(64).description
let otherSecret = String(repeating: "Z", count: 64)

func master(_ password: String) -> SecretBytes { SecretBytes.copyingUTF8(of: password) }
func plainBytes(_ secret: SecretBytes) -> [UInt8] { secret.withUnsafeBytes { Array($0) } }

/// A secret with every byte value, NUL and newline included, that libsecret must keep byte-exact.
let binarySecret: [UInt8] = Array(0...255) + Array("tail\n".utf8)

/// A fresh private directory for one test's keyring files.
func temporaryDirectory() throws -> String {
    var template = Array("/tmp/portal-filekeyring-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    try #require(made != nil, "mkdtemp failed")
    return String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func removeDirectory(_ path: String) {
    _ = system("rm -rf '\(path)'")
}

func fileBytes(_ path: String) -> [UInt8]? {
    guard let file = fopen(path, "rb") else { return nil }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = fread(&buffer, 1, buffer.count, file)
        if count == 0 { break }
        bytes += buffer[0..<count]
    }
    return bytes
}

func writeBytes(_ bytes: [UInt8], to path: String) {
    let file = fopen(path, "wb")
    _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
    fclose(file)
}

/// libsecret's file backend through `secret-tool`, in an environment of four variables: no
/// D-Bus address, so nothing can reach a Secret Service.
enum SecretTool {
    static func path() throws -> String {
        for directory in ["/usr/bin", "/bin", "/usr/local/bin"] where access("\(directory)/secret-tool", X_OK) == 0 {
            return "\(directory)/secret-tool"
        }
        Issue.record("secret-tool is not installed (Debian: libsecret-tools; scripts/deps.sh installs it)")
        throw Failure()
    }

    struct Failure: Error {}

    /// Runs `secret-tool arguments` on the keyring `file` under `password` with `input` on stdin;
    /// the exit status and stdout, byte-exact. Killed after 30 s (`timeout`).
    static func run(_ arguments: [String], file: String, password: String,
                    input: [UInt8] = []) throws -> (status: Int32, output: [UInt8]) {
        let tool = try path()
        let directory = try temporaryDirectory()
        defer { removeDirectory(directory) }
        writeBytes(input, to: "\(directory)/in")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "\(directory)/in", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "\(directory)/out", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let words: [String] = ["timeout", "30", tool] + arguments
        let variables: [String] = ["PATH=/usr/bin:/bin", "SECRET_BACKEND=file", "SECRET_FILE_TEST_PATH=\(file)",
                                   "SECRET_FILE_TEST_PASSWORD=\(password)"]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = variables.map { strdup($0) } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/usr/bin/timeout", &actions, nil, argv, envp)
        #expect(spawned == 0, "posix_spawn failed: \(spawned)")
        guard spawned == 0 else { throw Failure() }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return ((status >> 8) & 0xFF, fileBytes("\(directory)/out") ?? [])
    }

    static func store(file: String, password: String, label: String, _ attributes: [String], secret: [UInt8]) throws {
        let result = try run(["store", "--label=\(label)"] + attributes, file: file, password: password, input: secret)
        try #require(result.status == 0, "secret-tool store \(attributes) failed")
    }

    /// The secret `secret-tool lookup` returns, or nil when it finds none.
    static func lookup(file: String, password: String, _ attributes: [String]) throws -> [UInt8]? {
        let result = try run(["lookup"] + attributes, file: file, password: password)
        return result.status == 0 ? result.output : nil
    }
}

/// `portal-session`, built beside this test binary.
func portalSession() throws -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    try #require(count > 0)
    let executable = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let tool = String(executable[..<(executable.lastIndex(of: "/") ?? executable.startIndex)]) + "/portal-session"
    try #require(access(tool, X_OK) == 0, "\(tool) is not built")
    return tool
}
