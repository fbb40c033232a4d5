/// An HTTP response.
public struct PortalResponse: Sendable {
    /// The HTTP status code.
    public let status: Int
    /// The response body, at most `HTTPClient.maxBodyBytes`: a new copy on every read, which is
    /// the caller's (the library's own copy is wiped when the last `PortalResponse` holding it
    /// goes away; a body may carry a credential, such as a sign-in exchange's token).
    public var body: [UInt8] { bodyBytes.withUnsafeBytes { Array($0) } }
    /// The library's copy of the body (wiped on release).
    let bodyBytes: SecretBytes
    /// The response's `Retry-After`, in whole seconds from now (libcurl's CURLINFO_RETRY_AFTER:
    /// delta-seconds, or an HTTP-date converted); nil when absent, unparsable, 0 or in the past.
    let retryAfterSeconds: Int?

    init(status: Int, bodyBytes: SecretBytes, retryAfterSeconds: Int? = nil) {
        self.status = status
        self.bodyBytes = bodyBytes
        self.retryAfterSeconds = retryAfterSeconds
    }

    /// The body's length in bytes.
    @_spi(Bindings)
    public var bodyCount: Int { bodyBytes.count }

    /// Calls `body` with the response body in place, without a copy (valid only during the call).
    @_spi(Bindings)
    public func withBodyBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bodyBytes.withUnsafeBytes(body)
    }
}
