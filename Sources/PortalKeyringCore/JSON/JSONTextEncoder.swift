/// `Encodable` to JSON for the request bodies the library sends: flat objects of
/// strings, booleans and integers — what `Encodable` structs with those fields synthesize (an
/// optional that is nil is left out). Anything else (nested values, arrays, floating point)
/// throws `EncodingError.invalidValue`: no body of ours needs it. Keys in the order encoded;
/// strings escaped as RFC 8259 requires (`"`, `\`, and control characters as `\uXXXX` or their
/// short forms), every other character as UTF-8.
struct JSONTextEncoder {
    /// The JSON text of `value`.
    static func encode(_ value: some Encodable) throws -> [UInt8] {
        let object = Object()
        try value.encode(to: Encoder(object: object))
        var out: [UInt8] = [UInt8(ascii: "{")]
        for (index, member) in object.members.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            appendString(member.key, to: &out)
            out.append(UInt8(ascii: ":"))
            out += member.value
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    static func appendString(_ string: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += Array(#"\""#.utf8)
            case UInt8(ascii: "\\"): out += Array(#"\\"#.utf8)
            case 0x0A: out += Array(#"\n"#.utf8)
            case 0x0D: out += Array(#"\r"#.utf8)
            case 0x09: out += Array(#"\t"#.utf8)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out += Array(#"\u00"#.utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// The members encoded so far.
    private final class Object {
        var members: [(key: String, value: [UInt8])] = []
        /// A nested object, which a body never has: each write to it throws.
        let refusing: Bool
        init(refusing: Bool = false) { self.refusing = refusing }
    }

    private static func unsupported(_ what: String, _ path: [any CodingKey]) -> EncodingError {
        EncodingError.invalidValue(what, .init(codingPath: path, debugDescription: "a request body holds only strings, booleans and integers"))
    }

    private struct Encoder: Swift.Encoder {
        let object: Object
        var codingPath: [any CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            KeyedEncodingContainer(Keyed<Key>(object: object))
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer { Refused(codingPath: codingPath) }
        func singleValueContainer() -> any SingleValueEncodingContainer { Refused(codingPath: codingPath) }
    }

    private struct Keyed<K: CodingKey>: KeyedEncodingContainerProtocol {
        let object: Object
        var codingPath: [any CodingKey] { [] }

        private func put(_ key: K, _ value: [UInt8]) throws {
            if object.refusing { throw JSONTextEncoder.unsupported("a nested object", codingPath + [key]) }
            object.members.append((key.stringValue, value))
        }

        mutating func encodeNil(forKey key: K) throws { try put(key, Array("null".utf8)) }
        mutating func encode(_ value: Bool, forKey key: K) throws { try put(key, Array((value ? "true" : "false").utf8)) }
        mutating func encode(_ value: String, forKey key: K) throws {
            var out: [UInt8] = []
            JSONTextEncoder.appendString(value, to: &out)
            try put(key, out)
        }
        mutating func encode(_ value: Int, forKey key: K) throws { try put(key, Array(String(value).utf8)) }
        mutating func encode(_ value: Int64, forKey key: K) throws { try put(key, Array(String(value).utf8)) }
        mutating func encode(_ value: UInt64, forKey key: K) throws { try put(key, Array(String(value).utf8)) }

        mutating func encode<T: Encodable>(_ value: T, forKey key: K) throws {
            switch value {
            case let value as String: try encode(value, forKey: key)
            case let value as Bool: try encode(value, forKey: key)
            case let value as Int: try encode(value, forKey: key)
            case let value as Int64: try encode(value, forKey: key)
            case let value as UInt64: try encode(value, forKey: key)
            default: throw JSONTextEncoder.unsupported("\(T.self)", codingPath + [key])
            }
        }

        mutating func nestedContainer<N: CodingKey>(keyedBy keyType: N.Type, forKey key: K) -> KeyedEncodingContainer<N> {
            KeyedEncodingContainer(Keyed<N>(object: Object(refusing: true)))
        }
        mutating func nestedUnkeyedContainer(forKey key: K) -> any UnkeyedEncodingContainer { Refused(codingPath: codingPath + [key]) }
        mutating func superEncoder() -> any Swift.Encoder { Encoder(object: Object(refusing: true)) }
        mutating func superEncoder(forKey key: K) -> any Swift.Encoder { Encoder(object: Object(refusing: true)) }
    }

    /// Every other shape: each write throws.
    private struct Refused: UnkeyedEncodingContainer, SingleValueEncodingContainer {
        let codingPath: [any CodingKey]
        var count: Int { 0 }

        mutating func encodeNil() throws { throw JSONTextEncoder.unsupported("null", codingPath) }
        mutating func encode<T: Encodable>(_ value: T) throws { throw JSONTextEncoder.unsupported("\(T.self)", codingPath) }
        mutating func nestedContainer<N: CodingKey>(keyedBy keyType: N.Type) -> KeyedEncodingContainer<N> {
            KeyedEncodingContainer(Keyed<N>(object: Object(refusing: true)))
        }
        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
        mutating func superEncoder() -> any Swift.Encoder { Encoder(object: Object(refusing: true)) }
    }
}
