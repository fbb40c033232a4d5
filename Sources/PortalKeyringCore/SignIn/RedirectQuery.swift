/// The query of a redirect URL, when the URL is this app's redirect URL (same scheme, host and
/// path; scheme and host compared case-insensitively, RFC 3986 §6.2.2.1, since browsers and URL
/// handlers may change their case; the path and query case-sensitively; surrounding whitespace,
/// the fragment and trailing slashes ignored). A private-use redirect URL without an authority
/// (`com.example.app:/oauth2redirect`, RFC 8252 §7.1) has no host: its scheme is compared
/// case-insensitively and its path case-sensitively.
///
/// Parameters as PortalSwift reads them: `+` is a space, values are percent-decoded as UTF-8 and
/// a value that does not decode is kept as it came; empty pairs and empty names are skipped; the
/// **last** of a repeated name wins (Portal appends its parameters to the redirect URL, so a
/// `token` already in the configured URL is not the grant).
struct RedirectQuery {
    private var items: [String: String] = [:]

    init?(url: String, redirectUrl: String) {
        let url = url.trimmingWhitespace()
        func split(_ s: String) -> (base: String, query: String) {
            let noFragment = s.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? s
            let parts = noFragment.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
            return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
        }
        // Linear: trailing slashes are counted once from the end (the old loop recounted the
        // whole string per slash removed, O(n²): 120 KB of slashes took 18 s).
        func normalized(_ base: String) -> String {
            guard let colon = base.firstIndex(of: ":") else { return base }
            let rest = base[colon...]
            var end = rest.endIndex, slashes = 0
            while end > rest.startIndex, rest[rest.index(before: end)] == "/" {
                end = rest.index(before: end)
                slashes += 1
            }
            // Drop trailing slashes, keeping at least 3 characters of ":…" (as "://").
            let drop = min(slashes, max(0, rest[..<end].count + slashes - 3))
            return base[..<colon].lowercased() + Self.lowercasingHost(rest.dropLast(drop))
        }
        let incoming = split(url), ours = split(redirectUrl)
        guard normalized(incoming.base) == normalized(ours.base) else { return nil }
        items = Self.parameters(Substring(incoming.query))
    }

    /// The parameters of `query` (the text after `?`, without the fragment), read as above.
    static func parameters(_ query: Substring) -> [String: String] {
        var items: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = Self.decode(kv[0]) ?? String(kv[0])
            if key.isEmpty { continue }
            items[key] = kv.count > 1 ? Self.decode(kv[1]) ?? String(kv[1]) : ""
        }
        return items
    }

    /// The `state` parameter of an authorize URL (Portal's single-use OAuth `state`), read as the
    /// redirect's parameters are; nil when it has none or an empty one.
    static func state(ofAuthorizeURL url: String) -> String? {
        let noFragment = url.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? Substring(url)
        guard let question = noFragment.firstIndex(of: "?") else { return nil }
        let state = parameters(noFragment[noFragment.index(after: question)...])["state"]
        return state?.isEmpty == false ? state : nil
    }


    subscript(key: String) -> String? { items[key] }

    /// `://userinfo@host:port/path` with the host (and port) lower-cased; anything else unchanged.
    static func lowercasingHost(_ rest: Substring) -> String {
        guard rest.hasPrefix("://") else { return String(rest) }
        let authorityStart = rest.index(rest.startIndex, offsetBy: 3)
        let authorityEnd = rest[authorityStart...].firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[authorityStart..<authorityEnd]
        let hostStart = authority.lastIndex(of: "@").map { authority.index(after: $0) } ?? authority.startIndex
        return "://" + authority[..<hostStart] + authority[hostStart...].lowercased() + rest[authorityEnd...]
    }

    /// Percent-decoding with `+` as space; nil for malformed escapes or invalid UTF-8.
    static func decode(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "+") {
                bytes.append(0x20)
            } else if byte == UInt8(ascii: "%") {
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
                bytes.append(high << 4 | low)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
