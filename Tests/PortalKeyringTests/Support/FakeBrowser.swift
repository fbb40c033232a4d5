import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// The desktop's web browser for the desktop sign-in tests: Tests/tools/fake_browser.sh (its
/// header says what each `mode` does), registered with the XDG desktop files GIO reads
/// (`$XDG_DATA_HOME/applications/portal-test-browser.desktop`, and `$XDG_CONFIG_HOME/mimeapps.list`
/// defaults for `x-scheme-handler/http` and `https`; scripts/with-keyring.sh points both variables
/// into its temporary directory). The fake Portal API's authorize URLs are
/// `http://127.0.0.1:PORT/…`, so the `http` registration is the one these tests use; `https` is
/// what a real Portal answers.
enum FakeBrowser {
    static let desktopId = "portal-test-browser.desktop"

    static func variable(_ name: String) throws -> String {
        try #require(getenv(name).map { String(cString: $0) },
                     "\(name) is unset: run through scripts/with-keyring.sh (README's test command)")
    }

    /// The browser's state directory (inside scripts/with-keyring.sh's temporary directory).
    static func directory() throws -> String { try variable("XDG_DATA_HOME") + "/portal-test-browser" }

    private static func applications() throws -> String { try variable("XDG_DATA_HOME") + "/applications" }
    private static func mimeapps() throws -> String { try variable("XDG_CONFIG_HOME") + "/mimeapps.list" }

    /// `portal-session`, built beside the test bundle by `swift build --build-tests`.
    static func cli() throws -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        try #require(count > 0)
        let exe = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let cli = String(exe[..<(exe.lastIndex(of: "/") ?? exe.startIndex)]) + "/portal-session"
        try #require(access(cli, X_OK) == 0, "\(cli) is missing: swift build --build-tests builds it")
        return cli
    }

    /// Tests/tools/fake_browser.sh, the browser itself (shared with Tests/c/desktop_signin_test.c).
    static let script: String = {
        // #filePath is …/Tests/PortalKeyringTests/Support/FakeBrowser.swift: three folders up is Tests/.
        let tests = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false).dropLast(3)
        return tests.joined(separator: "/") + "/tools/fake_browser.sh"
    }()

    /// Registers the browser (idempotent), sets what its next launches do, and waits until GIO in
    /// this process sees it as the `http` and `https` handler (it notices changed XDG directories
    /// through a file monitor, asynchronously).
    static func install(mode: String, auth: PortalAuth, endUser: String = "") throws {
        let dir = try directory()
        mkdir(dir, 0o700)
        try #require(access(script, X_OK) == 0, "\(script) is missing or not executable")
        try write(dir + "/mode", mode)
        try write(dir + "/env", "PORTAL_AUTH_ENVIRONMENT_ID='\(auth.authEnvironmentId)'\n"
            + "PORTAL_REDIRECT_URL='\(auth.redirectUrl)'\nPORTAL_API_HOST='\(auth.apiHost)'\n"
            + "PORTAL_TEST_END_USER='\(endUser)'\nPORTAL_TEST_CLI='\(try cli())'\n"
            + "export PORTAL_AUTH_ENVIRONMENT_ID PORTAL_REDIRECT_URL PORTAL_API_HOST\n")
        for name in ["opened", "redirect", "handler-status", "handler.out"] { unlink(dir + "/" + name) }
        let apps = try applications()
        mkdir(apps, 0o700)
        let defaults = try mimeapps()
        if access(apps + "/" + desktopId, F_OK) != 0 || access(defaults, F_OK) != 0 {
            try write(apps + "/" + desktopId, "[Desktop Entry]\nType=Application\nName=Portal test browser\n"
                + "Exec=\"\(script)\" \"\(dir)\" %u\nMimeType=x-scheme-handler/http;x-scheme-handler/https;\nNoDisplay=true\n")
            try write(defaults, "[Default Applications]\nx-scheme-handler/http=\(desktopId)\n"
                + "x-scheme-handler/https=\(desktopId)\n")
        }
        try #require(waitUntil { DesktopURLOpener.defaultHandler(scheme: "http") == desktopId
                         && DesktopURLOpener.defaultHandler(scheme: "https") == desktopId },
                     "GIO does not see \(desktopId) as the http(s) handler")
    }

    /// Unregisters the browser: no application handles http(s) URLs (the test machine has no web
    /// browser; a system one would fail this wait, which says so).
    static func uninstall() throws {
        unlink(try applications() + "/" + desktopId)
        unlink(try mimeapps())
        try #require(waitUntil { DesktopURLOpener.defaultHandler(scheme: "http") == nil },
                     "an application still handles http URLs: \(DesktopURLOpener.defaultHandler(scheme: "http") ?? "")")
    }

    /// The URLs the browser was launched with so far.
    static func opened() throws -> [String] {
        (read(try directory() + "/opened") ?? "").split(separator: "\n").map(String.init)
    }

    /// Waits (up to `seconds`) for the file `name` the browser writes; returns its first line.
    static func waitForFile(_ name: String, seconds: Double = 20) async throws -> String {
        let dir = try directory()
        let path = dir + "/" + name
        let end = monotonicMilliseconds() + Int(seconds * 1000)
        while monotonicMilliseconds() < end {
            if let text = read(path) { return String(text.prefix { $0 != "\n" }) }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("the fake browser wrote no \(name) within \(seconds) s (handler.out: \(read(dir + "/handler.out") ?? "-"))")
        throw PortalAuthError.signInTimedOut
    }

    static func read(_ path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count <= 0 { break }
            bytes += buffer[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Writes `text` to a temporary file beside `path` and renames it into place (one inotify
    /// event, and readers never see half a file).
    static func write(_ path: String, _ text: String, mode: mode_t = 0o600) throws {
        let temporary = path + ".tmp"
        let file = try #require(fopen(temporary, "w"), "cannot write \(temporary)")
        fputs(text, file)
        fclose(file)
        chmod(temporary, mode)
        try #require(rename(temporary, path) == 0, "cannot rename \(temporary)")
    }

    static func waitUntil(seconds: Double = 5, _ condition: () -> Bool) -> Bool {
        let end = monotonicMilliseconds() + Int(seconds * 1000)
        while monotonicMilliseconds() < end {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }
}
