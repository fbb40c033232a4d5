import Testing
import Synchronization
import Dispatch
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

// Tests written to kill mutants of the catalogue (Tests/mutants/). Each names the
// promise it guards; Tests/mutants/run.sh proves that it fails when that promise is broken.
// They need the loopback Portal API (scripts/with-portal-api.sh) only where they say so; none
// needs the keyring (InMemoryStorage) or DNS.

private final class Tally: Sendable {
    private let value = Atomic<Int>(0)
    func increment() { value.wrappingAdd(1, ordering: .relaxed) }
    var count: Int { value.load(ordering: .relaxed) }
}

/// Runs `body(index)` on `count` new POSIX threads and joins them. Not GCD: its pool has about
/// as many threads as cores (two here), which never puts 16 callers into the same instant.
private func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    final class Job { let body: @Sendable (Int) -> Void; let index: Int
        init(_ body: @escaping @Sendable (Int) -> Void, _ index: Int) { self.body = body; self.index = index } }
    var threads: [pthread_t] = []
    for index in 0..<count {
        let job = Unmanaged.passRetained(Job(body, index)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { raw in
            let job = Unmanaged<Job>.fromOpaque(raw!).takeRetainedValue()
            job.body(job.index)
            return nil
        }, job)
        precondition(rc == 0, "pthread_create failed")
        threads.append(thread)
    }
    for thread in threads { pthread_join(thread, nil) }
}

/// A reusable spin barrier: every thread of a round leaves it within a few microseconds of the
/// others, which is what puts concurrent rejections into the invalidation race.
private final class SpinBarrier: Sendable {
    private let arrived = Atomic<Int>(0)
    let parties: Int
    init(parties: Int) { self.parties = parties }
    /// Waits until `parties` threads have arrived for `round` (0, 1, 2, ...).
    func wait(round: Int) {
        let target = parties * (round + 1)
        arrived.wrappingAdd(1, ordering: .acquiringAndReleasing)
        var spins = 0
        while arrived.load(ordering: .acquiring) < target {
            spins += 1
            if spins % 64 == 0 { sched_yield() }
        }
    }
}

/// `InMemoryStorage` whose deletes take `delayMicroseconds`: holds an invalidation between
/// "phase is invalidated" and "listeners notified" long enough to register a listener there.
private final class SlowDeleteStorage: SessionStorage, @unchecked Sendable {
    let inner = InMemoryStorage()
    let delayMicroseconds: UInt32
    private let deleting = Atomic<Bool>(false)
    init(delayMicroseconds: UInt32) { self.delayMicroseconds = delayMicroseconds }

    func restore(authEnvironmentId: String) throws(StorageFailure) -> ReadPolicy.Restored? {
        try inner.restore(authEnvironmentId: authEnvironmentId)
    }
    func replace(authEnvironmentId: String, generation: String, now: UInt64, label: String,
                 document: (UInt64) -> SecretBytes) throws(StorageFailure) -> UInt64 {
        try inner.replace(authEnvironmentId: authEnvironmentId, generation: generation, now: now, label: label,
                          document: document)
    }
    func observe(authEnvironmentId: String) throws(StorageFailure) -> SessionObservation {
        try inner.observe(authEnvironmentId: authEnvironmentId)
    }
    func delete(itemId: String) throws(StorageFailure) {
        deleting.store(true, ordering: .releasing)
        usleep(delayMicroseconds)
        try inner.delete(itemId: itemId)
    }
    func deleteAll(authEnvironmentId: String, generation: String?) throws(StorageFailure) -> Int {
        deleting.store(true, ordering: .releasing)
        usleep(delayMicroseconds)
        return try inner.deleteAll(authEnvironmentId: authEnvironmentId, generation: generation)
    }
    func waitForDelete(seconds: Int) -> Bool {
        for _ in 0..<(seconds * 1000) where !deleting.load(ordering: .acquiring) { usleep(1000) }
        return deleting.load(ordering: .acquiring)
    }
}

