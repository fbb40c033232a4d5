import Testing
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// SerialDelivery, the queue the invalidation listeners run on, across `fork()` (the fork rule:
/// a child works or fails at once). The parent's queued jobs are not the child's: they never run
/// there, so nothing in the child may wait for them.
@Suite(.serialized) struct SerialDeliveryTests {
    /// ThreadSanitizer's runtime (the slow fault checks' `swift test --sanitize=thread`) ends a
    /// fork() child of a multithreaded process that starts a thread, as the child here must.
    static let threadSanitizer = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__tsan_init") != nil

    @Test(.disabled(if: threadSanitizer, "ThreadSanitizer does not let a fork() child of a multithreaded process start threads"))
    func aForkChildNeitherWaitsForTheParentsJobsNorLosesItsOwn() throws {
        let delivery = SerialDelivery()
        var gate: [Int32] = [-1, -1], done: [Int32] = [-1, -1]
        try #require(pipe(&gate) == 0 && pipe(&done) == 0)
        defer { for fd in gate + done { close(fd) } }
        let (gateRead, doneWrite) = (gate[0], done[1])
        // The parent's delivery thread blocks in its first job; a second waits behind it.
        delivery.async { var byte: UInt8 = 0; _ = read(gateRead, &byte, 1) }
        delivery.async {}
        let pid = fork()
        try #require(pid >= 0)
        if pid == 0 {
            // The child: wait() returns (nothing of its own is queued), and a job of its own runs.
            delivery.wait()
            delivery.async { var byte: UInt8 = 1; _ = write(doneWrite, &byte, 1) }
            var ready = pollfd(fd: done[0], events: Int16(POLLIN), revents: 0)
            _exit(poll(&ready, 1, 5_000) == 1 ? 0 : 3)
        }
        var status: Int32 = 0
        var ended = false
        for _ in 0..<1_000 where !ended {  // 10 s at most
            ended = waitpid(pid, &status, WNOHANG) == pid
            if !ended { usleep(10_000) }
        }
        if !ended {
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
        }
        var byte: UInt8 = 0
        _ = write(gate[1], &byte, 1)  // the parent's first job returns
        delivery.wait()
        #expect(ended, "the fork child's wait() waited for the parent's queued jobs (killed after 10 s)")
        #expect(ended && status == 0, "the child's own job did not run within 5 s (exit status \(status))")
    }
}
