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
