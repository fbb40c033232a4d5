import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring

/// The JSON reader over jsmn: exactly one RFC 8259 value, at least as strict as
/// JSONDecoder; strings unescaped byte-exact; integers without overflow.
@Suite struct JSONTextTests {
    func read<R>(_ text: String, _ body: (JSONText.Value) -> R) throws -> R {
        try bytes(Array(text.utf8), body)
    }

    func bytes<R>(_ bytes: [UInt8], _ body: (JSONText.Value) -> R) throws -> R {
        var copy = bytes
        return try copy.withUnsafeMutableBytes { raw in try JSONText.read(UnsafeRawBufferPointer(raw)) { value in body(value) } }
    }

    func accepts(_ text: String) -> Bool { (try? read(text) { _ in true }) == true }

    @Test(arguments: [
        #"{}"#, #"[]"#, #" { "a" : 1 , "b" : [ true , false , null ] } "#, #"{"a":{"b":{"c":[]}}}"#,
        #"[0, -0, 1.5, -2e10, 3E+2, 4e-2, 123456789012345678901234567890]"#, #"["\"\\\/\b\f\n\r\t\u00e9\ud83d\udd11"]"#,
        "{\"a\":\"caf\u{e9} \u{6f22}\"}", #"{"a":"\u0000"}"#, "\t\n\r {}\n",
    ])
    func acceptsValidText(_ text: String) {
        #expect(accepts(text), "\(text)")
    }

    @Test(arguments: [
        "", " ", "{", "}", "[", "{}{}", "{} []", "[1,]", "[,1]", "[1 2]", "{\"a\":1,}", "{\"a\" 1}", "{\"a\"::1}",
        "{,\"a\":1}", "{'a':1}", "{a:1}", "[01]", "[1.]", "[.5]", "[+1]", "[-]", "[1e]", "[1e+]", "[tru]", "[truex]",
        "[nul]", "[True]", "[NaN]", "[Infinity]", "// c\n{}", "{} // c", "/* c */ {}", "[\"a\nb\"]", "[\"a\tb\"]",
        "[\"\\x\"]", "[\"\\u12\"]", "[\"\\u12G4\"]", "[\"\\ud83d\"]", "[\"\\udd11\"]", "[\"\\ud83d\\u0041\"]", "[\"abc]",
        "{\"a\":1}x", "x{}", "[1]]", "[[1]", "{\"a\":1,\"a\":2}", "[{\"k\":1,\"\\u006b\":2}]",
    ])
    func refusesWhatJSONDecoderRefuses(_ text: String) {
        #expect(!accepts(text), "\(text.debugDescription)")
    }

    /// jsmn's strict mode ends a primitive only at a separator: "1" alone was refused and "1 "
    /// accepted (found by Tests/fuzz/JSONTextFuzz.swift). A bare number or literal is refused
    /// wherever it ends; a bare string is a value.
    @Test func refusesABareNumberOrLiteralWhereverItEnds() {
        for text in ["1", "1 ", " 1", "-0.5e3\n", "true", "false ", " null"] {
            #expect(!accepts(text), "\(text.debugDescription)")
        }
        #expect(accepts(#""s""#) && accepts(#" "s" "#))
    }

    @Test func refusesInvalidUTF8AndBareControlBytes() {
        for bytes: [UInt8] in [[0x5B, 0x22, 0xFF, 0x22, 0x5D], [0x5B, 0x22, 0xC3, 0x22, 0x5D], [0x5B, 0x22, 0xED, 0xA0, 0x80, 0x22, 0x5D],
                               [0x5B, 0x22, 0x01, 0x22, 0x5D], [0x5B, 0x22, 0x7F, 0x22, 0x5D]] {
            let accepted = (try? self.bytes(bytes) { _ in true }) == true
            // DEL (0x7F) is allowed by RFC 8259; every other case is not.
            #expect(accepted == (bytes[2] == 0x7F), "\(bytes)")
        }
    }

    @Test func limitsTheNesting() {
        #expect(accepts(String(repeating: "[", count: 32) + String(repeating: "]", count: 32)))
        #expect(!accepts(String(repeating: "[", count: 33) + String(repeating: "]", count: 33)))
    }

