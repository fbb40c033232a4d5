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

/// Must equal PORTAL_KEYRING_VERSION_STRING (a C string macro is not a StaticString in Swift);
/// Tests/c/abi_test.c and Tests/install/run.sh compare them.
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
    case PORTAL_ERR_RATE_LIMITED: return staticCString("rate limited")
    case PORTAL_ERR_MALFORMED_RESPONSE: return staticCString("malformed response")
    case PORTAL_ERR_INVALID_GRANT: return staticCString("invalid grant")
    case PORTAL_ERR_INVALID_USER_JWT: return staticCString("invalid user JWT")
    case PORTAL_ERR_AUTHENTICATION_FAILED: return staticCString("authentication failed")
    case PORTAL_ERR_UNSOLICITED_REDIRECT: return staticCString("unsolicited redirect")
    case PORTAL_ERR_DIFFERENT_END_USER: return staticCString("different end user")
    case PORTAL_ERR_CANCELLED: return staticCString("cancelled")
    default: return staticCString("unknown status")
    }
}

@c @implementation
public func portal_last_error_message() -> UnsafePointer<CChar>! {
    lastErrorMessage()
}

@c @implementation
public func portal_string_free(_ string: UnsafeMutablePointer<CChar>?) {
    // A pointer the library did not hand out, or one freed already, is ignored.
    // The size recorded when it was handed out: a response body with an embedded NUL is wiped
    // to its end, not to its first NUL.
    guard let string, let size = takeBackString(string) else { return }
    explicit_bzero(string, size)
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
        let redirect = try stringArgument(redirectUrl, "redirect_url", maxBytes: PortalAuth.maxRedirectURLBytes)
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
        handle.auth.withLock { box in box.value = box.value.withKeyringTimeouts(timeouts) }
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
        var token = try stringArgument(clientSessionToken, "client_session_token", maxBytes: PortalAuth.maxTokenBytes)
        // The String made from the caller's token is this call's own: wiped when the call ends.
        defer { wipeStringStorage(&token) }
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
    do {
        let handle = try borrowHandle(session, as: SessionHandle.self, "session")
        clearLastError()
        return UnsafePointer(handle.endUserId)
    } catch {
        setLastError(error.message)
        return nil
    }
}

@c @implementation
public func portal_session_get_auth_environment_id(_ session: OpaquePointer?) -> UnsafePointer<CChar>? {
    guard let session else {
        setLastError("session: must not be NULL")
        return nil
    }
    do {
        let handle = try borrowHandle(session, as: SessionHandle.self, "session")
        clearLastError()
        return UnsafePointer(handle.authEnvironmentId)
    } catch {
        setLastError(error.message)
        return nil
    }
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
            return handOutString(memory.assumingMemoryBound(to: CChar.self))
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
    // Closed while this function holds the last reference; a freed or foreign pointer is ignored.
    releaseHandle(portal, as: Portal.self)?.close()
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
                           _ bodyOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                           _ bodyLenOut: UnsafeMutablePointer<Int>?) -> portal_status {
    exported { () throws(CFailure) in
        let portal = try borrowHandle(portal, as: Portal.self, "portal")
        let method = try stringArgument(method, "method", maxBytes: 16)
        // The method becomes the request line: allowlisted here (exact upper case) and again in
        // the core's PortalRequest.validate(), before anything is sent.
        guard PortalRequest.allowedMethods.contains(method) else {
            throw .invalidArgument("method", "must be GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS")
        }
        let target = try stringArgument(target, "target", maxBytes: 8192)
        let bodyBytes: [UInt8]? = body == nil ? nil
            : Array(try stringArgument(body, "body", maxBytes: HTTPClientLimits.maxRequestBodyBytes).utf8)
        let statusOut = try outArgument(statusOut, "status_out")
        let response = try core(names: ["target": "target"]) { () throws(PortalAuthError) in
            try portal.send(PortalRequest(method: method, target: target, body: bodyBytes))
        }
        if let bodyOut {
            guard let copy = malloc(response.bodyCount + 1) else {
                throw CFailure(status: PORTAL_ERR_INTERNAL, message: "out of memory")
            }
            response.withBodyBytes { if let base = $0.baseAddress { memcpy(copy, base, $0.count) } }
            copy.storeBytes(of: 0, toByteOffset: response.bodyCount, as: UInt8.self)
            bodyOut.pointee = handOutString(copy.assumingMemoryBound(to: CChar.self), size: response.bodyCount + 1)
        }
        bodyLenOut?.pointee = response.bodyCount
        statusOut.pointee = response.status
    }
}

private enum HTTPClientLimits {
    static let maxRequestBodyBytes = 1 << 20
}

// MARK: - Sign-in

@c @implementation
public func portal_auth_get_methods(_ auth: OpaquePointer?, _ methodsOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                    _ autoCreateWalletOut: UnsafeMutablePointer<Bool>?) -> portal_status {
    exported { () throws(CFailure) in
        let handle = try borrowHandle(auth, as: AuthHandle.self, "auth")
        let out = try outArgument(methodsOut, "methods_out")
        let methods = try core { () throws(PortalAuthError) in try handle.current.getMethods() }
        out.pointee = try mallocCString(methods.allowedMethods.joined(separator: ","))
        autoCreateWalletOut?.pointee = methods.autoCreateWallet
    }
}

