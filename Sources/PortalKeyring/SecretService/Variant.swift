import CLibSecret

/// GVariant construction and reading for `SecretBus` (GLib's variadic constructors are not
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

    /// The string (or object path) that is child `index` of `tuple`.
    static func string(_ tuple: OpaquePointer, _ index: gsize) -> String {
        let child = g_variant_get_child_value(tuple, index)!
        defer { g_variant_unref(child) }
        return String(cString: g_variant_get_string(child, nil))
    }

    /// The strings (or object paths) of the array that is child `index` of `tuple`.
    static func strings(_ tuple: OpaquePointer, _ index: gsize) -> [String] {
        let array = g_variant_get_child_value(tuple, index)!
        defer { g_variant_unref(array) }
        return (0..<g_variant_n_children(array)).map { string(array, $0) }
    }
}
