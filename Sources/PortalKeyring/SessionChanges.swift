@_spi(Bindings) import PortalKeyringCore

/// `auth.sessionChanges`: a `SessionWatch` as an `AsyncSequence` of `SessionChange` (docs/threading.md).
///
///     for await change in try await auth.sessionChanges {
///         if case .signedIn(let endUserId) = change { showWallet(for: endUserId) }
///     }
///
/// The watch is live when `sessionChanges` returns: every change after that is in the
/// sequence, in order. One consumer: iterate it once. It ends when the iterating task is
/// cancelled (`next()` returns nil and the watch stops: its thread exits), when `cancel()` is
/// called, or when the sequence and its iterator are released. A consumer that falls behind
/// keeps the newest 100 events (the older ones are dropped; the last names the final state).
public struct SessionChanges: AsyncSequence, Sendable {
    public typealias Element = SessionChange
    public typealias Failure = Never

    private let stream: AsyncStream<SessionChange>
    private let running: RunningWatch

    /// The watch and the stream's input; stopping either stops both.
    final class RunningWatch: Sendable {
        let watch: SessionWatch
        let continuation: AsyncStream<SessionChange>.Continuation
        init(_ watch: SessionWatch, _ continuation: AsyncStream<SessionChange>.Continuation) {
            self.watch = watch
            self.continuation = continuation
        }
        func stop() {
            watch.cancel()
            continuation.finish()
        }
        deinit { stop() }
    }

    init(auth: PortalAuth) throws(PortalAuthError) {
        let (stream, continuation) = AsyncStream<SessionChange>.makeStream(bufferingPolicy: .bufferingNewest(100))
        let watch = try SessionWatch(auth: auth) { change in continuation.yield(change) }
        // The iterating task cancelled, or the stream finished: stop the watch thread.
        continuation.onTermination = { _ in watch.cancel() }
        self.stream = stream
        running = RunningWatch(watch, continuation)
    }

    /// Stops the watch; the sequence ends after the events already delivered.
    public func cancel() { running.stop() }

    public func makeAsyncIterator() -> Iterator { Iterator(base: stream.makeAsyncIterator(), running: running) }

    public struct Iterator: AsyncIteratorProtocol {
        public typealias Element = SessionChange
        public typealias Failure = Never
        var base: AsyncStream<SessionChange>.Iterator
        let running: RunningWatch

        /// The next change; nil once the watch stopped or the task was cancelled.
        public mutating func next() async -> SessionChange? { await base.next() }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> SessionChange? {
            await base.next(isolation: actor)
        }
    }
}

extension PortalAuth {
    /// This auth environment's stored-session changes, by any process: a live `SessionWatch` as
    /// an `AsyncSequence` (see `SessionChanges`). Starting it subscribes and reads the baseline
    /// on a library worker thread ("portal-async"), never on the caller's.
    /// - Throws: `.sessionStorageFailure` when there is no session bus; `.cancelled` when the
    ///   task is cancelled while it starts.
    public var sessionChanges: SessionChanges {
        get async throws(PortalAuthError) {
            try await OperationRunner.run(.keyring) { () throws(PortalAuthError) in try SessionChanges(auth: self) }
        }
    }
}