/// A TCP server on a chosen IPv4 address that records every byte it receives and answers each
/// request with HTTP 401 `{}`: "another server" for the exact-host and plain-HTTP tests.
final class RecordingListener: @unchecked Sendable {
    let address: String
    let port: UInt16
    private let fd: Int32
    private let received = Lock<(bytes: [UInt8], connections: Int)>(([], 0))
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    /// Binds `address` (dotted IPv4, or an IPv6 literal such as `::1`) on `port` (0: any free
    /// port); nil when that fails.
    init?(address: String, port: UInt16 = 0) {
        let ipv6 = address.contains(":")
        let fd = socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        let bound: UInt16?
        if ipv6 {
            var on: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &on, socklen_t(MemoryLayout<Int32>.size))
            var addr = sockaddr_in6()
            addr.sin6_family = sa_family_t(AF_INET6)
            addr.sin6_port = port.bigEndian
            var length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            let ok = inet_pton(AF_INET6, address, &addr.sin6_addr) == 1
                && withUnsafePointer(to: &addr, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }) == 0
                && listen(fd, 16) == 0
                && withUnsafeMutablePointer(to: &addr, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }) == 0
            bound = ok ? UInt16(bigEndian: addr.sin6_port) : nil
        } else {
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = port.bigEndian
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let ok = inet_pton(AF_INET, address, &addr.sin_addr) == 1
                && withUnsafePointer(to: &addr, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }) == 0
                && listen(fd, 16) == 0
                && withUnsafeMutablePointer(to: &addr, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }) == 0
            bound = ok ? UInt16(bigEndian: addr.sin_port) : nil
        }
        guard let bound else { close(fd); return nil }
        self.fd = fd
        self.address = address
        self.port = bound
        DispatchQueue.global().async { self.serve() }
    }

    /// A listener on 127.0.0.1 whose port's decimal form starts with `prefix`.
    static func loopback(portStartingWith prefix: String) -> RecordingListener? {
        for _ in 0..<200 {
            let candidate = UInt16(prefix + String(UInt32.random(in: 0..<10_000)).leftPadded(to: 4))!
            if let listener = RecordingListener(address: "127.0.0.1", port: candidate) { return listener }
        }
        return nil
    }

    var connections: Int { received.withLock { $0.connections } }
    var bytes: [UInt8] { received.withLock { $0.bytes } }
    var text: String { String(decoding: bytes, as: UTF8.self) }

    /// Whether any byte sequence received equals `needle` (case-insensitive ASCII).
    func saw(_ needle: String) -> Bool { text.lowercased().contains(needle.lowercased()) }

    func stop() {
        stopping.store(true, ordering: .releasing)
        finished.wait()
        close(fd)
    }

    private func serve() {
        defer { finished.signal() }
        while !stopping.load(ordering: .acquiring) {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 50) > 0 else { continue }
            let client = accept(fd, nil, nil)
            guard client >= 0 else { continue }
            received.withLock { $0.connections += 1 }
            var request: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            // Read until the end of the headers, EOF, or 2 s of silence (a TLS ClientHello).
            while request.count < 65_536 {
                var clientPoll = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
                guard poll(&clientPoll, 1, 2_000) > 0 else { break }
                let n = read(client, &buffer, buffer.count)
                guard n > 0 else { break }
                request += buffer[0..<n]
                received.withLock { $0.bytes += buffer[0..<n] }
                if String(decoding: request, as: UTF8.self).contains("\r\n\r\n") { break }
            }
            let answer = "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
            _ = answer.withCString { write(client, $0, strlen($0)) }
            close(client)
        }
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}

/// This machine's first non-loopback IPv4 address (no DNS: getifaddrs), if it has one.
private func nonLoopbackIPv4() -> String? {
    var list: UnsafeMutablePointer<ifaddrs>?
    guard getifaddrs(&list) == 0 else { return nil }
    defer { freeifaddrs(list) }
    var entry = list
    while let current = entry {
        defer { entry = current.pointee.ifa_next }
        guard let sa = current.pointee.ifa_addr, sa.pointee.sa_family == sa_family_t(AF_INET) else { continue }
        var text = [CChar](repeating: 0, count: 64)
        var address = sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
        guard inet_ntop(AF_INET, &address, &text, socklen_t(text.count)) != nil else { continue }
        let dotted = String(cString: text)
        if !dotted.hasPrefix("127.") { return dotted }
    }
    return nil
}

/// A session held in memory (no keyring), its token a unique marker.
private func memorySession(apiHost: String, token: String? = nil) throws -> (PortalSession, String) {
    let token = token ?? "cst-guard-\(ItemSchema.newGeneration())"
    let auth = try PortalAuth(authEnvironmentId: "guard-\(ItemSchema.newGeneration().prefix(8))", redirectUrl: "app://cb",
                              apiHost: apiHost, storage: InMemoryStorage())
    return (try auth.persistSession(endUserId: "guard-user", clientSessionToken: token), token)
}

