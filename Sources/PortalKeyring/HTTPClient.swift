import CCurl
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// An HTTP request to the Portal API or another host.
public struct PortalRequest: Sendable {
    /// `GET`, `POST`, `PUT`, `PATCH` or `DELETE`.
    public var method: String
    /// A path on the Portal API host (starting with `/`), or an absolute `https://` URL.
    public var target: String
    /// Extra request headers. `Authorization` is set by the library for the Portal API host.
    public var headers: [(name: String, value: String)]
    /// The request body (sent with `Content-Type: application/json` unless a header says otherwise).
    public var body: [UInt8]?

    public init(method: String = "GET", target: String, headers: [(name: String, value: String)] = [], body: [UInt8]? = nil) {
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
    }
}

/// An HTTP response.
public struct PortalResponse: Sendable {
    /// The HTTP status code.
    public let status: Int
    /// The response body, at most `HTTPClient.maxBodyBytes`.
    public let body: [UInt8]
}

/// Why a request did not produce a response.
enum HTTPFailure: Error, Equatable {
    /// The library refused to send it (for example a bearer over plain HTTP to a non-loopback host).
    case refused(String)
    /// Connection failure, TLS failure, reset or timeout.
    case transport(String)

    var message: String {
        switch self {
        case .refused(let m): return "request refused: \(m)"
        case .transport(let m): return "network error: \(m)"
        }
    }
}

/// Lets the owner of requests abort those in flight (libcurl checks it at least once a second
/// while a transfer runs, and during connect). Thread-safe.
final class RequestCancellation: Sendable {
    private let cancelled = Atomic<Bool>(false)
    func cancel() { cancelled.store(true, ordering: .releasing) }
    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }
}

/// A parsed target URL: scheme, host (without brackets) and whether the host is loopback.
struct TargetURL: Equatable {
    let url: String
    let scheme: String
    /// Host and port as written in the URL authority, lower-cased, e.g. `api.portalhq.io` or `127.0.0.1:8080`.
    let authority: String
    let isLoopback: Bool

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

/// The HTTP client: libcurl (loaded on first use, see `Curl`) easy handles, one per request,
/// HTTPS required except to loopback.
///
/// Timeouts (documented in the C header): 10 s to connect, 30 s for a whole request. Redirects
/// are not followed (a bearer must not follow a redirect to another host). Thread-safe.
struct HTTPClient: Sendable {
    static let connectTimeoutMilliseconds = 10_000
    static let totalTimeoutMilliseconds = 30_000
    static let maxBodyBytes = 4 << 20

    var connectTimeoutMilliseconds = HTTPClient.connectTimeoutMilliseconds
    var totalTimeoutMilliseconds = HTTPClient.totalTimeoutMilliseconds

