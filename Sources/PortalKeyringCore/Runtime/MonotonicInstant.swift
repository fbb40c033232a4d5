import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// A point on the monotonic clock: the one currency of the core's deadlines (an operation's end,
/// a turn's, a lock's or a prompt's wait, the watch's next read). The clock is GLib's
/// (`g_get_monotonic_time`, `CLOCK_MONOTONIC` on Linux): it never jumps with the wall clock, and
/// `pthread_cond_timedwait` on a condition set to `CLOCK_MONOTONIC` reads the same one. Named
/// after Swift's `ContinuousClock.Instant`; the spans between two instants are `Duration`s.
///
/// A bound enters as milliseconds (`KeyringTimeouts`, the C ABI, a constant) and becomes an
/// instant once, with `advanced(byMilliseconds:)`; a system call that takes a relative timeout
/// gets `remainingMilliseconds`, rounded up so that no wait ends before its instant. This file is
/// the only one of the core that reads the clock or converts between its units
/// (`scripts/check-sources.sh`).
package struct MonotonicInstant: Comparable, Hashable, Sendable {
    /// Microseconds on the monotonic clock (GLib's unit).
    private let microseconds: Int

    private init(microseconds: Int) {
        self.microseconds = microseconds
    }

    /// The instant the clock reads now.
    package static var now: MonotonicInstant { MonotonicInstant(microseconds: Int(g_get_monotonic_time())) }

    /// Later than any instant the clock reaches: a wait without an end.
    package static let distantFuture = MonotonicInstant(microseconds: Int.max)

    /// The clock's origin (it reads 0 at boot, never less): earlier than any instant it reads.
    package static let origin = MonotonicInstant(microseconds: 0)

    /// `milliseconds` after this instant (never past `distantFuture`).
    package func advanced(byMilliseconds milliseconds: UInt32) -> MonotonicInstant {
        advanced(by: .milliseconds(milliseconds))
    }

    /// `duration` after this instant (before it when negative; never past `distantFuture`).
    package func advanced(by duration: Duration) -> MonotonicInstant {
        let (seconds, attoseconds) = duration.components
        let (inSeconds, secondsOverflow) = seconds.multipliedReportingOverflow(by: 1_000_000)
        let (span, spanOverflow) = inSeconds.addingReportingOverflow(Int64(attoseconds / 1_000_000_000_000))
        let (sum, sumOverflow) = microseconds.addingReportingOverflow(Int(span))
        if secondsOverflow || spanOverflow || sumOverflow { return seconds < 0 ? Self(microseconds: Int.min) : .distantFuture }
        return Self(microseconds: sum)
    }

    /// The time from this instant to `other` (negative when `other` is earlier).
    package func duration(to other: MonotonicInstant) -> Duration {
        .microseconds(other.microseconds - microseconds)
    }

    /// Whether the clock has reached this instant.
    package var hasPassed: Bool { self <= .now }

    /// The time left until this instant in whole milliseconds, for a system call that takes a
    /// relative timeout (poll, a GLib timeout source, a GDBus call, a `Deadlines` timer): rounded
    /// up, so that a wait never ends before the instant; 0 once it has passed.
    package var remainingMilliseconds: Int {
        let left = microseconds - MonotonicInstant.now.microseconds
        guard left > 0 else { return 0 }
        return left / 1000 + (left % 1000 == 0 ? 0 : 1)
    }

    /// This instant as `pthread_cond_timedwait` takes it on a `CLOCK_MONOTONIC` condition.
    package var timespec: Glibc.timespec {
        Glibc.timespec(tv_sec: microseconds / 1_000_000, tv_nsec: (microseconds % 1_000_000) * 1000)
    }

    package static func < (lhs: MonotonicInstant, rhs: MonotonicInstant) -> Bool {
        lhs.microseconds < rhs.microseconds
    }
}
