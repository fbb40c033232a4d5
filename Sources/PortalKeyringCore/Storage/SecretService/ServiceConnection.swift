import CGLib
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What keyring calls run against: the library's own session-bus connection, the provider's
/// unique bus name, and the transfer session opened with that provider on that connection.
/// Immutable; shared by the calls of every thread until `ServiceConnection` drops it.
final class ServiceEndpoint: @unchecked Sendable {
    /// The private `GDBusConnection` (one reference owned).
    let connection: OpaquePointer
    /// The provider's unique bus name (the owner of `org.freedesktop.secrets` when the transfer
    /// session was opened).
    let name: String
    let session: TransferSession
    /// Whether a restore must read each item's attributes besides its secret, to confirm the item
    /// and its document against each other (`SecretServiceStorage.readSecrets`): true for every
    /// provider but gnome-keyring, and when the provider's program cannot be told.
    ///
    /// gnome-keyring is exempt because it cannot answer otherwise: its search compares attributes
    /// exactly, and it writes an item's attributes and secret together in one record of the
    /// keyring file. KeePassXC's search over-matches (values plus a line end), and it can serve
    /// one sign-in's secret under another's attributes after a lock (docs/providers.md). The read
    /// costs gnome-keyring about 0.25 ms, a third of a warm restore (bench/results.md), even sent
    /// in the same round trip.
    let confirmsReads: Bool

    init(connection: OpaquePointer, name: String, session: TransferSession, confirmsReads: Bool = true) {
        g_object_ref(UnsafeMutableRawPointer(connection))
        self.connection = connection
        self.name = name
        self.session = session
        self.confirmsReads = confirmsReads
    }

    deinit {
        Self.closeSession(connection, name, session.path)
        g_object_unref(UnsafeMutableRawPointer(connection))
    }

    /// Session.Close for the transfer session at `path` of the provider `name`, not waited for
    /// (sent without a reply expected); the provider also closes it when the connection goes away.
    static func closeSession(_ connection: OpaquePointer, _ name: String, _ path: String) {
        BusCall.post(connection, destination: name, path, "org.freedesktop.Secret.Session", "Close")
    }
}

/// The process-wide endpoint: a session-bus connection of the library's own, the provider's
/// unique name and an open (encrypted) transfer session, created lazily and rebuilt after a
/// failure.
///
/// The connection is private (`BusConnection.open`, which says why). libsecret's `SecretService`
/// can only be created on GLib's shared connection, so the transfer session is the library's own
/// (`TransferSession`). A closed connection is detected at the start of the next call and
/// replaced; a provider restart on a live bus is handled by a retry on a new endpoint.
final class ServiceConnection: Sendable {
    /// This process's instance (a fork child gets its own: `ForkSafety`).
    static var shared: ServiceConnection { slot.get }
    private static let slot = ProcessLocal { ServiceConnection() }

    private struct Cache: @unchecked Sendable {
        var connection: OpaquePointer?
        var endpoint: ServiceEndpoint?
    }
    private let cached = Lock(Cache())

    /// Runs `body` with an endpoint under the operation's deadline (`OperationDeadline`: the call
    /// deadline from now, or what is left of the operation this call is part of — the sandbox's
    /// move of the host's session). A failure on a cached endpoint (stale connection, provider
    /// restarted), or a provider error on any endpoint (a transfer session the provider garbles),
    /// drops it and runs `body` again on a new one, as `RetryBudget` allows.
    func run<T>(operation: String, timeouts: KeyringTimeouts,
                _ body: (ServiceEndpoint, Deadline) throws(StorageFailure) -> T)
        throws(StorageFailure) -> T {
        try OperationDeadline.run(timeouts) { () throws(StorageFailure) -> T in
            try runInOperation(operation: operation, timeouts: timeouts, body)
        }
    }

    private func runInOperation<T>(operation: String, timeouts: KeyringTimeouts,
                                   _ body: (ServiceEndpoint, Deadline) throws(StorageFailure) -> T)
        throws(StorageFailure) -> T {
        ForkSafety.install()
        if ForkSafety.dbusUnusable { throw ForkSafety.childFailure }
        let bound = OperationDeadline.milliseconds(timeouts)
        let end = OperationDeadline.end(timeouts)
        // The operation's time is up already (earlier steps took it): no call is started.
        if end.hasPassed { throw .timedOut(operation: operation, milliseconds: bound) }
        return try Deadlines.shared.run(operation: operation, until: end, reporting: bound) { call throws(StorageFailure) -> T in
            var retries = RetryBudget()
            while true {
                let endpoint: ServiceEndpoint
                let fromCache: Bool
                do throws(StorageFailure) {
                    (endpoint, fromCache) = try acquire(call.cancellable)
                } catch {
                    // The provider refused to open the transfer session: once more, with new keys.
                    if retries.allows(error, fromCache: false), g_cancellable_is_cancelled(call.cancellable) == 0 {
                        continue
                    }
                    throw error
                }
                do throws(StorageFailure) {
                    return try body(endpoint, call)
                } catch {
                    if retries.allows(error, fromCache: fromCache), g_cancellable_is_cancelled(call.cancellable) == 0 {
                        drop(endpoint)
                        continue
                    }
                    throw error
                }
            }
        }
    }

