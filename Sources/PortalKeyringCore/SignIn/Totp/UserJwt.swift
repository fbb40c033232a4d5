/// The `endUserId` claim of a user JWT (the TOTP step's credential). `POST
/// /api/v3/auth/totps/validations` answers without an end user, so `verifyTotp` labels the
/// session with this claim, read before the code is sent: a JWT without it fails locally and no
/// code is spent. Read, never verified (the backend verifies the JWT; the label gates nothing).
enum UserJwt {
    /// The non-blank string claim `endUserId` of `jwt`'s second segment (base64url or base64,
    /// padded or not). The JWT must have at least two `.`-separated segments.
    /// - Throws: `invalidUserJwt`; nothing of the JWT reaches the error.
    static func endUserId(of jwt: String) throws(PortalAuthError) -> String {
        let segments = jwt.split(separator: ".", maxSplits: 2, omittingEmptySubsequences: false)
        guard segments.count >= 2 else { throw .invalidUserJwt }
        // base64url or base64, padded or not: read as canonical unpadded base64url.
        var text = Array(segments[1].utf8)
        while text.last == UInt8(ascii: "=") { text.removeLast() }
        text = text.map { $0 == UInt8(ascii: "+") ? UInt8(ascii: "-") : $0 == UInt8(ascii: "/") ? UInt8(ascii: "_") : $0 }
        guard let payload = text.withUnsafeBytes({ Base64URL.decode($0) }) else { throw .invalidUserJwt }
        // A claim of another type (a number, an object) reads as absent, never as text.
        let claim = payload.withUnsafeBytes { bytes in try? JSONText.read(bytes) { root in root.member("endUserId")?.string } }
        guard let endUserId = claim.flatMap({ $0 }),
              !endUserId.isBlank else { throw .invalidUserJwt }
        return endUserId
    }
}

extension PortalAuth {
    /// The `endUserId` claim of a user JWT, as `verifyTotp` reads it (`UserJwt`), for the C ABI
    /// and `portal-session`.
    @_spi(Bindings) @_spi(PortalKeyringCLI)
    public static func endUserId(ofUserJwt jwt: String) throws(PortalAuthError) -> String {
        try UserJwt.endUserId(of: jwt)
    }
}
