/// What the Portal backend requires, besides the address, to send a sign-in email: the sender
/// and the email template (PortalSwift's `MagicLinkConfig`). Given once to `PortalAuth`; an app
/// that signs in only with Google or Apple never needs one. The backend checks both against the
/// auth environment (`fromEmail` on a sending domain it has enabled, `templateId` an existing
/// template); this library only forwards them, after the checks `PortalAuth.init` documents.
public struct MagicLinkConfig: Sendable, Equatable {
    /// The sender address of the sign-in email.
    public let fromEmail: String
    /// The id of the email template to send.
    public let templateId: String

    public init(fromEmail: String, templateId: String) {
        self.fromEmail = fromEmail
        self.templateId = templateId
    }
}
