import CJsmn
#if canImport(Glibc)
import Glibc
#endif

/// A JSON text read in place: jsmn tokenizes the caller's bytes without allocating
/// or copying them, and this type checks what jsmn lets through, so that a text is accepted only
/// when it is exactly one RFC 8259 value — at least as strict as JSONDecoder:
///
/// - one top-level value, surrounded by JSON whitespace only: an object, an array or a string
///   (a bare number or literal is refused, which RFC 8259 allows);
/// - between the tokens of an array or object exactly one `,` (and `:` after a key), no trailing
///   comma, no comment, no single quote;
/// - literals spelled `true`, `false`, `null`; numbers as the grammar says (no `+`, no leading
///   zero, no `.5`, no `1.`);
/// - strings: no byte below 0x20, only the escapes `\" \\ \/ \b \f \n \r \t \uXXXX`, surrogates
///   in pairs, `\u0000` kept as a byte, the bytes valid UTF-8;
/// - nesting at most `maximumDepth` deep.
///
/// Reading is linear in the text's length (docs/security.md, "A planted oversized item": a planted `{"a":0,"a":0,…}` of
/// 0.5 MB took seconds): jsmn keeps parent links (cjsmn.h), the nesting is bounded before jsmn runs
/// (its walk up at a closing bracket is then at most `maximumDepth` steps), every check below is
/// one pass over the tokens and the text between them, and a decoder looking up many members
/// indexes the object once (`membersByKey`). What may be large is capped by the caller before it
/// gets here: a stored document (`SessionDocument`), a Portal API answer (`PortalAuth.maxAnswerBytes`).
///
/// - no object naming a key twice: JSONDecoder would pick one silently, and a stored document or
///   an answer with two tokens or two end users is not ours to guess.
///
/// Values are read through `JSONText.Value`, valid only inside `read`'s body: nothing of the
/// input is copied unless asked (`string()`, or `unescape(into:)` straight into a wiped buffer).
enum JSONText {
    /// Why a text was refused; the message says where (a byte offset), never what.
    struct Failure: Error, Equatable {
        let message: String
    }

    /// The deepest nesting accepted (arrays and objects).
    static let maximumDepth = 32

    /// Reads `bytes` as one JSON value and hands it to `body`; throws `Failure` for a text that
    /// is not one, or what `body` throws.
    static func read<R>(_ bytes: UnsafeRawBufferPointer, _ body: (Value) throws -> R) throws -> R {
        let text = bytes.bindMemory(to: UInt8.self)
        guard let base = bytes.baseAddress, !text.isEmpty, text.count < Int(Int32.max) else {
            throw Failure(message: "empty or oversized text")
        }
        if let meter = pthread_getspecific(meterKey) { meter.assumingMemoryBound(to: Int.self).pointee += text.count }
        // The nesting first: jsmn's walk up to the open container at each closing bracket is as
        // long as the nesting is deep, so `[[[…]]]` of n brackets would cost n² steps.
        if let at = Self.firstTooDeep(text) {
            throw Failure(message: "nested deeper than \(JSONText.maximumDepth) at \(at)")
        }
        let chars = base.assumingMemoryBound(to: CChar.self)
        var parser = jsmn_parser()
        jsmn_init(&parser)
        let needed = jsmn_parse(&parser, chars, text.count, nil, 0)
        guard needed > 0 else { throw Failure(message: "not a JSON value (\(needed))") }
        var tokens = [jsmntok_t](repeating: jsmntok_t(), count: Int(needed))
        jsmn_init(&parser)
        let count = tokens.withUnsafeMutableBufferPointer { jsmn_parse(&parser, chars, text.count, $0.baseAddress, UInt32($0.count)) }
        guard count == needed else { throw Failure(message: "not a JSON value (\(count))") }
        // jsmn's strict mode ends a number or literal only at a separator, so a bare one at the
        // very end of the text would be refused and one followed by a space accepted: a bare
        // top-level number or literal is refused either way (no answer of ours is one).
        guard tokens[0].type != JSMN_PRIMITIVE else { throw Failure(message: "a bare number or literal at the top level") }
        let document = Document(text: text, tokens: tokens)
        let end = try document.check(0, depth: 0)
        guard end == tokens.count, document.isBlank(document.rawEnd(0), text.count),
              document.isBlank(0, document.rawStart(0)) else {
            throw Failure(message: "more than one value, or text around it")
        }
        return try body(Value(document: document, index: 0))
    }

