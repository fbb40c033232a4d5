// portal-session check: asks the Portal API whether the stored session is still accepted, and on
// its rejection signs out exactly that sign-in, as a Portal does on any 401 (docs/api.md#invalidation).
@_spi(PortalKeyringCLI) import PortalKeyringCore

/// Restores the stored session and sends `GET /api/v3/clients/me` with its token. 2xx: valid
/// (exit 0). 401: the request's own path invalidates it (the stored item of this sign-in only,
/// keyed by its generation: a newer sign-in stored meanwhile stays), exit 6; a delete that failed
/// is tried once more here, and still failing is exit 2. Anything else (5xx, 403, no answer)
/// clears nothing: exit 3. No session: exit 1, like restore.
func check(_ options: Options) throws -> Exit {
    let auth = try options.auth()
    let env = auth.authEnvironmentId
    guard let session = try auth.restoreSession() else {
        report(options, ["status": "signedOut", "authEnvironmentId": env], text: "signed out")
        return .signedOut
    }
    let portal = Portal(credentialsUnvalidated: session)
    // Before the process exits: no request of the library may still run (Portal.close()).
    defer { portal.close() }
    let response = try portal.send(PortalRequest(target: "/api/v3/clients/me"))
    let fields = ["authEnvironmentId": env, "endUserId": session.endUserId]
    switch response.status {
    case 200..<300:
        report(options, fields.merging(["status": "valid"]) { $1 }, text: session.endUserId)
        return .ok
    case 401:
        do {
            try session.invalidate()
        } catch {
            var cause = "\(error)"
            if case .sessionStorageFailure(let message) = error { cause = message }
            throw PortalAuthError.sessionStorageFailure(
                message: "the Portal API rejected the session, but its stored item could not be deleted: \(cause)")
        }
        printError("the Portal API rejected the session of \(session.endUserId): signed out (that sign-in's item deleted)")
        report(options, fields.merging(["status": "rejected"]) { $1 }, text: "rejected")
        return .rejected
    default:
        printError("the session was neither confirmed nor rejected: the stored session is kept")
        if response.status >= 500 { throw PortalAuthError.internalServerError(status: response.status) }
        throw PortalAuthError.clientError(status: response.status, message: "")
    }
}
