/// The character classes the argument checks use, decided on scalars and bytes, without the
/// standard library's Unicode property tables: `Unicode.Scalar.properties` and `Character`'s
/// `isWhitespace`/`isNumber`/`isLetter` read tables of about 200 KiB, which the first check
/// would make resident in every process that loads the library (bench/results.md).
/// `TextClassesTests` compares each class with the standard library's over every scalar.
extension Unicode.Scalar {
    /// Unicode's White_Space property (PropList.txt): tab, LF, VT, FF, CR, space, U+0085 (NEL),
    /// U+00A0, U+1680, U+2000–U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
    package var isWhiteSpace: Bool {
        switch value {
        case 0x09...0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000...0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000:
            return true
        default:
            return false
        }
    }

    /// General category Cc: C0 (U+0000–U+001F), DEL, C1 (U+0080–U+009F).
    package var isControl: Bool {
        value < 0x20 || (0x7F...0x9F).contains(value)
    }

    /// General category Cf, format characters: invisible, yet they change how the text around
    /// them is shown — the bidirectional embeddings, overrides and isolates (U+202A–U+202E,
    /// U+2066–U+2069, U+061C, U+200E, U+200F), zero-width characters (U+200B–U+200D, U+2060,
    /// U+FEFF), the soft hyphen, invisible operators, interlinear annotation marks, tag characters.
    package var isFormat: Bool {
        switch value {
        case 0xAD, 0x600...0x605, 0x61C, 0x6DD, 0x70F, 0x890...0x891, 0x8E2, 0x180E, 0x200B...0x200F,
             0x202A...0x202E, 0x2060...0x2064, 0x2066...0x206F, 0xFEFF, 0xFFF9...0xFFFB, 0x110BD, 0x110CD,
             0x13430...0x1343F, 0x1BCA0...0x1BCA3, 0x1D173...0x1D17A, 0xE0001, 0xE0020...0xE007F:
            return true
        default:
            return false
        }
    }

    /// White space or a control character: what a token, header value or URL must not hold.
    package var isWhiteSpaceOrControl: Bool { isWhiteSpace || isControl }
}

extension UInt8 {
    /// A–Z, a–z, 0–9.
    package var isASCIIAlphanumeric: Bool { isASCIILetter || isASCIIDigit }
    package var isASCIILetter: Bool { (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self) }
    package var isASCIIDigit: Bool { (0x30...0x39).contains(self) }
    /// 0–9, A–F, a–f.
    package var isASCIIHexDigit: Bool { isASCIIDigit || (0x41...0x46).contains(self) || (0x61...0x66).contains(self) }
}

extension StringProtocol {
    /// Empty, or white space only (every scalar `isWhiteSpace`).
    package var isBlank: Bool { unicodeScalars.allSatisfy { $0.isWhiteSpace } }

    /// Whether every byte is an ASCII letter or digit or one of `others` (ASCII).
    package func isASCII(alphanumericOr others: String) -> Bool {
        utf8.allSatisfy { $0.isASCIIAlphanumeric || others.utf8.contains($0) }
    }
}

extension String {
    /// Without surrounding Unicode white space (spaces, tabs, line ends, U+00A0, U+2028, …): how a
    /// redirect URL, an enrolment link or a typed email address is read.
    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.isWhiteSpace }),
              let last = scalars.lastIndex(where: { !$0.isWhiteSpace }) else { return "" }
        return String(scalars[first...last])
    }
}
