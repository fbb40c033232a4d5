#if canImport(Glibc)
import Glibc
#endif

/// A value guarded by a `pthread_mutex_t`, with the `withLock` shape of `Synchronization.Mutex`.
///
/// Package-wide: the Swift API module's `async` calls use it too. Used instead of `Mutex` for the
/// core's shared state: on Linux, `Mutex` locks with raw futex calls that ThreadSanitizer does not
/// see, so the slow fault suite's `swift test --sanitize=thread` reported the exactly-once state of
/// `InvalidationCenter` as a data race under 16 contending threads although every access was inside
/// the lock. A pthread mutex is what the sanitizer models. Not recursive; never call back into the
/// same lock from `body`.
///
/// `Value` is never empty (`Void`): the sanitizer then places the value's access on the object's
/// first word, which `withLock` reads unlocked to find the value, and reported a race between two
/// threads that both held the lock (a `Lock<Void>` in `WatchLoop`; the report's symbolizer then
/// kept the slow checks' test run from ending). `scripts/check-sources.sh` refuses one.
package final class Lock<Value>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var value: Value

    package init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