private let fastHTTP = HTTPClient(connectTimeoutMilliseconds: 2_000, totalTimeoutMilliseconds: 4_000)

// MARK: - Exactly once (onSessionInvalidated's listeners, from any number of threads)

@Suite struct ExactlyOnceGuardTests {
    /// 16 threads released together by a spin barrier report the same rejected token, 150 rounds
    /// (a fresh credential each round): exactly one report per round says "invalidated", and each
    /// of three listeners hears it exactly once. Kills: the once-only guard of
    /// `InvalidationCenter.beginInvalidation` removed (more than one "invalidated" per round), and
    /// that plus the per-listener guard removed (listeners fire twice).
    @Test func concurrentReportsInvalidateExactlyOnce() throws {
        let threads = 16, rounds = 150
        struct Round: Sendable { let portal: Portal; let token: String; let wins: Tally; let heard: [Tally] }
        let prepared: [Round] = try (0..<rounds).map { _ in
            let (session, token) = try memorySession(apiHost: "127.0.0.1:9")
            let portal = Portal(credentials: session, apiHost: nil, http: fastHTTP, validate: false)
            let heard = (0..<3).map { _ in Tally() }
            for tally in heard { portal.onSessionInvalidated { tally.increment() } }
            return Round(portal: portal, token: token, wins: Tally(), heard: heard)
        }
        let barrier = SpinBarrier(parties: threads)
        onThreads(threads) { _ in
            for (index, round) in prepared.enumerated() {
                barrier.wait(round: index)
                if (try? round.portal.reportUnauthorized(rejectedToken: round.token)) == true { round.wins.increment() }
            }
        }
        prepared.forEach { $0.portal.waitForListenerDeliveries() }
        let multiple = prepared.filter { $0.wins.count > 1 }.count
        let none = prepared.filter { $0.wins.count == 0 }.count
        let overheard = prepared.filter { $0.heard.contains { $0.count > 1 } }.count
        let unheard = prepared.filter { $0.heard.contains { $0.count == 0 } }.count
        #expect(multiple == 0, "\(multiple) of \(rounds) rounds reported \"invalidated\" more than once")
        #expect(none == 0, "\(none) of \(rounds) rounds never invalidated")
        #expect(overheard == 0, "in \(overheard) of \(rounds) rounds a listener fired more than once")
        #expect(unheard == 0, "in \(unheard) of \(rounds) rounds a listener never fired")
        #expect(prepared.allSatisfy { $0.portal.credentials?.isInvalidated == true })
    }

    /// A listener registered while the rejection is being handled (the item is being deleted,
    /// the listeners not yet notified) runs once, and, like every listener, only after the
    /// delete returned: a listener that restores must not find the rejected session (the
    /// AddressSanitizer pass, slower, caught a replay that ran before the delete). Kills:
    /// `replay-before-delete` (a listener added mid-invalidation is replayed at once).
    @Test func aListenerAddedDuringTheInvalidationHearsOnce() throws {
        let storage = SlowDeleteStorage(delayMicroseconds: 300_000)
        let auth = try PortalAuth(authEnvironmentId: "guard-late", redirectUrl: "app://cb", apiHost: "127.0.0.1:9",
                                  storage: storage)
        let session = try auth.persistSession(endUserId: "u", clientSessionToken: "cst-late-listener")
        let portal = Portal(credentials: session, apiHost: nil, http: fastHTTP, validate: false)
        let early = Tally(), during = Tally(), after = Tally(), tooEarly = Tally()
        let checkDeleted: @Sendable () -> Void = {
            if (try? auth.restoreSession()) != nil { tooEarly.increment() }
        }
        portal.onSessionInvalidated { checkDeleted(); early.increment() }
        let reported = DispatchSemaphore(value: 0)
        let result = Lock<Bool?>(nil)
        DispatchQueue.global().async {
            let invalidated = try? portal.reportUnauthorized(rejectedToken: "cst-late-listener")
            result.withLock { $0 = invalidated }
            reported.signal()
        }
        #expect(storage.waitForDelete(seconds: 10), "the invalidation never reached the storage delete")
        portal.onSessionInvalidated { checkDeleted(); during.increment() }
        reported.wait()
        portal.onSessionInvalidated { checkDeleted(); after.increment() }
        portal.waitForListenerDeliveries()
        #expect(result.withLock { $0 } == true)
        #expect(early.count == 1)
        #expect(during.count == 1, "a listener registered mid-invalidation ran \(during.count) times")
        #expect(after.count == 1)
        #expect(tooEarly.count == 0, "\(tooEarly.count) listeners ran while the rejected session was still stored")
    }
}

