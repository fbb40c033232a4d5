// portal-session: the Portal session layer for shell scripts and desktop integration.
// Built on the Swift core; never prints a token unless --show-token is given, never logs one.
// Files: Options.swift (the command line), Commands.swift (each command), Check.swift (check),
// Watch.swift (watch), Help.swift (texts and exit codes), JSONOutput.swift (--json),
// Terminal.swift (stdin, stdout, stderr).
@_spi(PortalKeyringCLI) import PortalKeyringCore
#if canImport(Glibc)
import Glibc
#endif

// Before anything opens a descriptor: 0, 1 and 2 are ours (a closed stdout is refused).
if !reserveStandardDescriptors() {
    printError("stdout is closed: nothing done (redirect it, e.g. >/dev/null, to discard the output)")
    exit(Exit.output.rawValue)
}
// No core file, no ptrace by other processes of the user (docs/security.md, "Core dumps").
ProcessHardening.makeNonDumpable()
do {
    let arguments = try commandLineArguments()
    // The redirect URL's grant leaves /proc/PID/cmdline as soon as it has been copied.
    ProcessHardening.scrubURLQueriesFromArgv()
    let options = try Options.parse(arguments)
    finish(try run(options))
} catch {
    if jsonRequested() { output(json(["status": "usage", "message": error.message])) }
    if error.showUsage {
        printError(error.message)
        writeStderr(usage + "\n")
    } else {
        printError("\(error.message)\nsee: portal-session --help")
    }
    finish(.usage)
}
