import CCurl
#if canImport(Glibc)
import Glibc
#endif

/// An HTTP request to the Portal API or another host.
public struct PortalRequest: Sendable {
    /// One of `allowedMethods` (ASCII, any case); anything else is rejected before a byte is sent.
    public var method: String
    /// A path on the Portal API host (starting with `/`), or an absolute `https://` URL.
    public var target: String
    /// Extra request headers. `Authorization` is set by the library for the Portal API host.
    public var headers: [(name: String, value: String)]
    /// The request body (sent with `Content-Type: application/json` unless a header says otherwise).
    public var body: [UInt8]?

    /// The methods a request may use: a method goes into the request line, so it is allowlisted.
    public static let allowedMethods: Set<String> = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]

    public init(method: String = "GET", target: String, headers: [(name: String, value: String)] = [], body: [UInt8]? = nil) {
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
    }
}
