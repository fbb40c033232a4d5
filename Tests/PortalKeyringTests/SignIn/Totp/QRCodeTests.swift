import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// `QRCode` against a real decoder: each code is drawn as an image and read back with zbarimg
/// (zbar-tools, scripts/deps.sh), so a wrong level, mask, module order or quiet zone fails here.
@Suite struct QRCodeTests {
    static let payloads = [
        "otpauth://totp/Portal:someone%40example.com?secret=JBSWY3DPEHPK3PXP&issuer=Portal",
        "x",
        "otpauth://totp/Portal?secret=" + String(repeating: "ABCDEFGH234567", count: 60),
        "ünïcödé ✓ 🔑 bytes as UTF-8",
    ]

    @Test(arguments: payloads)
    func zbarReadsBackThePayload(_ payload: String) throws {
        let code = try #require(QRCode.encode(Array(payload.utf8)))
        #expect(try decode(code) == payload)
    }

    @Test func shapeLevelMAndQuietZone() throws {
        // 14 bytes fit version 1 at level M (its byte capacity: 14); 15 need version 2 (at level L,
        // 17 would still fit version 1).
        #expect(QRCode.encode(Array(String(repeating: "a", count: 14).utf8))?.size == 21 + 8)
        #expect(QRCode.encode(Array(String(repeating: "a", count: 15).utf8))?.size == 25 + 8)
        let code = try #require(QRCode.encode(Array("otpauth://totp/x?secret=AAAA".utf8)))
        #expect(code.modules.count == code.size * code.size)
        for i in 0..<code.size {
            for edge in [0, 1, 2, 3, code.size - 4, code.size - 3, code.size - 2, code.size - 1] {
                #expect(!code.isDark(x: i, y: edge) && !code.isDark(x: edge, y: i), "quiet zone at \(i), \(edge)")
            }
        }
        // The top-left finder pattern starts right after the quiet zone: a dark 7×7 ring.
        #expect((4..<11).allSatisfy { code.isDark(x: $0, y: 4) && code.isDark(x: 4, y: $0) })
        #expect(!code.isDark(x: 5, y: 5) && code.isDark(x: 6, y: 6))
    }

    @Test func refusesWhatItCannotEncode() {
        #expect(QRCode.encode([]) == nil)
        #expect(QRCode.encode([UInt8](repeating: 0x41, count: QRCode.maxPayloadBytes + 1)) == nil)
        #expect(QRCode.encode([UInt8](repeating: 0x41, count: QRCode.maxPayloadBytes)) != nil)
    }

    @Test func svgAndTerminalText() throws {
        let code = try #require(QRCode.encode(Array("otpauth://totp/x?secret=AAAA".utf8)))
        let svg = code.svg
        #expect(svg.hasPrefix("<svg ") && svg.hasSuffix("</svg>"))
        #expect(svg.contains(#"viewBox="0 0 \#(code.size) \#(code.size)""#))
        let dark = code.modules.filter { $0 }.count
        // Each run of dark modules is one "M…z" rectangle; their areas add up to the dark modules.
        var area = 0
        for run in svg.split(separator: "M").dropFirst() {
            guard let h = run.firstIndex(of: "h"), let v = run.firstIndex(of: "v"),
                  let width = Int(run[run.index(after: h)..<v]) else { continue }
            area += width
        }
        #expect(area == dark)
        let lines = code.terminalText().split(separator: "\n")
        #expect(lines.count == (code.size + 1) / 2)
        #expect(lines.allSatisfy { $0.count == code.size })
        #expect(lines.first?.allSatisfy { $0 == "█" } == true, "the quiet zone is drawn light")
        #expect(code.terminalText(darkOnLight: true).split(separator: "\n").first?.allSatisfy { $0 == " " } == true)
    }

    /// A TOTP step's QR code encodes its link as `totpSecret` reads it, and nothing else does.
    @Test func totpStepQRCode() throws {
        let link = "otpauth://totp/Portal:eu-1?secret=jbswy3dpehpk3pxp&issuer=Portal"
        let step = TotpRequiredResult(userJwt: "jwt", totpLink: "  " + link + "\n", endUserId: "eu-1")
        #expect(try decode(try step.qrCode()) == link)
        // A link that came percent-encoded as a whole is decoded first, as totpSecret reads it.
        let encoded = "otpauth%3A%2F%2Ftotp%2FPortal%3Aeu-1%3Fsecret%3DJBSWY3DPEHPK3PXP"
        #expect(try decode(try QRCode(totpLink: encoded)) == "otpauth://totp/Portal:eu-1?secret=JBSWY3DPEHPK3PXP")
        for bad in ["", "https://example.com/?secret=JBSWY3DP", "otpauth://totp/x?secret=not-base32!",
                    "otpauth://totp/x", "otpauth://totp/x?issuer=P",
                    "otpauth://totp/x?secret=AAAA&pad=" + String(repeating: "p", count: QRCode.maxPayloadBytes)] {
            #expect(throws: PortalAuthError.totpQrUnavailable, "\(bad.prefix(60))") { try QRCode(totpLink: bad) }
        }
        #expect(throws: PortalAuthError.totpQrUnavailable) {
            try TotpRequiredResult(userJwt: "jwt", totpLink: nil, endUserId: "").qrCode()
        }
        // The error carries no part of the link (its secret).
        #expect(!PortalAuthError.totpQrUnavailable.description.contains("JBSWY3DP"))
    }

    /// Draws `code` as a PGM image (4 pixels per module) and decodes it with zbarimg.
    private func decode(_ code: QRCode) throws -> String {
        let scale = 4
        let side = code.size * scale
        var image = Array("P5\n\(side) \(side)\n255\n".utf8)
        for y in 0..<side {
            for x in 0..<side { image.append(code.isDark(x: x / scale, y: y / scale) ? 0 : 255) }
        }
        let base = "/tmp/portal-keyring-qr-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { unlink(base + ".pgm"); unlink(base + ".txt") }
        let file = try #require(fopen(base + ".pgm", "wb"))
        fwrite(image, 1, image.count, file)
        fclose(file)
        let status = system("zbarimg --quiet --raw -Sbinary '\(base).pgm' > '\(base).txt'")
        try #require(status == 0, "zbarimg failed (\(status)); is zbar-tools installed (scripts/deps.sh)?")
        let out = try #require(fopen(base + ".txt", "rb"))
        defer { fclose(out) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, out)
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        if bytes.last == 0x0A { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}
