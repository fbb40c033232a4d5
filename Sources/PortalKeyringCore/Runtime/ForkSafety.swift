import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// What the keyring adapter does in a child process after `fork()` (docs/providers.md; Python's
/// `multiprocessing` forks by default on Linux).
///
/// Threads do not survive a fork: the child has no deadline thread and no GDBus worker thread,
/// while the parent's connection, proxy and locks are copied as they were. So:
///
/// - The adapter's process-wide objects (`ServiceConnection`, `Deadlines`, `Prompts`) are held in
///   `ProcessLocal` slots: in the child they are created anew on first use (new connection, new
///   deadline thread); the parent's copies are abandoned, never touched.
/// - GLib's GDBus runs every connection's I/O on one shared worker thread ("gdbus") that GLib
///   starts once per process and never restarts. When it existed at the fork (started by this
///   library or by the host application), no D-Bus connection can work in the child: connecting
///   would wait 25 s for a reply that the dead thread never reads. Every keyring call in such a
///   child fails at once with `.unavailable`, naming the cause and the remedies (exec, or
///   multiprocessing's `spawn` or `forkserver` start method).
/// - A child of a process that never used D-Bus works normally.
///
/// The check runs in the parent just before a fork (a `pthread_atfork` prepare handler, installed
/// when the adapter is first used): it looks for a thread named `gdbus` in `/proc/self/task`,
/// a few dozen microseconds per fork. `posix_spawn` and `vfork` (as used by `subprocess`) run no
/// fork handlers and cost nothing.
enum ForkSafety {
    /// Set by the prepare handler (parent, single caller at a time: fork serializes handlers).
    nonisolated(unsafe) private static var gdbusThreadAtFork = false
    /// Set in the child when the GDBus worker thread existed at the fork; inherited by its own children.
    nonisolated(unsafe) private(set) static var dbusUnusable = false

    /// Installs the fork handlers once per process (idempotent, thread-safe).
    static func install() { _ = installed }

    private static let installed: Bool = {
        pthread_atfork({ ForkSafety.gdbusThreadAtFork = ForkSafety.gdbusThreadExists() },
                       nil,
                       {
                           if ForkSafety.gdbusThreadAtFork { ForkSafety.dbusUnusable = true }
                           ProcessLocalRegistry.resetAfterFork()
                       })
        return true
    }()

    /// The failure every keyring call gives in a child that cannot use D-Bus.
    static let childFailure = StorageFailure.unavailable(
        "this process was forked from one that had connected to D-Bus; GLib's D-Bus connections cannot "
            + "work in a fork() child. Use the library after exec, or start child processes with "
            + "Python multiprocessing's 'spawn' or 'forkserver' method")

    /// Whether a thread of this process is named `gdbus` (GLib's shared D-Bus worker).
    private static func gdbusThreadExists() -> Bool {
        guard let directory = opendir("/proc/self/task") else { return true } // unknown: assume it does
        defer { closedir(directory) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let wanted = Array("gdbus\n".utf8)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }  // trusted: d_name is a fixed-size array
            if name.hasPrefix(".") { continue }
            let fd = open("/proc/self/task/\(name)/comm", O_RDONLY | O_CLOEXEC)
            if fd < 0 { continue }
            let count = read(fd, &buffer, buffer.count)
            close(fd)
            if count == wanted.count && buffer[0..<count].elementsEqual(wanted) { return true }
        }
        return false
    }
}

/// One process-wide object that a fork child must not inherit: `get` returns the instance created
/// in this process, creating it on first use (also on first use after a fork).
final class ProcessLocal<Value: AnyObject>: @unchecked Sendable {
    private let value = Lock<Value?>(nil)
    private let make: () -> Value

    init(_ make: @escaping () -> Value) {
        self.make = make
        ProcessLocalRegistry.add(self)
    }

    var get: Value {
        value.withLock { value in
            if let value { return value }
            let created = make()
            value = created
            return created
        }
    }

    /// Called in the child, single-threaded: the lock may have been held by a thread that no longer
    /// exists, and the parent's instance belongs to threads that no longer exist. Both are abandoned
    /// (the instance is leaked, never deinitialized, as its resources are the parent's).
    fileprivate func resetAfterFork() {
        value.resetAfterFork()
        value.withLock { value in
            if let value { _ = Unmanaged.passRetained(value) }
            value = nil
        }
    }
}

/// The `ProcessLocal` slots, reset in a fork child.
private enum ProcessLocalRegistry {
    /// Slots live for the process (they are static); they are never removed.
    private static let slots = Lock<[() -> Void]>([])

    static func add<Value>(_ slot: ProcessLocal<Value>) {
        slots.withLock { $0.append { [unowned slot] in slot.resetAfterFork() } }
    }

    static func resetAfterFork() {
        slots.resetAfterFork()
        for reset in slots.withLock({ $0 }) { reset() }
    }
}
