// portal-session's standard streams: stderr messages, stdout lines, stdin secrets, and checks
// that output was really written.
import FoundationEssentials
@_spi(PortalKeyringCLI) import PortalKeyringCore
#if canImport(Glibc)
import Glibc
#endif

/// Prints to stderr. `message` may carry outside text (a redirect, a server, D-Bus): control
/// characters (ESC sequences, CR) are removed and the length capped so it cannot drive the terminal.
func printError(_ message: String) {
    let safe = message.split(separator: "\n", omittingEmptySubsequences: false)
        .map { DisplayText.sanitized($0, limit: 1000) }.joined(separator: "\n")
    writeStderr("portal-session: \(safe)\n")
}

/// Writes `text` to stderr as it is (our own texts only).
func writeStderr(_ text: String) {
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

/// Prints a line of stdout built from outside text (end user ids, keyring descriptions, server
/// messages) without its control characters: nothing read from elsewhere drives the terminal.
func say(_ text: String) {
    output(DisplayText.sanitized(text, limit: Int.max))
}

/// A token or user JWT on a line of its own (plain `--show-token` output). These come from the
/// keyring or the server, so they may hold anything: one with a control character (C0, DEL, C1)
/// is not printed at all — an escape sequence would reach the terminal, and a sanitized copy
/// would be a wrong token — and stderr says so; `--json` prints it escaped and exact.
func outputSecret(_ text: String, _ what: String) {
    if text.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7f...0x9f).contains($0.value) }) {
        printError("the \(what) holds control characters: not printed (--json prints it, escaped)")
        return
    }
    output(text)
}

/// Makes sure descriptors 0, 1 and 2 are open before anything else opens a file or socket, so
/// that none lands on them (a D-Bus socket on fd 1 would receive our output). A closed stdin or
/// stderr becomes /dev/null. Returns false when stdout was closed: the caller refuses to run,
/// since nothing it prints could be written (it still gets /dev/null, to keep the slot taken).
func reserveStandardDescriptors() -> Bool {
    var stdoutOpen = true
    for fd: Int32 in 0...2 where fcntl(fd, F_GETFD) == -1 && errno == EBADF {
        // The lowest free descriptor is `fd`: the lower ones are open (or were just reserved).
        _ = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY)
        if fd == 1 { stdoutOpen = false }
    }
    return stdoutOpen
}

/// The errno of the first failed write to stdout, 0 while all succeeded. The tool is single-threaded.
nonisolated(unsafe) var stdoutError: Int32 = 0

/// Writes `text` and a line end to stdout, unbuffered; a failure (a full disk, /dev/full, EIO) is
/// remembered for `finish`, which turns it into exit 74: output that was lost is never exit 0.
func output(_ text: String) {
    let bytes = Array((text + "\n").utf8)
    var offset = 0
    while offset < bytes.count && stdoutError == 0 {
        let written = bytes.withUnsafeBytes { write(1, $0.baseAddress! + offset, $0.count - offset) }  // trusted: never empty (the line end)
        if written > 0 { offset += written } else if written < 0 && errno == EINTR { continue } else {
            stdoutError = written < 0 ? errno : EIO
        }
    }
}

/// Exits with `code`, unless stdout could not be written: then exit 74 with a message on stderr.
func finish(_ code: Exit) -> Never {
    if stdoutError != 0 {
        printError("could not write to stdout: \(String(cString: strerror(stdoutError)))"
            + (code == .ok ? " (the command itself succeeded)" : ""))
        exit(Exit.output.rawValue)
    }
    exit(code.rawValue)
}

/// An environment variable, which must be UTF-8 (never repaired: a repaired id would name
/// another auth environment).
func environment(_ name: String) throws(UsageError) -> String? {
    guard let value = getenv(name) else { return nil }
    let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(value).assumingMemoryBound(to: UInt8.self), count: strlen(value))
    guard let string = String(validating: bytes, as: UTF8.self) else {
        throw UsageError(message: "\(name) is not valid UTF-8")
    }
    return string.isEmpty ? nil : string
}

/// The command line, rejecting arguments that are not UTF-8 (Swift's `CommandLine.arguments`
/// would silently replace the bad bytes).
func commandLineArguments() throws(UsageError) -> [String] {
    var result: [String] = []
    for index in 1..<Int(CommandLine.argc) {
        guard let pointer = CommandLine.unsafeArgv[index] else { continue }
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self),
                                        count: strlen(pointer))
        guard let argument = String(validating: bytes, as: UTF8.self) else {
            throw UsageError(message: "argument \(index) is not valid UTF-8")
        }
        result.append(argument)
    }
    return result
}

/// Reads a secret from stdin (at most `limit` bytes) and removes one trailing line end (LF or
/// CRLF). A terminal on stdin is refused: the secret would echo and nothing says it is awaited.
func readSecretFromStdin(limit: Int, what: String, example: String) throws(UsageError) -> String {
    if isatty(0) == 1 {
        throw UsageError(message: "\(what) is read from stdin, which is a terminal: pipe it in, e.g. \(example)")
    }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = read(0, &buffer, buffer.count)
        if count <= 0 { break }
        bytes.append(contentsOf: buffer[0..<count])
        if bytes.count > limit + 2 { break }
    }
    defer {
        for index in bytes.indices { bytes[index] = 0 }
        for index in buffer.indices { buffer[index] = 0 }
    }
    // One LF, or one CRLF; a CR alone is not a line end here, so it stays and is refused.
    if bytes.last == 0x0A {
        bytes.removeLast()
        if bytes.last == 0x0D { bytes.removeLast() }
    }
    guard bytes.count <= limit else { throw UsageError(message: "the value on stdin is longer than \(limit) bytes") }
    guard let text = String(validating: bytes, as: UTF8.self) else { throw UsageError(message: "stdin is not valid UTF-8") }
    return text
}
