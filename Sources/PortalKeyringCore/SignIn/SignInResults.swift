/// The results of the sign-in calls, shaped like PortalSwift's `AuthenticatedResult`,
/// `TotpRequiredResult` and `AuthResult` (docs/sign-in.md#results-and-the-totp-step).

/// A completed sign-in (PortalSwift's `AuthenticatedResult`): the session, persisted before this
/// was returned, and what the Portal API said about the client when it said it.
public struct AuthenticatedResult: Sendable {
    /// The persisted session; pass it to `Portal(credentials:)`.
    public let session: PortalSession
    /// The Portal client this session belongs to, when the API reported one.
    public let clientId: String?
    /// Whether that client is account-abstracted, when the API reported it.
    public let isAccountAbstracted: Bool?

    public init(session: PortalSession, clientId: String?, isAccountAbstracted: Bool?) {
        self.session = session
        self.clientId = clientId
        self.isAccountAbstracted = isAccountAbstracted
    }
}

/// A sign-in that needs a TOTP code (PortalSwift's `TotpRequiredResult`). Nothing was persisted.
///
/// `userJwt` is a short-lived bearer credential for `verifyTotp(code:userJwt:)`: pass it back
/// verbatim, never store or log it. `totpLink` (an `otpauth://` link, first-time enrolment only)
/// embeds the TOTP secret. Printing a value (`description`, `debugDescription`, `dump`) shows
/// neither: both are redacted.
public struct TotpRequiredResult: Sendable, Equatable {
    /// The credential that authorises the TOTP step; never persisted.
    public let userJwt: String
    /// The `otpauth://` enrolment link, or nil when the end user is enrolled already.
    public let totpLink: String?
    /// The end user the grant exchange named: a label for the app's UI, "" when the API sent none
    /// (the session `verifyTotp` persists takes its end user from the JWT's `endUserId` claim).
    public let endUserId: String

    public init(userJwt: String, totpLink: String?, endUserId: String) {
        self.userJwt = userJwt
        self.totpLink = totpLink
        self.endUserId = endUserId
    }

    /// The shared secret of `totpLink`, to type into an authenticator app: its `secret` parameter
    /// (the last one when repeated), percent-decoded, trimmed and uppercased, returned only when
    /// it is base32 (`A`–`Z`, `2`–`7`, optional trailing `=`); nil for a missing link, a link that
    /// is not `otpauth://`, or a missing, empty or non-base32 secret. A secret: never log it.
    public var totpSecret: String? { totpLink.flatMap(TotpLink.secret(ofLink:)) }

    /// `totpLink` as a QR code for an authenticator app to scan (`QRCode(totpLink:)`: level M,
    /// 4-module quiet zone; `svg` and `terminalText()` draw it). Its modules encode the secret:
    /// show it, never log or store it.
    /// - Throws: `totpQrUnavailable` when there is no link, it carries no valid secret, or
    ///   libqrencode is not installed.
    public func qrCode() throws(PortalAuthError) -> QRCode {
        guard let totpLink else { throw .totpQrUnavailable }
        return try QRCode(totpLink: totpLink)
    }
}

extension TotpRequiredResult: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Redacted: the user JWT and the link (with its secret) are never shown.
    public var description: String {
        "TotpRequiredResult(endUserId: \"\(DisplayText.sanitized(endUserId))\", userJwt: <redacted>, "
            + "totpLink: \(totpLink == nil ? "nil" : "<redacted>"))"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        Mirror(self, children: ["endUserId": endUserId, "userJwt": "<redacted>",
                                "totpLink": totpLink == nil ? "nil" : "<redacted>"])
    }
}

/// What `handleRedirect(url:)` made of a URL (PortalSwift's `AuthResult`, plus `notHandled` for
/// PortalSwift's nil).
public enum RedirectResult: Sendable {
    /// The URL is not this app's redirect URL (other scheme, host or path): nothing was done.
    case notHandled
    /// Signed in; the session was persisted before this was returned.
    case authenticated(AuthenticatedResult)
    /// The end user must enter a TOTP code: call `verifyTotp(code:userJwt:)` with its `userJwt`.
    /// Nothing was persisted.
    case totpRequired(TotpRequiredResult)
}

/// What a desktop sign-in (`signInWithGoogle(timeout:)`, `signInWithApple(timeout:)`) ended with:
/// PortalSwift's `AuthResult`. A redirect that is not this app's never ends one, so there is no
/// `notHandled` here.
public enum AuthResult: Sendable {
    /// Signed in; the session was persisted before this was returned.
    case authenticated(AuthenticatedResult)
    /// The end user must enter a TOTP code: call `verifyTotp(code:userJwt:)` with its `userJwt`.
    /// Nothing was persisted.
    case totpRequired(TotpRequiredResult)
}
