// JSONTextFuzz.swift — libFuzzer target for the library's JSON reader (`JSONText`,
// Sources/PortalKeyringCore/JSON/JSONText.swift: jsmn plus our checks).
//
// Built by Tests/fuzz/run.sh together with the PortalKeyringCore sources as one module. The oracle is
// a second, independent reader written here from RFC 8259 and JSONText's documented rules
// (depth at most JSONText.maximumDepth containers, no key named twice in an object, `\u0000`
// kept, invalid UTF-8 and lone surrogates refused, no bare number or literal at the top level). For every input, besides "no crash, no trap,
// nothing reported by ASan":
//  - JSONText accepts exactly what the reference accepts;
//  - an accepted text reads back as the reference's tree: kinds, object keys in order, array
//    elements, every string's unescaped bytes (through `unescape(into:)`, the secrets' path),
//    `true`/`false`, and numbers: `int64` is the exact value of an integer that fits, `double`
//    the nearest finite Double;
//  - `member(key)` finds every key of an object, and reading is deterministic;
//  - reading is linear in the text: the input, taken as a unit, is repeated
//    into a text of about 4 KiB and one 16 times longer — as the elements of an array when the
//    unit is a value, else as the members of an object (`"a":0` gives the planted
//    `{"a":0,"a":0,…}`) — and the long one must cost at most 8 times as much CPU time per byte
//    (a quadratic reader costs about 16 times; runs under 30 ms are noise, not judged). Checked
//    on the first 64 inputs of a run (every committed seed on replay) and one in 512 after.
#if canImport(Glibc)
import Glibc
#endif

private func violation(_ what: String) -> Never {
    fputs("JSONTextFuzz: invariant violated: \(what)\n", stderr)
    abort()
}

/// The reference's tree.
private indirect enum Node: Equatable {
    case object([([UInt8], Node)])
    case array([Node])
    case string([UInt8])
    case number([UInt8])
    case bool(Bool)
    case null

    static func == (a: Node, b: Node) -> Bool {
        switch (a, b) {
        case let (.object(x), .object(y)):
            return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case let (.array(x), .array(y)): return x == y
        case let (.string(x), .string(y)): return x == y
        case let (.number(x), .number(y)): return x == y
        case let (.bool(x), .bool(y)): return x == y
        case (.null, .null): return true
        default: return false
        }
    }
}

/// RFC 8259 by recursive descent, with JSONText's extra rules.
private struct Reference {
    let b: UnsafeRawBufferPointer
    var i = 0

    init(_ bytes: UnsafeRawBufferPointer) { b = bytes }

    mutating func document() -> Node? {
        skipBlank()
        // JSONText refuses a bare top-level number or literal (documented there).
        guard i < b.count, b[i] == UInt8(ascii: "{") || b[i] == UInt8(ascii: "[") || b[i] == UInt8(ascii: "\"") else { return nil }
        guard let value = value(depth: 0) else { return nil }
        skipBlank()
        return i == b.count ? value : nil
    }

    mutating func skipBlank() {
        while i < b.count, b[i] == 0x20 || b[i] == 0x09 || b[i] == 0x0A || b[i] == 0x0D { i += 1 }
    }

    mutating func literal(_ word: String) -> Bool {
        let w = Array(word.utf8)
        guard b.count - i >= w.count, (0..<w.count).allSatisfy({ b[i + $0] == w[$0] }) else { return false }
        i += w.count
        return true
    }

