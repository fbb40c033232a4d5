/// What an identifier and a token may be, decided once: `PortalAuth`'s argument checks refuse a
/// value that breaks these rules (`invalidArgument`), and restore hands out a stored document
/// only when its values keep them (`SessionDocument`), so a C caller always receives what it
/// could have passed in.
enum ArgumentRules {
    /// Longest identifier (`PortalAuth.maxIdentifierBytes`), in UTF-8 bytes.
    static let maxIdentifierBytes = 2048
    /// Longest token (`PortalAuth.maxTokenBytes`), in UTF-8 bytes (64 KiB).
    static let maxTokenBytes = 65_536

    /// An identifier: not blank, no NUL, at most `maxIdentifierBytes`. With `refusingControl`
    /// (new values: the auth environment id, which also goes into a request header, and a
    /// persisted end user id), no control character either (C0 — tab, CR, LF … —, DEL, C1).
    /// Restore checks stored values without it, so items stored by earlier versions still read.
    static func isIdentifier(_ value: String, refusingControl: Bool = false) -> Bool {
        !(value.utf8.count > maxIdentifierBytes || value.utf8.contains(0)
            || value.isBlank || (refusingControl && value.unicodeScalars.contains { $0.isControl }))
    }

    /// A token: 1 … `maxTokenBytes` bytes, no NUL, not only ASCII white space. Stored tokens are
    /// held to this alone; a token a caller hands in also to `PortalAuth.checkNewToken`.
    static func isToken(_ token: SecretBytes) -> Bool {
        token.withUnsafeBytes { bytes -> Bool in
            bytes.count > 0 && bytes.count <= maxTokenBytes && !bytes.contains(0)
                && bytes.contains(where: { !($0 == 0x20 || (0x09...0x0D).contains($0)) })
        }
    }
}
