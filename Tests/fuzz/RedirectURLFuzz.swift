// RedirectURLFuzz.swift — libFuzzer target for the redirect-URL parser (`RedirectQuery`,
// Sources/PortalKeyringCore/SignIn/RedirectQuery.swift), which reads URLs the desktop hands to
// `portal-session handle-redirect %u` — input from outside the app.
//
// Built by Tests/fuzz/run.sh with the PortalKeyringCore sources as one module. The first input byte
// picks one of a few configured redirect URLs; the rest is the URL. Checked for every input,
// besides "no crash, no trap, no ASan report":
//  - parsing is deterministic;
//  - a URL accepted as ours has, once surrounding whitespace is trimmed, exactly our redirect
//    URL's scheme and host (both case-insensitively, RFC 3986 §6.2.2.1) and path
//    (case-sensitively) before its query: a look-alike is never treated as the app's redirect;
//  - every decoded parameter value is valid UTF-8 (it is a Swift String) and percent-decoding
//    never produces more bytes than the input.
#if canImport(Glibc)
import Glibc
#endif

private let redirects = ["portalkeyring://auth/callback", "https://app.example.com/portal/redirect",
                         "myapp:/cb", "example-app://portal/redirect?fixed=1"]

private func violation(_ what: String) -> Never {
    fputs("RedirectURLFuzz: invariant violated: \(what)\n", stderr)
    abort()
}

private func base(_ url: String) -> String {
    let noFragment = url.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? url
    return noFragment.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? noFragment
}

/// The oracle's own normalization, written apart from the parser's: scheme lower-cased; for
/// `scheme://authority/path`, the host (after any `userinfo@`) lower-cased; the rest as is.
private func caseNormalized(_ url: String) -> String {
    guard let colon = url.firstIndex(of: ":") else { return url }
    let scheme = url[..<colon].lowercased()
    let rest = url[colon...]
    guard rest.hasPrefix("://") else { return scheme + rest }
    let authority = rest.dropFirst(3).prefix(while: { $0 != "/" })
    let path = rest.dropFirst(3 + authority.count)
    let userinfo = authority.lastIndex(of: "@").map { authority[...$0] } ?? ""
    let host = authority.dropFirst(userinfo.count)
    return scheme + "://" + userinfo + host.lowercased() + path
}

/// The oracle's own trim: Unicode whitespace off both ends.
private func trimmed(_ text: String) -> String {
    var scalars = Substring(text).unicodeScalars
    while let first = scalars.first, first.properties.isWhitespace { scalars.removeFirst() }
    while let last = scalars.last, last.properties.isWhitespace { scalars.removeLast() }
    return String(scalars)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func redirectURLFuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let redirect = redirects[Int(data[0]) % redirects.count]
    let url = String(decoding: UnsafeBufferPointer(start: data + 1, count: size - 1), as: UTF8.self)
    let first = RedirectQuery(url: url, redirectUrl: redirect)
    let second = RedirectQuery(url: url, redirectUrl: redirect)
    if (first == nil) != (second == nil) { violation("nondeterministic acceptance of \(url)") }
    guard let query = first else { return 0 }
    // Surrounding whitespace is not part of the URL (RedirectQuery trims it, as PortalSwift does).
    var ours = base(redirect), theirs = base(trimmed(url))
    while ours.hasSuffix("/") && ours.count > 3 { ours.removeLast() }
    while theirs.hasSuffix("/") && theirs.count > 3 { theirs.removeLast() }
    if caseNormalized(ours) != caseNormalized(theirs) {
        violation("accepted \(url) as \(redirect)")
    }
    for key in ["token", "error", "authMethod", "login_type"] {
        if let value = query[key], value.utf8.count > url.utf8.count { violation("decoded \(key) longer than the URL") }
    }
    return 0
}
