import Testing
import Dispatch
import FoundationEssentials
@testable import PortalKeyringCore
@testable import PortalKeyring
#if canImport(Glibc)
import Glibc
#endif

/// The real keyring (`SecretServiceStorage`) with a fault seam in front of the sign-in's write: the
/// next `failures` writes fail as a locked keyring with its prompt dismissed would, and with a
/// gate, the first write announces itself (`entered`) and waits for `open()`.
private final class FaultyWriteStorage: SessionStorage, @unchecked Sendable {
    let inner: SecretServiceStorage
    private let failures: Lock<Int>
    private let gated: Lock<Bool>
    let entered = DispatchSemaphore(value: 0)
    private let gate = DispatchSemaphore(value: 0)
    let written = DispatchSemaphore(value: 0)

    init(timeouts: KeyringTimeouts, failures: Int = 0, gated: Bool = false) {
        inner = SecretServiceStorage(timeouts: timeouts)
        self.failures = Lock(failures)
        self.gated = Lock(gated)
    }

    func open() { gate.signal() }

    func restore(authEnvironmentId: String) throws(StorageFailure) -> ReadPolicy.Restored? {
        try inner.restore(authEnvironmentId: authEnvironmentId)
    }
    func observe(authEnvironmentId: String) throws(StorageFailure) -> SessionObservation {
        try inner.observe(authEnvironmentId: authEnvironmentId)
    }
    func replace(authEnvironmentId: String, generation: String, now: UInt64, label: String,
                 document: (UInt64) -> SecretBytes) throws(StorageFailure) -> UInt64 {
        let fail = failures.withLock { n -> Bool in
            guard n > 0 else { return false }
            n -= 1
            return true
        }
        if fail { throw .locked("the unlock prompt was dismissed (test fault)") }
        if gated.withLock({ g in defer { g = false }; return g }) {
            entered.signal()
            gate.wait()
        }
        defer { written.signal() }
        return try inner.replace(authEnvironmentId: authEnvironmentId, generation: generation, now: now,
                                 label: label, document: document)
    }
    func delete(itemId: String) throws(StorageFailure) { try inner.delete(itemId: itemId) }
    func deleteAll(authEnvironmentId: String, generation: String?) throws(StorageFailure) -> Int {
        try inner.deleteAll(authEnvironmentId: authEnvironmentId, generation: generation)
    }
}

/// A TOTP sign-in is not lost once Portal accepted the code: the exchange is
/// remembered, so a retry of the same verify persists without a second exchange (the server
/// spent the code and the user JWT). Real keyring, loopback Portal API.
@Suite(.serialized) struct TotpRetryTests {
    private static let route = "/api/v3/auth/totps/validations"
    private struct Envelope<T: Decodable>: Decodable { let data: T }

    /// An auth over `storage` with a sign-in pending, at the TOTP step for `user`: (auth, JWT, code).
    private func atTotpStep(_ user: String, _ storage: FaultyWriteStorage) throws -> (PortalAuth, String, String) {
        _ = try KeyringControl.environment()
        let auth = try PortalAuth(authEnvironmentId: "totp-retry-\(ItemSchema.newGeneration().prefix(12))",
                                  redirectUrl: redirect, apiHost: try FakePortalAPI.host(), storage: storage,
                                  keyringTimeouts: storage.inner.timeouts)
        try auth.pendingSignIn.record()
        guard case .totpRequired(let step) = try auth.handleRedirect(url: try grant("magic_link", user: user, totp: true)) else {
            throw PortalAuthError.authenticationFailed(message: "expected totpRequired")
        }
        let jwt = step.userJwt
        struct Code: Decodable { let code: String }
        let code = try JSONDecoder().decode(Envelope<Code>.self,
                                            from: Data(try FakePortalAPI.admin("GET", "totp?endUserId=\(user)").utf8)).data.code
        return (auth, jwt, code)
    }

    private static let timeouts = KeyringTimeouts(callMilliseconds: 5_000, promptMilliseconds: 1_000)

    /// The keyring write fails after Portal accepted the code; a retry with the same JWT from
    /// another thread, and the fresh code the end user types then, persists the remembered
    /// session, and Portal saw exactly one verification (the JWT is spent: a second one would
    /// fail). Kills: signin/totp-exchange-forgotten, signin/retry-keyed-on-code.
    @Test func storageFailureThenRetryPersistsWithoutASecondExchange() throws {
        let storage = FaultyWriteStorage(timeouts: Self.timeouts, failures: 1)
        let (a, jwt, code) = try atTotpStep("eu-totp-retry", storage)
        let before = try FakePortalAPI.requests(Self.route).total
        #expect {
            try a.verifyTotp(code: code, userJwt: jwt)
        } throws: { error in
            if case PortalAuthError.sessionStorageFailure = error { return true } else { return false }
        }
        #expect(try a.restoreSession() == nil)
        #expect(try FakePortalAPI.requests(Self.route).total == before + 1)