    mutating func value(depth: Int) -> Node? {
        guard i < b.count else { return nil }
        switch b[i] {
        case UInt8(ascii: "{"):
            guard depth < JSONText.maximumDepth else { return nil }
            i += 1
            var members: [([UInt8], Node)] = []
            skipBlank()
            if i < b.count, b[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
            while true {
                skipBlank()
                guard let key = string() else { return nil }
                if members.contains(where: { $0.0 == key }) { return nil }
                skipBlank()
                guard i < b.count, b[i] == UInt8(ascii: ":") else { return nil }
                i += 1
                skipBlank()
                guard let v = value(depth: depth + 1) else { return nil }
                members.append((key, v))
                skipBlank()
                guard i < b.count else { return nil }
                if b[i] == UInt8(ascii: ",") { i += 1; continue }
                if b[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
                return nil
            }
        case UInt8(ascii: "["):
            guard depth < JSONText.maximumDepth else { return nil }
            i += 1
            var elements: [Node] = []
            skipBlank()
            if i < b.count, b[i] == UInt8(ascii: "]") { i += 1; return .array(elements) }
            while true {
                skipBlank()
                guard let v = value(depth: depth + 1) else { return nil }
                elements.append(v)
                skipBlank()
                guard i < b.count else { return nil }
                if b[i] == UInt8(ascii: ",") { i += 1; continue }
                if b[i] == UInt8(ascii: "]") { i += 1; return .array(elements) }
                return nil
            }
        case UInt8(ascii: "\""):
            return string().map { .string($0) }
        case UInt8(ascii: "t"): return literal("true") ? .bool(true) : nil
        case UInt8(ascii: "f"): return literal("false") ? .bool(false) : nil
        case UInt8(ascii: "n"): return literal("null") ? .null : nil
        default:
            return number().map { .number($0) }
        }
    }

    mutating func digits() -> Int {
        let from = i
        while i < b.count, b[i] >= 0x30, b[i] <= 0x39 { i += 1 }
        return i - from
    }

    mutating func number() -> [UInt8]? {
        let from = i
        if i < b.count, b[i] == UInt8(ascii: "-") { i += 1 }
        guard i < b.count else { return nil }
        if b[i] == UInt8(ascii: "0") { i += 1 } else if digits() == 0 { return nil }
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            guard digits() > 0 else { return nil }
        }
        if i < b.count, b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E") {
            i += 1
            if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") { i += 1 }
            guard digits() > 0 else { return nil }
        }
        return Array(b[from..<i])
    }

    mutating func hex4() -> UInt32? {
        guard b.count - i >= 4 else { return nil }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = b[i]
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            default: return nil
            }
            v = v * 16 + d
            i += 1
        }
        return v
    }

    /// A string token's unescaped bytes; nil when it is not a valid string.
    mutating func string() -> [UInt8]? {
        guard i < b.count, b[i] == UInt8(ascii: "\"") else { return nil }
        i += 1
        var out: [UInt8] = []
        while true {
            guard i < b.count else { return nil }
            let c = b[i]
            if c == UInt8(ascii: "\"") { i += 1; return out }
            if c < 0x20 { return nil }
            if c == UInt8(ascii: "\\") {
                i += 1
                guard i < b.count else { return nil }
                let e = b[i]
                i += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    guard var scalar = hex4() else { return nil }
                    if scalar >= 0xDC00 && scalar <= 0xDFFF { return nil }
                    if scalar >= 0xD800 && scalar <= 0xDBFF {
                        guard b.count - i >= 2, b[i] == UInt8(ascii: "\\"), b[i + 1] == UInt8(ascii: "u") else { return nil }
                        i += 2
                        guard let low = hex4(), low >= 0xDC00, low <= 0xDFFF else { return nil }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    out.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
                default: return nil
                }
                continue
            }
            // Raw UTF-8: one well-formed sequence (Unicode Table 3-7).
            let need: Int, low: UInt8, high: UInt8
            switch c {
            case 0x00...0x7F: need = 0; low = 0x80; high = 0xBF
            case 0xC2...0xDF: need = 1; low = 0x80; high = 0xBF
            case 0xE0: need = 2; low = 0xA0; high = 0xBF
            case 0xE1...0xEC, 0xEE...0xEF: need = 2; low = 0x80; high = 0xBF
            case 0xED: need = 2; low = 0x80; high = 0x9F
            case 0xF0: need = 3; low = 0x90; high = 0xBF
            case 0xF1...0xF3: need = 3; low = 0x80; high = 0xBF
            case 0xF4: need = 3; low = 0x80; high = 0x8F
            default: return nil
            }
            guard b.count - i > need else { return nil }
            for k in 0..<need {
                let x = b[i + 1 + k]
                if k == 0 { guard x >= low && x <= high else { return nil } } else { guard x >= 0x80 && x <= 0xBF else { return nil } }
            }
            out.append(contentsOf: b[i...(i + need)])
            i += need + 1
        }
    }
}

/// JSONText's reading of `value`, as the reference's tree; `raw` gives number spellings in order.
private func tree(_ value: JSONText.Value, numbers: inout [(Int64?, Double?)]) -> Node {
    switch value.kind {
    case .object:
        return .object(value.keys.map { key in
            guard let member = value.member(key) else { violation("member(\(key.utf8.count)-byte key) not found") }
            return (Array(key.utf8), tree(member, numbers: &numbers))
        })
    case .array:
        return .array(value.elements.map { tree($0, numbers: &numbers) })
    case .string:
        guard let count = value.unescapedCount else { violation("a string without a count") }
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            value.unescape(into: UnsafeMutableRawBufferPointer(buffer))
            initialized = count
        }
        return .string(bytes)
    case .number:
        numbers.append((value.int64, value.double))
        return .number([])
    case .bool:
        guard let flag = value.bool else { violation("a bool without a value") }
        return .bool(flag)
    case .null:
        return .null
    }
}

