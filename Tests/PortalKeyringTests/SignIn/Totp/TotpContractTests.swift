import Testing
import FoundationEssentials
@testable import PortalKeyringCore
@testable import PortalKeyring

/// The TOTP step and the sign-in results as the Portal backend gives them (docs/sign-in.md#results-and-the-totp-step):
/// a wrong code is a bare 401 and the JWT stays usable; the TOTP answers name no end user (read
/// from the JWT's claim before the code is sent); the results carry the client. Real keyring,
/// loopback Portal API (strict on these routes).
@Suite(.serialized) struct TotpContractTests {
    private static let route = "/api/v3/auth/totps/validations"
    private struct Envelope<T: Decodable>: Decodable { let data: T }
    private struct Code: Decodable { let code: String }
    private struct EndUser: Decodable { let clientId: String }

    private func auth() throws -> PortalAuth {
        _ = try KeyringControl.environment()
        let auth = try PortalAuth(authEnvironmentId: "totp-contract-\(ItemSchema.newGeneration().prefix(12))",
                                  redirectUrl: redirect, apiHost: try FakePortalAPI.host(),
                                  keyringTimeouts: KeyringTimeouts(callMilliseconds: 5_000, promptMilliseconds: 1_000))
        try auth.pendingSignIn.record()
        return auth
    }

    private func step(_ a: PortalAuth, _ user: String) throws -> TotpRequiredResult {
        guard case .totpRequired(let step) = try a.handleRedirect(url: try grant("magic_link", user: user, totp: true)) else {
            throw PortalAuthError.authenticationFailed(message: "expected totpRequired")
        }
        return step
    }

    private func code(_ user: String) throws -> String {
        try JSONDecoder().decode(Envelope<Code>.self, from: Data(try FakePortalAPI.admin("GET", "totp?endUserId=\(user)").utf8)).data.code
    }

