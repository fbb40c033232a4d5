import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// The pipe the Secret portal writes the master secret into: its write end goes to the portal
/// with `RetrieveSecret` (a `GUnixFDList` holds a copy), ours is closed once the call is
/// answered, and the read end is read only after `Response` 0 (on failure gnome-keyring never
/// closes its end: a read before the answer could wait for nothing).
final class SecretPipe {
    /// Why the pipe could not be made or read; the caller words it.
    struct Failure: Error { let message: String }

    private(set) var readEnd: Int32
    private(set) var writeEnd: Int32

    init() throws(Failure) {
        var ends: [Int32] = [-1, -1]
        var error: UnsafeMutablePointer<GError>?
        // pipe2 with O_CLOEXEC (Swift's Glibc module does not declare it).
        guard g_unix_open_pipe(&ends, FD_CLOEXEC, &error) != 0 else {
            let message = error.flatMap { $0.pointee.message.map { String(cString: $0) } } ?? "failed"
            if let error { g_error_free(error) }
            throw Failure(message: "pipe: " + message)
        }
        readEnd = ends[0]
        writeEnd = ends[1]
        // Read without blocking: `read(exactly:until:)` waits with poll, bounded.
        _ = fcntl(readEnd, F_SETFL, fcntl(readEnd, F_GETFL) | O_NONBLOCK)
    }

    deinit {
        closeWriteEnd()
        if readEnd >= 0 { close(readEnd) }
    }

    /// A list holding a copy of the write end, for the call's `h` argument 0. The caller unrefs it.
    func fdList() throws(Failure) -> UnsafeMutablePointer<GUnixFDList> {
        let list = g_unix_fd_list_new()!  // trusted: GLib allocates or aborts, never NULL
        var error: UnsafeMutablePointer<GError>?
        guard g_unix_fd_list_append(list, writeEnd, &error) == 0 else {
            let message = error.flatMap { $0.pointee.message.map { String(cString: $0) } } ?? "could not pass the pipe"
            if let error { g_error_free(error) }
            g_object_unref(list)
            throw Failure(message: message)
        }
        return list
    }

    /// Closes this process's copy of the write end: once the portal's copies are closed too,
    /// the read end sees the end of the secret.
    func closeWriteEnd() {
        guard writeEnd >= 0 else { return }
        close(writeEnd)
        writeEnd = -1
    }

    /// Exactly `count` bytes from the pipe, read before `end` or until `cancellable` is cancelled.
    /// The writer has written them all by the time its `Response` 0 is sent, so this returns as
    /// soon as `count` bytes are there and nothing follows them.
    /// Fewer bytes before the end of the stream or the deadline, or more than `count`: a failure
    /// (the bytes read are wiped).
    func read(exactly count: Int, until end: MonotonicInstant,
              _ cancellable: UnsafeMutablePointer<GCancellable>) throws(Failure) -> SecretBytes {
        var got = 0
        var failure: String?
        // One byte more than wanted, to see a writer that sends more.
        let buffer = SecretBytes(count: count + 1) { out in
            while got <= count {
                let n = Glibc.read(readEnd, out.baseAddress! + got, count + 1 - got)  // trusted: count + 1 > 0, our own buffer
                if n > 0 {
                    got += n
                    continue
                }
                if n == 0 { break }  // the end of the stream: every writer closed its end
                if errno == EINTR { continue }
                guard errno == EAGAIN || errno == EWOULDBLOCK else {
                    failure = "read: " + String(cString: strerror(errno))
                    break
                }
                if got == count { break }  // all there, nothing more written
                if end.hasPassed || g_cancellable_is_cancelled(cancellable) != 0 {
                    failure = "\(got) of \(count) bytes came before the deadline"
                    break
                }
                // Wake up at least every 100 ms to notice a cancellation.
                var ready = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
                let slice = min(end, MonotonicInstant.now.advanced(byMilliseconds: 100))
                _ = poll(&ready, 1, Int32(clamping: slice.remainingMilliseconds))
            }
        }
        if let failure { throw Failure(message: failure) }
        guard got == count else {
            throw Failure(message: got > count ? "more than \(count) bytes were sent" : "only \(got) of \(count) bytes were sent")
        }
        return buffer.withUnsafeBytes { SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[..<count])) }
    }
}
