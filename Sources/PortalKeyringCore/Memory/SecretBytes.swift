#if canImport(Glibc)
import Glibc
#endif

/// Memory holding secret bytes (a CST, an API key, a serialized session document, a response
/// body).
///
/// The bytes live in anonymous memory marked `MADV_DONTDUMP`, so that a core dump of the host
/// process leaves them out: a slot of `SecretPool` for small secrets, pages of their own for
/// larger ones. They are overwritten with zeros before the memory is reused or unmapped: the
/// library never releases a token it owns without wiping it first (docs/api.md#ownership), and nothing of it
/// goes to the C allocator's free lists. Immutable after creation (except
/// `Growable`), so it is safe to share between threads.
final class SecretBytes: @unchecked Sendable {
    let count: Int
    private let base: UnsafeMutablePointer<UInt8>
    private let mapped: Int

    /// Copies `bytes` into fresh memory.
    convenience init(copying bytes: UnsafeRawBufferPointer) {
        self.init(count: bytes.count) { out in
            if let src = bytes.baseAddress, bytes.count > 0 {
                UnsafeMutableRawPointer(out.baseAddress!).copyMemory(from: src, byteCount: bytes.count)  // trusted: our own buffer of bytes.count > 0 bytes
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

    /// Zeroed memory for `count` bytes, excluded from core dumps: a slot of `SecretPool` for up
    /// to `SecretPool.slotSize` bytes (`mapped` is then `pooled`), else pages of its own. Falls
    /// back to the heap when mmap fails (`mapped` is then 0).
    private static func allocatePages(_ count: Int) -> (UnsafeMutablePointer<UInt8>, Int) {
        if count <= SecretPool.slotSize, let slot = SecretPool.take() {
            return (slot.assumingMemoryBound(to: UInt8.self), pooled)
        }
        let length = (max(count, 1) + pageSize - 1) / pageSize * pageSize
        let address = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        if let address, address != MAP_FAILED {
            _ = madvise(address, length, MADV_DONTDUMP)
            SecretPool.lock(address, length)  // munmap unlocks
            return (address.assumingMemoryBound(to: UInt8.self), length)
        }
        let heap = UnsafeMutablePointer<UInt8>.allocate(capacity: max(count, 1))
        heap.initialize(repeating: 0, count: max(count, 1))
        return (heap, 0)
    }

    /// `mapped` of memory that is a `SecretPool` slot.
    private static let pooled = -1

    private static func releasePages(_ base: UnsafeMutablePointer<UInt8>, _ mapped: Int, wiping count: Int) {
        if mapped == pooled {
            SecretPool.give(UnsafeMutableRawPointer(base))  // wipes the whole slot
            return
        }
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
            self.capacity = mapped > 0 ? mapped : max(capacity, 1)  // a pool slot holds `capacity`
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

/// Slots for small secrets (tokens, API keys, session documents: at most `slotSize` bytes) in
/// shared anonymous chunks marked `MADV_DONTDUMP`, so that a `SecretBytes` costs no system call:
/// a page of its own is three (mmap, madvise, munmap: about 7 µs, and a restore makes five).
/// A slot is wiped whole when it is given back, before it can be handed out again; chunks are
/// never unmapped (the pool is as large as the most small secrets alive at once, 128 per
/// 64 KiB chunk). Chunks (and the pages of larger secrets) are also locked in RAM (`mlock`), as
/// libsecret's secure memory is, so that a token is never written to swap — within
/// `RLIMIT_MEMLOCK`: once the limit is reached, memory is used unlocked (still excluded from
/// core dumps and wiped), and `lockedBytes`/`unlockedBytes` say how much of each. Thread-safe (one `Lock`, held across fork() by an atfork handler so that
/// a child never inherits it locked).
enum SecretPool {
    static let slotSize = 512
    private static let chunkSize = 64 * 1024

    /// The slots free to hand out.
    private static let available: Lock<[UnsafeMutableRawPointer]> = {
        let available = Lock<[UnsafeMutableRawPointer]>([])
        pthread_atfork({ SecretPool.available.lockBeforeFork() },
                       { SecretPool.available.unlockAfterFork(inChild: false) },
                       { SecretPool.available.unlockAfterFork(inChild: true) })
        return available
    }()

    /// A zeroed slot of `slotSize` bytes, or nil when no chunk can be mapped.
    static func take() -> UnsafeMutableRawPointer? {
        available.withLock { freeSlots in take(from: &freeSlots) }
    }

    private static func take(from freeSlots: inout [UnsafeMutableRawPointer]) -> UnsafeMutableRawPointer? {
        if freeSlots.isEmpty {
            let address = mmap(nil, chunkSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
            guard let address, address != MAP_FAILED else { return nil }
            _ = madvise(address, chunkSize, MADV_DONTDUMP)
            lock(address, chunkSize)
            freeSlots.reserveCapacity(freeSlots.count + chunkSize / slotSize)
            for index in stride(from: chunkSize / slotSize - 1, through: 0, by: -1) {
                freeSlots.append(address + index * slotSize)
            }
        }
        return freeSlots.popLast()
    }

    /// `mlock` of secret memory; a refusal (the `RLIMIT_MEMLOCK` limit reached, or no limit
    /// granted at all) leaves it unlocked, counted.
    static func lock(_ address: UnsafeMutableRawPointer, _ length: Int) {
        let locked = mlock(address, length) == 0
        totals.withLock { totals in
            if locked { totals.locked += length } else { totals.unlocked += length }
        }
    }

    /// Bytes of secret memory mapped so far that `mlock` accepted, and that it refused (pages of
    /// large secrets count while they are mapped and after; the figures are for diagnostics).
    static var lockedBytes: Int { totals.withLock { $0.locked } }
    static var unlockedBytes: Int { totals.withLock { $0.unlocked } }

    private static let totals = Lock((locked: 0, unlocked: 0))

    /// Wipes a slot from `take()` and makes it available again.
    static func give(_ slot: UnsafeMutableRawPointer) {
        explicit_bzero(slot, slotSize)
        available.withLock { $0.append(slot) }
    }
}

/// How much of the library's secret memory is locked in RAM, for `portal-session status`.
@_spi(PortalKeyringCLI)
public enum SecretMemory {
    /// "locked in RAM (N KiB)", or what is not locked and why.
    public static var summary: String {
        let locked = SecretPool.lockedBytes / 1024, unlocked = SecretPool.unlockedBytes / 1024
        if unlocked == 0 { return "locked in RAM (\(locked) KiB; never swapped)" }
        return "\(unlocked) KiB not locked in RAM (RLIMIT_MEMLOCK reached; may be swapped, still wiped), \(locked) KiB locked"
    }
}

/// `SecretBytes.wipeStorage(of:)` for the C exports: wipes, in place, the heap storage of a
/// String the caller made from a secret C argument and no longer reads.
@_spi(Bindings)
public func wipeStringStorage(_ string: inout String) {
    SecretBytes.wipeStorage(of: &string)
}
