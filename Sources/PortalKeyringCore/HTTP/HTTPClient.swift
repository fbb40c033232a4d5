import CCurl
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Lets the owner of requests abort those in flight (libcurl checks it at least once a second
/// while a transfer runs, and during connect). Thread-safe.
final class RequestCancellation: Sendable {
    private let cancelled = Atomic<Bool>(false)
    func cancel() { cancelled.store(true, ordering: .releasing) }
    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }
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
    /// CURLOPT_PROTOCOLS_STR (internal so that a test can make libcurl refuse an option).
    var protocols = "http,https"

    /// A byte that has no place in a header value (RFC 9110 §5.5): a control character other
    /// than horizontal tab (CR, LF and NUL among them), or DEL.
    static func endsHeaderLine(_ byte: UInt8) -> Bool { (byte < 0x20 && byte != 0x09) || byte == 0x7F }

    /// Sends `request` to `target`. `bearer`, when given, goes in the Authorization header; it is
    /// refused over plain HTTP unless the host is loopback, and refused (nothing sent) when it
    /// or a header value holds a control character. A body longer than `maxBodyBytes` stops the
    /// transfer there: `HTTPFailure.oversized` (a Portal API answer the library parses is held to
    /// `PortalAuth.maxAnswerBytes`, so a huge one costs no more than that much reading).
    func send(_ request: PortalRequest, to target: TargetURL, bearer: SecretBytes?,
              cancellation: RequestCancellation? = nil,
              maxBodyBytes: Int = HTTPClient.maxBodyBytes) throws(HTTPFailure) -> PortalResponse {
        if target.scheme != "https" && !target.isLoopback {
            throw .refused("plain HTTP to \(target.authority) is not allowed; use https")
        }
        // Nothing goes into a header line that could end it and start another: every value
        // the library or the caller adds, and the bearer (a CST stored by an earlier version may
        // hold a line end: restore hands it out, but it is never sent).
        for (name, value) in request.headers where value.utf8.contains(where: Self.endsHeaderLine) {
            throw .refused("the \(name) header holds a line end or another control character; nothing was sent")
        }
        if let bearer, bearer.withUnsafeBytes({ $0.contains { $0 <= 0x20 || $0 == 0x7F } }) {
            throw .refused("the bearer token holds whitespace, a line end or another control character; nothing was sent")
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
        // Every header line is wiped before the list is freed: one of them is the bearer.
        defer { curl.slistFreeAll(Curl.wipe(headers)) }
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
            prefix.withUnsafeBytes { UnsafeMutableRawPointer(line).copyMemory(from: $0.baseAddress!, byteCount: prefix.count) }  // trusted: a constant, non-empty prefix
            bearer.withUnsafeBytes { bytes in
                if let base = bytes.baseAddress {
                    UnsafeMutableRawPointer(line + prefix.count).copyMemory(from: base, byteCount: bytes.count)
                }
            }
            line[prefix.count + bearer.count] = 0
            headers = curl.slistAppend(headers, line)
        }

        let sink = ResponseSink(limit: maxBodyBytes)
        let sinkPointer = Unmanaged.passRetained(sink)
        defer { sinkPointer.release() }

        // Every option is checked: one the loaded libcurl refuses (too old, built without it)
        // fails the request instead of silently weakening it.
        func check(_ code: CURLcode, _ name: String) throws(HTTPFailure) {
            guard code == CURLE_OK else {
                let reason = curl.easyStrerror(code).map { String(cString: $0) } ?? "error \(code.rawValue)"
                throw .transport("libcurl refused option \(name): \(reason)")
            }
        }
        for option in transportOptions(for: target) {
            switch option.value {
            case .long(let value): try check(portal_curl_setopt_long(setopt, easy, option.id, value), option.name)
            case .string(let value): try check(portal_curl_setopt_ptr(setopt, easy, option.id, value), option.name)
            }
        }
        try check(portal_curl_setopt_ptr(setopt, easy, CURLOPT_HTTPHEADER, headers), "CURLOPT_HTTPHEADER")
        try check(portal_curl_setopt_write(setopt, easy) { data, size, count, context in
            guard let data, let context else { return 0 }
            let sink = Unmanaged<ResponseSink>.fromOpaque(context).takeUnretainedValue()
            let length = size * count
            if sink.bytes.count + length > sink.limit {
                sink.overflowed = true
                return 0  // libcurl stops the transfer (CURLE_WRITE_ERROR)
            }
            sink.bytes.append(UnsafeRawBufferPointer(start: data, count: length))
            return length
        }, "CURLOPT_WRITEFUNCTION")
        try check(portal_curl_setopt_ptr(setopt, easy, CURLOPT_WRITEDATA, sinkPointer.toOpaque()), "CURLOPT_WRITEDATA")
        if let cancellation {
            if cancellation.isCancelled { throw .transport("cancelled") }
            try check(portal_curl_setopt_long(setopt, easy, CURLOPT_NOPROGRESS, 0), "CURLOPT_NOPROGRESS")
            try check(portal_curl_setopt_xferinfo(setopt, easy) { context, _, _, _, _ in
                guard let context else { return 0 }
                return Unmanaged<RequestCancellation>.fromOpaque(context).takeUnretainedValue().isCancelled ? 1 : 0
            }, "CURLOPT_XFERINFOFUNCTION")
            try check(portal_curl_setopt_ptr(setopt, easy, CURLOPT_XFERINFODATA,
                                             Unmanaged.passUnretained(cancellation).toOpaque()), "CURLOPT_XFERINFODATA")
        }
        let method = request.method.uppercased()
        guard PortalRequest.allowedMethods.contains(method) else { throw .refused("method \(method) is not allowed") }
        if let body = request.body {
            try check(portal_curl_setopt_long(setopt, easy, CURLOPT_POSTFIELDSIZE, body.count), "CURLOPT_POSTFIELDSIZE")
            let code = body.withUnsafeBytes {
                portal_curl_setopt_ptr(setopt, easy, CURLOPT_COPYPOSTFIELDS, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1))
            }
            try check(code, "CURLOPT_COPYPOSTFIELDS")
        }
        if method == "GET" && request.body == nil {
            try check(portal_curl_setopt_long(setopt, easy, CURLOPT_HTTPGET, 1), "CURLOPT_HTTPGET")
        } else if method == "HEAD" && request.body == nil {
            try check(portal_curl_setopt_long(setopt, easy, CURLOPT_NOBODY, 1), "CURLOPT_NOBODY")
        } else if method != "POST" {
            try check(portal_curl_setopt_ptr(setopt, easy, CURLOPT_CUSTOMREQUEST, method), "CURLOPT_CUSTOMREQUEST")
        }

        let code = withExtendedLifetime(cancellation) { curl.easyPerform(easy) }
        if sink.overflowed {
            var status = 0
            portal_curl_getinfo_long(curl.getinfo, easy, CURLINFO_RESPONSE_CODE, &status)
            throw .oversized(limit: maxBodyBytes, status: status)
        }
        if code != CURLE_OK {
            throw .transport(curl.easyStrerror(code).map { String(cString: $0) } ?? "libcurl error \(code.rawValue)")
        }
        var status = 0
        portal_curl_getinfo_long(curl.getinfo, easy, CURLINFO_RESPONSE_CODE, &status)
        // Retry-After (libcurl >= 7.66; an older one leaves it 0: no wait known).
        var retryAfter: curl_off_t = 0
        let retryRead = portal_curl_getinfo_off(curl.getinfo, easy, CURLINFO_RETRY_AFTER, &retryAfter) == CURLE_OK
        return PortalResponse(status: status, bodyBytes: sink.bytes.freeze(),
                              retryAfterSeconds: retryRead && retryAfter > 0 ? Int(retryAfter) : nil)
    }
}

