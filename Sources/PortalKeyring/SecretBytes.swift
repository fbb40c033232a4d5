#if canImport(Glibc)
import Glibc
#endif

/// Heap memory holding secret bytes (a CST or a serialized session document).
///
/// The bytes are overwritten with zeros before the memory is released, so the library never
/// frees a token it owns without wiping it first (SPEC §5). Immutable after creation, so it is
/// safe to share between threads.
final class SecretBytes: @unchecked Sendable {
    let count: Int
    private let base: UnsafeMutablePointer<UInt8>

    /// Copies `bytes` into fresh memory.
    init(copying bytes: UnsafeRawBufferPointer) {
        count = bytes.count
        base = .allocate(capacity: max(count, 1))
        if count > 0, let src = bytes.baseAddress {
            base.update(from: src.assumingMemoryBound(to: UInt8.self), count: count)
        }
    }

    /// `count` bytes written by `fill` (which must write all of them) straight into wiped memory.
    init(count: Int, _ fill: (UnsafeMutableBufferPointer<UInt8>) -> Void) {
        self.count = count
        base = .allocate(capacity: max(count, 1))
        base.initialize(repeating: 0, count: max(count, 1))
        fill(UnsafeMutableBufferPointer(start: base, count: count))
    }

    /// Copies the UTF-8 of `string`.
    static func copyingUTF8(of string: String) -> SecretBytes {
        var s = string
        return s.withUTF8 { SecretBytes(copying: UnsafeRawBufferPointer($0)) }
    }

    deinit {
        SecretBytes.wipe(UnsafeMutableRawPointer(base), count)
        base.deallocate()
    }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// The bytes as a Swift `String` (the caller asked for a String; that copy cannot be wiped).
    func string() -> String {
        String(decoding: UnsafeBufferPointer(start: base, count: count), as: UTF8.self)
    }

    /// Zeroes `count` bytes at `pointer` in a way the optimizer cannot elide.
    static func wipe(_ pointer: UnsafeMutableRawPointer?, _ count: Int) {
        guard let pointer, count > 0 else { return }
        explicit_bzero(pointer, count)
    }
}
