import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// Tells a session watch (`WatchLoop`) that a file keyring may have changed: an inotify watch on
/// the keyring's directory, dispatched on the watch's main context. A writer replaces the file
/// (a new file renamed over it: `IN_MOVED_TO`) or writes it in place (libsecret: `IN_CLOSE_WRITE`);
/// either, or its deletion, under the keyring's own name counts. Like a Secret Service signal it
/// is only a hint: the watch reads the keyring again and compares (so the lock file beside it, or
/// another app's write that changes nothing of ours, gives no event).
///
/// The directory is created (mode 0700, as the first persist would) when missing, so a watch
/// started before the first sign-in sees it. When the keyring's path is a symbolic link (its
/// writers replace the file it leads to: `FileKeyringFile.target`), the directory of that file is
/// watched too, for that file's name. Costs one descriptor; nothing runs while nothing changes.
final class FileKeyringMonitor {
    private let descriptor: Int32
    private var source: UnsafeMutablePointer<GSource>?
    /// Each inotify watch and the name in its directory that counts.
    private var names: [(watch: Int32, name: [UInt8])] = []
    private let changed: () -> Void

    /// Starts watching `path`'s directory on `context`; `changed` runs there on each event.
    init(path: String, context: OpaquePointer, changed: @escaping () -> Void) throws(StorageFailure) {
        do throws(FileKeyringError) {
            try FileKeyringFile.makeDirectory(of: path)
        } catch {
            throw .fileKeyring("\(path): the session watch cannot create its directory: \(error)")
        }
        self.changed = changed
        descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else {
            throw .fileKeyring("\(path): the session watch cannot watch it: inotify: \(String(cString: strerror(errno)))")
        }
        // A link that leads nowhere now is watched by its own name only: the reads say why.
        var files = [path]
        if let target = try? FileKeyringFile.target(of: path), target != path { files.append(target) }
        let events = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE)
        for file in files {
            let directory = FileKeyringFile.directory(of: file)
            let watch = inotify_add_watch(descriptor, directory, events)
            guard watch >= 0 else {
                let reason = String(cString: strerror(errno))
                close(descriptor)
                throw .fileKeyring("\(path): the session watch cannot watch \(directory): \(reason)")
            }
            let name = file.lastIndex(of: "/").map { String(file[file.index(after: $0)...]) } ?? file
            names.append((watch, Array(name.utf8)))
        }
        let source: UnsafeMutablePointer<GSource> = g_unix_fd_source_new(descriptor, G_IO_IN)  // GLib aborts rather than NULL
        let callback: GUnixFDSourceFunc = { _, _, data in
            guard let data else { return 0 }
            Unmanaged<FileKeyringMonitor>.fromOpaque(data).takeUnretainedValue().drain()
            return 1  // G_SOURCE_CONTINUE
        }
        g_source_set_callback(source, unsafeBitCast(callback, to: GSourceFunc.self), Unmanaged.passUnretained(self).toOpaque(), nil)
        g_source_attach(source, context)
        self.source = source
    }

    /// Stops watching; call on the context's thread (the watch thread's teardown) before release.
    func stop() {
        guard let source else { return }
        g_source_destroy(source)
        g_source_unref(source)
        self.source = nil
        close(descriptor)
    }

    deinit { stop() }

    /// Reads every queued event; `changed` once when any names the keyring.
    private func drain() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var hit = false
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count <= 0 { break }  // EAGAIN: nothing more queued
            var offset = 0
            let header = MemoryLayout<inotify_event>.size
            while offset + header <= count {
                let watch = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: Int32.self) }
                let length = buffer.withUnsafeBytes { Int($0.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)) }
                let end = min(offset + header + length, count)
                // The name is NUL-padded to `length` bytes.
                let raw = Array(buffer[(offset + header)..<end].prefix(while: { $0 != 0 }))
                if names.contains(where: { $0.watch == watch && $0.name == raw }) { hit = true }
                offset += header + length
            }
        }
        if hit { changed() }
    }
}
