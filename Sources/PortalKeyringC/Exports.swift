// The exported C functions of libportal-keyring.so. Each is checked by the compiler against its
// declaration in Include/portal_keyring.h (`@c @implementation`, SE-0495). Documentation lives in
// the header.
import CPortalKeyring
@_spi(PortalKeyringC) import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

private let authNames = ["authEnvironmentId": "auth_environment_id", "redirectUrl": "redirect_url",
                         "apiHost": "api_host", "endUserId": "end_user_id",
                         "clientSessionToken": "client_session_token"]

// MARK: - Versions and status

@c @implementation
public func portal_keyring_version_number() -> UInt32 {
    UInt32(PORTAL_KEYRING_VERSION_MAJOR) * 1_000_000 + UInt32(PORTAL_KEYRING_VERSION_MINOR) * 1_000
        + UInt32(PORTAL_KEYRING_VERSION_PATCH)
}

@c @implementation
public func portal_keyring_version() -> UnsafePointer<CChar>! {
    staticCString("0.1.0")
}

@c @implementation
public func portal_status_str(_ status: portal_status) -> UnsafePointer<CChar>! {
    switch status {
    case PORTAL_OK: return staticCString("ok")
    case PORTAL_ERR_INVALID_ARGUMENT: return staticCString("invalid argument")
    case PORTAL_ERR_SESSION_STORAGE: return staticCString("session storage failure")
    case PORTAL_ERR_SESSION_INVALIDATED: return staticCString("session invalidated")
    case PORTAL_ERR_UNAUTHORIZED: return staticCString("unauthorized")
    case PORTAL_ERR_NETWORK: return staticCString("network error")
    case PORTAL_ERR_INTERNAL: return staticCString("internal error")
    default: return staticCString("unknown status")
    }
}

@c @implementation
public func portal_last_error_message() -> UnsafePointer<CChar>! {
    lastErrorMessage()
}

@c @implementation
public func portal_string_free(_ string: UnsafeMutablePointer<CChar>?) {
    guard let string else { return }
    explicit_bzero(string, strlen(string))
    free(string)
}

// MARK: - portal_auth

@c @implementation
public func portal_auth_new(_ out: UnsafeMutablePointer<OpaquePointer?>?, _ authEnvironmentId: UnsafePointer<CChar>?,
                            _ redirectUrl: UnsafePointer<CChar>?, _ apiHost: UnsafePointer<CChar>?) -> portal_status {
    exported { () throws(CFailure) in
        let out = try outArgument(out)
        let max = PortalAuth.maxIdentifierBytes
        let id = try stringArgument(authEnvironmentId, "auth_environment_id", maxBytes: max)
        let redirect = try stringArgument(redirectUrl, "redirect_url", maxBytes: max)
        let host = apiHost == nil ? PortalAuth.defaultApiHost : try stringArgument(apiHost, "api_host", maxBytes: max)
        let auth = try core(names: authNames) { () throws(PortalAuthError) in
            try PortalAuth(authEnvironmentId: id, redirectUrl: redirect, apiHost: host)
        }
        out.pointee = retainHandle(AuthHandle(auth))
    }
}

@c @implementation
public func portal_auth_free(_ auth: OpaquePointer?) {
    releaseHandle(auth, as: AuthHandle.self)
}

@c @implementation
public func portal_auth_set_keyring_timeouts(_ auth: OpaquePointer?, _ callTimeoutMs: UInt32,
                                             _ promptTimeoutMs: UInt32) -> portal_status {
    exported { () throws(CFailure) in
        let handle = try borrowHandle(auth, as: AuthHandle.self, "auth")
        let limit: ClosedRange<UInt32> = 1...600_000
        guard limit.contains(callTimeoutMs) else { throw .invalidArgument("call_timeout_ms", "must be 1 … 600000") }
        guard limit.contains(promptTimeoutMs) else { throw .invalidArgument("prompt_timeout_ms", "must be 1 … 600000") }
        let timeouts = KeyringTimeouts(callMilliseconds: callTimeoutMs, promptMilliseconds: promptTimeoutMs)
        try handle.auth.withLock { box throws(CFailure) in
            let old = box.value
            box.value = try core(names: authNames) { () throws(PortalAuthError) in
                try PortalAuth(authEnvironmentId: old.authEnvironmentId, redirectUrl: old.redirectUrl,
                               apiHost: old.apiHost, keyringTimeouts: timeouts)
            }
        }
    }
}

@c @implementation
public func portal_auth_restore_session(_ auth: OpaquePointer?, _ out: UnsafeMutablePointer<OpaquePointer?>?) -> portal_status {
    exported { () throws(CFailure) in
        let handle = try borrowHandle(auth, as: AuthHandle.self, "auth")
        let out = try outArgument(out)
        let session = try core { () throws(PortalAuthError) in try handle.current.restoreSession() }
        out.pointee = try session.map { s throws(CFailure) in try sessionHandle(s) }
    }
}

