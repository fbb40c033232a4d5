// portal-session's --json output: one object per command, keys sorted.
import FoundationEssentials

/// A value of a --json object: a string or a boolean (nil values are left out).
enum JSONValue: Encodable, Equatable {
    case string(String)
    case bool(Bool)

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        }
    }
}

/// An object of strings (nil values left out).
func json(_ object: [String: String?]) -> String {
    json(values: object.mapValues { $0.map(JSONValue.string) })
}

/// An object of strings and booleans (nil values left out), keys sorted.
func json(values object: [String: JSONValue?]) -> String {
    // Values keep every character: the encoder escapes C0 controls, and DEL and C1 controls are
    // escaped here, so nothing in the output drives a terminal and a script reads back exactly
    // what was stored.
    let present = object.compactMapValues { $0 }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    let data = (try? encoder.encode(present)) ?? Data("{}".utf8)
    var out = ""
    for scalar in String(decoding: data, as: UTF8.self).unicodeScalars {
        if scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value) {
            let hex = String(scalar.value, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        } else {
            out.unicodeScalars.append(scalar)
        }
    }
    return out
}

/// The keyring description's values for --json: "yes"/"no" of `defaultCollectionLocked` as a
/// JSON boolean, everything else as a string.
func keyringJSONValue(key: String, value: String) -> JSONValue {
    if key == "defaultCollectionLocked", value == "yes" || value == "no" { return .bool(value == "yes") }
    return .string(value)
}

/// Whether the command line asks for --json, read from the raw arguments (a usage error may come
/// before or during parsing): an option "--json" before any "--". A usage error then prints
/// {"status":"usage","message":…} too (Tests/cli/run.sh, "usage and help").
func jsonRequested() -> Bool {
    CommandLine.arguments.dropFirst().prefix { $0 != "--" }.contains("--json")
}
