import FoundationEssentials

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
        var text = segments[1]
        while text.last == "=" { text = text.dropLast() }
        var base64 = String(text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        if base64.count % 4 == 1 { throw .invalidUserJwt }
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        struct Claims: Decodable {
            let endUserId: String?
            init(from decoder: any Decoder) throws {
                // A claim of another type (a number, an object) reads as absent, never as text.
                let container = try decoder.container(keyedBy: Key.self)
                endUserId = try? container.decodeIfPresent(String.self, forKey: .endUserId)
            }
            enum Key: String, CodingKey { case endUserId }
        }
        guard let payload = Data(base64Encoded: base64),
              let claims = try? JSONDecoder().decode(Claims.self, from: payload),
              let endUserId = claims.endUserId,
              endUserId.unicodeScalars.contains(where: { !$0.properties.isWhitespace }) else { throw .invalidUserJwt }
        return endUserId
    }
}

extension PortalAuth {
    /// The `endUserId` claim of a user JWT, as `verifyTotp` reads it (`UserJwt`), for the C ABI
    /// and `portal-session`.
    @_spi(PortalKeyringC) @_spi(PortalKeyringCLI)
    public static func endUserId(ofUserJwt jwt: String) throws(PortalAuthError) -> String {
        try UserJwt.endUserId(of: jwt)
    }
}
