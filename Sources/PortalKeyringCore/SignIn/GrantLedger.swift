#if canImport(Glibc)
import Glibc
#endif

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

    private var entries: [String: Entry] = [:]
    private var totps: [TotpExchangeKey: TotpEntry] = [:]
    private var mutex = pthread_mutex_t()
    private var changed = pthread_cond_t()

    init() {
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&changed, nil)
    }

    deinit {
        pthread_cond_destroy(&changed)
        pthread_mutex_destroy(&mutex)
    }

    /// Claims `grant`: waits while another thread exchanges it, then says what to do.
    func begin(_ grant: String) -> Start {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        while true {
            switch entries[grant] {
            case .inFlight?:
                pthread_cond_wait(&changed, &mutex)
            case .done(let result)?:
                // A sign-in whose session was signed out or invalidated since is no sign-in to
                // replay: the grant is spent, so delivering it again fails like a used link.
                if case .authenticated(let signedIn) = result, signedIn.session.isInvalidated {
                    entries[grant] = .inFlight
                    return .exchange
                }
                return .cached(result)
            case .unpersisted(let exchange)?:
                entries[grant] = .inFlight
                return .persistOnly(exchange)
            case nil:
                entries[grant] = .inFlight
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
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        while true {
            switch totps[key] {
            case .inFlight?:
                pthread_cond_wait(&changed, &mutex)
            case .done(let result)?:
                if result.session.isInvalidated {  // signed out since: as for grants, above
                    totps[key] = .inFlight
                    return .exchange
                }
                return .cached(result)
            case .unpersisted(let exchange)?:
                totps[key] = .inFlight
                return .persistOnly(exchange)
            case nil:
                totps[key] = .inFlight
                return .exchange
            }
        }
    }

    func finishTotp(_ key: TotpExchangeKey, _ result: AuthenticatedResult) { setTotp(key, .done(result)) }

    /// The redirect whose TOTP step `userJwt` completed now replays as the sign-in it became
    /// (PortalSwift's rule), not as a step whose JWT Portal has spent.
    func completeTotpStep(userJwt: String, _ result: AuthenticatedResult) {
        pthread_mutex_lock(&mutex)
        for (grant, entry) in entries {
            if case .done(.totpRequired(let step)) = entry, step.userJwt == userJwt {
                entries[grant] = .done(.authenticated(result))
            }
        }
        pthread_cond_broadcast(&changed)
        pthread_mutex_unlock(&mutex)
    }
    func totpExchangedButNotPersisted(_ key: TotpExchangeKey, _ exchange: PortalAuth.TotpExchange) {
        setTotp(key, .unpersisted(exchange))
    }
    func abandonTotp(_ key: TotpExchangeKey) { setTotp(key, nil) }

    /// Forgets every grant and TOTP exchange (their tokens are wiped once no caller holds them),
    /// after waiting for exchanges in flight to settle.
    func forgetAll() {
        pthread_mutex_lock(&mutex)
        while entries.values.contains(where: { if case .inFlight = $0 { return true } else { return false } })
            || totps.values.contains(where: { if case .inFlight = $0 { return true } else { return false } }) {
            pthread_cond_wait(&changed, &mutex)
        }
        entries.removeAll()
        totps.removeAll()
        pthread_mutex_unlock(&mutex)
    }

    private func setTotp(_ key: TotpExchangeKey, _ entry: TotpEntry?) {
        pthread_mutex_lock(&mutex)
        totps[key] = entry
        pthread_cond_broadcast(&changed)
        pthread_mutex_unlock(&mutex)
    }

    private func set(_ grant: String, _ entry: Entry?) {
        pthread_mutex_lock(&mutex)
        entries[grant] = entry
        pthread_cond_broadcast(&changed)
        pthread_mutex_unlock(&mutex)
    }
}