/// The reference's tree with number spellings replaced by [] (compared separately), and the
/// spellings in document order.
private func numbersOut(_ node: Node, _ spellings: inout [[UInt8]]) -> Node {
    switch node {
    case .object(let members): return .object(members.map { ($0.0, numbersOut($0.1, &spellings)) })
    case .array(let elements): return .array(elements.map { numbersOut($0, &spellings) })
    case .number(let spelling): spellings.append(spelling); return .number([])
    default: return node
    }
}

private func threadCPUNanoseconds() -> Int {
    var now = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
    return now.tv_sec * 1_000_000_000 + now.tv_nsec
}

/// `unit` repeated `count` times, joined by commas, in brackets or braces.
private func repeated(_ unit: UnsafeRawBufferPointer, _ count: Int, asMembers: Bool) -> [UInt8] {
    var text: [UInt8] = [asMembers ? UInt8(ascii: "{") : UInt8(ascii: "[")]
    text.reserveCapacity(count * (unit.count + 1) + 2)
    for index in 0..<count {
        if index > 0 { text.append(UInt8(ascii: ",")) }
        text.append(contentsOf: unit)
    }
    text.append(asMembers ? UInt8(ascii: "}") : UInt8(ascii: "]"))
    return text
}

/// The linear-time property (see the header) for `unit`.
private func checkLinearTime(_ unit: UnsafeRawBufferPointer) {
    guard !unit.isEmpty, unit.count <= 1024 else { return }
    let isValue = (try? JSONText.read(unit) { _ in true }) == true
    let shortCount = max(1, 4096 / (unit.count + 1))
    let short = repeated(unit, shortCount, asMembers: !isValue)
    let long = repeated(unit, shortCount * 16, asMembers: !isValue)
    func nanoseconds(_ text: [UInt8]) -> Int {
        text.withUnsafeBytes { bytes in
            let start = threadCPUNanoseconds()
            _ = try? JSONText.read(bytes) { $0.kind }
            return max(threadCPUNanoseconds() - start, 1)
        }
    }
    let shortPerByte = Double((0..<3).map { _ in nanoseconds(short) }.min()!) / Double(short.count)
    var runs: [Int] = []
    for _ in 0..<3 {
        let time = nanoseconds(long)
        runs.append(time)
        if time < 30_000_000 || Double(time) / Double(long.count) <= 8 * shortPerByte { return }
    }
    violation("reading is not linear: \(short.count) B at \(shortPerByte) ns/B, \(long.count) B in \(runs) ns "
              + "(\(Double(runs.min()!) / Double(long.count)) ns/B)")
}

private nonisolated(unsafe) var executions = 0

@_cdecl("LLVMFuzzerTestOneInput")
public func jsonTextFuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size)
    executions += 1
    if executions <= 64 || executions % 512 == 0 { checkLinearTime(input) }
    var reference = Reference(input)
    let expected = reference.document()
    var numbers: [(Int64?, Double?)] = []
    let got: Node? = try? JSONText.read(input) { tree($0, numbers: &numbers) }
    switch (expected, got) {
    case (nil, nil):
        return 0
    case (nil, .some):
        violation("JSONText accepted a text the reference refuses")
    case (.some, nil):
        violation("JSONText refused a text the reference accepts")
    case let (.some(want), .some(have)):
        var spellings: [[UInt8]] = []
        guard numbersOut(want, &spellings) == have else { violation("the tree read differs from the reference's") }
        guard spellings.count == numbers.count else { violation("number count differs") }
        for (spelling, (int64, double)) in zip(spellings, numbers) {
            let text = String(decoding: spelling, as: UTF8.self)
            if int64 != Int64(text) { violation("int64 of a number differs from Int64(spelling)") }
            let nearest = Double(text).flatMap { $0.isFinite ? $0 : nil }
            if double != nearest { violation("double of a number differs from Double(spelling)") }
        }
        var again: [(Int64?, Double?)] = []
        guard let second = try? JSONText.read(input, { tree($0, numbers: &again) }), second == have else {
            violation("reading is not deterministic")
        }
    }
    return 0
}