    /// Where an array or object opens deeper than `maximumDepth` (a byte offset), nil when none
    /// does: one pass, counting the brackets outside strings (a backslash skips the byte after it).
    /// For a valid text this is the nesting `check` sees; an invalid one is refused either way.
    static func firstTooDeep(_ text: UnsafeBufferPointer<UInt8>) -> Int? {
        var depth = 0
        var inString = false
        var i = 0
        while i < text.count {
            let byte = text[i]
            if inString {
                if byte == UInt8(ascii: "\\") { i += 1 } else if byte == UInt8(ascii: "\"") { inString = false }
            } else {
                switch byte {
                case UInt8(ascii: "\""): inString = true
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                    if depth > maximumDepth { return i }
                case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
                default: break
                }
            }
            i += 1
        }
        return nil
    }

    /// How many bytes `read` was given on this thread while `body` ran: a measure of the work
    /// done (each read is a fixed number of linear passes), for tests that a text is read once,
    /// or not at all when a cap refuses it first.
    static func bytesRead(during body: () throws -> Void) rethrows -> Int {
        var count = 0
        let previous = pthread_getspecific(meterKey)
        try withUnsafeMutablePointer(to: &count) { pointer in
            pthread_setspecific(meterKey, pointer)
            defer { pthread_setspecific(meterKey, previous) }
            try body()
        }
        return count
    }

    private static let meterKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// What kind of value a token holds.
    enum Kind: Equatable { case object, array, string, number, bool, null }

    /// One value of a text being read.
    struct Value {
        fileprivate let document: Document
        fileprivate let index: Int

        var kind: Kind { document.kind(index) }

        /// The value of `key`; nil when absent or when this is not an object.
        func member(_ key: String) -> Value? {
            guard kind == .object else { return nil }
            var found: Int?
            let wanted = Array(key.utf8)
            document.forEachChild(index) { keyIndex in
                if document.stringEquals(keyIndex, wanted) { found = keyIndex + 1 }
            }
            return found.map { Value(document: document, index: $0) }
        }

        /// Each member's value by its key's unescaped bytes, in one pass over the object (keys
        /// are unique: `read` refuses a key named twice); empty when this is not an object. For a
        /// caller that looks up many keys: `member` looks through the whole object each time.
        var membersByKey: [[UInt8]: Value] {
            guard kind == .object else { return [:] }
            var members: [[UInt8]: Value] = [:]
            document.forEachChild(index) { members[document.unescaped($0)] = Value(document: document, index: $0 + 1) }
            return members
        }

        /// The keys of an object in order (unescaped), or [] when this is not an object.
        var keys: [String] {
            guard kind == .object else { return [] }
            var keys: [String] = []
            document.forEachChild(index) { keys.append(String(decoding: document.unescaped($0), as: UTF8.self)) }
            return keys
        }

        /// The elements of an array, or [] when this is not an array.
        var elements: [Value] {
            guard kind == .array else { return [] }
            var elements: [Value] = []
            document.forEachChild(index) { elements.append(Value(document: document, index: $0)) }
            return elements
        }

        /// A string's text (a copy: for what is not secret), nil when this is not a string.
        var string: String? {
            guard kind == .string else { return nil }
            return String(decoding: document.unescaped(index), as: UTF8.self)
        }

        /// A string's byte count once unescaped, nil when this is not a string.
        var unescapedCount: Int? {
            guard kind == .string else { return nil }
            return document.unescapedCount(index)
        }

        /// Writes a string's unescaped bytes into `out` (exactly `unescapedCount` bytes): a
        /// secret goes from the caller's wiped input to the caller's wiped buffer, no copy between.
        func unescape(into out: UnsafeMutableRawBufferPointer) {
            guard kind == .string else { return }
            document.unescape(index, into: out)
        }

