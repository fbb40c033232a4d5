import CGLib

/// GVariant construction and reading for `SecretBus` and the file keyring (GLib's variadic constructors are not
/// callable from Swift).
enum Variant {
    /// `G_VARIANT_TYPE(literal)`: a type string is its own `GVariantType`.
    static func type(_ literal: StaticString) -> OpaquePointer {
        OpaquePointer(UnsafeRawPointer(literal.utf8Start))
    }

    static func tuple(_ children: [OpaquePointer?]) -> OpaquePointer {
        var children = children
        return g_variant_new_tuple(&children, gsize(children.count))
    }

    /// `a{ss}`.
    static func stringDictionary(_ pairs: [(String, String)]) -> OpaquePointer {
        var entries: [OpaquePointer?] = pairs.map { g_variant_new_dict_entry(g_variant_new_string($0.0), g_variant_new_string($0.1)) }
        return g_variant_new_array(type("{ss}"), &entries, gsize(entries.count))
    }

    /// `a{sv}`; the values are wrapped in variants.
    static func propertyDictionary(_ pairs: [(String, OpaquePointer?)]) -> OpaquePointer {
        var entries: [OpaquePointer?] = pairs.map { g_variant_new_dict_entry(g_variant_new_string($0.0), g_variant_new_variant($0.1)) }
        return g_variant_new_array(type("{sv}"), &entries, gsize(entries.count))
    }

    /// `ao`.
    static func objectPaths(_ paths: [String]) -> OpaquePointer {
        var children: [OpaquePointer?] = paths.map { g_variant_new_object_path($0) }
        return g_variant_new_array(type("o"), &children, gsize(children.count))
    }

    // MARK: - Reading (every value here may come from another process)
    //
    // A reply to a method call has the type the call asked for (`g_dbus_connection_call` checks
    // it against its reply type before handing it over), but a signal's parameters, the
    // contents of a `v`, and anything read from a file have whatever type their sender chose.
    // So nothing below assumes a type: each reader checks the container, the index and the
    // child's type, and answers nil when they are not what was asked for. No reader traps.

    /// Child `index` of the container `value` (a tuple, array, dictionary entry or variant),
    /// or nil when `value` is not a container or has no such child. The caller unrefs it.
    static func child(_ value: OpaquePointer?, _ index: gsize) -> OpaquePointer? {
        guard let value, g_variant_is_container(value) != 0, index < g_variant_n_children(value) else { return nil }
        return g_variant_get_child_value(value, index)
    }

    /// Whether `value`'s type string is exactly `type`.
    static func has(_ value: OpaquePointer?, type: String) -> Bool {
        guard let value, let string = g_variant_get_type_string(value) else { return false }
        return String(cString: string) == type
    }

    /// The string, object path or signature `value` holds; nil for any other type.
    static func string(_ value: OpaquePointer?) -> String? {
        guard let value,
              g_variant_is_of_type(value, type("s")) != 0 || g_variant_is_of_type(value, type("o")) != 0
                || g_variant_is_of_type(value, type("g")) != 0,
              let bytes = g_variant_get_string(value, nil) else { return nil }
        return String(cString: bytes)
    }

    /// The string (or object path) that is child `index` of `tuple`; nil when there is no such
    /// child or it is not a string.
    static func string(_ tuple: OpaquePointer?, _ index: gsize) -> String? {
        guard let child = child(tuple, index) else { return nil }
        defer { g_variant_unref(child) }
        return string(child)
    }

    /// The strings (or object paths) of the array that is child `index` of `tuple`; nil when
    /// there is no such child or it is not an array of strings.
    static func strings(_ tuple: OpaquePointer?, _ index: gsize) -> [String]? {
        guard let array = child(tuple, index) else { return nil }
        defer { g_variant_unref(array) }
        guard has(array, type: "as") || has(array, type: "ao") else { return nil }
        var result: [String] = []
        for position in 0..<g_variant_n_children(array) {
            guard let string = string(array, position) else { return nil }
            result.append(string)
        }
        return result
    }

    /// The entries of the `a{ss}` value `dictionary`; nil for any other type.
    static func stringDictionary(_ dictionary: OpaquePointer?) -> [String: String]? {
        guard has(dictionary, type: "a{ss}"), let dictionary else { return nil }
        var result: [String: String] = [:]
        for index in 0..<g_variant_n_children(dictionary) {
            guard let entry = child(dictionary, index) else { return nil }
            defer { g_variant_unref(entry) }
            guard let key = string(entry, 0), let value = string(entry, 1) else { return nil }
            result[key] = value
        }
        return result
    }

    /// The value inside the variant `boxed` (type `v`), or nil. The caller unrefs it.
    static func unboxed(_ boxed: OpaquePointer?) -> OpaquePointer? {
        guard has(boxed, type: "v"), let boxed else { return nil }
        return g_variant_get_variant(boxed)
    }

    /// The bytes of the `ay` value `value`, borrowed from it (valid while it lives); nil for any
    /// other type.
    static func bytes(_ value: OpaquePointer?) -> UnsafeRawBufferPointer? {
        guard has(value, type: "ay"), let value else { return nil }
        var count: gsize = 0
        let start = g_variant_get_fixed_array(value, &count, 1)
        return UnsafeRawBufferPointer(start: count == 0 ? nil : start, count: Int(count))
    }

    /// The `u` that is child `index` of `tuple`; nil when there is no such child or it is not a `u`.
    static func uint32(_ tuple: OpaquePointer?, _ index: gsize) -> UInt32? {
        guard let child = child(tuple, index) else { return nil }
        defer { g_variant_unref(child) }
        return has(child, type: "u") ? g_variant_get_uint32(child) : nil
    }

    /// The `t` that is child `index` of `tuple`; nil when there is no such child or it is not a `t`.
    static func uint64(_ tuple: OpaquePointer?, _ index: gsize) -> UInt64? {
        guard let child = child(tuple, index) else { return nil }
        defer { g_variant_unref(child) }
        return has(child, type: "t") ? UInt64(g_variant_get_uint64(child)) : nil
    }
}
