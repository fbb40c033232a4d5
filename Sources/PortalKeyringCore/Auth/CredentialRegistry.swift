/// The Portals of this process, grouped by the credential they were built on (docs/api.md#invalidation): an invalidation is per credential, not per `Portal` object. When one Portal
/// invalidates its session (a 401, or `reportUnauthorized`), every other live Portal on the same
/// credential drops the token from memory and tells its own listeners, once — after the stored
/// item was deleted, as for the Portal that saw the 401.
///
/// A credential is named by its auth environment and sign-in (`session_generation`), else by its
/// stored item, else — a session without either, which only tests build — by the session object.
/// So two `PortalSession`s restored separately from one stored sign-in are one credential.
enum CredentialRegistry {
    /// A registered Portal; the registry never keeps one alive.
    private final class Entry: @unchecked Sendable {
        weak var portal: Portal?
        init(_ portal: Portal) { self.portal = portal }
    }

    private static let portals = Lock<[String: [Entry]]>([:])

    static func key(_ session: PortalSession) -> String {
        if let generation = session.generation { return "g\u{0}\(session.authEnvironmentId)\u{0}\(generation)" }
        if let itemId = session.itemId { return "i\u{0}\(session.authEnvironmentId)\u{0}\(itemId)" }
        return "o\u{0}\(UInt(bitPattern: ObjectIdentifier(session).hashValue))"
    }

    /// Registers `portal` under its credential; entries of Portals that are gone are dropped.
    static func join(_ portal: Portal, credential: String) {
        portals.withLock { all in
            var entries = all[credential, default: []].filter { $0.portal != nil }
            entries.append(Entry(portal))
            all[credential] = entries
        }
    }

    /// Drops the entries of Portals that are gone (a Portal's deinit).
    static func prune(_ credential: String) {
        portals.withLock { all in
            let entries = all[credential, default: []].filter { $0.portal != nil }
            all[credential] = entries.isEmpty ? nil : entries
        }
    }

    /// The other live Portals on `credential`.
    static func peers(of portal: Portal, credential: String) -> [Portal] {
        portals.withLock { all in
            let entries = all[credential, default: []].filter { $0.portal != nil }
            all[credential] = entries.isEmpty ? nil : entries
            return entries.compactMap { $0.portal }.filter { $0 !== portal }
        }
    }
}
