// The exported C functions of libportal-keyring.so that are not operations: versions, strings,
// handles and listeners. The operations, blocking and _async, are in SessionOperations.swift,
// PortalOperations.swift and SignInOperations.swift; the completion queues in AsyncExports.swift.
// Each export is checked by the compiler against its declaration in Include/portal_keyring.h
// (`@c @implementation`, SE-0495). Documentation lives in the header.
import CPortalKeyring
@_spi(Bindings) import PortalKeyringCore
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
/// Tests/c/abi_test/basics.c and Tests/install/run.sh compare them.
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
    case PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED: return staticCString("magic link not configured")
    case PORTAL_ERR_AUTH_METHOD_UNAVAILABLE: return staticCString("auth method unavailable")
    case PORTAL_ERR_ACCOUNT_ABSTRACTION_UNAVAILABLE: return staticCString("account abstraction unavailable")
    case PORTAL_ERR_SERVER: return staticCString("server error")
    case PORTAL_ERR_REQUEST_REFUSED: return staticCString("request refused")
    case PORTAL_ERR_TOTP_QR_UNAVAILABLE: return staticCString("TOTP QR code unavailable")
    case PORTAL_ERR_SIGN_IN_IN_PROGRESS: return staticCString("sign-in in progress")
    case PORTAL_ERR_SIGN_IN_UNAVAILABLE: return staticCString("sign-in unavailable")
    case PORTAL_ERR_SIGN_IN_TIMED_OUT: return staticCString("sign-in timed out")
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
public func portal_auth_set_magic_link(_ auth: OpaquePointer?, _ fromEmail: UnsafePointer<CChar>?,
                                       _ templateId: UnsafePointer<CChar>?) -> portal_status {
    exported { () throws(CFailure) in
        let handle = try borrowHandle(auth, as: AuthHandle.self, "auth")
        let max = PortalAuth.maxIdentifierBytes
        var config: MagicLinkConfig?
        switch (fromEmail, templateId) {
        case (nil, nil): config = nil
        case (nil, _): throw .invalidArgument("from_email", "must not be NULL when template_id is given")
        case (_, nil): throw .invalidArgument("template_id", "must not be NULL when from_email is given")
        default:
            config = MagicLinkConfig(fromEmail: try stringArgument(fromEmail, "from_email", maxBytes: max),
                                     templateId: try stringArgument(templateId, "template_id", maxBytes: max))
        }
        // Checked before the swap: a refused value leaves the handle as it was.
        try handle.auth.withLock { (box) throws(CFailure) in
            box.value = try core(names: magicLinkNames) { () throws(PortalAuthError) in
                try box.value.withMagicLink(config)
            }
        }
    }
}

private let magicLinkNames = ["fromEmail": "from_email", "templateId": "template_id"]

@c @implementation
public func portal_auth_set_account_abstraction(_ auth: OpaquePointer?,
                                                _ value: portal_account_abstraction) -> portal_status {
    exported { () throws(CFailure) in
        let handle = try borrowHandle(auth, as: AuthHandle.self, "auth")
        let setting: Bool?
        switch value {
        case PORTAL_ACCOUNT_ABSTRACTION_DEFAULT: setting = nil
        case PORTAL_ACCOUNT_ABSTRACTION_OFF: setting = false
        case PORTAL_ACCOUNT_ABSTRACTION_ON: setting = true
        default: throw .invalidArgument("value", "expected PORTAL_ACCOUNT_ABSTRACTION_DEFAULT, _OFF or _ON")
        }
        handle.auth.withLock { box in box.value = box.value.withAccountAbstraction(setting) }
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
        let key = try secretArgument(apiKey, "api_key", maxBytes: PortalAuth.maxTokenBytes)
        let host = apiHost == nil ? PortalAuth.defaultApiHost
            : try stringArgument(apiHost, "api_host", maxBytes: PortalAuth.maxIdentifierBytes)
        let portal = try core(names: ["apiKey": "api_key", "apiHost": "api_host"]) { () throws(PortalAuthError) in
            try Portal(apiKey: key.value, apiHost: host)
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
            let handle = portal.onSessionInvalidated({ callback(data.pointer) },
                                                     release: { destroyNotify?(data.pointer) })
            out?.pointee = handle.id
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