        /// A number as the nearest `Double` (finite); nil when this is not a number.
        var double: Double? {
            guard kind == .number else { return nil }
            let token = document.tokens[index]
            return Double(String(decoding: document.text[Int(token.start)..<Int(token.end)], as: UTF8.self)).flatMap { $0.isFinite ? $0 : nil }
        }

        /// `true` or `false`; nil for anything else.
        var bool: Bool? {
            guard kind == .bool else { return nil }
            return document.byte(document.tokens[index].start) == UInt8(ascii: "t")
        }

        var isNull: Bool { kind == .null }

        /// An integer number that fits an `Int64`; nil for a fraction, an exponent, an overflow or
        /// anything that is not a number.
        var int64: Int64? {
            guard kind == .number else { return nil }
            return document.integer(index)
        }
    }

    /// The tokens of one text and the checks and reads over them.
    fileprivate struct Document {
        let text: UnsafeBufferPointer<UInt8>
        let tokens: [jsmntok_t]

        func byte(_ offset: Int32) -> UInt8 { text[Int(offset)] }

        func kind(_ index: Int) -> Kind {
            let token = tokens[index]
            switch token.type {
            case JSMN_OBJECT: return .object
            case JSMN_ARRAY: return .array
            case JSMN_STRING: return .string
            default:
                switch byte(token.start) {
                case UInt8(ascii: "t"), UInt8(ascii: "f"): return .bool
                case UInt8(ascii: "n"): return .null
                default: return .number
                }
            }
        }

        /// Where a token's text starts and ends, its quotes included.
        func rawStart(_ index: Int) -> Int { Int(tokens[index].start) - (tokens[index].type == JSMN_STRING ? 1 : 0) }
        func rawEnd(_ index: Int) -> Int { Int(tokens[index].end) + (tokens[index].type == JSMN_STRING ? 1 : 0) }

        /// Whether text[from..<to] is JSON whitespace only.
        func isBlank(_ from: Int, _ to: Int) -> Bool {
            guard from <= to else { return false }
            return text[from..<to].allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        }

        /// Whether text[from..<to] is whitespace, exactly one `separator`, whitespace.
        func isSeparator(_ from: Int, _ to: Int, _ separator: UInt8) -> Bool {
            guard from < to, let at = text[from..<to].firstIndex(of: separator) else { return false }
            return isBlank(from, at) && isBlank(at + 1, to)
        }

        /// Checks the value at `index` and everything in it; returns the index after its subtree.
        func check(_ index: Int, depth: Int) throws(Failure) -> Int {
            guard index < tokens.count else { throw Failure(message: "truncated") }
            let token = tokens[index]
            let start = rawStart(index)
            switch token.type {
            case JSMN_STRING:
                try checkString(index)
                return index + 1
            case JSMN_PRIMITIVE:
                try checkPrimitive(index)
                return index + 1
            case JSMN_OBJECT, JSMN_ARRAY:
                guard depth < JSONText.maximumDepth else { throw Failure(message: "nested deeper than \(JSONText.maximumDepth) at \(start)") }
                let object = token.type == JSMN_OBJECT
                var next = index + 1
                var previousEnd = start + 1
                var keys = Set<[UInt8]>()
                for child in 0..<Int(token.size) {
                    guard next < tokens.count else { throw Failure(message: "truncated at \(start)") }
                    let gapOK = child == 0 ? isBlank(previousEnd, rawStart(next)) : isSeparator(previousEnd, rawStart(next), UInt8(ascii: ","))
                    guard gapOK else { throw Failure(message: "expected a value or ',' at \(previousEnd)") }
                    if object {
                        guard tokens[next].type == JSMN_STRING, tokens[next].size == 1 else {
                            throw Failure(message: "expected a key at \(rawStart(next))")
                        }
                        try checkString(next)
                        guard keys.insert(unescaped(next)).inserted else {
                            throw Failure(message: "a key named twice at \(rawStart(next))")
                        }
                        let valueIndex = next + 1
                        guard valueIndex < tokens.count, isSeparator(rawEnd(next), rawStart(valueIndex), UInt8(ascii: ":")) else {
                            throw Failure(message: "expected ':' at \(rawEnd(next))")
                        }
                        next = try check(valueIndex, depth: depth + 1)
                        previousEnd = rawEnd(valueIndex)
                    } else {
                        let element = next
                        next = try check(element, depth: depth + 1)
                        previousEnd = rawEnd(element)
                    }
                }
                // Nothing but whitespace before the closing bracket (no trailing comma).
                guard isBlank(previousEnd, Int(token.end) - 1),
                      byte(token.end - 1) == (object ? UInt8(ascii: "}") : UInt8(ascii: "]")) else {
                    throw Failure(message: "expected '\(object ? "}" : "]")' at \(previousEnd)")
                }
                return next
            default:
                throw Failure(message: "not a JSON value at \(start)")
            }
        }

        /// Calls `body` with the index of each child (each key, for an object) of a container.
        func forEachChild(_ index: Int, _ body: (Int) -> Void) {
            var next = index + 1
            for _ in 0..<Int(tokens[index].size) {
                body(next)
                if tokens[index].type == JSMN_OBJECT { next += 1 }  // the value after the key
                next = skip(next)
            }
        }

        /// The index after the subtree at `index`.
        func skip(_ index: Int) -> Int {
            var next = index + 1
            switch tokens[index].type {
            case JSMN_OBJECT:
                for _ in 0..<Int(tokens[index].size) { next = skip(next + 1) }
            case JSMN_ARRAY:
                for _ in 0..<Int(tokens[index].size) { next = skip(next) }
            default:
                break
            }
            return next
        }

        private func checkPrimitive(_ index: Int) throws(Failure) {
            let token = tokens[index]
            let span = Array(text[Int(token.start)..<Int(token.end)])
            if span == Array("true".utf8) || span == Array("false".utf8) || span == Array("null".utf8) { return }
            guard Self.isNumber(span) else { throw Failure(message: "not a literal or number at \(token.start)") }
        }

        /// RFC 8259's number: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
        static func isNumber(_ span: [UInt8]) -> Bool {
            var i = 0
            func digits() -> Int {
                let from = i
                while i < span.count, (0x30...0x39).contains(span[i]) { i += 1 }
                return i - from
            }
            if i < span.count, span[i] == UInt8(ascii: "-") { i += 1 }
            guard i < span.count else { return false }
            if span[i] == UInt8(ascii: "0") { i += 1 } else if digits() == 0 { return false }
            if i < span.count, span[i] == UInt8(ascii: ".") {
                i += 1
                guard digits() > 0 else { return false }
            }
            if i < span.count, span[i] == UInt8(ascii: "e") || span[i] == UInt8(ascii: "E") {
                i += 1
                if i < span.count, span[i] == UInt8(ascii: "+") || span[i] == UInt8(ascii: "-") { i += 1 }
                guard digits() > 0 else { return false }
            }
            return i == span.count
        }

        /// A string's escapes, control bytes, surrogates and UTF-8 (by decoding it once).
        private func checkString(_ index: Int) throws(Failure) {
            let token = tokens[index]
            var valid = true
            walk(index) { unit in if unit == nil { valid = false } }
            guard valid else { throw Failure(message: "invalid string at \(token.start)") }
            // The unescaped bytes must be UTF-8 (an escape can only make valid scalars).
            guard isUTF8(index) else {
                throw Failure(message: "a string that is not UTF-8 at \(token.start)")
            }
        }

        /// Whether the string's unescaped bytes are UTF-8 (no overlong form, surrogate or value
        /// above U+10FFFF), checked as they come: no copy of a string that may be a secret.
        private func isUTF8(_ index: Int) -> Bool {
            var need = 0
            var low: UInt8 = 0x80, high: UInt8 = 0xBF
            var ok = true
            walk(index) { unit in
                guard ok, let byte = unit else { ok = false; return }
                if need == 0 {
                    switch byte {
                    case 0x00...0x7F: break
                    case 0xC2...0xDF: need = 1
                    case 0xE0: (need, low) = (2, 0xA0)
                    case 0xE1...0xEC, 0xEE...0xEF: need = 2
                    case 0xED: (need, high) = (2, 0x9F)
                    case 0xF0: (need, low) = (3, 0x90)
                    case 0xF1...0xF3: need = 3
                    case 0xF4: (need, high) = (3, 0x8F)
                    default: ok = false
                    }
                } else {
                    guard byte >= low, byte <= high else { ok = false; return }
                    (low, high) = (0x80, 0xBF)
                    need -= 1
                }
            }
            return ok && need == 0
        }

        /// Calls `emit` with each unescaped byte of the string at `index`, or with nil (once, then
        /// stops) at the first control byte, bad escape or lone surrogate.
        func walk(_ index: Int, _ emit: (UInt8?) -> Void) {
            let token = tokens[index]
            var i = Int(token.start)
            let end = Int(token.end)
            func hex4(_ at: Int) -> UInt32? {
                guard at + 4 <= end else { return nil }
                var value: UInt32 = 0
                for byte in text[at..<(at + 4)] {
                    let digit: UInt32
                    switch byte {
                    case 0x30...0x39: digit = UInt32(byte - 0x30)
                    case 0x41...0x46: digit = UInt32(byte - 0x41 + 10)
                    case 0x61...0x66: digit = UInt32(byte - 0x61 + 10)
                    default: return nil
                    }
                    value = value << 4 | digit
                }
                return value
            }
            while i < end {
                let byte = text[i]
                if byte < 0x20 { emit(nil); return }
                guard byte == UInt8(ascii: "\\") else {
                    emit(byte)
                    i += 1
                    continue
                }
                guard i + 1 < end else { emit(nil); return }
                let escape = text[i + 1]
                i += 2
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): emit(escape)
                case UInt8(ascii: "b"): emit(0x08)
                case UInt8(ascii: "f"): emit(0x0C)
                case UInt8(ascii: "n"): emit(0x0A)
                case UInt8(ascii: "r"): emit(0x0D)
                case UInt8(ascii: "t"): emit(0x09)
                case UInt8(ascii: "u"):
                    guard var scalar = hex4(i) else { emit(nil); return }
                    i += 4
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard i + 6 <= end, text[i] == UInt8(ascii: "\\"), text[i + 1] == UInt8(ascii: "u"),
                              let low = hex4(i + 2), (0xDC00...0xDFFF).contains(low) else { emit(nil); return }
                        i += 6
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        emit(nil)
                        return
                    }
                    for unit in UTF8.encode(Unicode.Scalar(scalar)!)! { emit(unit) }  // trusted: not a surrogate, ≤ 0x10FFFF
                default:
                    emit(nil)
                    return
                }
            }
        }

        func unescapedCount(_ index: Int) -> Int {
            var count = 0
            walk(index) { _ in count += 1 }
            return count
        }

        func unescape(_ index: Int, into out: UnsafeMutableRawBufferPointer) {
            var at = 0
            walk(index) { unit in
                guard let unit, at < out.count else { return }
                out[at] = unit
                at += 1
            }
        }

        func unescaped(_ index: Int) -> [UInt8] {
            var bytes: [UInt8] = []
            walk(index) { unit in if let unit { bytes.append(unit) } }
            return bytes
        }

        func stringEquals(_ index: Int, _ wanted: [UInt8]) -> Bool { unescaped(index) == wanted }

        /// An integer that fits Int64, read from the number's text; nil otherwise.
        func integer(_ index: Int) -> Int64? {
            let token = tokens[index]
            var i = Int(token.start)
            let end = Int(token.end)
            let negative = text[i] == UInt8(ascii: "-")
            if negative { i += 1 }
            guard i < end else { return nil }
            var value: Int64 = 0
            while i < end {
                let byte = text[i]
                guard (0x30...0x39).contains(byte) else { return nil }  // a fraction or an exponent
                let digit = Int64(byte - 0x30)
                let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = negative ? times.subtractingReportingOverflow(digit) : times.addingReportingOverflow(digit)
                guard !overflow1, !overflow2 else { return nil }
                value = sum
                i += 1
            }
            return value
        }
    }
}
