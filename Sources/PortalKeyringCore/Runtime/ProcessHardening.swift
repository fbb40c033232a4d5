import CCurl
#if canImport(Glibc)
import Glibc
#endif

/// Process-wide protections for the `portal-session` command (not for the library: a host
/// process decides these for itself). Not thread-safe: call them at start-up, before any thread
/// is started.
@_spi(PortalKeyringCLI)
public enum ProcessHardening {
    /// Makes the process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`): no core file is written
    /// when it crashes (with `fs.suid_dumpable` = 0, the default), `/proc/PID/mem`, `environ` and
    /// `maps` become root-only, and another process of the same user cannot attach with ptrace
    /// (gdb, gcore). Returns whether the process is now non-dumpable.
    @discardableResult
    public static func makeNonDumpable() -> Bool {
        _ = portal_prctl_set_dumpable(0)
        return portal_prctl_get_dumpable() == 0
    }

    /// Overwrites with NUL bytes the query and fragment (from the first `?` or `#`) of every
    /// command-line argument that contains `:/` (`myapp://auth?…`, and private-use redirect URLs
    /// like `com.example.app:/cb?…`, RFC 8252 §7.1), in the process's own argv memory: that is
    /// what `/proc/PID/cmdline` (world-readable) and `ps` show, and a redirect URL's query holds
    /// its single-use grant. Call it after the arguments were copied (`CommandLine.arguments`
    /// or `unsafeArgv` read). The window before the call remains (docs/security.md). Returns
    /// how many arguments were scrubbed.
    @discardableResult
    public static func scrubURLQueriesFromArgv() -> Int {
        var scrubbed = 0
        for index in 1..<Int(CommandLine.argc) {
            guard let argument = CommandLine.unsafeArgv[index], strstr(argument, ":/") != nil else { continue }
            let length = strlen(argument)
            guard let start = strpbrk(argument, "?#") else { continue }
            let offset = argument.distance(to: start)
            explicit_bzero(start, length - offset)
            scrubbed += 1
        }
        return scrubbed
    }
}
