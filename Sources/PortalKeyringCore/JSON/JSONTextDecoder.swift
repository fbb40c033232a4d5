/// `Decodable` over `JSONText`: the standard library's `Decoder` protocol, so the
/// answers' wire types keep their declarations while the library needs no Foundation. Reads
/// only; `userInfo` is empty. Numbers: integers must fit the type exactly (no rounding, no
/// wrapping), floating point from the number's text. `SecretField` decodes a string straight
/// into `SecretBytes`.
struct JSONTextDecoder: Decoder {
    let value: JSONText.Value
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// Decodes `bytes` (one JSON text) as `T`; throws `JSONText.Failure` or a `DecodingError`.
    static func decode<T: Decodable>(_ type: T.Type, from bytes: UnsafeRawBufferPointer) throws -> T {
        try JSONText.read(bytes) { root in try T(from: JSONTextDecoder(value: root, codingPath: [])) }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard value.kind == .object else { throw Self.mismatch("an object", codingPath) }
        return KeyedDecodingContainer(Keyed<Key>(object: value, members: value.membersByKey, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard value.kind == .array else { throw Self.mismatch("an array", codingPath) }
        return Unkeyed(elements: value.elements, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { Single(value: value, codingPath: codingPath) }

    static func mismatch(_ wanted: String, _ path: [any CodingKey]) -> DecodingError {
        DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "expected \(wanted)"))
    }

    /// A leaf value as one of the standard library's primitive types.
    static func primitive<T>(_ value: JSONText.Value, _ type: T.Type, _ path: [any CodingKey]) throws -> T {
        let result: Any?
        switch type {
        case is Bool.Type: result = value.bool
        case is String.Type: result = value.string
        case is Double.Type: result = value.double
        case is Float.Type: result = value.double.flatMap { Float(exactly: $0) ?? Float($0) }.flatMap { $0.isFinite ? $0 : nil }
        case is Int.Type: result = value.int64.flatMap { Int(exactly: $0) }
        case is Int8.Type: result = value.int64.flatMap { Int8(exactly: $0) }
        case is Int16.Type: result = value.int64.flatMap { Int16(exactly: $0) }
        case is Int32.Type: result = value.int64.flatMap { Int32(exactly: $0) }
        case is Int64.Type: result = value.int64
        case is UInt.Type: result = value.int64.flatMap { UInt(exactly: $0) }
        case is UInt8.Type: result = value.int64.flatMap { UInt8(exactly: $0) }
        case is UInt16.Type: result = value.int64.flatMap { UInt16(exactly: $0) }
        case is UInt32.Type: result = value.int64.flatMap { UInt32(exactly: $0) }
        case is UInt64.Type: result = value.int64.flatMap { UInt64(exactly: $0) }
        default: result = nil
        }
        guard let typed = result as? T else { throw mismatch("\(T.self)", path) }
        return typed
    }

    private struct Key: CodingKey {
        let stringValue: String
        let intValue: Int?
        init(stringValue: String) { self.stringValue = stringValue; intValue = nil }
        init(intValue: Int) { stringValue = String(intValue); self.intValue = intValue }
    }

    /// An object's members, indexed once when the container is made: a type that decodes every
    /// key (a `Dictionary`) would otherwise look through the whole object for each one, n² steps.
    private struct Keyed<K: CodingKey>: KeyedDecodingContainerProtocol {
        let object: JSONText.Value
        let members: [[UInt8]: JSONText.Value]
        let codingPath: [any CodingKey]
        var allKeys: [K] { object.keys.compactMap { K(stringValue: $0) } }

        func contains(_ key: K) -> Bool { members[Array(key.stringValue.utf8)] != nil }

        private func member(_ key: K) throws -> JSONText.Value {
            guard let value = members[Array(key.stringValue.utf8)] else {
                throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no \(key.stringValue)"))
            }
            return value
        }

        func decodeNil(forKey key: K) throws -> Bool { try member(key).isNull }
        func decode(_ type: Bool.Type, forKey key: K) throws -> Bool { try primitive(type, key) }
        func decode(_ type: String.Type, forKey key: K) throws -> String { try primitive(type, key) }
        func decode(_ type: Double.Type, forKey key: K) throws -> Double { try primitive(type, key) }
        func decode(_ type: Float.Type, forKey key: K) throws -> Float { try primitive(type, key) }
        func decode(_ type: Int.Type, forKey key: K) throws -> Int { try primitive(type, key) }
        func decode(_ type: Int8.Type, forKey key: K) throws -> Int8 { try primitive(type, key) }
        func decode(_ type: Int16.Type, forKey key: K) throws -> Int16 { try primitive(type, key) }
        func decode(_ type: Int32.Type, forKey key: K) throws -> Int32 { try primitive(type, key) }
        func decode(_ type: Int64.Type, forKey key: K) throws -> Int64 { try primitive(type, key) }
        func decode(_ type: UInt.Type, forKey key: K) throws -> UInt { try primitive(type, key) }
        func decode(_ type: UInt8.Type, forKey key: K) throws -> UInt8 { try primitive(type, key) }
        func decode(_ type: UInt16.Type, forKey key: K) throws -> UInt16 { try primitive(type, key) }
        func decode(_ type: UInt32.Type, forKey key: K) throws -> UInt32 { try primitive(type, key) }
        func decode(_ type: UInt64.Type, forKey key: K) throws -> UInt64 { try primitive(type, key) }

        func decode<T: Decodable>(_ type: T.Type, forKey key: K) throws -> T {
            let value = try member(key)
            // A secret goes from the answer's (wiped) bytes straight into SecretBytes: no String,
            // no array in between.
            if T.self == SecretField.self {
                guard let count = value.unescapedCount else { throw JSONTextDecoder.mismatch("a string", codingPath + [key]) }
                return SecretField(bytes: SecretBytes(count: count) { value.unescape(into: UnsafeMutableRawBufferPointer($0)) }) as! T  // trusted: T is SecretField
            }
            return try T(from: JSONTextDecoder(value: value, codingPath: codingPath + [key]))
        }

        private func primitive<T>(_ type: T.Type, _ key: K) throws -> T {
            try JSONTextDecoder.primitive(try member(key), type, codingPath + [key])
        }

        func nestedContainer<N: CodingKey>(keyedBy type: N.Type, forKey key: K) throws -> KeyedDecodingContainer<N> {
            try JSONTextDecoder(value: try member(key), codingPath: codingPath + [key]).container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: K) throws -> any UnkeyedDecodingContainer {
            try JSONTextDecoder(value: try member(key), codingPath: codingPath + [key]).unkeyedContainer()
        }

        func superDecoder() throws -> any Decoder { try superDecoder(forKey: K(stringValue: "super")!) }  // trusted: every CodingKey takes a string

        func superDecoder(forKey key: K) throws -> any Decoder {
            JSONTextDecoder(value: try member(key), codingPath: codingPath + [key])
        }
    }

    private struct Unkeyed: UnkeyedDecodingContainer {
        let elements: [JSONText.Value]
        let codingPath: [any CodingKey]
        var currentIndex = 0
        var count: Int? { elements.count }
        var isAtEnd: Bool { currentIndex >= elements.count }

        private mutating func next() throws -> (JSONText.Value, [any CodingKey]) {
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(Any.self, .init(codingPath: codingPath, debugDescription: "no more elements"))
            }
            defer { currentIndex += 1 }
            return (elements[currentIndex], codingPath + [Key(intValue: currentIndex)])
        }

        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd else { return false }
            if elements[currentIndex].isNull { currentIndex += 1; return true }
            return false
        }

        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let (value, path) = try next()
            return try T(from: JSONTextDecoder(value: value, codingPath: path))
        }