    private func clientId(_ user: String) throws -> String {
        try JSONDecoder().decode(Envelope<EndUser>.self,
                                 from: Data(try FakePortalAPI.admin("POST", "end-users", #"{"endUserId":"\#(user)"}"#).utf8)).data.clientId
    }

    /// A mistyped code is a wrong-code failure, not a dead JWT: the same JWT with the right code
    /// then signs in, with the end user from the JWT and the client from the answer.
    /// Kills: signin/wrong-code-is-invalid-jwt.
    @Test func wrongCodeThenRightCodeWithTheSameJwt() throws {
        let a = try auth()
        let step = try step(a, "eu-typo")
        let right = try code("eu-typo")
        let wrong = right == "000000" ? "111111" : "000000"
        let before = try FakePortalAPI.requests(Self.route).total
        #expect(throws: PortalAuthError.authenticationFailed(message: PortalAuth.totpCodeRejected)) {
            try a.verifyTotp(code: wrong, userJwt: step.userJwt)
        }
        #expect(try a.restoreSession() == nil)
        let signedIn = try a.verifyTotp(code: right, userJwt: step.userJwt)
        #expect(signedIn.session.endUserId == "eu-typo")
        #expect(signedIn.clientId == (try clientId("eu-typo")))
        #expect(signedIn.isAccountAbstracted == false)
        #expect(try a.restoreSession()?.getToken() == signedIn.session.getToken())
        #expect(try FakePortalAPI.requests(Self.route).total == before + 2)
        try a.clearPersistedSession()
    }

    /// The redirect of a TOTP step that `verifyTotp` completed replays as the sign-in it became,
    /// not as a step whose JWT Portal has spent (PortalSwift's rule). Kills: signin/step-replayed-after-verify.
    @Test func completedTotpStepReplaysAsSignedIn() throws {
        let a = try auth()
        let url = try grant("magic_link", user: "eu-replay", totp: true)
        guard case .totpRequired(let step) = try a.handleRedirect(url: url) else {
            Issue.record("expected totpRequired")
            return
        }
        guard case .totpRequired(let again) = try a.handleRedirect(url: url), again == step else {
            Issue.record("a pending TOTP step replays as itself")
            return
        }
        let signedIn = try a.verifyTotp(code: try code("eu-replay"), userJwt: step.userJwt)
        guard case .authenticated(let replayed) = try a.handleRedirect(url: url) else {
            Issue.record("the completed step must replay as the sign-in")
            return
        }
        #expect(replayed.session === signedIn.session && replayed.clientId == signedIn.clientId)
        try a.clearPersistedSession()
    }

    /// A JWT without a usable `endUserId` claim fails locally: nothing is sent, the code stays
    /// unused. Kills: signin/end-user-read-after-send.
    @Test(arguments: [#"{"sub":"eu-sub-only"}"#, #"{"endUserId":42}"#, #"{"endUserId":"  "}"#, "not json"])
    func jwtWithoutEndUserIdSendsNothing(claims: String) throws {
        let a = try auth()
        let payload = Data(claims.utf8).base64EncodedString().replacing("=", with: "")
        let before = try FakePortalAPI.requests(Self.route).total
        #expect(throws: PortalAuthError.invalidUserJwt) { try a.verifyTotp(code: "123456", userJwt: "eyJhbGciOiJIUzI1NiJ9.\(payload).sig") }
        #expect(throws: PortalAuthError.invalidUserJwt) { try a.verifyTotp(code: "123456", userJwt: "no-dots") }
        #expect(try FakePortalAPI.requests(Self.route).total == before)
    }

    @Test func endUserIdClaimDecoding() throws {
        // base64url without padding, standard base64 with padding, two segments only.
        let json = #"{"endUserId":"eu-ü?>"}"#
        let standard = Data(json.utf8).base64EncodedString()
        let url = standard.replacing("+", with: "-").replacing("/", with: "_")
            .replacing("=", with: "")
        #expect(try UserJwt.endUserId(of: "h.\(standard).s") == "eu-ü?>")
        #expect(try UserJwt.endUserId(of: "h.\(url).s") == "eu-ü?>")
        #expect(try UserJwt.endUserId(of: "h.\(url)") == "eu-ü?>")
        #expect(throws: PortalAuthError.invalidUserJwt) { try UserJwt.endUserId(of: "h.%%%.s") }
    }

    /// The grant exchange's answer: a non-blank CST signs in (and needs `endUserId`); else a
    /// non-blank `userJwt` is the TOTP step, with or without `endUserId`; neither is invalidGrant.
    @Test(arguments: [
        (#"{"userJwt":"a.b.c","totpLink":"otpauth://totp/x?secret=jbswy3dp"}"#, "totp:"),
        (#"{"endUserId":"eu-named","userJwt":"a.b.c"}"#, "totp:eu-named"),
        (#"{"endUserId":"eu-x","clientSessionToken":"  ","userJwt":"a.b.c"}"#, "totp:eu-x"),
        (#"{"clientSessionToken":"cst-without-user"}"#, "malformed response: missing endUserId"),
        (#"{"endUserId":"eu-x"}"#, "invalid grant"),
        (#"{"endUserId":"eu-x","userJwt":" ","clientSessionToken":""}"#, "invalid grant"),
    ] as [(String, String)])
    func grantExchangeAnswers(answer: String, expected: String) throws {
        let a = try auth()
        let url = try grant("magic_link", user: "eu-shape")
        try FakePortalAPI.admin("POST", "faults", #"{"route":"/api/v3/auth/magic-links/validations","status":200,"count":1,"when":"after","body":{"data":\#(answer)}}"#)
        let outcome: String
        do throws(PortalAuthError) {
            switch try a.handleRedirect(url: url) {
            case .totpRequired(let step): outcome = "totp:" + step.endUserId
            case .authenticated: outcome = "authenticated"
            case .notHandled: outcome = "notHandled"
            }
        } catch {
            outcome = error.description
        }
        #expect(outcome == expected)
        try a.clearPersistedSession()
    }

    /// A signed-in redirect carries the client the answer named.
    @Test func signedInRedirectCarriesTheClient() throws {
        let a = try auth()
        guard case .authenticated(let signedIn) = try a.handleRedirect(url: try grant("oauth", user: "eu-client", provider: "GOOGLE")) else {
            Issue.record("expected authenticated")
            return
        }
        #expect(signedIn.clientId == (try clientId("eu-client")))
        #expect(signedIn.isAccountAbstracted == false)
        try a.clearPersistedSession()
    }

    @Test func totpSecretIsTheValidatedBase32Secret() {
        func secret(_ link: String?) -> String? { TotpRequiredResult(userJwt: "j", totpLink: link, endUserId: "").totpSecret }
        #expect(secret("otpauth://totp/Portal:a?secret=jbswy3dpehpk3pxp&issuer=Portal") == "JBSWY3DPEHPK3PXP")
        #expect(secret("  OTPAUTH://totp/a?secret=AB&secret=CD==#secret=EF ") == "CD==")
        #expect(secret("otpauth%3A%2F%2Ftotp%2Fa%3Fsecret%3DMZXW6%3D%3D%3D") == "MZXW6===")
        #expect(secret("otpauth://totp/a?%73ecret=%20mzxw6%20") == "MZXW6")
        for bad in [nil, "", "https://x/?secret=JBSW", "otpauth://totp/a", "otpauth://totp/a?secret=",
                    "otpauth://totp/a?secret===", "otpauth://totp/a?secret=AB=C", "otpauth://totp/a?secret=AB18",
                    "JBSWY3DP"] as [String?] {
            #expect(secret(bad) == nil, "\(bad ?? "nil")")
        }
    }

    /// docs/security.md "TOTP secrets outside the base32 alphabet": base32's digits are 2–7. A secret with an 8, a 9, a 0 or a 1 (each
    /// alone beside valid characters) is no secret: `totpSecret` is nil and no QR code is made of
    /// the link (nothing an authenticator would read differently). Kills: totp/secret-digits-8-9.
    @Test func digitsOutsideTheBase32AlphabetAreRefused() {
        func link(_ secret: String) -> String { "otpauth://totp/Portal:a?secret=\(secret)&issuer=Portal" }
        func secret(_ link: String) -> String? { TotpRequiredResult(userJwt: "j", totpLink: link, endUserId: "").totpSecret }
        #expect(secret(link("JBSWY3DPEHPK3PXP")) == "JBSWY3DPEHPK3PXP")
        #expect(secret(link("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")) == "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        for digit in ["8", "9", "0", "1"] {
            for bad in ["JBSWY3DP" + digit, digit + "JBSWY3DP", "JBSW" + digit + "Y3DP", digit + digit + "======"] {
                #expect(secret(link(bad)) == nil, "\(bad) was taken for base32")
                #expect(throws: PortalAuthError.totpQrUnavailable) { _ = try QRCode(totpLink: link(bad)) }
            }
        }
        // Nor a letter that only Unicode case mapping turns into one of the alphabet: `ſ` (long s)
        // upper-cases to S, `ı` (dotless i) to I, `ﬀ` to FF. Escaped or not, the link holds them,
        // not the letters.
        for bad in ["JBSWY3DPſ", "ıJBSWY3DP", "JBSWﬀ", "JBSW%C5%BFY3DP"] {
            #expect(secret(link(bad)) == nil, "\(bad) was taken for base32")
            #expect(throws: PortalAuthError.totpQrUnavailable) { _ = try QRCode(totpLink: link(bad)) }
        }
        #expect(secret(link("jbswy3dp")) == "JBSWY3DP")
    }

    /// Printing a TOTP step shows neither the JWT nor the link or its secret.
    @Test func printingRedacts() {
        let step = TotpRequiredResult(userJwt: "header.SECRETCLAIMS.sig", totpLink: "otpauth://totp/a?secret=JBSWY3DPEHPK3PXP",
                                      endUserId: "eu-print")
        var dumped = ""
        dump(step, to: &dumped)
        for text in [step.description, step.debugDescription, String(describing: step), String(reflecting: step), "\(step)", dumped] {
            #expect(!text.contains("SECRETCLAIMS") && !text.contains("JBSWY3DP") && !text.contains("otpauth"), "\(text)")
            #expect(text.contains("eu-print"))
        }
    }
}
