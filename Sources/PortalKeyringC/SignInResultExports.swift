// The accessors of what a sign-in says besides the session: the client of a signed-in session,
// and the end user and secret of a TOTP step (read from the strings portal_auth_handle_redirect()
// hands out, so the blocking and non-blocking calls share them). Never blocking, no I/O.
// Documentation lives in Include/portal_keyring.h.
import CPortalKeyring
@_spi(Bindings) import PortalKeyringCore
#if canImport(Glibc)
import Glibc
#endif

@c @implementation
public func portal_session_get_client_id(_ session: OpaquePointer?) -> UnsafePointer<CChar>? {
    guard let session else {
        setLastError("session: must not be NULL")
        return nil
    }
    do {
        let handle = try borrowHandle(session, as: SessionHandle.self, "session")
        clearLastError()
        return handle.clientId.map { UnsafePointer($0) }
    } catch {
        setLastError(error.message)
        return nil
    }
}

@c @implementation
public func portal_session_get_is_account_abstracted(_ session: OpaquePointer?) -> Int32 {
    guard let session else {
        setLastError("session: must not be NULL")
        return -1
    }
    do {
        let handle = try borrowHandle(session, as: SessionHandle.self, "session")
        clearLastError()
        return handle.isAccountAbstracted.map { $0 ? 1 : 0 } ?? -1
    } catch {
        setLastError(error.message)
        return -1
    }
}

@c @implementation
public func portal_totp_link_get_secret(_ totpLink: UnsafePointer<CChar>?,
                                        _ out: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> portal_status {
    exported { () throws(CFailure) in
        let link = try secretArgument(totpLink, "totp_link", maxBytes: PortalAuth.maxTokenBytes)
        let out = try outArgument(out)
        let secret = TotpRequiredResult(userJwt: "", totpLink: link.value, endUserId: "").totpSecret
        out.pointee = try secret.map { (text: String) throws(CFailure) in try mallocCString(text) }
    }
}

@c @implementation
public func portal_user_jwt_get_end_user_id(_ userJwt: UnsafePointer<CChar>?,
                                            _ out: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> portal_status {
    exported { () throws(CFailure) in
        let jwt = try secretArgument(userJwt, "user_jwt", maxBytes: PortalAuth.maxTokenBytes)
        let out = try outArgument(out)
        let endUserId = try core { () throws(PortalAuthError) in try PortalAuth.endUserId(ofUserJwt: jwt.value) }
        out.pointee = try mallocCString(endUserId)
    }
}

@c @implementation
public func portal_totp_qr_code(_ totpLink: UnsafePointer<CChar>?, _ sizeOut: UnsafeMutablePointer<Int>?,
                                _ modulesOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> portal_status {
    exported { () throws(CFailure) in
        let link = try secretArgument(totpLink, "totp_link", maxBytes: PortalAuth.maxTokenBytes)
        let modulesOut = try outArgument(modulesOut, "modules_out")
        let code = try core { () throws(PortalAuthError) in try QRCode(totpLink: link.value) }
        defer { code.wipeModules() }
        // '1' dark, '0' light, row-major: a string any FFI reads, wiped by portal_string_free().
        // Written straight into the string handed out: no Swift copy of the grid is left behind.
        let count = code.modules.count
        guard let text = malloc(count + 1)?.assumingMemoryBound(to: CChar.self) else {
            throw CFailure(status: PORTAL_ERR_INTERNAL, message: "out of memory")
        }
        for (index, dark) in code.modules.enumerated() { text[index] = dark ? 0x31 : 0x30 }
        text[count] = 0
        modulesOut.pointee = handOutString(text, size: count + 1)
        sizeOut?.pointee = code.size
    }
}

@c @implementation
public func portal_totp_qr_svg(_ totpLink: UnsafePointer<CChar>?,
                               _ svgOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> portal_status {
    exported { () throws(CFailure) in
        let link = try secretArgument(totpLink, "totp_link", maxBytes: PortalAuth.maxTokenBytes)
        let svgOut = try outArgument(svgOut, "svg_out")
        let code = try core { () throws(PortalAuthError) in try QRCode(totpLink: link.value) }
        defer { code.wipeModules() }
        var svg = code.svg
        defer { wipeStringStorage(&svg) }
        svgOut.pointee = try mallocCString(svg)
    }
}