@c @implementation
public func portal_auth_clear_persisted_session(_ auth: OpaquePointer?) -> portal_status {
    exported { () throws(CFailure) in
        let handle = try borrowHandle(auth, as: AuthHandle.self, "auth")
        try core { () throws(PortalAuthError) in try handle.current.clearPersistedSession() }
    }
}

@c @implementation
public func portal_auth_persist_session(_ auth: OpaquePointer?, _ endUserId: UnsafePointer<CChar>?,
                                        _ clientSessionToken: UnsafePointer<CChar>?,
                                        _ out: UnsafeMutablePointer<OpaquePointer?>?) -> portal_status {
    exported { () throws(CFailure) in
        let handle = try borrowHandle(auth, as: AuthHandle.self, "auth")
        let user = try stringArgument(endUserId, "end_user_id", maxBytes: PortalAuth.maxIdentifierBytes)
        let token = try stringArgument(clientSessionToken, "client_session_token", maxBytes: PortalAuth.maxTokenBytes)
        let session = try core(names: authNames) { () throws(PortalAuthError) in
            try handle.current.persistSession(endUserId: user, clientSessionToken: token)
        }
        if let out { out.pointee = try sessionHandle(session) }
    }
}

// MARK: - portal_session

@c @implementation
public func portal_session_get_end_user_id(_ session: OpaquePointer?) -> UnsafePointer<CChar>? {
    guard let session else {
        setLastError("session: must not be NULL")
        return nil
    }
    clearLastError()
    return UnsafePointer(Unmanaged<SessionHandle>.fromOpaque(UnsafeRawPointer(session)).takeUnretainedValue().endUserId)
}

@c @implementation
public func portal_session_get_auth_environment_id(_ session: OpaquePointer?) -> UnsafePointer<CChar>? {
    guard let session else {
        setLastError("session: must not be NULL")
        return nil
    }
    clearLastError()
    return UnsafePointer(Unmanaged<SessionHandle>.fromOpaque(UnsafeRawPointer(session)).takeUnretainedValue().authEnvironmentId)
}