        // The end user types the code shown now (here: any other code): the same JWT finishes
        // the accepted sign-in.
        let fresh = code == "000000" ? "111111" : "000000"
        let retried = Lock<Result<PortalSession, PortalAuthError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let result: Result<PortalSession, PortalAuthError>
            do throws(PortalAuthError) { result = .success(try a.verifyTotp(code: fresh, userJwt: jwt).session) } catch { result = .failure(error) }
            retried.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        let session = try #require(try retried.withLock { $0 }?.get())
        #expect(session.endUserId == "eu-totp-retry")
        #expect(try FakePortalAPI.requests(Self.route).total == before + 1) // no second exchange
        #expect(try a.restoreSession()?.getToken() == session.getToken())
        // Once persisted, the same JWT returns the same session, still without an exchange.
        let again = try a.verifyTotp(code: code, userJwt: jwt)
        #expect(try again.session.getToken() == session.getToken())
        #expect(again.clientId?.isEmpty == false)
        #expect(try FakePortalAPI.requests(Self.route).total == before + 1)
        try a.clearPersistedSession()
    }

    /// `clearPersistedSession()` forgets a remembered TOTP exchange: the same verify afterwards
    /// goes to Portal again, which refuses the spent JWT with the bare 401 it gives a wrong code.
    @Test func clearForgetsTheRememberedExchange() throws {
        let storage = FaultyWriteStorage(timeouts: Self.timeouts, failures: 1)
        let (a, jwt, code) = try atTotpStep("eu-totp-forget", storage)
        #expect(throws: PortalAuthError.self) { try a.verifyTotp(code: code, userJwt: jwt) }
        try a.clearPersistedSession()
        let before = try FakePortalAPI.requests(Self.route).total
        #expect(throws: PortalAuthError.authenticationFailed(message: PortalAuth.totpCodeRejected)) {
            try a.verifyTotp(code: code, userJwt: jwt)
        }
        #expect(try FakePortalAPI.requests(Self.route).total == before + 1)
        #expect(try a.restoreSession() == nil)
    }

    /// An `async` verify cancelled after Portal answered (while the keyring write runs): the
    /// caller gets `.cancelled`, the worker still persists the session, and a retry of the same
    /// verify returns it without a second exchange.
    @Test func cancelAfterTheExchangeStillPersists() async throws {
        let storage = FaultyWriteStorage(timeouts: Self.timeouts, gated: true)
        let (a, jwt, code) = try atTotpStep("eu-totp-cancel", storage)
        let before = try FakePortalAPI.requests(Self.route).total
        let task = Task { try await a.verifyTotp(code: code, userJwt: jwt) }
        // Portal answered; the write has begun.
        #expect(await Self.wait(for: storage.entered), "the keyring write never began")
        task.cancel()
        await #expect(throws: PortalAuthError.cancelled) { try await task.value }
        storage.open()
        #expect(await Self.wait(for: storage.written), "the worker never finished the write")
        #expect(try await a.restoreSession()?.endUserId == "eu-totp-cancel") // the worker persisted
        let session = try await a.verifyTotp(code: code, userJwt: jwt).session
        #expect(session.endUserId == "eu-totp-cancel")
        #expect(try FakePortalAPI.requests(Self.route).total == before + 1)
        #expect(try await a.restoreSession()?.getToken() == session.getToken())
        try await a.clearPersistedSession()
    }

    /// Waits off the cooperative pool for `semaphore`, at most 30 s; whether it was signalled.
    private static func wait(for semaphore: DispatchSemaphore) async -> Bool {
        await withCheckedContinuation { (resumed: CheckedContinuation<Bool, Never>) in
            DispatchQueue.global().async { resumed.resume(returning: semaphore.wait(timeout: .now() + 30) == .success) }
        }
    }

    /// The ledger key is the SHA-256 digest (libgcrypt) of the JWT alone, so the JWT itself is
    /// never kept and any code retries an accepted exchange.
    @Test func ledgerKeyIsSHA256OfTheJwt() throws {
        func hex(_ bytes: [UInt8]) -> String {
            bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
        }
        let jwt = SecretBytes.copyingUTF8(of: "a.b.c")
        let key = try #require(TotpExchangeKey(userJwt: jwt))
        // SHA-256("a.b.c"), from `printf 'a.b.c' | sha256sum`.
        #expect(hex(key.digest) == "845e30448809e2bc8958eb025bfc795235d13b077a53d0c3abbd2385170dc9b8")
        #expect(key == TotpExchangeKey(userJwt: SecretBytes.copyingUTF8(of: "a.b.c")))
        #expect(key != TotpExchangeKey(userJwt: SecretBytes.copyingUTF8(of: "a.b.d")))
    }
}
