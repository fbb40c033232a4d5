/// Remembers exchanged redirect grants and accepted TOTP exchanges (single-use on the server) so a
/// repeat delivery or retry neither exchanges twice nor loses a sign-in whose keyring write
/// failed. In memory only; a TOTP exchange is filed under `TotpExchangeKey` (a digest of the user
/// JWT, never the JWT, and not of the code) and its token is `SecretBytes`, wiped when the entry
/// is forgotten. Thread-safe;
/// `forgetAll()` waits for exchanges in flight. A remembered sign-in whose session has been
/// invalidated since (a sign-out through its `Portal`, a 401, `invalidate()`) is never replayed.
final class GrantLedger: @unchecked Sendable {
    enum Start { case exchange, cached(RedirectResult), persistOnly(PortalAuth.Exchange) }
    private enum Entry { case inFlight, done(RedirectResult), unpersisted(PortalAuth.Exchange) }
    enum TotpStart { case exchange, cached(AuthenticatedResult), persistOnly(PortalAuth.TotpExchange) }
    private enum TotpEntry { case inFlight, done(AuthenticatedResult), unpersisted(PortalAuth.TotpExchange) }

    private struct State {
        var entries: [String: Entry] = [:]
        var totps: [TotpExchangeKey: TotpEntry] = [:]
        var settled: Bool {
            !entries.values.contains { if case .inFlight = $0 { true } else { false } }
                && !totps.values.contains { if case .inFlight = $0 { true } else { false } }
        }
    }
    /// Broadcast on every change: waiters wait for an exchange in flight to settle.
    private let state = Lock(State())

    /// Claims `grant`: waits while another thread exchanges it, then says what to do.
    func begin(_ grant: String) -> Start {
        state.withLock(when: { s in if case .inFlight? = s.entries[grant] { false } else { true } }) { s, _ in
            switch s.entries[grant] {
            case .done(let result)?:
                // A sign-in whose session was signed out or invalidated since is no sign-in to
                // replay: the grant is spent, so delivering it again fails like a used link.
                if case .authenticated(let signedIn) = result, signedIn.session.isInvalidated {
                    s.entries[grant] = .inFlight
                    return .exchange
                }
                return .cached(result)
            case .unpersisted(let exchange)?:
                s.entries[grant] = .inFlight
                return .persistOnly(exchange)
            case nil, .inFlight?:  // not in flight: waited for above
                s.entries[grant] = .inFlight
                return .exchange
            }
        }
    }

    func finish(_ grant: String, _ result: RedirectResult) { set(grant, .done(result)) }
    func exchangedButNotPersisted(_ grant: String, _ exchange: PortalAuth.Exchange) { set(grant, .unpersisted(exchange)) }
    func abandon(_ grant: String) { set(grant, nil) }

    /// Claims the TOTP exchange `key`: waits while another thread verifies a code with the same
    /// user JWT, then says what to do.
    func beginTotp(_ key: TotpExchangeKey) -> TotpStart {
        state.withLock(when: { s in if case .inFlight? = s.totps[key] { false } else { true } }) { s, _ in
            switch s.totps[key] {
            case .done(let result)?:
                if result.session.isInvalidated {  // signed out since: as for grants, above
                    s.totps[key] = .inFlight
                    return .exchange
                }
                return .cached(result)
            case .unpersisted(let exchange)?:
                s.totps[key] = .inFlight
                return .persistOnly(exchange)
            case nil, .inFlight?:  // not in flight: waited for above
                s.totps[key] = .inFlight
                return .exchange
            }
        }
    }

    func finishTotp(_ key: TotpExchangeKey, _ result: AuthenticatedResult) { setTotp(key, .done(result)) }

    /// The redirect whose TOTP step `userJwt` completed now replays as the sign-in it became
    /// (PortalSwift's rule), not as a step whose JWT Portal has spent.
    func completeTotpStep(userJwt: String, _ result: AuthenticatedResult) {
        state.withLock { s in
            for (grant, entry) in s.entries {
                if case .done(.totpRequired(let step)) = entry, step.userJwt == userJwt {
                    s.entries[grant] = .done(.authenticated(result))
                }
            }
            state.broadcast()
        }
    }
    func totpExchangedButNotPersisted(_ key: TotpExchangeKey, _ exchange: PortalAuth.TotpExchange) {
        setTotp(key, .unpersisted(exchange))
    }
    func abandonTotp(_ key: TotpExchangeKey) { setTotp(key, nil) }

    /// Forgets every grant and TOTP exchange (their tokens are wiped once no caller holds them),
    /// after waiting for exchanges in flight to settle.
    func forgetAll() {
        state.withLock(when: { $0.settled }) { s, _ in
            s.entries.removeAll()
            s.totps.removeAll()
        }
    }

    private func setTotp(_ key: TotpExchangeKey, _ entry: TotpEntry?) {
        state.withLock { s in
            s.totps[key] = entry
            state.broadcast()
        }
    }

    private func set(_ grant: String, _ entry: Entry?) {
        state.withLock { s in
            s.entries[grant] = entry
            state.broadcast()
        }
    }
}
