/// The answers of the sign-in exchanges (grant exchange, TOTP validation), decoded as the Portal
/// API gives them (README, "Sign-in"). Tokens are moved into wiped memory as they are decoded.
extension PortalAuth {
    /// A grant exchange's answer (`decodeExchange`): a CST with its end user, or a TOTP step.
    struct Exchange: @unchecked Sendable {
        var endUserId: String?
        var clientId: String?
        var isAccountAbstracted: Bool?
        var clientSessionToken: SecretBytes?
        var userJwt: SecretBytes?
        var totpLink: String?
    }

    /// An accepted TOTP code's answer, with the end user read from the JWT.
    struct TotpExchange: @unchecked Sendable {
        let endUserId: String
        let clientId: String?
        let isAccountAbstracted: Bool?
        let clientSessionToken: SecretBytes
    }

    /// The grant exchange's answer, as the Portal API gives it (docs: README "Sign-in"): a
    /// non-blank `clientSessionToken` signs in and then requires `endUserId`; else a non-blank
    /// `userJwt` is the TOTP step (`endUserId` optional); neither is `invalidGrant`.
    func decodeExchange(_ data: ExchangeWire) throws(PortalAuthError) -> Exchange {
        var exchange = Exchange(endUserId: data.endUserId, clientId: data.clientId,
                                isAccountAbstracted: data.isAccountAbstracted, totpLink: data.totpLink)
        // The decoder's Strings are this call's own: copied into wiped memory, then zeroed in place.
        if var token = data.clientSessionToken, !Self.isBlank(token) {
            let bytes = SecretBytes.copyingUTF8(of: token)
            SecretBytes.wipeStorage(of: &token)
            guard let endUserId = data.endUserId, !Self.isBlank(endUserId) else { throw .malformedResponse(field: "endUserId") }
            exchange.endUserId = endUserId
            do { try Self.checkToken(bytes, name: "clientSessionToken") } catch { throw .malformedResponse(field: "clientSessionToken") }
            exchange.clientSessionToken = bytes
        } else if var jwt = data.userJwt, !Self.isBlank(jwt) {
            exchange.userJwt = SecretBytes.copyingUTF8(of: jwt)
            SecretBytes.wipeStorage(of: &jwt)
        } else {
            throw .invalidGrant
        }
        return exchange
    }

    /// The answer of `/api/v3/auth/totps/validations`: a non-blank `clientSessionToken`, and the
    /// client; the end user is the one read from the JWT (the answer names none).
    func decodeTotpValidation(_ data: TotpValidationWire, endUserId: String) throws(PortalAuthError) -> TotpExchange {
        guard var token = data.clientSessionToken, !Self.isBlank(token) else {
            throw .malformedResponse(field: "clientSessionToken")
        }
        let bytes = SecretBytes.copyingUTF8(of: token)
        SecretBytes.wipeStorage(of: &token)
        do { try Self.checkToken(bytes, name: "clientSessionToken") } catch { throw .malformedResponse(field: "clientSessionToken") }
        return TotpExchange(endUserId: endUserId, clientId: data.clientId,
                            isAccountAbstracted: data.isAccountAbstracted, clientSessionToken: bytes)
    }

    private static func isBlank(_ text: String) -> Bool {
        !text.unicodeScalars.contains { !$0.properties.isWhitespace }
    }

    struct ExchangeWire: Decodable {
        let endUserId: String?
        let clientId: String?
        let clientSessionToken: String?
        let isAccountAbstracted: Bool?
        let userJwt: String?
        let totpLink: String?
    }

    struct TotpValidationWire: Decodable {
        let clientId: String?
        let clientSessionToken: String?
        let isAccountAbstracted: Bool?
    }
}
