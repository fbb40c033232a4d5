// floor.swift — the Swift-runtime floor for the load-cost figures: a dynamic library
// with one exported C function and nothing else, built exactly as the shipped library is
// (-static-stdlib, lld, --gc-sections, stripped; bench/build-floor.sh). Whatever it costs to load
// and call once is what any Swift library built this way pays before doing any work of its own.
//
// bench_floor_call(text) returns the length of the NUL-terminated `text` counted by Swift's
// String (so the call reaches the runtime's allocator and String code, as a first real call
// does), or -1 when `text` is NULL.

@_cdecl("bench_floor_call")
public func benchFloorCall(_ text: UnsafePointer<CChar>?) -> Int32 {
    guard let text else { return -1 }
    return Int32(truncatingIfNeeded: String(cString: text).count)
}
