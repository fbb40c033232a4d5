// portal-session watch: one line per change of the stored session (docs/threading.md), until SIGINT or
// SIGTERM.
@_spi(PortalKeyringCLI) import PortalKeyringCore
#if canImport(Glibc)
import Glibc
#endif

/// The line for one event: `signed-in END_USER_ID` (sanitized), `signed-out`, `locked`,
/// `resync`, `available`; with --json an object {"authEnvironmentId":…,"endUserId":…,"event":…,
/// "origin":…}, the origin ("thisProcess", "otherProcess") for signedIn and signedOut only.
func watchLine(_ change: SessionChange, origin: SessionChangeOrigin = .unknown, env: String, json asJSON: Bool) -> String {
    let name: String
    var endUserId: String?
    switch change {
    case .signedIn(let user):
        name = "signedIn"
        endUserId = user
    case .signedOut: name = "signedOut"
    case .locked: name = "locked"
    case .resync: name = "resync"
    case .available: name = "available"
    }
    let from: String? = switch origin {
    case .thisProcess: "thisProcess"
    case .otherProcess: "otherProcess"
    case .unknown: nil
    }
    if asJSON { return json(["event": name, "authEnvironmentId": env, "endUserId": endUserId, "origin": from]) }
    return DisplayText.sanitized(change.description, limit: Int.max)
}

/// Watches until SIGINT or SIGTERM (exit 0). The events are written by the watch thread; this
/// thread waits in sigwait() with both signals blocked in every thread (the watch thread,
/// started afterwards, inherits the mask), so a signal never interrupts a line half-written.
/// "watching AUTH_ENV" goes to stderr once the watch is live: every change after it is reported.
/// A stdout that cannot be written ends the watch (exit 74, through `finish`).
func watch(_ options: Options) throws -> Exit {
    try options.expectArguments(0, "no arguments")
    let auth = try options.auth()
    var signals = sigset_t()
    sigemptyset(&signals)
    sigaddset(&signals, SIGINT)
    sigaddset(&signals, SIGTERM)
    pthread_sigmask(SIG_BLOCK, &signals, nil)
    let asJSON = options.flags.contains("--json")
    let env = auth.authEnvironmentId
    let session = try SessionWatch(auth: auth) { change, origin in
        output(watchLine(change, origin: origin, env: env, json: asJSON))
        if stdoutError != 0 { kill(getpid(), SIGTERM) }
    }
    writeStderr("watching \(DisplayText.sanitized(env, limit: 200))\n")
    var received: Int32 = 0
    sigwait(&signals, &received)
    session.cancel()
    return .ok
}