// MARK: - Exact host (a 401 from the exact Portal API host; look-alikes never invalidate)

@Suite(.serialized) struct ExactHostGuardTests {
    /// The decision itself, without DNS: only the exact authority (case-insensitive; `:443`
    /// spelled out for https) is the Portal API host.
    @Test func onlyTheExactAuthorityIsThePortalAPIHost() throws {
        let (session, _) = try memorySession(apiHost: "api.portalhq.io")
        let portal = Portal(credentials: session, apiHost: nil, http: fastHTTP, validate: false)
        func decides(_ url: String) throws -> Bool {
            portal.isPortalAPI(try #require(TargetURL(url), "\(url) does not parse"))
        }
        for url in ["https://api.portalhq.io/api/v3/clients/me", "https://API.PortalHQ.IO/x", "https://api.portalhq.io:443/x"] {
            #expect(try decides(url), "\(url) is the Portal API host")
        }
        for url in ["https://api.portalhq.io./x",                // trailing dot: another spelling
                    "https://api.portalhq.io.:443/x",
                    "https://api.portalhq.io.evil.test/x",       // look-alike suffix
                    "https://api.portalhq.io.example.net/x",
                    "https://api.portalhq.iox/x",                // prefix
                    "https://evil-api.portalhq.io/x", "https://xapi.portalhq.io/x",
                    "https://api.portalhq.io:8443/x",            // another port
                    "https://api.portalhq.io:4430/x", "https://api.portalhq.io:44/x",
                    "http://api.portalhq.io:443/x"] {   // (plain http to the host itself: refused in HTTPClient)
            #expect(try !decides(url), "\(url) must not be taken for the Portal API host")
        }
        #expect(TargetURL("https://api.portalhq.io@evil.test/x") == nil, "userinfo is refused")

        let (mixed, _) = try memorySession(apiHost: "API.PortalHQ.io:8443")
        let mixedPortal = Portal(credentials: mixed, apiHost: nil, http: fastHTTP, validate: false)
        #expect(mixedPortal.isPortalAPI(try #require(TargetURL("https://api.portalhq.io:8443/x"))))
        #expect(!mixedPortal.isPortalAPI(try #require(TargetURL("https://api.portalhq.io/x"))))
        #expect(!mixedPortal.isPortalAPI(try #require(TargetURL("https://api.portalhq.io:443/x"))))
    }

    /// Another port on the Portal API's own address — a real listener that answers 401 — never
    /// gets the bearer and never invalidates; nor does a port whose digits merely start with the
    /// API host's, nor one on an `apiHost` that names no port. Kills: a host check that ignores
    /// the port, and one that matches by prefix.
    @Test func anotherPortOnTheSameAddressGetsNoBearer() throws {
        let apiHost = try FakePortalAPI.host()
        let other = try #require(RecordingListener(address: "127.0.0.1"))
        let prefixed = try #require(RecordingListener.loopback(portStartingWith: "1"))
        defer { other.stop(); prefixed.stop() }
        // (Portal apiHost, target on a listener that is not that host)
        let cases: [(String, RecordingListener)] = [(apiHost, other), ("127.0.0.1", other), ("127.0.0.1:1", prefixed)]
        for (host, listener) in cases {
            let (session, token) = try memorySession(apiHost: host)
            let portal = Portal(credentials: session, apiHost: nil, http: fastHTTP, validate: false)
            let fired = Tally()
            portal.onSessionInvalidated { fired.increment() }
            let target = "http://127.0.0.1:\(listener.port)/api/v3/clients/me"
            let before = listener.connections
            let status = try portal.send(PortalRequest(target: target)).status
            portal.waitForListenerDeliveries()
            #expect(status == 401, "the listener answers 401")
            #expect(listener.connections == before + 1, "the request reached \(target)")
            #expect(!listener.saw("authorization"), "apiHost \(host): the bearer went to \(target)")
            #expect(!listener.saw(token), "apiHost \(host): the token went to \(target)")
            #expect(!session.isInvalidated, "apiHost \(host): a 401 from \(target) invalidated the session")
            #expect(fired.count == 0)
        }
    }

    /// The Portal API host written in another case is still that host: the bearer goes with the
    /// request and the loopback API accepts it (200). Kills: a case-sensitive comparison, on either
    /// side (the configured host or the parsed target). Needs scripts/with-portal-api.sh.
    @Test func hostCaseDoesNotMatter() throws {
        let apiHost = try FakePortalAPI.host()
        let port = try #require(apiHost.split(separator: ":").last.map(String.init))
        let token = try FakePortalAPI.issueToken(endUserId: "guard-case")
        for (configured, target) in [("LocalHost:\(port)", "/api/v3/clients/me"),
                                     ("localhost:\(port)", "http://LOCALHOST:\(port)/api/v3/clients/me")] {
            let (session, _) = try memorySession(apiHost: configured, token: token)
            let portal = Portal(credentials: session, apiHost: nil, http: fastHTTP, validate: false)
            let before = try FakePortalAPI.requests("/api/v3/clients/me")
            let status = try portal.send(PortalRequest(target: target)).status
            let after = try FakePortalAPI.requests("/api/v3/clients/me")
            #expect(status == 200, "apiHost \(configured), target \(target): \(status), the bearer was not sent")
            #expect(after.withBearer == before.withBearer + 1)
            #expect(!session.isInvalidated)
        }
    }
}

// MARK: - Plain HTTP (a bearer is never sent over plain HTTP to a non-loopback host)

@Suite(.serialized) struct PlainHTTPGuardTests {
    /// A listener on this machine's own non-loopback address (and on 0.0.0.0, which Linux routes
    /// to the local host): plain HTTP to it, with the bearer due, is refused before a single byte
    /// is sent. No DNS involved. Kills: the https-except-loopback check removed.
    @Test func plainHTTPToANonLoopbackAddressSendsNothing() throws {
        var addresses = ["0.0.0.0"]
        if let own = nonLoopbackIPv4() { addresses.insert(own, at: 0) }
        for address in addresses {
            let listener = try #require(RecordingListener(address: address), "cannot listen on \(address)")
            defer { listener.stop() }
            let apiHost = "\(address):\(listener.port)"
            let (session, token) = try memorySession(apiHost: apiHost)
            let portal = Portal(credentials: session, apiHost: nil, http: fastHTTP, validate: false)
            let fired = Tally()
            portal.onSessionInvalidated { fired.increment() }
            #expect(portal.isPortalAPI(try #require(TargetURL("http://\(apiHost)/api/v3/clients/me"))),
                    "precondition: the bearer is due for this target")
            let error = #expect(throws: PortalAuthError.self) {
                try portal.send(PortalRequest(target: "http://\(apiHost)/api/v3/clients/me"))
            }
            if case .networkFailure(let message)? = error {
                #expect(message.contains("refused"), "not refused: \(message)")
            } else {
                Issue.record("expected networkFailure (refused), got \(String(describing: error))")
            }
            usleep(300_000)
            #expect(listener.connections == 0, "plain HTTP to \(address): \(listener.connections) connection(s) made")
            #expect(listener.bytes.isEmpty, "plain HTTP to \(address): bytes arrived: \(listener.text.prefix(200))")
            #expect(!listener.saw(token))
            portal.waitForListenerDeliveries()
            #expect(!session.isInvalidated && fired.count == 0)
        }
    }

    /// Loopback is decided from a parsed address literal, never from a name's shape:
    /// DNS names that start with "127." or "localhost" are not loopback, so a bearer never goes
    /// over plain HTTP to them; 127.0.0.0/8 dotted quads, ::1 in any spelling and `localhost`
    /// are. No DNS: the decision and the refusal both come before any lookup. Kills: the
    /// "127." name-prefix check (loopback-prefix mutant).
    @Test func loopbackIsDecidedFromTheAddressLiteralOnly() throws {
        for url in ["http://127.example.net/x", "http://127.0.0.1.attacker.example/x", "http://127.0.0.1.nip.io:8080/x",
                    "http://127.1.2.3.4/x", "http://localhost.attacker.example/x", "http://localhostx/x",
                    "http://127x/x", "http://0.0.0.0/x", "http://128.0.0.1/x", "http://[::2]/x", "http://[::ffff:8.8.8.8]/x"] {
            let target = try #require(TargetURL(url), "\(url) does not parse")
            #expect(!target.isLoopback, "\(url) was taken for loopback")
        }
        for url in ["http://127.0.0.1:8080/x", "http://127.255.3.4/x", "http://localhost/x", "http://LocalHost:1/x",
                    "http://[::1]:1/x", "http://[0:0:0:0:0:0:0:1]/x", "http://[0000::0001]:9/x"] {
            #expect(try #require(TargetURL(url), "\(url) does not parse").isLoopback, "\(url) is loopback")
        }
        for host in ["127.0.0.1.attacker.example", "127.example.net", "127.0.0.1.attacker.example:80", "localhost.evil.test"] {
            #expect(TargetURL.forAPI(host: host, path: "/x")?.scheme == "https", "apiHost \(host) must get https")
        }
        #expect(TargetURL.forAPI(host: "127.0.0.1:8080", path: "/x")?.scheme == "http")
        #expect(TargetURL.forAPI(host: "[::1]:8080", path: "/x")?.scheme == "http")
        #expect(TargetURL.forAPI(host: "LOCALHOST", path: "/x")?.scheme == "http")

        // The bearer over plain HTTP to such a name is refused before any lookup or byte.
        for apiHost in ["127.example.net", "127.0.0.1.attacker.example"] {
            let (session, _) = try memorySession(apiHost: apiHost)
            let portal = Portal(credentials: session, apiHost: nil, http: fastHTTP, validate: false)
            let error = #expect(throws: PortalAuthError.self) {
                try portal.send(PortalRequest(target: "http://\(apiHost)/api/v3/clients/me"))
            }
            guard case .networkFailure(let message)? = error, message.contains("refused") else {
                Issue.record("apiHost \(apiHost): expected a refusal, got \(String(describing: error))")
                continue
            }
        }
    }

    /// docs/security.md "`localhost` and the IPv6 loopback": libcurl answers the name `localhost` with both 127.0.0.1 and ::1 and
    /// connects to whichever accepts, so while the app's server listens on IPv4 alone, any local
    /// user who binds [::1]:PORT got the request and its bearer. `localhost` now means 127.0.0.1
    /// only: a squatter on [::1]:PORT (nothing on 127.0.0.1:PORT) receives nothing, and the
    /// request fails; the literal `[::1]:PORT` still reaches an IPv6 server. Kills:
    /// http/localhost-any-family.
    @Test func localhostNeverReachesTheIPv6Loopback() throws {
        let squatter = try #require(RecordingListener(address: "::1"), "cannot listen on [::1] (no IPv6 loopback)")
        defer { squatter.stop() }
        // Nothing of ours on 127.0.0.1:PORT (a free port there, or the test says why it cannot run).
        let probe = try #require(RecordingListener(address: "127.0.0.1", port: squatter.port),
                                 "127.0.0.1:\(squatter.port) is taken: rerun")
        probe.stop()
        let apiHost = "localhost:\(squatter.port)"
        let (session, token) = try memorySession(apiHost: apiHost)
        let portal = Portal(credentials: session, apiHost: nil, http: fastHTTP, validate: false)
        let fired = Tally()
        portal.onSessionInvalidated { fired.increment() }
        #expect(throws: PortalAuthError.self) { try portal.send(PortalRequest(target: "/api/v3/clients/me")) }
        usleep(300_000)
        #expect(squatter.connections == 0, "[::1]:\(squatter.port) got \(squatter.connections) connection(s) for localhost")
        #expect(!squatter.saw(token))
        portal.waitForListenerDeliveries()
        #expect(!session.isInvalidated && fired.count == 0)
        // The literal is the way to an IPv6-only server (its 401 is the API host's: it invalidates).
        let (v6Session, v6Token) = try memorySession(apiHost: "[::1]:\(squatter.port)")
        let v6 = Portal(credentials: v6Session, apiHost: nil, http: fastHTTP, validate: false)
        #expect(try v6.send(PortalRequest(target: "/api/v3/clients/me")).status == 401)
        #expect(squatter.connections == 1 && squatter.saw(v6Token))
        // The option itself: IPv4 only for the name, never for a literal.
        let ipResolve = { (url: String) throws -> [CurlOption.Value] in
            HTTPClient().transportOptions(for: try #require(TargetURL(url))).filter { $0.name == "CURLOPT_IPRESOLVE" }.map(\.value)
        }
        #expect(try ipResolve("http://LocalHost:8080/x") == [.long(1)])  // CURL_IPRESOLVE_V4
        #expect(try ipResolve("http://127.0.0.1:8080/x").isEmpty && ipResolve("http://[::1]:8080/x").isEmpty)
        #expect(try ipResolve("https://api.portalhq.io/x").isEmpty)
    }
}
