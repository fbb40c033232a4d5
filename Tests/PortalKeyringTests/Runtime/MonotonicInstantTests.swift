import Testing
@testable import PortalKeyringCore
import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// The deadlines' one currency: an instant converts to the relative timeouts of the system calls
/// without ever ending a wait early, and survives the bounds that enter the core.
struct MonotonicInstantTests {
    @Test func remainingMillisecondsRoundsUpSoThatNoWaitEndsEarly() {
        // Half a millisecond (or any fraction) left is one whole millisecond, not none.
        let end = MonotonicInstant.now.advanced(by: .microseconds(10_500))
        let left = end.remainingMilliseconds
        #expect(left >= 1 && left <= 11)
        // A wait of the returned length from now reaches the instant: never shorter.
        #expect(end <= MonotonicInstant.now.advanced(byMilliseconds: UInt32(left)))
        // At every fraction of a millisecond the answer covers the time still left after it.
        for fraction in stride(from: 100, to: 1000, by: 100) {
            let soon = MonotonicInstant.now.advanced(by: .microseconds(3_000 + fraction))
            let milliseconds = soon.remainingMilliseconds
            #expect(soon <= MonotonicInstant.now.advanced(byMilliseconds: UInt32(milliseconds)), "\(fraction) µs over")
        }
    }

    @Test func remainingMillisecondsIsNeverNegative() {
        #expect(MonotonicInstant.origin.remainingMilliseconds == 0)
        #expect(MonotonicInstant.now.advanced(byMilliseconds: 0).remainingMilliseconds == 0)
        #expect(MonotonicInstant.now.advanced(by: .milliseconds(-5)).remainingMilliseconds == 0)
        #expect(MonotonicInstant.origin.hasPassed)
    }

    @Test func aWaitForTheRemainingTimeEndsAtOrAfterTheInstant() {
        // poll with the rounded-up time left never returns before the instant.
        for _ in 0..<20 {
            let end = MonotonicInstant.now.advanced(by: .microseconds(2_300))
            var none = pollfd(fd: -1, events: 0, revents: 0)
            _ = poll(&none, 1, Int32(clamping: end.remainingMilliseconds))
            #expect(end.hasPassed)
        }
    }

    @Test func boundsEnterWithoutOverflow() {
        let now = MonotonicInstant.now
        let later = now.advanced(byMilliseconds: .max)
        #expect(later > now && later < .distantFuture)
        #expect(now.duration(to: later) == .milliseconds(UInt32.max))
        #expect(MonotonicInstant.distantFuture.advanced(byMilliseconds: 5) == .distantFuture)
        #expect(MonotonicInstant.distantFuture.remainingMilliseconds > Int(UInt32.max))
        #expect(!MonotonicInstant.distantFuture.hasPassed)
    }

    @Test func instantsCompareAndTheEarlierWins() {
        let now = MonotonicInstant.now
        let soon = now.advanced(byMilliseconds: 10)
        let later = now.advanced(byMilliseconds: 20)
        #expect(now < soon && soon < later)
        #expect(min(later, soon) == soon && max(soon, later) == later)
        #expect(soon.duration(to: later) == .milliseconds(10))
        #expect(later.duration(to: soon) == .milliseconds(-10))
        #expect(soon.advanced(by: soon.duration(to: later)) == later)
    }

    @Test func timespecIsTheSameInstantOnThePthreadClock() {
        let instant = MonotonicInstant.now.advanced(by: .microseconds(1_234_567))
        let time = instant.timespec
        #expect(time.tv_nsec >= 0 && time.tv_nsec < 1_000_000_000 && time.tv_nsec % 1000 == 0)
        var clock = timespec()
        clock_gettime(CLOCK_MONOTONIC, &clock)
        let ahead = Duration.seconds(time.tv_sec - clock.tv_sec) + .nanoseconds(time.tv_nsec - clock.tv_nsec)
        #expect(ahead > .milliseconds(1_200) && ahead <= .microseconds(1_234_567))
    }
}