    /// Which failures of one keyring call are tried again on a new endpoint.
    ///
    /// A provider error (`.failed`: a secret that does not decrypt under the transfer session, an
    /// object gone, a session refused) is retried once; an unavailable provider once more when the
    /// endpoint came from the cache and may be stale (provider or bus restarted). The two are
    /// counted apart: after a provider restart, the new session may still be one the provider
    /// garbles (KWallet 5.103: `TransferSession.open`), and a shared budget failed that restore
    /// (1 kwallet Swift suite run in 12).
    struct RetryBudget {
        private var failedRetried = false
        private var staleRetried = false

        /// Whether `error` may be retried, and counts the retry.
        mutating func allows(_ error: StorageFailure, fromCache: Bool) -> Bool {
            switch error {
            case .failed:
                defer { failedRetried = true }
                return !failedRetried
            case .unavailable:
                guard fromCache else { return false }
                defer { staleRetried = true }
                return !staleRetried
            case .locked, .refused, .noDefaultCollection, .timedOut, .overran, .superseded, .fileKeyring, .misconfigured,
                 .secretPortal:
                return false
            }
        }
    }

    /// Forgets the cached endpoint (for example after the provider restarted). The connection is
    /// kept while it is open.
    func drop(_ endpoint: ServiceEndpoint) {
        let old: ServiceEndpoint? = cached.withLock { cache in
            guard cache.endpoint === endpoint else { return nil }
            defer { cache.endpoint = nil }
            return cache.endpoint
        }
        _ = old  // released outside the lock
    }

    /// Returns an endpoint, and whether it came from the cache.
    private func acquire(_ cancellable: UnsafeMutablePointer<GCancellable>) throws(StorageFailure)
        -> (ServiceEndpoint, Bool) {
        var stale: ServiceEndpoint?
        let current: (connection: OpaquePointer?, endpoint: ServiceEndpoint?) = cached.withLock { cache in
            if let connection = cache.connection, g_dbus_connection_is_closed(connection) != 0 {
                // The bus went away (or restarted): forget the connection and its endpoint.
                stale = cache.endpoint
                g_object_unref(UnsafeMutableRawPointer(connection))
                cache = Cache()
            }
            if let endpoint = cache.endpoint { return (nil, endpoint) }
            if let connection = cache.connection { g_object_ref(UnsafeMutableRawPointer(connection)) }
            return (cache.connection, nil)
        }
        withExtendedLifetime(stale) {}  // released here, outside the lock
        stale = nil
        if let endpoint = current.endpoint { return (endpoint, true) }
        let connection: OpaquePointer
        if let existing = current.connection { connection = existing } else { connection = try BusConnection.open(cancellable) }
        defer { g_object_unref(UnsafeMutableRawPointer(connection)) }
        let fresh = try open(on: connection, cancellable)
        // Another thread may have connected meanwhile; keep the first, use ours for this call.
        cached.withLock { cache in
            if cache.connection == nil {
                g_object_ref(UnsafeMutableRawPointer(connection))
                cache.connection = connection
            }
            if cache.endpoint == nil && cache.connection == connection {
                cache.endpoint = fresh
            }
        }
        return (fresh, false)
    }

    /// The provider's unique name on `connection`, and a transfer session opened with it.
    private func open(on connection: OpaquePointer,
                      _ cancellable: UnsafeMutablePointer<GCancellable>) throws(StorageFailure) -> ServiceEndpoint {
        let name = try ProviderName.resolve(on: connection, cancellable)
        do throws(StorageFailure.Classified) {
            let session = try TransferSession.open({ algorithm, input throws(StorageFailure.Classified) -> OpaquePointer? in
                do throws(StorageFailure.Classified) {
                    return try BusCall.call(connection, destination: name, SecretBus.servicePath, SecretBus.serviceInterface,
                                            "OpenSession", Variant.tuple([g_variant_new_string(algorithm), input]),
                                            "(vo)", .deadline(cancellable), "could not open a transfer session")
                } catch {
                    // The provider does not offer this algorithm.
                    if error.name == "org.freedesktop.DBus.Error.NotSupported" { return nil }
                    throw error
                }
            }, close: { path in
                ServiceEndpoint.closeSession(connection, name, path)
            })
            // One round trip to the bus daemon per endpoint (once per process, normally).
            let program = (try? SecretBus.provider(connection, name, cancellable))?.name
            return ServiceEndpoint(connection: connection, name: name, session: session,
                                   confirmsReads: program != "gnome-keyring-daemon")
        } catch {
            switch error.kind {
            case .cancelled: throw .failed("cancelled")
            case .unavailable: throw .unavailable(error.message)
            default:
                // The provider answered, and refused (e.g. KWallet: "Client public key size is invalid").
                throw .failed("could not open a transfer session: " + error.message)
            }
        }
    }
}
