#if canImport(Glibc)
import Glibc
#endif

/// A QR code as a square grid of modules, for a TOTP enrolment link (README, "Sign-in"):
/// error-correction level M, byte mode, the smallest version that holds the payload, and the
/// 4-module quiet zone the QR specification asks for included in `size`. Encoded by libqrencode,
/// loaded with `dlopen` on first use like libcurl (`Curl`): apps that never show a QR code never
/// load it.
public struct QRCode: Sendable, Equatable {
    /// Modules on one side, quiet zone included (21 + 8 for the smallest symbol).
    public let size: Int
    /// Row-major, top row first: true for a dark module.
    public let modules: [Bool]

    /// The quiet zone on every side, in modules.
    public static let quietZone = 4
    /// The longest payload encoded, in bytes (a version-40 symbol at level M holds 2331).
    public static let maxPayloadBytes = 2331

    /// Whether the module at column `x`, row `y` is dark; false outside the grid.
    public func isDark(x: Int, y: Int) -> Bool {
        guard (0..<size).contains(x), (0..<size).contains(y) else { return false }
        return modules[y * size + x]
    }

    /// The code as an SVG document: one unit per module, black on an opaque white square, for
    /// toolkits that draw SVG (scale it with nearest-neighbour or `shape-rendering`).
    public var svg: String {
        var path = ""
        for y in 0..<size {
            var x = 0
            while x < size {
                guard isDark(x: x, y: y) else { x += 1; continue }
                var end = x
                while end < size, isDark(x: end, y: y) { end += 1 }
                path += "M\(x) \(y)h\(end - x)v1h-\(end - x)z"
                x = end
            }
        }
        return ##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 \##(size) \##(size)" shape-rendering="crispEdges">"##
            + ##"<rect width="\##(size)" height="\##(size)" fill="#fff"/><path fill="#000" d="\##(path)"/></svg>"##
    }

    /// The code as text for a terminal, two module rows per line with Unicode half blocks.
    /// Light modules are drawn (`█`, `▀`, `▄`) and dark ones left blank, which scans on a dark
    /// terminal background; `darkOnLight` draws the dark modules instead, for a light background.
    public func terminalText(darkOnLight: Bool = false) -> String {
        var lines: [String] = []
        for top in stride(from: 0, to: size, by: 2) {
            var line = ""
            for x in 0..<size {
                // Outside the grid (an odd last row) counts as light, like the quiet zone.
                let upper = isDark(x: x, y: top) != darkOnLight
                let lower = top + 1 < size ? isDark(x: x, y: top + 1) != darkOnLight : !darkOnLight
                switch (upper, lower) {
                case (false, false): line += "█"
                case (false, true): line += "▀"
                case (true, false): line += "▄"
                case (true, true): line += " "
                }
            }
            lines.append(line)
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Encodes `payload` (its bytes exactly, byte mode) at level M. Nil when libqrencode cannot
    /// be loaded, the payload is empty or longer than `maxPayloadBytes`, or encoding fails.
    static func encode(_ payload: [UInt8]) -> QRCode? {
        guard !payload.isEmpty, payload.count <= maxPayloadBytes, let library = QREncoder.shared else { return nil }
        guard let symbol = payload.withUnsafeBufferPointer({ library.encodeData(Int32($0.count), $0.baseAddress, 0, levelM) })
        else { return nil }
        defer { library.free(symbol) }
        // QRcode { int version; int width; unsigned char *data; }: each data byte's lowest bit
        // is the module (1: dark). Read, checked, then wiped: the link holds the TOTP secret.
        let width = Int(symbol.load(fromByteOffset: MemoryLayout<Int32>.size, as: Int32.self))
        guard let data = symbol.load(fromByteOffset: 2 * MemoryLayout<Int32>.size, as: UnsafeMutablePointer<UInt8>?.self),
              width >= 21, width <= 177, (width - 21) % 4 == 0 else { return nil }
        defer { memset(data, 0, width * width) }
        let size = width + 2 * quietZone
        var modules = [Bool](repeating: false, count: size * size)
        for row in 0..<width {
            for column in 0..<width where data[row * width + column] & 1 == 1 {
                modules[(row + quietZone) * size + column + quietZone] = true
            }
        }
        return QRCode(size: size, modules: modules)
    }

    /// `QR_ECLEVEL_M` in libqrencode's `QRecLevel`.
    private static let levelM: Int32 = 1
}

extension QRCode {
    /// The QR code of a TOTP enrolment link, for hosts that hold the link themselves (see
    /// `TotpRequiredResult.qrCode()`, which is this of its `totpLink`). It encodes the link as
    /// `TotpRequiredResult.totpSecret` reads it: trimmed, and decoded as a whole when it came
    /// percent-encoded.
    /// - Throws: `totpQrUnavailable` when the link is not `otpauth://` with a valid base32
    ///   secret, is longer than `maxPayloadBytes`, or libqrencode cannot be loaded.
    public init(totpLink: String) throws(PortalAuthError) {
        guard let payload = TotpLink.qrPayload(ofLink: totpLink), let code = Self.encode(Array(payload.utf8)) else {
            throw .totpQrUnavailable
        }
        self = code
    }
}

/// libqrencode's two functions, loaded once per process by soname (`libqrencode.so.4`, Debian's
/// libqrencode4), never unloaded; nil when it is not installed.
private struct QREncoder: @unchecked Sendable {
    /// `QRcode *QRcode_encodeData(int size, const unsigned char *data, int version, QRecLevel level)`.
    let encodeData: @convention(c) (Int32, UnsafePointer<UInt8>?, Int32, Int32) -> UnsafeMutableRawPointer?
    /// `void QRcode_free(QRcode *qrcode)`.
    let free: @convention(c) (UnsafeMutableRawPointer?) -> Void

    static let shared: QREncoder? = {
        guard let handle = dlopen("libqrencode.so.4", RTLD_NOW | RTLD_LOCAL),
              let encode = dlsym(handle, "QRcode_encodeData"), let free = dlsym(handle, "QRcode_free") else { return nil }
        return QREncoder(
            encodeData: unsafeBitCast(encode, to: (@convention(c) (Int32, UnsafePointer<UInt8>?, Int32, Int32) -> UnsafeMutableRawPointer?).self),
            free: unsafeBitCast(free, to: (@convention(c) (UnsafeMutableRawPointer?) -> Void).self))
    }()
}
