// The keyring operations of portal_auth and portal_session, each written once: its `prepare…`
// function reads and checks the C arguments on the calling thread (a secret through
// `secretArgument`, wiped when the work is released) and returns the work (`PreparedWork`);
// the blocking export runs that inline, the _async export on a keyring worker (`startAsync`,
// AsyncOperation.swift). Documentation lives in Include/portal_keyring.h.
import CPortalKeyring
@_spi(Bindings) import PortalKeyringCore

/// The auth handle's current core object, for the work.
func sharedAuth(_ auth: OpaquePointer?) throws(CFailure) -> Shared<PortalAuth> {
    Shared(value: try borrowHandle(auth, as: AuthHandle.self, "auth").current)
}

// MARK: - restore

private func prepareRestore(_ auth: OpaquePointer?) throws(CFailure) -> PreparedWork {
    let auth = try sharedAuth(auth)
    return { () throws(CFailure) in
        let session = try core { () throws(PortalAuthError) in try auth.value.restoreSession() }
        return Outcome(session: try session.map { s throws(CFailure) in try sessionHandle(s) })
    }
}

@c @implementation
public func portal_auth_restore_session(_ auth: OpaquePointer?, _ out: UnsafeMutablePointer<OpaquePointer?>?) -> portal_status {
    exported { () throws(CFailure) in
        let work = try prepareRestore(auth)
        let out = try outArgument(out)
        var outcome = try work()
        out.pointee = outcome.session.take()
    }
}

@c @implementation
public func portal_auth_restore_session_async(_ auth: OpaquePointer?, _ queue: OpaquePointer?,
                                              _ callback: portal_completion_cb?, _ userData: UnsafeMutableRawPointer?,
                                              _ destroyNotify: portal_destroy_notify?,
                                              _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startAsync(queue, callback, userData, destroyNotify, operationOut, lane: .keyring) { () throws(CFailure) in
        try prepareRestore(auth)
    }
}

// MARK: - persist

private let persistNames = ["endUserId": "end_user_id", "clientSessionToken": "client_session_token"]

/// Checks the arguments as `persistSession` will before it returns, so that the _async form
/// refuses a bad token at once, as the blocking one does (Tests/c/async_test/completions.c).
private func preparePersist(_ auth: OpaquePointer?, _ endUserId: UnsafePointer<CChar>?,
                            _ clientSessionToken: UnsafePointer<CChar>?) throws(CFailure) -> PreparedWork {
    let auth = try sharedAuth(auth)
    let user = try stringArgument(endUserId, "end_user_id", maxBytes: PortalAuth.maxIdentifierBytes)
    let token = try secretArgument(clientSessionToken, "client_session_token", maxBytes: PortalAuth.maxTokenBytes)
    try core(names: persistNames) {
        () throws(PortalAuthError) in try PortalAuth.checkPersistArguments(endUserId: user, clientSessionToken: token.value)
    }
    return { () throws(CFailure) in
        let session = try core(names: persistNames) { () throws(PortalAuthError) in
            try auth.value.persistSession(endUserId: user, clientSessionToken: token.value)
        }
        return Outcome(session: try sessionHandle(session))
    }
}

@c @implementation
public func portal_auth_persist_session(_ auth: OpaquePointer?, _ endUserId: UnsafePointer<CChar>?,
                                        _ clientSessionToken: UnsafePointer<CChar>?,
                                        _ out: UnsafeMutablePointer<OpaquePointer?>?) -> portal_status {
    exported { () throws(CFailure) in
        var outcome = try preparePersist(auth, endUserId, clientSessionToken)()
        defer { outcome.release() }
        if let out { out.pointee = outcome.session.take() }
    }
}

@c @implementation
public func portal_auth_persist_session_async(_ auth: OpaquePointer?, _ endUserId: UnsafePointer<CChar>?,
                                              _ clientSessionToken: UnsafePointer<CChar>?, _ queue: OpaquePointer?,
                                              _ callback: portal_completion_cb?, _ userData: UnsafeMutableRawPointer?,
                                              _ destroyNotify: portal_destroy_notify?,
                                              _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startAsync(queue, callback, userData, destroyNotify, operationOut, lane: .keyring) { () throws(CFailure) in
        try preparePersist(auth, endUserId, clientSessionToken)
    }
}

// MARK: - clear

private func prepareClear(_ auth: OpaquePointer?) throws(CFailure) -> PreparedWork {
    let auth = try sharedAuth(auth)
    return { () throws(CFailure) in
        try core { () throws(PortalAuthError) in try auth.value.clearPersistedSession() }
        return Outcome()
    }
}

@c @implementation
public func portal_auth_clear_persisted_session(_ auth: OpaquePointer?) -> portal_status {
    exported { () throws(CFailure) in _ = try prepareClear(auth)() }
}

@c @implementation
public func portal_auth_clear_persisted_session_async(_ auth: OpaquePointer?, _ queue: OpaquePointer?,
                                                      _ callback: portal_completion_cb?,
                                                      _ userData: UnsafeMutableRawPointer?,
                                                      _ destroyNotify: portal_destroy_notify?,
                                                      _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startAsync(queue, callback, userData, destroyNotify, operationOut, lane: .keyring) { () throws(CFailure) in
        try prepareClear(auth)
    }
}

// MARK: - invalidate

private func prepareInvalidate(_ session: OpaquePointer?) throws(CFailure) -> PreparedWork {
    let session = Shared(value: try borrowHandle(session, as: SessionHandle.self, "session").session)
    // The token leaves memory before the call returns; the keyring delete is the work.
    session.value.dropToken()
    return { () throws(CFailure) in
        try core { () throws(PortalAuthError) in try session.value.invalidate() }
        return Outcome()
    }
}

@c @implementation
public func portal_session_invalidate(_ session: OpaquePointer?) -> portal_status {
    exported { () throws(CFailure) in _ = try prepareInvalidate(session)() }
}

@c @implementation
public func portal_session_invalidate_async(_ session: OpaquePointer?, _ queue: OpaquePointer?,
                                            _ callback: portal_completion_cb?, _ userData: UnsafeMutableRawPointer?,
                                            _ destroyNotify: portal_destroy_notify?,
                                            _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startAsync(queue, callback, userData, destroyNotify, operationOut, lane: .keyring) { () throws(CFailure) in
        try prepareInvalidate(session)
    }
}
