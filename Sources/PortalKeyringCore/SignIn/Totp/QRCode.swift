#if canImport(Glibc)
import Glibc
#endif

/// A QR code as a square grid of modules, for a TOTP enrolment link (docs/sign-in.md#the-enrolment-link-as-a-qr-code):
/// error-correction level M, byte mode, the smallest version that holds the payload, and the
/// 4-module quiet zone the QR specification asks for included in `size`. Encoded by libqrencode,
/// loaded with `dlopen` on first use like libcurl (`Curl`): apps that never show a QR code never
/// load it.
///
/// The link holds the TOTP secret, and the modules encode it. What is wiped (docs/security.md,
/// "What the QR code exports wipe"): the payload handed to libqrencode (a `SecretBytes` copy) and libqrencode's
/// module array (zeroed before `QRcode_free`); the C exports also wipe their copy of the
/// argument, write the `'1'`/`'0'` text straight into the string they return, and wipe the module
/// grid and the SVG text once copied out (the returned strings are wiped by
/// `portal_string_free`). What is not: the Swift `String`s the link is read through
/// (`TotpLink`: trimmed and decoded copies, the `secret` parameter), libqrencode's own buffers
/// (its copy of the input, the bit stream, the error-correction blocks, the masked frames it
/// tries), all freed to malloc as they are; and whatever the Swift API hands its caller
/// (`modules`, `svg`, `terminalText()`), which the caller owns.
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
    ///
    /// Written into one string whose capacity is reserved first, in pieces short enough to be
    /// stored inline: no larger copy of the path is made and left behind in freed memory, so the
    /// C export's wipe of the result covers the whole document.
    public var svg: String {
        var runs = 0
        forEachDarkRun { _, _, _ in runs += 1 }
        let sizeText = String(size)
        var svg = ""
        // Each run is at most "M177 177h177v1h-177z" (20 bytes); the frame is under 200.
        svg.reserveCapacity(200 + 4 * sizeText.utf8.count + 20 * runs)
        svg += ##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 "##
        svg += sizeText; svg += " "; svg += sizeText
        svg += ##"" shape-rendering="crispEdges"><rect width=""##
        svg += sizeText; svg += ##"" height=""##; svg += sizeText
        svg += ##"" fill="#fff"/><path fill="#000" d=""##
        forEachDarkRun { x, y, length in
            let run = String(length)
            svg += "M"; svg += String(x); svg += " "; svg += String(y)
            svg += "h"; svg += run; svg += "v1h-"; svg += run; svg += "z"
        }
        svg += ##""/></svg>"##
        return svg
    }

    /// Calls `body(x, y, length)` for each horizontal run of dark modules, row by row.
    private func forEachDarkRun(_ body: (Int, Int, Int) -> Void) {
        for y in 0..<size {
            var x = 0
            while x < size {
                guard isDark(x: x, y: y) else { x += 1; continue }
                var end = x
                while end < size, isDark(x: end, y: y) { end += 1 }
                body(x, y, end - x)
                x = end
            }
        }
    }

    /// Zeroes the storage of `modules` in place (the C exports, once they copied it out: the
    /// grid encodes the TOTP secret). Every holder of the same array storage sees all-light.
    @_spi(Bindings)
    public func wipeModules() {
        modules.withUnsafeBufferPointer { buffer in
            SecretBytes.wipe(UnsafeMutableRawPointer(mutating: buffer.baseAddress), buffer.count * MemoryLayout<Bool>.stride)
        }
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
        encode(payload.withUnsafeBytes { SecretBytes(copying: $0) })
    }

    /// `encode(_:)` of bytes held in wiped memory (a TOTP link).
    static func encode(_ payload: SecretBytes) -> QRCode? {
        guard payload.count > 0, payload.count <= maxPayloadBytes, let library = QREncoder.shared else { return nil }
        guard let symbol = payload.withUnsafeBytes({
            library.encodeData(Int32($0.count), $0.baseAddress?.assumingMemoryBound(to: UInt8.self), 0, levelM)
        }) else { return nil }
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
        guard let payload = TotpLink.qrPayload(ofLink: totpLink), let code = Self.encode(SecretBytes.copyingUTF8(of: payload)) else {
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
