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

extension PortalRequest {
    /// Rejects what would let a caller's text rewrite the request: a method outside
    /// `allowedMethods` (it becomes the request line), a header name that is not an RFC 7230
    /// token, a header value containing CR, LF or NUL (each would end the header line early and
    /// start another header or request). Checked before anything is sent.
    ///
    /// - Throws: `invalidArgument(name: "method")` or `invalidArgument(name: "headers")`.
    func validate() throws(PortalAuthError) {
        guard method.utf8.allSatisfy({ $0 < 0x80 }), Self.allowedMethods.contains(method.uppercased()) else {
            throw .invalidArgument(name: "method")
        }
        for (name, value) in headers {
            guard !name.utf8.isEmpty, name.utf8.allSatisfy(Self.isTokenByte),
                  !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }) else {
                throw .invalidArgument(name: "headers")
            }
        }
    }

    /// RFC 7230 `tchar`: ALPHA, DIGIT and ``!#$%&'*+-.^_`|~``.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }
}