        mutating func nestedContainer<N: CodingKey>(keyedBy type: N.Type) throws -> KeyedDecodingContainer<N> {
            let (value, path) = try next()
            return try JSONTextDecoder(value: value, codingPath: path).container(keyedBy: type)
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            let (value, path) = try next()
            return try JSONTextDecoder(value: value, codingPath: path).unkeyedContainer()
        }

        mutating func superDecoder() throws -> any Decoder {
            let (value, path) = try next()
            return JSONTextDecoder(value: value, codingPath: path)
        }
    }

    private struct Single: SingleValueDecodingContainer {
        let value: JSONText.Value
        let codingPath: [any CodingKey]

        func decodeNil() -> Bool { value.isNull }
        func decode<T: Decodable>(_ type: T.Type) throws -> T {
            switch type {
            case is Bool.Type, is String.Type, is Double.Type, is Float.Type, is Int.Type, is Int8.Type, is Int16.Type,
                 is Int32.Type, is Int64.Type, is UInt.Type, is UInt8.Type, is UInt16.Type, is UInt32.Type, is UInt64.Type:
                return try JSONTextDecoder.primitive(value, type, codingPath)
            default:
                return try T(from: JSONTextDecoder(value: value, codingPath: codingPath))
            }
        }
    }
}

/// A string field of an answer that holds a secret (a CST, a user JWT): `JSONTextDecoder` reads it
/// straight into `SecretBytes`. Any other decoder goes through a `String`, wiped in place after.
struct SecretField: Decodable, @unchecked Sendable {
    let bytes: SecretBytes

    init(bytes: SecretBytes) { self.bytes = bytes }

    init(from decoder: any Decoder) throws {
        var text = try decoder.singleValueContainer().decode(String.self)
        bytes = SecretBytes.copyingUTF8(of: text)
        SecretBytes.wipeStorage(of: &text)
    }
}