@c @implementation
public func portal_session_copy_token(_ session: OpaquePointer?, _ out: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> portal_status {
    exported { () throws(CFailure) in
        let handle = try borrowHandle(session, as: SessionHandle.self, "session")
        let out = try outArgument(out)
        let copy = handle.session.withTokenBytes { bytes -> UnsafeMutablePointer<CChar>? in
            guard let memory = malloc(bytes.count + 1) else { return nil }
            if let base = bytes.baseAddress { memcpy(memory, base, bytes.count) }
            memory.storeBytes(of: 0, toByteOffset: bytes.count, as: UInt8.self)
            return memory.assumingMemoryBound(to: CChar.self)
        }
        switch copy {
        case .none:
            throw CFailure(status: PORTAL_ERR_SESSION_INVALIDATED, message: "the session was invalidated")
        case .some(.none):
            throw CFailure(status: PORTAL_ERR_INTERNAL, message: "out of memory")
        case .some(.some(let copy)):
            out.pointee = copy
        }
    }
}

@c @implementation
public func portal_session_free(_ session: OpaquePointer?) {
    releaseHandle(session, as: SessionHandle.self)
}

@c @implementation
public func portal_session_invalidate(_ session: OpaquePointer?) -> portal_status {
    exported { () throws(CFailure) in
        let handle = try borrowHandle(session, as: SessionHandle.self, "session")
        try core { () throws(PortalAuthError) in try handle.session.invalidate() }
    }
}

// MARK: - portal

@c @implementation
public func portal_new(_ out: UnsafeMutablePointer<OpaquePointer?>?, _ session: OpaquePointer?,
                       _ apiHost: UnsafePointer<CChar>?) -> portal_status {
    exported { () throws(CFailure) in
        let out = try outArgument(out)
        let handle = try borrowHandle(session, as: SessionHandle.self, "session")
        let host = apiHost == nil ? nil : try stringArgument(apiHost, "api_host", maxBytes: PortalAuth.maxIdentifierBytes)
        let portal = try core(names: authNames) { () throws(PortalAuthError) in
            try Portal(credentials: handle.session, apiHost: host)
        }
        out.pointee = retainHandle(portal)
    }
}

@c @implementation
public func portal_new_with_api_key(_ out: UnsafeMutablePointer<OpaquePointer?>?, _ apiKey: UnsafePointer<CChar>?,
                                    _ apiHost: UnsafePointer<CChar>?) -> portal_status {
    exported { () throws(CFailure) in
        let out = try outArgument(out)
        let key = try stringArgument(apiKey, "api_key", maxBytes: PortalAuth.maxTokenBytes)
        let host = apiHost == nil ? PortalAuth.defaultApiHost
            : try stringArgument(apiHost, "api_host", maxBytes: PortalAuth.maxIdentifierBytes)
        let portal = try core(names: ["apiKey": "api_key", "apiHost": "api_host"]) { () throws(PortalAuthError) in
            try Portal(apiKey: key, apiHost: host)
        }
        out.pointee = retainHandle(portal)
    }
}

@c @implementation
public func portal_free(_ portal: OpaquePointer?) {
    guard let portal else { return }
    Unmanaged<Portal>.fromOpaque(UnsafeRawPointer(portal)).takeUnretainedValue().cancelAllListeners()
    releaseHandle(portal, as: Portal.self)
}

/// `user_data` crosses to the delivery thread; the C caller owns its thread safety (documented).
private struct UserData: @unchecked Sendable { let pointer: UnsafeMutableRawPointer? }

@c @implementation
public func portal_on_session_invalidated(_ portal: OpaquePointer?, _ callback: portal_session_invalidated_cb?,
                                          _ userData: UnsafeMutableRawPointer?, _ destroyNotify: portal_destroy_notify?,
                                          _ out: UnsafeMutablePointer<UInt64>?) -> portal_status {
    let data = UserData(pointer: userData)
    // On failure destroy_notify runs before the error is recorded, so that a destroy_notify that
    // calls into the library cannot overwrite the caller's error message.
    let status = exported { () throws(CFailure) in
        do throws(CFailure) {
            let portal = try borrowHandle(portal, as: Portal.self, "portal")
            guard let callback else { throw .invalidArgument("callback", "must not be NULL") }
            let out = try outArgument(out)
            let handle = portal.onSessionInvalidated({ callback(data.pointer) },
                                                     release: { destroyNotify?(data.pointer) })
            out.pointee = handle.id
        } catch {
            destroyNotify?(data.pointer)
            throw error
        }
    }
    return status
}

@c @implementation
public func portal_listener_cancel(_ portal: OpaquePointer?, _ handle: UInt64) -> portal_status {
    exported { () throws(CFailure) in
        let portal = try borrowHandle(portal, as: Portal.self, "portal")
        portal.cancelListener(id: handle)
    }
}

@c @implementation
public func portal_report_unauthorized(_ portal: OpaquePointer?, _ rejectedToken: UnsafePointer<CChar>?,
                                       _ invalidatedOut: UnsafeMutablePointer<Bool>?) -> portal_status {
    exported { () throws(CFailure) in
        let portal = try borrowHandle(portal, as: Portal.self, "portal")
        let token = try stringArgument(rejectedToken, "rejected_token", maxBytes: PortalAuth.maxTokenBytes)
        let invalidated = try core { () throws(PortalAuthError) in try portal.reportUnauthorized(rejectedToken: token) }
        invalidatedOut?.pointee = invalidated
    }
}

@c @implementation
public func portal_clear_session(_ portal: OpaquePointer?) -> portal_status {
    exported { () throws(CFailure) in
        let portal = try borrowHandle(portal, as: Portal.self, "portal")
        try core { () throws(PortalAuthError) in try portal.clearSession() }
    }
}

@c @implementation
public func portal_request(_ portal: OpaquePointer?, _ method: UnsafePointer<CChar>?, _ target: UnsafePointer<CChar>?,
                           _ body: UnsafePointer<CChar>?, _ statusOut: UnsafeMutablePointer<Int>?,
                           _ bodyOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> portal_status {
    exported { () throws(CFailure) in
        let portal = try borrowHandle(portal, as: Portal.self, "portal")
        let method = try stringArgument(method, "method", maxBytes: 16)
        guard ["GET", "POST", "PUT", "PATCH", "DELETE"].contains(method) else {
            throw .invalidArgument("method", "must be GET, POST, PUT, PATCH or DELETE")
        }
        let target = try stringArgument(target, "target", maxBytes: 8192)
        let bodyBytes: [UInt8]? = body == nil ? nil
            : Array(try stringArgument(body, "body", maxBytes: HTTPClientLimits.maxRequestBodyBytes).utf8)
        let statusOut = try outArgument(statusOut, "status_out")
        let response = try core(names: ["target": "target"]) { () throws(PortalAuthError) in
            try portal.send(PortalRequest(method: method, target: target, body: bodyBytes))
        }
        if let bodyOut {
            guard let copy = malloc(response.body.count + 1) else {
                throw CFailure(status: PORTAL_ERR_INTERNAL, message: "out of memory")
            }
            response.body.withUnsafeBytes { if let base = $0.baseAddress { memcpy(copy, base, $0.count) } }
            copy.storeBytes(of: 0, toByteOffset: response.body.count, as: UInt8.self)
            bodyOut.pointee = copy.assumingMemoryBound(to: CChar.self)
        }
        statusOut.pointee = response.status
    }
}

private enum HTTPClientLimits {
    static let maxRequestBodyBytes = 1 << 20
}
