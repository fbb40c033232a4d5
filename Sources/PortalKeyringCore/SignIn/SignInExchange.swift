/// The answers of the sign-in exchanges (grant exchange, TOTP validation), decoded as the Portal
/// API gives them (docs/sign-in.md#results-and-the-totp-step). Tokens are moved into wiped memory as they are decoded.
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

    /// The grant exchange's answer, as the Portal API gives it (docs/sign-in.md#results-and-the-totp-step): a
    /// non-blank `clientSessionToken` signs in and then requires `endUserId`; else a non-blank
    /// `userJwt` is the TOTP step (`endUserId` optional); neither is `invalidGrant`.
    func decodeExchange(_ data: ExchangeWire) throws(PortalAuthError) -> Exchange {
        var exchange = Exchange(endUserId: data.endUserId, clientId: data.clientId,
                                isAccountAbstracted: data.isAccountAbstracted, totpLink: data.totpLink)
        // The secrets came from the decoder straight into wiped memory (SecretField).
        if let bytes = data.clientSessionToken?.bytes, !Self.isBlank(bytes) {
            guard let endUserId = data.endUserId, !endUserId.isBlank else { throw .malformedResponse(field: "endUserId") }
            exchange.endUserId = endUserId
            do { try Self.checkToken(bytes, name: "clientSessionToken") } catch { throw .malformedResponse(field: "clientSessionToken") }
            exchange.clientSessionToken = bytes
        } else if let jwt = data.userJwt?.bytes, !Self.isBlank(jwt) {
            exchange.userJwt = jwt
        } else {
            throw .invalidGrant
        }
        return exchange
    }

    /// The answer of `/api/v3/auth/totps/validations`: a non-blank `clientSessionToken`, and the
    /// client; the end user is the one read from the JWT (the answer names none).
    func decodeTotpValidation(_ data: TotpValidationWire, endUserId: String) throws(PortalAuthError) -> TotpExchange {
        guard let bytes = data.clientSessionToken?.bytes, !Self.isBlank(bytes) else {
            throw .malformedResponse(field: "clientSessionToken")
        }
        do { try Self.checkToken(bytes, name: "clientSessionToken") } catch { throw .malformedResponse(field: "clientSessionToken") }
        return TotpExchange(endUserId: endUserId, clientId: data.clientId,
                            isAccountAbstracted: data.isAccountAbstracted, clientSessionToken: bytes)
    }

    /// Whether a secret is empty or whitespace only (read in place, no String made; bytes that
    /// are not UTF-8 count as not blank: `checkToken` refuses them).
    private static func isBlank(_ secret: SecretBytes) -> Bool {
        secret.withUnsafeBytes { bytes in
            var iterator = bytes.makeIterator()
            var parser = Unicode.UTF8.ForwardParser()
            while true {
                switch parser.parseScalar(from: &iterator) {
                case .valid(let unit):
                    if !Unicode.UTF8.decode(unit).isWhiteSpace { return false }
                case .emptyInput: return true
                case .error: return false
                }
            }
        }
    }

    struct ExchangeWire: Decodable {
        let endUserId: String?
        let clientId: String?
        let clientSessionToken: SecretField?
        let isAccountAbstracted: Bool?
        let userJwt: SecretField?
        let totpLink: String?
    }

    struct TotpValidationWire: Decodable {
        let clientId: String?
        let clientSessionToken: SecretField?
        let isAccountAbstracted: Bool?
    }
}
