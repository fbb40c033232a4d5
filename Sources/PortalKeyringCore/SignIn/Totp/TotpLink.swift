/// Reads the shared secret out of an `otpauth://` enrolment link (`TotpRequiredResult.totpSecret`).
/// Linear scans only: a hostile link of any length costs one pass.
enum TotpLink {
    /// The validated, uppercased `secret` parameter of `link`, or nil (see `totpSecret`).
    static func secret(ofLink link: String) -> String? {
        guard let link = normalized(link) else { return nil }
        var body = Substring(link)
        if let hash = body.firstIndex(of: "#") { body = body[..<hash] }
        guard let question = body.firstIndex(of: "?") else { return nil }
        var candidate: Substring?
        for pair in body[body.index(after: question)...].split(separator: "&") {
            guard let equals = pair.firstIndex(of: "=") else { continue }
            let name = pair[..<equals]
            if (RedirectQuery.decode(name) ?? String(name)) == "secret" { candidate = pair[pair.index(after: equals)...] }
        }
        guard let raw = candidate else { return nil }
        return base32(RedirectQuery.decode(raw) ?? String(raw))
    }

    /// What a QR code of `link` encodes: the link as `secret(ofLink:)` reads it (trimmed, decoded
    /// as a whole when it came encoded), when it carries a valid secret; else nil.
    static func qrPayload(ofLink link: String) -> String? {
        guard let payload = normalized(link), secret(ofLink: payload) != nil else { return nil }
        return payload
    }

    /// The trimmed link when it starts with `otpauth://` (any case), else the link percent-decoded
    /// as a whole when that does; nil otherwise.
    private static func normalized(_ link: String) -> String? {
        let trimmed = link.trimmingWhitespace()
        if hasScheme(trimmed) { return trimmed }
        guard let decoded = RedirectQuery.decode(Substring(trimmed)).map({ $0.trimmingWhitespace() }), hasScheme(decoded) else { return nil }
        return decoded
    }

    private static func hasScheme(_ text: String) -> Bool {
        text.utf8.count >= 10 && String(decoding: text.utf8.prefix(10), as: UTF8.self).lowercased() == "otpauth://"
    }


    /// `value` trimmed and uppercased when it is base32 with at least one data character and
    /// only trailing `=` padding; else nil. Checked on the bytes as they came, ASCII letters
    /// uppercased alone: Unicode case mapping would take `ſ` for `S` and `ı` for `I`, a secret the
    /// link itself (and so its QR code) does not hold.
    private static func base32(_ value: String) -> String? {
        var upper: [UInt8] = []
        var data = 0, padding = false
        for original in value.trimmingWhitespace().utf8 {
            let byte = (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(original) ? original - 0x20 : original
            upper.append(byte)
            if byte == UInt8(ascii: "=") { padding = true; continue }
            guard !padding, (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "2")...UInt8(ascii: "7")).contains(byte) else { return nil }
            data += 1
        }
        return data > 0 ? String(decoding: upper, as: UTF8.self) : nil
    }
}