    /// Sends `request` to `target`. `bearer`, when given, goes in the Authorization header; it is
    /// refused over plain HTTP unless the host is loopback.
    func send(_ request: PortalRequest, to target: TargetURL, bearer: SecretBytes?,
              cancellation: RequestCancellation? = nil) throws(HTTPFailure) -> PortalResponse {
        if target.scheme != "https" && !target.isLoopback {
            throw .refused("plain HTTP to \(target.authority) is not allowed; use https")
        }
        let curl: Curl
        switch Curl.shared {
        case .success(let loaded): curl = loaded
        case .failure(let failure): throw failure
        }
        guard let easy = curl.easyInit() else { throw .transport("could not initialize libcurl") }
        defer { curl.easyCleanup(easy) }
        let setopt = curl.setopt

        var headers: UnsafeMutablePointer<curl_slist>?
        defer { curl.slistFreeAll(headers) }
        var hasContentType = false
        for (name, value) in request.headers where name.lowercased() != "authorization" {
            if name.lowercased() == "content-type" { hasContentType = true }
            headers = curl.slistAppend(headers, "\(name): \(value)")
        }
        if request.body != nil && !hasContentType { headers = curl.slistAppend(headers, "Content-Type: application/json") }
        headers = curl.slistAppend(headers, "Accept: application/json")
        if let bearer {
            // Build the header line in wiped memory; libcurl copies it into the slist.
            let prefix = Array("Authorization: Bearer ".utf8)
            let line = UnsafeMutablePointer<CChar>.allocate(capacity: prefix.count + bearer.count + 1)
            defer {
                SecretBytes.wipe(line, prefix.count + bearer.count + 1)
                line.deallocate()
            }
            prefix.withUnsafeBytes { UnsafeMutableRawPointer(line).copyMemory(from: $0.baseAddress!, byteCount: prefix.count) }
            bearer.withUnsafeBytes { bytes in
                if let base = bytes.baseAddress {
                    UnsafeMutableRawPointer(line + prefix.count).copyMemory(from: base, byteCount: bytes.count)
                }
            }
            line[prefix.count + bearer.count] = 0
            headers = curl.slistAppend(headers, line)
        }

        let sink = ResponseSink()
        let sinkPointer = Unmanaged.passRetained(sink)
        defer { sinkPointer.release() }

        portal_curl_setopt_ptr(setopt, easy, CURLOPT_URL, target.url)
        portal_curl_setopt_ptr(setopt, easy, CURLOPT_PROTOCOLS_STR, "http,https")
        portal_curl_setopt_long(setopt, easy, CURLOPT_NOSIGNAL, 1)
        portal_curl_setopt_long(setopt, easy, CURLOPT_FOLLOWLOCATION, 0)
        portal_curl_setopt_long(setopt, easy, CURLOPT_CONNECTTIMEOUT_MS, connectTimeoutMilliseconds)
        portal_curl_setopt_long(setopt, easy, CURLOPT_TIMEOUT_MS, totalTimeoutMilliseconds)
        portal_curl_setopt_ptr(setopt, easy, CURLOPT_HTTPHEADER, headers)
        portal_curl_setopt_write(setopt, easy) { data, size, count, context in
            guard let data, let context else { return 0 }
            let sink = Unmanaged<ResponseSink>.fromOpaque(context).takeUnretainedValue()
            let length = size * count
            if sink.bytes.count + length > HTTPClient.maxBodyBytes { return 0 }
            sink.bytes.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length))
            return length
        }
        portal_curl_setopt_ptr(setopt, easy, CURLOPT_WRITEDATA, sinkPointer.toOpaque())
        if let cancellation {
            if cancellation.isCancelled { throw .transport("cancelled") }
            portal_curl_setopt_long(setopt, easy, CURLOPT_NOPROGRESS, 0)
            portal_curl_setopt_xferinfo(setopt, easy) { context, _, _, _, _ in
                guard let context else { return 0 }
                return Unmanaged<RequestCancellation>.fromOpaque(context).takeUnretainedValue().isCancelled ? 1 : 0
            }
            portal_curl_setopt_ptr(setopt, easy, CURLOPT_XFERINFODATA, Unmanaged.passUnretained(cancellation).toOpaque())
        }
        let method = request.method.uppercased()
        if let body = request.body {
            portal_curl_setopt_long(setopt, easy, CURLOPT_POSTFIELDSIZE, body.count)
            body.withUnsafeBytes { _ = portal_curl_setopt_ptr(setopt, easy, CURLOPT_COPYPOSTFIELDS, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1)) }
        }
        if method == "GET" && request.body == nil {
            portal_curl_setopt_long(setopt, easy, CURLOPT_HTTPGET, 1)
        } else if method != "POST" {
            portal_curl_setopt_ptr(setopt, easy, CURLOPT_CUSTOMREQUEST, method)
        }

        let code = withExtendedLifetime(cancellation) { curl.easyPerform(easy) }
        if code != CURLE_OK {
            throw .transport(curl.easyStrerror(code).map { String(cString: $0) } ?? "libcurl error \(code.rawValue)")
        }
        var status = 0
        portal_curl_getinfo_long(curl.getinfo, easy, CURLINFO_RESPONSE_CODE, &status)
        return PortalResponse(status: status, body: sink.bytes)
    }
}

private final class ResponseSink {
    var bytes: [UInt8] = []
}
