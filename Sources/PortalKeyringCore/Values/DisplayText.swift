/// Text from outside (a redirect URL, a server's error body, a D-Bus error) made safe to put in
/// an error message that may reach a terminal, a log or a dialog: control characters removed —
/// C0 (U+0000–U+001F), DEL (U+007F) and C1 (U+0080–U+009F), so no ESC/CSI sequence, carriage
/// return or bell gets through — and format characters (general category Cf: the bidirectional
/// overrides and isolates such as U+202E and U+2066–U+2069, U+061C, zero-width characters
/// U+200B–U+200F and U+FEFF, …) and the line and paragraph separators U+2028 and U+2029, so that
/// no reordered or hidden text spoofs the message around it (docs/security.md, "Format characters in messages"); and the length
/// capped (docs/security.md). Decided on scalar values (`TextClasses.swift`), without the
/// standard library's Unicode property tables.
@_spi(Bindings) @_spi(PortalKeyringCLI)
public enum DisplayText {
    /// At most this many characters of a redirect's `error` parameter are kept (PortalSwift's limit).
    public static let maxRedirectErrorCharacters = 100
    /// The cap for other messages built from outside text.
    public static let maxMessageCharacters = 500

    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// What `sanitized` removes: a control character, a format character (Cf), U+2028 or U+2029.
    public static func isRemoved(_ scalar: Unicode.Scalar) -> Bool {
        isControl(scalar) || scalar.isFormat || scalar.value == 0x2028 || scalar.value == 0x2029
    }

    /// `text` without control, format and line or paragraph separator characters (`isRemoved`),
    /// cut to `limit` characters (an ellipsis marks a cut). Linear in the length of `text`, and
    /// stops reading once the limit is reached.
    public static func sanitized(_ text: some StringProtocol, limit: Int = maxMessageCharacters) -> String {
        var result = String.UnicodeScalarView()
        var count = 0
        for scalar in text.unicodeScalars where !isRemoved(scalar) {
            if count == limit { return String(result) + "…" }
            result.append(scalar)
            count += 1
        }
        return String(result)
    }
}
