import Testing
@testable import PortalKeyringCore

/// The library's character classes (`TextClasses.swift`) decide on scalar values and bytes, to
/// keep the standard library's Unicode property tables out of the first call's resident memory;
/// `String(decimal:)` (`Decimal.swift`) likewise its integer formatting. Each must agree with the
/// standard library's own answer, over every Unicode scalar.
@Suite struct TextClassesTests {
    /// Every scalar value: U+0000 … U+10FFFF without the surrogates.
    static var allScalars: some Sequence<Unicode.Scalar> {
        (0...0x10FFFF).lazy.compactMap { Unicode.Scalar(UInt32($0)) }
    }

    @Test func whiteSpaceIsUnicodesWhiteSpaceProperty() {
        var disagreeing: [UInt32] = []
        for scalar in Self.allScalars where scalar.isWhiteSpace != scalar.properties.isWhitespace {
            disagreeing.append(scalar.value)
        }
        #expect(disagreeing.isEmpty, "disagree with properties.isWhitespace: \(disagreeing.map { String($0, radix: 16) })")
    }

    @Test func controlIsGeneralCategoryCc() {
        var disagreeing: [UInt32] = []
        for scalar in Self.allScalars where scalar.isControl != (scalar.properties.generalCategory == .control) {
            disagreeing.append(scalar.value)
        }
        #expect(disagreeing.isEmpty, "disagree with generalCategory == .control: \(disagreeing.map { String($0, radix: 16) })")
    }

    @Test func formatIsGeneralCategoryCf() {
        var disagreeing: [UInt32] = []
        for scalar in Self.allScalars where scalar.isFormat != (scalar.properties.generalCategory == .format) {
            disagreeing.append(scalar.value)
        }
        #expect(disagreeing.isEmpty, "disagree with generalCategory == .format: \(disagreeing.map { String($0, radix: 16) })")
    }

    @Test func asciiClassesAreCharactersOwn() {
        for byte in UInt8.min...UInt8.max {
            let character = Character(Unicode.Scalar(byte))
            let ascii = byte < 0x80
            #expect(byte.isASCIILetter == (ascii && character.isLetter), "\(byte)")
            #expect(byte.isASCIIDigit == (ascii && character.isNumber), "\(byte)")
            #expect(byte.isASCIIHexDigit == (ascii && character.isHexDigit), "\(byte)")
        }
        #expect("a-b.C9".isASCII(alphanumericOr: "-."))
        #expect(!"a_b".isASCII(alphanumericOr: "-."))
        #expect(!"é".isASCII(alphanumericOr: ""))
    }

    @Test(arguments: [0, 7, 9, 10, 99, 100, 4_294_967_295, 1 << 53, UInt64.max - 1, UInt64.max])
    func decimalIsStringsOwn(_ value: UInt64) {
        #expect(String(decimal: value) == String(value))
    }

    @Test(arguments: ["", " ", "\t\r\n", "\u{A0}\u{2028}\u{3000}"])
    func blankIsWhiteSpaceOnly(_ text: String) {
        #expect(text.isBlank)
    }

    @Test(arguments: ["x", " x ", "\u{200B}", "\u{1F511}", "\0"])
    func notBlankWithAnythingElse(_ text: String) {
        #expect(!text.isBlank)
    }

    @Test func trimmingUsesTheSameClass() {
        #expect("\u{3000}\t a b \u{2029}\n".trimmingWhitespace() == "a b")
        #expect(" \u{85} ".trimmingWhitespace() == "")
        #expect("\u{200B}x\u{200B}".trimmingWhitespace() == "\u{200B}x\u{200B}")
    }
}