@c @implementation
public func portal_auth_send_magic_link(_ auth: OpaquePointer?, _ email: UnsafePointer<CChar>?) -> portal_status {
    exported { () throws(CFailure) in
        let handle = try borrowHandle(auth, as: AuthHandle.self, "auth")
        let email = try stringArgument(email, "email", maxBytes: 320)
        try core { () throws(PortalAuthError) in try handle.current.sendMagicLink(email: email) }
    }
}

@c @implementation
public func portal_auth_login_with_google(_ auth: OpaquePointer?, _ urlOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> portal_status {
    exported { () throws(CFailure) in
        let handle = try borrowHandle(auth, as: AuthHandle.self, "auth")
        let out = try outArgument(urlOut, "url_out")
        let url = try core { () throws(PortalAuthError) in try handle.current.loginWithGoogle() }
        out.pointee = try mallocCString(url)
    }
}

@c @implementation
public func portal_auth_login_with_apple(_ auth: OpaquePointer?, _ urlOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> portal_status {
    exported { () throws(CFailure) in
        let handle = try borrowHandle(auth, as: AuthHandle.self, "auth")
        let out = try outArgument(urlOut, "url_out")
        let url = try core { () throws(PortalAuthError) in try handle.current.loginWithApple() }
        out.pointee = try mallocCString(url)
    }
}

@c @implementation
public func portal_auth_handle_redirect(_ auth: OpaquePointer?, _ url: UnsafePointer<CChar>?,
                                        _ kindOut: UnsafeMutablePointer<portal_redirect_kind>?,
                                        _ sessionOut: UnsafeMutablePointer<OpaquePointer?>?,
                                        _ userJwtOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                        _ totpLinkOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> portal_status {
    portal_auth_handle_redirect_v2(auth, url, 0, kindOut, sessionOut, userJwtOut, totpLinkOut)
}

@c @implementation
public func portal_auth_handle_redirect_v2(_ auth: OpaquePointer?, _ url: UnsafePointer<CChar>?, _ flags: UInt32,
                                           _ kindOut: UnsafeMutablePointer<portal_redirect_kind>?,
                                           _ sessionOut: UnsafeMutablePointer<OpaquePointer?>?,
                                           _ userJwtOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                           _ totpLinkOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> portal_status {
    exported { () throws(CFailure) in
        let handle = try borrowHandle(auth, as: AuthHandle.self, "auth")
        let url = try stringArgument(url, "url", maxBytes: PortalAuth.maxRedirectURLBytes)
        let kindOut = try outArgument(kindOut, "kind_out")
        let known = UInt32(PORTAL_REDIRECT_ALLOW_UNSOLICITED.rawValue | PORTAL_REDIRECT_REPLACE_END_USER.rawValue)
        guard flags & ~known == 0 else { throw .invalidArgument("flags", "unknown bits \(flags & ~known)") }
        var options: RedirectOptions = []
        if flags & PORTAL_REDIRECT_ALLOW_UNSOLICITED.rawValue != 0 { options.insert(.allowUnsolicited) }
        if flags & PORTAL_REDIRECT_REPLACE_END_USER.rawValue != 0 { options.insert(.replaceDifferentEndUser) }
        let result = try core { () throws(PortalAuthError) in try handle.current.handleRedirect(url: url, options: options) }
        // Build every output first so that a failure writes none of them.
        var session: OpaquePointer?
        var jwt: UnsafeMutablePointer<CChar>?
        var link: UnsafeMutablePointer<CChar>?
        let kind: portal_redirect_kind
        switch result {
        case .notHandled:
            kind = PORTAL_REDIRECT_NOT_HANDLED
        case .authenticated(let s):
            kind = PORTAL_REDIRECT_AUTHENTICATED
            if sessionOut != nil { session = try sessionHandle(s) }
        case .totpRequired(let userJwt, let totpLink):
            kind = PORTAL_REDIRECT_TOTP_REQUIRED
            if userJwtOut != nil { jwt = try mallocCString(userJwt) }
            if totpLinkOut != nil, let totpLink {
                do throws(CFailure) { link = try mallocCString(totpLink) } catch { portal_string_free(jwt); throw error }
            }
        }
        kindOut.pointee = kind
        sessionOut?.pointee = session
        userJwtOut?.pointee = jwt
        totpLinkOut?.pointee = link
    }
}

@c @implementation
public func portal_auth_verify_totp(_ auth: OpaquePointer?, _ code: UnsafePointer<CChar>?, _ userJwt: UnsafePointer<CChar>?,
                                    _ out: UnsafeMutablePointer<OpaquePointer?>?) -> portal_status {
    exported { () throws(CFailure) in
        let handle = try borrowHandle(auth, as: AuthHandle.self, "auth")
        let code = try stringArgument(code, "code", maxBytes: 16)
        let jwt = try stringArgument(userJwt, "user_jwt", maxBytes: PortalAuth.maxTokenBytes)
        let session = try core(names: ["code": "code", "userJwt": "user_jwt"]) { () throws(PortalAuthError) in
            try handle.current.verifyTotp(code: code, userJwt: jwt)
        }
        if let out { out.pointee = try sessionHandle(session) }
    }
}
