// The sign-in operations of portal_auth, each written once: its `prepare…` function reads and
// checks the C arguments on the calling thread (a secret through `secretArgument`, wiped when
// the work is released) and returns the work (`PreparedWork`); the blocking export runs that
// inline, the _async export on a worker (`startSignIn`, AsyncOperation.swift), whose result
// reaches the callback as a portal_sign_in_result. Documentation lives in Include/portal_keyring.h.
import CPortalKeyring
@_spi(Bindings) import PortalKeyringCore
#if canImport(Glibc)
import Glibc
#endif

// MARK: - get_methods

private func prepareGetMethods(_ auth: OpaquePointer?) throws(CFailure) -> PreparedWork {
    let auth = try sharedAuth(auth)
    return { () throws(CFailure) in
        let methods = try core { () throws(PortalAuthError) in try auth.value.getMethods() }
        return Outcome(text: try mallocCString(methods.allowedMethods.joined(separator: ",")),
                       autoCreateWallet: methods.autoCreateWallet)
    }
}

@c @implementation
public func portal_auth_get_methods(_ auth: OpaquePointer?, _ methodsOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                    _ autoCreateWalletOut: UnsafeMutablePointer<Bool>?) -> portal_status {
    exported { () throws(CFailure) in
        let work = try prepareGetMethods(auth)
        let out = try outArgument(methodsOut, "methods_out")
        var outcome = try work()
        out.pointee = outcome.text.take()
        autoCreateWalletOut?.pointee = outcome.autoCreateWallet
    }
}

@c @implementation
public func portal_auth_get_methods_async(_ auth: OpaquePointer?, _ queue: OpaquePointer?,
                                          _ callback: portal_sign_in_cb?, _ userData: UnsafeMutableRawPointer?,
                                          _ destroyNotify: portal_destroy_notify?,
                                          _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startSignIn(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        try prepareGetMethods(auth)
    }
}

// MARK: - send_magic_link

private func prepareSendMagicLink(_ auth: OpaquePointer?, _ email: UnsafePointer<CChar>?) throws(CFailure) -> PreparedWork {
    let auth = try sharedAuth(auth)
    let email = try stringArgument(email, "email", maxBytes: 320)
    return { () throws(CFailure) in
        try core { () throws(PortalAuthError) in try auth.value.sendMagicLink(email: email) }
        return Outcome()
    }
}

@c @implementation
public func portal_auth_send_magic_link(_ auth: OpaquePointer?, _ email: UnsafePointer<CChar>?) -> portal_status {
    exported { () throws(CFailure) in _ = try prepareSendMagicLink(auth, email)() }
}

@c @implementation
public func portal_auth_send_magic_link_async(_ auth: OpaquePointer?, _ email: UnsafePointer<CChar>?,
                                              _ queue: OpaquePointer?, _ callback: portal_sign_in_cb?,
                                              _ userData: UnsafeMutableRawPointer?, _ destroyNotify: portal_destroy_notify?,
                                              _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startSignIn(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        try prepareSendMagicLink(auth, email)
    }
}

// MARK: - login_with_google, login_with_apple

private enum Provider { case google, apple }

private func prepareLogin(_ auth: OpaquePointer?, _ provider: Provider) throws(CFailure) -> PreparedWork {
    let auth = try sharedAuth(auth)
    return { () throws(CFailure) in
        let url = try core { () throws(PortalAuthError) in
            switch provider {
            case .google: try auth.value.loginWithGoogle()
            case .apple: try auth.value.loginWithApple()
            }
        }
        return Outcome(text: try mallocCString(url))
    }
}

