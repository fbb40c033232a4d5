/// Text from outside (a redirect URL, a server's error body, a D-Bus error) made safe to put in
/// an error message that may reach a terminal: control characters removed — C0 (U+0000–U+001F),
/// DEL (U+007F) and C1 (U+0080–U+009F), so no ESC/CSI sequence, carriage return or bell gets
/// through — and the length capped (docs/security.md).
@_spi(Bindings) @_spi(PortalKeyringCLI)
public enum DisplayText {
    /// At most this many characters of a redirect's `error` parameter are kept (PortalSwift's limit).
    public static let maxRedirectErrorCharacters = 100
    /// The cap for other messages built from outside text.
    public static let maxMessageCharacters = 500

    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// `text` without control characters, cut to `limit` characters (an ellipsis marks a cut).
    /// Linear in the length of `text`, and stops reading once the limit is reached.
    public static func sanitized(_ text: some StringProtocol, limit: Int = maxMessageCharacters) -> String {
        var result = String.UnicodeScalarView()
        var count = 0
        for scalar in text.unicodeScalars where !isControl(scalar) {
            if count == limit { return String(result) + "…" }
            result.append(scalar)
            count += 1
        }
        return String(result)
    }
}
