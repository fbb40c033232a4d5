#if canImport(Glibc)
import Glibc
#endif

/// Memory holding secret bytes (a CST, an API key, a serialized session document, a response
/// body).
///
/// The bytes live in their own anonymous pages (`mmap`), marked `MADV_DONTDUMP` so that a core
/// dump of the host process leaves them out, and are overwritten with zeros before the pages are
/// unmapped: the library never releases a token it owns without wiping it first (SPEC §5), and
/// nothing of it goes back to the allocator's free lists. Immutable after creation (except
/// `Growable`), so it is safe to share between threads.
final class SecretBytes: @unchecked Sendable {
    let count: Int
    private let base: UnsafeMutablePointer<UInt8>
    private let mapped: Int

    /// Copies `bytes` into fresh memory.
    convenience init(copying bytes: UnsafeRawBufferPointer) {
        self.init(count: bytes.count) { out in
            if let src = bytes.baseAddress, bytes.count > 0 {
                UnsafeMutableRawPointer(out.baseAddress!).copyMemory(from: src, byteCount: bytes.count)
            }
        }
    }

    /// `count` bytes written by `fill` (which must write all of them) straight into wiped memory.
    init(count: Int, _ fill: (UnsafeMutableBufferPointer<UInt8>) -> Void) {
        self.count = count
        (base, mapped) = SecretBytes.allocatePages(count)
        fill(UnsafeMutableBufferPointer(start: base, count: count))
    }

    /// Copies the UTF-8 of `string`.
    static func copyingUTF8(of string: String) -> SecretBytes {
        var s = string
        return s.withUTF8 { SecretBytes(copying: UnsafeRawBufferPointer($0)) }
    }

    deinit {
        SecretBytes.releasePages(base, mapped, wiping: count)
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

    /// Zeroes the UTF-8 storage of `string` in place, where the string owns heap storage (a
    /// native string longer than 15 bytes; a shorter one lives inline, in registers or on the
    /// stack, and is left alone). For strings this library made from a secret it was given (a C
    /// argument) and that nothing reads afterwards: every other holder of the same storage sees
    /// zeros. A bridged or shared-literal string is not touched.
    static func wipeStorage(of string: inout String) {
        guard string.utf8.count > 15, string.isContiguousUTF8 else { return }
        string.withUTF8 { wipe(UnsafeMutableRawPointer(mutating: $0.baseAddress), $0.count) }
    }

    // MARK: - Pages

    private static let pageSize = max(Int(sysconf(Int32(_SC_PAGESIZE))), 4096)

    /// Zeroed pages for `count` bytes (at least one page), excluded from core dumps. Falls back
    /// to the heap when mmap fails (`mapped` is then 0).
    private static func allocatePages(_ count: Int) -> (UnsafeMutablePointer<UInt8>, Int) {
        let length = (max(count, 1) + pageSize - 1) / pageSize * pageSize
        let address = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        if let address, address != MAP_FAILED {
            _ = madvise(address, length, MADV_DONTDUMP)
            return (address.assumingMemoryBound(to: UInt8.self), length)
        }
        let heap = UnsafeMutablePointer<UInt8>.allocate(capacity: max(count, 1))
        heap.initialize(repeating: 0, count: max(count, 1))
        return (heap, 0)
    }

    private static func releasePages(_ base: UnsafeMutablePointer<UInt8>, _ mapped: Int, wiping count: Int) {
        wipe(UnsafeMutableRawPointer(base), count)
        if mapped > 0 {
            munmap(UnsafeMutableRawPointer(base), mapped)
        } else {
            base.deallocate()
        }
    }

    /// A byte buffer that grows (a response body being received) without leaving copies: each
    /// growth copies into new pages and wipes the old ones. Not thread-safe (one transfer).
    final class Growable {
        private(set) var count = 0
        private var base: UnsafeMutablePointer<UInt8>
        private var mapped: Int
        private var capacity: Int

        init(capacity: Int = 4096) {
            (base, mapped) = SecretBytes.allocatePages(capacity)
            self.capacity = mapped > 0 ? mapped : max(capacity, 1)
        }

        func append(_ bytes: UnsafeRawBufferPointer) {
            guard let source = bytes.baseAddress, bytes.count > 0 else { return }
            if count + bytes.count > capacity {
                var newCapacity = capacity
                while newCapacity < count + bytes.count { newCapacity *= 2 }
                let (newBase, newMapped) = SecretBytes.allocatePages(newCapacity)
                newBase.update(from: base, count: count)
                SecretBytes.releasePages(base, mapped, wiping: count)
                (base, mapped) = (newBase, newMapped)
                capacity = newMapped > 0 ? newMapped : newCapacity
            }
            UnsafeMutableRawPointer(base + count).copyMemory(from: source, byteCount: bytes.count)
            count += bytes.count
        }

        /// The bytes received so far, as `SecretBytes` (one copy; this buffer is wiped on deinit).
        func freeze() -> SecretBytes {
            SecretBytes(copying: UnsafeRawBufferPointer(start: base, count: count))
        }

        deinit {
            SecretBytes.releasePages(base, mapped, wiping: count)
        }
    }
}

/// `SecretBytes.wipeStorage(of:)` for the C exports: wipes, in place, the heap storage of a
/// String the caller made from a secret C argument and no longer reads.
@_spi(PortalKeyringC)
public func wipeStringStorage(_ string: inout String) {
    SecretBytes.wipeStorage(of: &string)
}