/// The blocking login: the URL into `url_out`.
private func login(_ auth: OpaquePointer?, _ provider: Provider,
                   _ urlOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> portal_status {
    exported { () throws(CFailure) in
        let work = try prepareLogin(auth, provider)
        let out = try outArgument(urlOut, "url_out")
        var outcome = try work()
        out.pointee = outcome.text.take()
    }
}

@c @implementation
public func portal_auth_login_with_google(_ auth: OpaquePointer?, _ urlOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> portal_status {
    login(auth, .google, urlOut)
}

@c @implementation
public func portal_auth_login_with_google_async(_ auth: OpaquePointer?, _ queue: OpaquePointer?,
                                                _ callback: portal_sign_in_cb?, _ userData: UnsafeMutableRawPointer?,
                                                _ destroyNotify: portal_destroy_notify?,
                                                _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startSignIn(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        try prepareLogin(auth, .google)
    }
}

@c @implementation
public func portal_auth_login_with_apple(_ auth: OpaquePointer?, _ urlOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> portal_status {
    login(auth, .apple, urlOut)
}

@c @implementation
public func portal_auth_login_with_apple_async(_ auth: OpaquePointer?, _ queue: OpaquePointer?,
                                               _ callback: portal_sign_in_cb?, _ userData: UnsafeMutableRawPointer?,
                                               _ destroyNotify: portal_destroy_notify?,
                                               _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startSignIn(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        try prepareLogin(auth, .apple)
    }
}

// MARK: - handle_redirect

/// Unknown flag bits are refused (docs/ABI.md: a flag added later is refused, never ignored).
private func prepareHandleRedirect(_ auth: OpaquePointer?, _ url: UnsafePointer<CChar>?,
                                   _ flags: UInt32) throws(CFailure) -> PreparedWork {
    let auth = try sharedAuth(auth)
    guard let url else { throw .invalidArgument("url", "must not be NULL") }
    // Blank, or more than 3 bytes per UTF-16 code unit allowed (no code unit takes more in
    // UTF-8): over handleRedirect's limit. Not ours, as the Swift call answers; only the scan is
    // bounded here.
    let longest = 3 * PortalAuth.maxRedirectURLBytes
    let length = strnlen(url, longest + 1)
    let text = length > longest ? nil : try stringArgument(url, "url", maxBytes: longest, allowingBlank: true)
    let known = UInt32(PORTAL_REDIRECT_ALLOW_UNSOLICITED.rawValue | PORTAL_REDIRECT_REPLACE_END_USER.rawValue)
    guard flags & ~known == 0 else { throw .invalidArgument("flags", "unknown bits \(flags & ~known)") }
    var options: RedirectOptions = []
    if flags & PORTAL_REDIRECT_ALLOW_UNSOLICITED.rawValue != 0 { options.insert(.allowUnsolicited) }
    if flags & PORTAL_REDIRECT_REPLACE_END_USER.rawValue != 0 { options.insert(.replaceDifferentEndUser) }
    let chosen = options
    return { () throws(CFailure) in
        guard let text else { return Outcome() }
        return try redirectOutcome(try core { () throws(PortalAuthError) in
            try auth.value.handleRedirect(url: text, options: chosen)
        })
    }
}

/// A sign-in's result as C outputs: the kind, and the session or the TOTP step's JWT and link
/// (handle_redirect, and sign_in_with_google/_apple in DesktopSignInOperations.swift).
func redirectOutcome(_ result: RedirectResult) throws(CFailure) -> Outcome {
    switch result {
    case .notHandled:
        return Outcome()
    case .authenticated(let signedIn):
        return Outcome(session: try sessionHandle(signedIn), kind: PORTAL_REDIRECT_AUTHENTICATED)
    case .totpRequired(let step):
        var outcome = Outcome(kind: PORTAL_REDIRECT_TOTP_REQUIRED, userJwt: try mallocCString(step.userJwt))
        if let totpLink = step.totpLink {
            do throws(CFailure) { outcome.totpLink = try mallocCString(totpLink) } catch {
                outcome.release()
                throw error
            }
        }
        return outcome
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
        let work = try prepareHandleRedirect(auth, url, flags)
        // Every output is built by the work, so a failure writes none of them; what the caller
        // did not ask for is freed (the user JWT wiped).
        var outcome = try work()
        defer { outcome.release() }
        kindOut?.pointee = outcome.kind
        if let sessionOut { sessionOut.pointee = outcome.session.take() }
        if let userJwtOut { userJwtOut.pointee = outcome.userJwt.take() }
        if let totpLinkOut { totpLinkOut.pointee = outcome.totpLink.take() }
    }
}

@c @implementation
public func portal_auth_handle_redirect_async(_ auth: OpaquePointer?, _ url: UnsafePointer<CChar>?, _ flags: UInt32,
                                              _ queue: OpaquePointer?, _ callback: portal_sign_in_cb?,
                                              _ userData: UnsafeMutableRawPointer?, _ destroyNotify: portal_destroy_notify?,
                                              _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startSignIn(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        try prepareHandleRedirect(auth, url, flags)
    }
}

// MARK: - verify_totp

/// Checks the code and the JWT as `verifyTotp` will, so that the _async form refuses a bad one
/// at once, as the blocking one does (Tests/c/async_signin_test/calls.c).
private func prepareVerifyTotp(_ auth: OpaquePointer?, _ code: UnsafePointer<CChar>?,
                               _ userJwt: UnsafePointer<CChar>?) throws(CFailure) -> PreparedWork {
    let auth = try sharedAuth(auth)
    let code = try stringArgument(code, "code", maxBytes: 16)
    let jwt = try secretArgument(userJwt, "user_jwt", maxBytes: PortalAuth.maxTokenBytes)
    try core(names: ["code": "code", "userJwt": "user_jwt"]) { () throws(PortalAuthError) in
        try PortalAuth.checkTotpArguments(code: code, userJwt: jwt.value)
    }
    return { () throws(CFailure) in
        let signedIn = try core(names: ["code": "code", "userJwt": "user_jwt"]) { () throws(PortalAuthError) in
            try auth.value.verifyTotp(code: code, userJwt: jwt.value)
        }
        return Outcome(session: try sessionHandle(signedIn))
    }
}

@c @implementation
public func portal_auth_verify_totp(_ auth: OpaquePointer?, _ code: UnsafePointer<CChar>?, _ userJwt: UnsafePointer<CChar>?,
                                    _ out: UnsafeMutablePointer<OpaquePointer?>?) -> portal_status {
    exported { () throws(CFailure) in
        var outcome = try prepareVerifyTotp(auth, code, userJwt)()
        defer { outcome.release() }
        if let out { out.pointee = outcome.session.take() }
    }
}

@c @implementation
public func portal_auth_verify_totp_async(_ auth: OpaquePointer?, _ code: UnsafePointer<CChar>?,
                                          _ userJwt: UnsafePointer<CChar>?, _ queue: OpaquePointer?,
                                          _ callback: portal_sign_in_cb?, _ userData: UnsafeMutableRawPointer?,
                                          _ destroyNotify: portal_destroy_notify?,
                                          _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startSignIn(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        try prepareVerifyTotp(auth, code, userJwt)
    }
}
