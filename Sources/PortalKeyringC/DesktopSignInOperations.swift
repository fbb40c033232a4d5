// The desktop sign-in of portal_auth (portal_auth_sign_in_with_google/_apple and their _async
// forms), written once as the other sign-in operations are (SignInOperations.swift): the
// `prepare…` function checks the C arguments on the calling thread and returns the work; the
// blocking export runs it inline, the _async export on a worker under the operation's token, whose
// cancel (portal_operation_cancel) ends the wait. Documentation lives in Include/portal_keyring.h.
import CPortalKeyring
@_spi(Bindings) import PortalKeyringCore

private enum Provider { case google, apple }

/// `timeout_ms`: 0 is the default (`PortalAuth.defaultSignInTimeout`, 15 minutes); more than that
/// is refused here, before anything starts.
private func prepareSignIn(_ auth: OpaquePointer?, _ provider: Provider, _ timeoutMs: UInt32) throws(CFailure) -> PreparedWork {
    let auth = try sharedAuth(auth)
    let timeout: Duration = timeoutMs == 0 ? PortalAuth.defaultSignInTimeout : .milliseconds(timeoutMs)
    try core(names: ["timeout": "timeout_ms"]) { () throws(PortalAuthError) in
        try PortalAuth.checkSignInTimeout(timeout)
    }
    return { () throws(CFailure) in
        let result = try core(names: ["timeout": "timeout_ms"]) { () throws(PortalAuthError) -> AuthResult in
            switch provider {
            case .google: try auth.value.signInWithGoogle(timeout: timeout)
            case .apple: try auth.value.signInWithApple(timeout: timeout)
            }
        }
        switch result {
        case .authenticated(let signedIn): return try redirectOutcome(.authenticated(signedIn))
        case .totpRequired(let step): return try redirectOutcome(.totpRequired(step))
        }
    }
}

/// The blocking sign-in: outputs as portal_auth_handle_redirect_v2 writes them.
private func signIn(_ auth: OpaquePointer?, _ provider: Provider, _ timeoutMs: UInt32,
                    _ kindOut: UnsafeMutablePointer<portal_redirect_kind>?,
                    _ sessionOut: UnsafeMutablePointer<OpaquePointer?>?,
                    _ userJwtOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                    _ totpLinkOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> portal_status {
    exported { () throws(CFailure) in
        let work = try prepareSignIn(auth, provider, timeoutMs)
        var outcome = try work()
        defer { outcome.release() }
        kindOut?.pointee = outcome.kind
        if let sessionOut { sessionOut.pointee = outcome.session.take() }
        if let userJwtOut { userJwtOut.pointee = outcome.userJwt.take() }
        if let totpLinkOut { totpLinkOut.pointee = outcome.totpLink.take() }
    }
}

@c @implementation
public func portal_auth_sign_in_with_google(_ auth: OpaquePointer?, _ timeoutMs: UInt32,
                                            _ kindOut: UnsafeMutablePointer<portal_redirect_kind>?,
                                            _ sessionOut: UnsafeMutablePointer<OpaquePointer?>?,
                                            _ userJwtOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                            _ totpLinkOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> portal_status {
    signIn(auth, .google, timeoutMs, kindOut, sessionOut, userJwtOut, totpLinkOut)
}

@c @implementation
public func portal_auth_sign_in_with_apple(_ auth: OpaquePointer?, _ timeoutMs: UInt32,
                                           _ kindOut: UnsafeMutablePointer<portal_redirect_kind>?,
                                           _ sessionOut: UnsafeMutablePointer<OpaquePointer?>?,
                                           _ userJwtOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                           _ totpLinkOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> portal_status {
    signIn(auth, .apple, timeoutMs, kindOut, sessionOut, userJwtOut, totpLinkOut)
}

@c @implementation
public func portal_auth_sign_in_with_google_async(_ auth: OpaquePointer?, _ timeoutMs: UInt32, _ queue: OpaquePointer?,
                                                  _ callback: portal_sign_in_cb?, _ userData: UnsafeMutableRawPointer?,
                                                  _ destroyNotify: portal_destroy_notify?,
                                                  _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startSignIn(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        try prepareSignIn(auth, .google, timeoutMs)
    }
}

@c @implementation
public func portal_auth_sign_in_with_apple_async(_ auth: OpaquePointer?, _ timeoutMs: UInt32, _ queue: OpaquePointer?,
                                                 _ callback: portal_sign_in_cb?, _ userData: UnsafeMutableRawPointer?,
                                                 _ destroyNotify: portal_destroy_notify?,
                                                 _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startSignIn(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        try prepareSignIn(auth, .apple, timeoutMs)
    }
}
