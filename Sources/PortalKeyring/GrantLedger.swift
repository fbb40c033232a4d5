#if canImport(Glibc)
import Glibc
#endif

/// Remembers exchanged redirect grants (single-use on the server) so a repeat delivery neither
/// exchanges twice nor loses a sign-in whose keyring write failed. Thread-safe; `forgetAll()`
/// waits for exchanges in flight.
final class GrantLedger: @unchecked Sendable {
    enum Start { case exchange, cached(RedirectResult), persistOnly(PortalAuth.Exchange) }
    private enum Entry { case inFlight, done(RedirectResult), unpersisted(PortalAuth.Exchange) }

    private var entries: [String: Entry] = [:]
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

    /// Forgets every grant, after waiting for exchanges in flight to settle.
    func forgetAll() {
        pthread_mutex_lock(&mutex)
        while entries.values.contains(where: { if case .inFlight = $0 { return true } else { return false } }) {
            pthread_cond_wait(&changed, &mutex)
        }
        entries.removeAll()
        pthread_mutex_unlock(&mutex)
    }

    private func set(_ grant: String, _ entry: Entry?) {
        pthread_mutex_lock(&mutex)
        entries[grant] = entry
        pthread_cond_broadcast(&changed)
        pthread_mutex_unlock(&mutex)
    }
}