/// One libcurl option `HTTPClient` sets on every request, by name for error messages.
struct CurlOption {
    enum Value: Equatable { case long(Int), string(String) }
    let id: CURLoption
    let name: String
    let value: Value
}

extension HTTPClient {
    /// The options that decide where a request goes and how it is protected, in the order they
    /// are set (every result checked): the URL, http/https only, no redirects, timeouts, TLS peer
    /// and host verification spelled out (CURLOPT_SSL_VERIFYPEER=1, CURLOPT_SSL_VERIFYHOST=2,
    /// libcurl's defaults, set so that nothing else can have changed them), and for a loopback
    /// target no proxy at all (CURLOPT_PROXY "" and CURLOPT_NOPROXY "*"): an `http_proxy`,
    /// `HTTP_PROXY` or `ALL_PROXY` variable never sees a request, or a bearer, meant for this
    /// machine. Non-loopback targets are https: a proxy from the environment gets a CONNECT
    /// tunnel and the bearer stays inside TLS.
    ///
    /// The name `localhost` is resolved over IPv4 only (CURLOPT_IPRESOLVE_V4: 127.0.0.1). libcurl
    /// answers it with both 127.0.0.1 and ::1 and connects to whichever accepts first, so while
    /// the app's server listens on 127.0.0.1:PORT alone, any local user who binds [::1]:PORT
    /// would receive the request and its bearer (docs/security.md, "`localhost` and the IPv6 loopback").
    /// `localhost` means 127.0.0.1, as in /etc/hosts on every supported system; a server on the
    /// IPv6 loopback alone is reached through the literal, `[::1]:PORT`.
    func transportOptions(for target: TargetURL) -> [CurlOption] {
        var options = [
            CurlOption(id: CURLOPT_URL, name: "CURLOPT_URL", value: .string(target.url)),
            CurlOption(id: CURLOPT_PROTOCOLS_STR, name: "CURLOPT_PROTOCOLS_STR", value: .string(protocols)),
            CurlOption(id: CURLOPT_NOSIGNAL, name: "CURLOPT_NOSIGNAL", value: .long(1)),
            CurlOption(id: CURLOPT_FOLLOWLOCATION, name: "CURLOPT_FOLLOWLOCATION", value: .long(0)),
            CurlOption(id: CURLOPT_CONNECTTIMEOUT_MS, name: "CURLOPT_CONNECTTIMEOUT_MS", value: .long(connectTimeoutMilliseconds)),
            CurlOption(id: CURLOPT_TIMEOUT_MS, name: "CURLOPT_TIMEOUT_MS", value: .long(totalTimeoutMilliseconds)),
            CurlOption(id: CURLOPT_SSL_VERIFYPEER, name: "CURLOPT_SSL_VERIFYPEER", value: .long(1)),
            CurlOption(id: CURLOPT_SSL_VERIFYHOST, name: "CURLOPT_SSL_VERIFYHOST", value: .long(2)),
        ]
        if target.isLocalhostName {
            options.append(CurlOption(id: CURLOPT_IPRESOLVE, name: "CURLOPT_IPRESOLVE", value: .long(Int(CURL_IPRESOLVE_V4))))
        }
        if target.isLoopback {
            options.append(CurlOption(id: CURLOPT_PROXY, name: "CURLOPT_PROXY", value: .string("")))
            options.append(CurlOption(id: CURLOPT_NOPROXY, name: "CURLOPT_NOPROXY", value: .string("*")))
        }
        return options
    }
}

/// Where libcurl's write callback puts the body: pages that are wiped, never left behind, as it
/// grows and when the request ends.
private final class ResponseSink {
    let bytes = SecretBytes.Growable()
    /// The most bytes kept; the write callback stops the transfer beyond it.
    let limit: Int
    var overflowed = false

    init(limit: Int) { self.limit = limit }
}
