#if canImport(Glibc)
import Glibc
#endif

/// A value guarded by a `pthread_mutex_t`, with the `withLock` shape of `Synchronization.Mutex`,
/// and a condition to wait on for the value to change (`withLock(when:until:_:)`): the library's
/// one lock type for state shared between threads. Between processes the library locks files
/// with `flock` (`PrivateDirectory.lock`, `FileKeyringLock`), never with this.
/// `scripts/check-sources.sh` refuses a `pthread_mutex_`/`pthread_cond_` call, a GLib mutex or a
/// `Mutex<` anywhere else in Sources/.
///
/// Package-wide: the Swift API module's `async` calls and the C ABI's tables use it too. Used
/// instead of `Synchronization.Mutex`: on Linux, `Mutex` locks with raw futex calls that
/// ThreadSanitizer does not see, so the slow fault suite's `swift test --sanitize=thread`
/// reported the exactly-once state of `InvalidationCenter` as a data race under 16 contending
/// threads although every access was inside the lock. GLib's `GMutex`/`GCond` are futex-based
/// too, and the sanitizer reported every access under them as a race as well (seen in the slow
/// fault checks, on `PersistTurn`'s queue). A pthread mutex and condition are what the sanitizer
/// models. Not recursive; never call back into the same lock from `body`.
///
/// The mutex and condition are allocated on the heap, once, and never move: pthread objects must
/// keep their address while in use, which the address of a Swift stored property (`&property`)
/// is not promised to do.
///
/// `Value` is never empty (`Void`): the sanitizer then places the value's access on the object's
/// first word, which `withLock` reads unlocked to find the value, and reported a race between two
/// threads that both held the lock (a `Lock<Void>` in `WatchLoop`; the report's symbolizer then
/// kept the slow checks' test run from ending). `scripts/check-sources.sh` refuses one.
package final class Lock<Value>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    /// Waits measure the monotonic clock, the one `MonotonicInstant` reads (the deadlines').
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var value: Value

    package init(_ value: Value) {
        self.value = value
        mutex.initialize(to: pthread_mutex_t())
        condition.initialize(to: pthread_cond_t())
        pthread_mutex_init(mutex, nil)
        Self.initializeCondition(condition)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    private static func initializeCondition(_ condition: UnsafeMutablePointer<pthread_cond_t>) {
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    /// Runs `body` with exclusive access to the value.
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Takes the lock, waits until `ready` says yes or `end` passes, then runs `body` without
    /// letting go of the lock in between. `ready` is asked at once and after every wake-up
    /// (`broadcast`, `signal`, a spurious one), the lock held; each wait lets go of the lock.
    /// `end`: nil for no end. `body` gets `ready`'s last answer: false only when `end` passed first.
    ///
    /// The value is handed to `ready` and `body` afresh each time, never held across a wait, so
    /// neither sees a copy that another thread changed meanwhile.
    package func withLock<Result, Failure: Error>(
        when ready: (inout Value) -> Bool, until end: MonotonicInstant? = nil,
        _ body: (inout Value, _ ready: Bool) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        var isReady = ready(&value)
        while !isReady {
            if let end {
                var deadline = end.timespec
                if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT {
                    isReady = ready(&value)
                    break
                }
            } else {
                pthread_cond_wait(condition, mutex)
            }
            isReady = ready(&value)
        }
        return try body(&value, isReady)
    }

    /// Wakes every thread waiting in `withLock(when:until:_:)` to ask its `ready` again. Called
    /// from inside a `withLock` body, after the change it announces.
    package func broadcast() {
        pthread_cond_broadcast(condition)
    }

    /// Wakes one waiting thread (any one): for waiters that all wait for the same thing.
    package func signal() {
        pthread_cond_signal(condition)
    }

    // MARK: fork()

    /// For a `pthread_atfork` prepare handler: holds the lock across `fork()`, so that a child
    /// never inherits it held by a thread it does not have. Paired with `unlockAfterFork`.
    package func lockBeforeFork() {
        pthread_mutex_lock(mutex)
    }

    /// For the parent and child `pthread_atfork` handlers after `lockBeforeFork`. In the child the
    /// condition is made anew: no thread that waited on it in the parent exists there.
    package func unlockAfterFork(inChild: Bool) {
        if inChild { Self.initializeCondition(condition) }
        pthread_mutex_unlock(mutex)
    }

    /// In a `fork()` child (single-threaded), for a lock that was not held across the fork: it may
    /// have been held by a thread that does not exist here, so the mutex and condition are made
    /// anew (the parent's state of them is abandoned).
    package func resetAfterFork() {
        pthread_mutex_init(mutex, nil)
        Self.initializeCondition(condition)
    }
}
