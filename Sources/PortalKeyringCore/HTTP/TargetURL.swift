import CCurl
#if canImport(Glibc)
import Glibc
#endif

/// A parsed target URL: scheme, host (without brackets) and whether the host is loopback.
struct TargetURL: Equatable {
    let url: String
    let scheme: String
    /// Host and port as written in the URL authority, lower-cased, e.g. `api.portalhq.io` or `127.0.0.1:8080`.
    let authority: String
    let isLoopback: Bool
    /// The host is the name `localhost` (any case), not an address literal: requests to it are
    /// made over IPv4 only, to 127.0.0.1 (`transportOptions`).
    let isLocalhostName: Bool

    /// Parses an absolute http(s) URL with libcurl's URL parser; nil when it is not one.
    init?(_ url: String) {
        guard case .success(let curl) = Curl.shared, let handle = curl.urlNew() else { return nil }
        defer { curl.urlCleanup(handle) }
        guard curl.urlSet(handle, CURLUPART_URL, url, 0) == CURLUE_OK else { return nil }
        func part(_ which: CURLUPart) -> String? {
            var out: UnsafeMutablePointer<CChar>?
            guard curl.urlGet(handle, which, &out, 0) == CURLUE_OK, let out else { return nil }
            defer { curl.free(out) }
            return String(cString: out)
        }
        guard let scheme = part(CURLUPART_SCHEME)?.lowercased(), scheme == "https" || scheme == "http",
              let host = part(CURLUPART_HOST)?.lowercased(), part(CURLUPART_USER) == nil else { return nil }
        let port = part(CURLUPART_PORT)
        self.url = url
        self.scheme = scheme
        self.authority = port.map { "\(host):\($0)" } ?? host
        self.isLoopback = TargetURL.isLoopbackHost(host)
        self.isLocalhostName = host == "localhost"
    }

    /// Whether `host` (as libcurl's URL parser returns it: IPv6 in brackets) is a loopback
    /// address, decided from the literal alone, never from a name's shape: an IPv4 dotted quad
    /// in 127.0.0.0/8, an IPv6 literal equal to ::1 (any valid spelling), or exactly `localhost`
    /// (any case). `127.example.net` or `127.0.0.1.attacker.example` are DNS names: not loopback.
    static func isLoopbackHost(_ host: String) -> Bool {
        if host.lowercased() == "localhost" { return true }
        if host.hasPrefix("[") {
            guard host.hasSuffix("]"), host.utf8.count > 2 else { return false }
            var address = in6_addr()
            guard inet_pton(AF_INET6, String(host.dropFirst().dropLast()), &address) == 1 else { return false }
            return withUnsafeBytes(of: &address) { $0.elementsEqual([UInt8](repeating: 0, count: 15) + [1]) }
        }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4 else { return false }
        for octet in octets {
            guard (1...3).contains(octet.utf8.count), octet.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let value = Int(octet), value <= 255 else { return false }
        }
        return Int(octets[0]) == 127
    }

    /// The URL for `path` on `apiHost` (`host` or `host:port`): https, or http for a loopback host
    /// (decided by `isLoopbackHost` on the host libcurl parses out of it).
    static func forAPI(host apiHost: String, path: String) -> TargetURL? {
        if let plain = TargetURL("http://\(apiHost)\(path)"), plain.isLoopback { return plain }
        return TargetURL("https://\(apiHost)\(path)")
    }
}