    @Test func readsMembersStringsAndNumbers() throws {
        try read(#"{"s":"a\u0041\n\ud83d\udd11","n":-42,"big":9223372036854775807,"over":9223372036854775808,"f":1.5,"e":1e2,"t":true,"z":null,"k":"only","arr":[1,"2",[3]]}"#) { value in
            #expect(value.kind == .object)
            #expect(value.member("s")?.string == "aA\n\u{1F511}")
            #expect(value.member("s")?.unescapedCount == 7)
            #expect(value.member("n")?.int64 == -42)
            #expect(value.member("big")?.int64 == Int64.max)
            #expect(value.member("over")?.int64 == nil, "an overflow is refused, never wrapped")
            #expect(value.member("f")?.int64 == nil && value.member("e")?.int64 == nil)
            #expect(value.member("t")?.bool == true && value.member("z")?.isNull == true)
            #expect(value.member("k")?.string == "only")
            #expect(value.member("missing") == nil)
            #expect(value.member("arr")?.elements.map(\.kind) == [.number, .string, .array])
            #expect(value.keys.count == 10)
        }
    }

    @Test func unescapesIntoTheCallersBufferAndKeepsNul() throws {
        try read(#"{"c":"a\u0000b\"c"}"#) { value in
            let string = value.member("c")!
            let count = string.unescapedCount!
            var out = [UInt8](repeating: 0xAA, count: count)
            out.withUnsafeMutableBytes { string.unescape(into: $0) }
            #expect(out == [0x61, 0x00, 0x62, 0x22, 0x63], "\\u0000 is kept as a byte, never truncates")
        }
    }
}

/// `Decodable` and `Encodable` without Foundation (JSONTextDecoder, JSONTextEncoder): the shapes
/// the API's answers and our request bodies have.
@Suite struct JSONTextCodingTests {
    struct Answer: Decodable, Equatable {
        struct Inner: Decodable, Equatable { let url: String?; let n: [Int] }
        let name: String
        let count: Int
        let flag: Bool?
        let missing: String?
        let inner: Inner
        let ratio: Double
    }

    func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        let bytes = Array(text.utf8)
        return try bytes.withUnsafeBytes { try JSONTextDecoder.decode(type, from: $0) }
    }

    @Test func decodesStructsOptionalsArraysAndNumbers() throws {
        let answer = try decode(Answer.self, #"{"name":"n\u00e9","count":-3,"flag":null,"inner":{"url":"https:\/\/x","n":[1,2]},"ratio":0.5,"extra":[{}]}"#)
        #expect(answer == Answer(name: "né", count: -3, flag: nil, missing: nil, inner: .init(url: "https://x", n: [1, 2]), ratio: 0.5))
        #expect(try decode([String: Int].self, #"{"a":1,"b":2}"#) == ["a": 1, "b": 2])
    }

    @Test func refusesWrongTypesAndInexactNumbers() throws {
        #expect(throws: (any Error).self) { try decode(Answer.self, #"{"name":1,"count":1,"inner":{"n":[]},"ratio":1}"#) }
        #expect(throws: (any Error).self) { try decode(Answer.self, #"{"name":"n","count":1.5,"inner":{"n":[]},"ratio":1}"#) }
        #expect(throws: (any Error).self) { try decode(Answer.self, #"{"name":"n","count":1,"inner":{"n":[]}}"#) }
        #expect(throws: (any Error).self) { try decode([UInt8].self, "[256]") }
        #expect(throws: (any Error).self) { try decode([Int8].self, "[128]") }
        #expect(try decode([Int8].self, "[-128, 127]") == [-128, 127])
        #expect(throws: (any Error).self) { try decode([Int].self, #"[1,2"#) }
    }

    struct Body: Encodable {
        let email: String
        let templateId: String?
        let isAccountAbstracted: Bool?
        let count: Int
    }

    @Test func encodesFlatBodiesAndLeavesOutNil() throws {
        let text = try JSONTextEncoder.encode(Body(email: "a\"b\\c\n\u{1}é/", templateId: nil, isAccountAbstracted: true, count: 7))
        #expect(String(decoding: text, as: UTF8.self) == #"{"email":"a\"b\\c\n\u0001é/","isAccountAbstracted":true,"count":7}"#)
        // What we send reads back through our own reader.
        let fields = try text.withUnsafeBytes { try JSONText.read($0) { root in root.member("email")?.string } }
        #expect(fields == "a\"b\\c\n\u{1}é/")
    }

    struct Nested: Encodable { let inner: [String: String] }

    @Test func refusesWhatNoBodyHas() {
        #expect(throws: (any Error).self) { try JSONTextEncoder.encode(Nested(inner: ["a": "b"])) }
        #expect(throws: (any Error).self) { try JSONTextEncoder.encode(["a", "b"]) }
        #expect(throws: (any Error).self) { try JSONTextEncoder.encode(1.5) }
    }
}
