@_spi(Bindings) import PortalKeyringCore

extension Portal {
    /// `close()` for async code (as C `portal_free_async`, Python `aclose()`): the same steps, but
    /// the wait for the aborted requests (about a second at most) happens on a library worker
    /// thread, so the calling executor — the main actor included — is never blocked. Not
    /// cancellable: once called, the Portal closes. (Not an `async` overload of `close()`: in
    /// async code that would turn every existing `portal.close()` into a compile error.)
    public func closeAsync() async {
        beginClose()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            OperationWorkers.submit {
                self.finishClose()
                done.resume()
            }
        }
    }
}
