/// The `X-Portal-Trace-Id` of one request to the Portal API: a fresh random UUID (version 4,
/// RFC 9562 §5.4) in lower case, from `SystemRandomNumberGenerator` (the kernel's CSPRNG,
/// getrandom(2)). A new one per request, never reused, never derived from anything else: it
/// lets Portal's logs tie a request to a report without identifying the end user.
enum TraceId {
    static let header = "X-Portal-Trace-Id"

    static func fresh() -> String {
        var rng = SystemRandomNumberGenerator()
        var bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) }
        bytes[6] = (bytes[6] & 0x0F) | 0x40  // version 4
        bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 9562 variant
        let hex = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        for (index, byte) in bytes.enumerated() {
            if [4, 6, 8, 10].contains(index) { text.append(UInt8(ascii: "-")) }
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
