// The exported non-blocking sign-in calls (issue 12; header "Non-blocking sign-in calls"). Each
// checks its arguments like its blocking twin in Exports.swift, then runs the same core call on a
// worker thread (AsyncOperation.swift); the result reaches the callback as a portal_sign_in_result.
import CPortalKeyring
@_spi(PortalKeyringC) import PortalKeyring

/// A Swift reference that may cross to a worker (the core types are thread-safe).
private struct Shared<T>: @unchecked Sendable { let value: T }

/// The auth handle's current core object, for the worker.
private func sharedAuth(_ auth: OpaquePointer?) throws(CFailure) -> Shared<PortalAuth> {
    Shared(value: try borrowHandle(auth, as: AuthHandle.self, "auth").current)
}

@c @implementation
public func portal_auth_get_methods_async(_ auth: OpaquePointer?, _ queue: OpaquePointer?,
                                          _ callback: portal_sign_in_cb?, _ userData: UnsafeMutableRawPointer?,
                                          _ destroyNotify: portal_destroy_notify?,
                                          _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startSignIn(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        let auth = try sharedAuth(auth)
        return { () throws(CFailure) in
            let methods = try core { () throws(PortalAuthError) in try auth.value.getMethods() }
            return Outcome(text: try mallocCString(methods.allowedMethods.joined(separator: ",")),
                           autoCreateWallet: methods.autoCreateWallet)
        }
    }
}

@c @implementation
public func portal_auth_send_magic_link_async(_ auth: OpaquePointer?, _ email: UnsafePointer<CChar>?,
                                              _ queue: OpaquePointer?, _ callback: portal_sign_in_cb?,
                                              _ userData: UnsafeMutableRawPointer?, _ destroyNotify: portal_destroy_notify?,
                                              _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startSignIn(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        let auth = try sharedAuth(auth)
        let email = try stringArgument(email, "email", maxBytes: 320)
        return { () throws(CFailure) in
            try core { () throws(PortalAuthError) in try auth.value.sendMagicLink(email: email) }
            return Outcome()
        }
    }
}

@c @implementation
public func portal_auth_login_with_google_async(_ auth: OpaquePointer?, _ queue: OpaquePointer?,
                                                _ callback: portal_sign_in_cb?, _ userData: UnsafeMutableRawPointer?,
                                                _ destroyNotify: portal_destroy_notify?,
                                                _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startSignIn(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        let auth = try sharedAuth(auth)
        return { () throws(CFailure) in
            Outcome(text: try mallocCString(try core { () throws(PortalAuthError) in try auth.value.loginWithGoogle() }))
        }
    }
}

@c @implementation
public func portal_auth_login_with_apple_async(_ auth: OpaquePointer?, _ queue: OpaquePointer?,
                                               _ callback: portal_sign_in_cb?, _ userData: UnsafeMutableRawPointer?,
                                               _ destroyNotify: portal_destroy_notify?,
                                               _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startSignIn(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        let auth = try sharedAuth(auth)
        return { () throws(CFailure) in
            Outcome(text: try mallocCString(try core { () throws(PortalAuthError) in try auth.value.loginWithApple() }))
        }
    }
}

@c @implementation
public func portal_auth_handle_redirect_async(_ auth: OpaquePointer?, _ url: UnsafePointer<CChar>?, _ flags: UInt32,
                                              _ queue: OpaquePointer?, _ callback: portal_sign_in_cb?,
                                              _ userData: UnsafeMutableRawPointer?, _ destroyNotify: portal_destroy_notify?,
                                              _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startSignIn(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        let auth = try sharedAuth(auth)
        let url = try stringArgument(url, "url", maxBytes: PortalAuth.maxRedirectURLBytes)
        let known = UInt32(PORTAL_REDIRECT_ALLOW_UNSOLICITED.rawValue | PORTAL_REDIRECT_REPLACE_END_USER.rawValue)
        guard flags & ~known == 0 else { throw .invalidArgument("flags", "unknown bits \(flags & ~known)") }
        var options: RedirectOptions = []
        if flags & PORTAL_REDIRECT_ALLOW_UNSOLICITED.rawValue != 0 { options.insert(.allowUnsolicited) }
        if flags & PORTAL_REDIRECT_REPLACE_END_USER.rawValue != 0 { options.insert(.replaceDifferentEndUser) }
        let chosen = options
        return { () throws(CFailure) in
            let result = try core { () throws(PortalAuthError) in try auth.value.handleRedirect(url: url, options: chosen) }
            switch result {
            case .notHandled:
                return Outcome()
            case .authenticated(let session):
                return Outcome(session: try sessionHandle(session), kind: PORTAL_REDIRECT_AUTHENTICATED)
            case .totpRequired(let userJwt, let totpLink):
                var outcome = Outcome(kind: PORTAL_REDIRECT_TOTP_REQUIRED, userJwt: try mallocCString(userJwt))
                if let totpLink {
                    do throws(CFailure) { outcome.totpLink = try mallocCString(totpLink) } catch {
                        outcome.release()
                        throw error
                    }
                }
                return outcome
            }
        }
    }
}

@c @implementation
public func portal_auth_verify_totp_async(_ auth: OpaquePointer?, _ code: UnsafePointer<CChar>?,
                                          _ userJwt: UnsafePointer<CChar>?, _ queue: OpaquePointer?,
                                          _ callback: portal_sign_in_cb?, _ userData: UnsafeMutableRawPointer?,
                                          _ destroyNotify: portal_destroy_notify?,
                                          _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startSignIn(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        let auth = try sharedAuth(auth)
        let code = try stringArgument(code, "code", maxBytes: 16)
        let jwt = try stringArgument(userJwt, "user_jwt", maxBytes: PortalAuth.maxTokenBytes)
        try core(names: ["code": "code", "userJwt": "user_jwt"]) { () throws(PortalAuthError) in
            try PortalAuth.checkTotpArguments(code: code, userJwt: jwt)
        }
        return { () throws(CFailure) in
            let session = try core(names: ["code": "code", "userJwt": "user_jwt"]) { () throws(PortalAuthError) in
                try auth.value.verifyTotp(code: code, userJwt: jwt)
            }
            return Outcome(session: try sessionHandle(session))
        }
    }
}
