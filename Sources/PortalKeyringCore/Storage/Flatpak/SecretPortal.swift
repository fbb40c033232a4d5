import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// The Secret portal: `org.freedesktop.portal.Secret` on `org.freedesktop.portal.Desktop`,
/// through which the host hands a sandboxed app the master secret of its file keyring (64
/// bytes, one per app id, kept by the host's keyring: gnome-keyring keeps it in the login
/// collection). What libsecret's file backend uses, so that our items and the app's own
/// libsecret secrets share one key and one file (docs/providers.md, "Flatpak").
///
/// Each call opens a private connection of its own (`BusConnection.open`; closed after), finds
/// the portal's unique name (starting it by D-Bus activation when nobody owns the name, as the
/// desktop would) and calls it through `BusCall`, everything bounded by the operation's end. A
/// key is derived from the secret once per keyring file (`FileKeyringMasterSecret`), so this
/// runs about once per process. Every failure is `StorageFailure.secretPortal`: the state of
/// the keyring cannot be read now, which is never "signed out", and nothing is deleted.
enum SecretPortal {
    static let busName = "org.freedesktop.portal.Desktop"
    static let path = "/org/freedesktop/portal/desktop"
    static let interface = "org.freedesktop.portal.Secret"
    /// The size of the master secret the portal API promises (and libsecret requires).
    static let secretSize = 64

    /// The portal's `version` property, read before `end`: 0 when the portal is there but has no
    /// Secret interface (a desktop without a Secret portal backend, such as Plasma 5). Throws
    /// when the portal cannot be asked (no bus, no portal, no answer).
    static func version(until end: MonotonicInstant) throws(StorageFailure) -> UInt32 {
        try withPortal("the version of the Secret portal", until: end) { connection, portal, cancellable throws(StorageFailure) in
            let reply: OpaquePointer
            do throws(StorageFailure.Classified) {
                reply = try BusCall.call(connection, destination: portal, path, "org.freedesktop.DBus.Properties", "Get",
                                         Variant.tuple([g_variant_new_string(interface), g_variant_new_string("version")]),
                                         "(v)", .deadline(cancellable), "could not read the Secret portal's version")
            } catch {
                // The portal answered: it has no such interface or property.
                if let name = error.name, Self.noSecretInterface.contains(name) { return 0 }
                throw failure("its version could not be read", error)
            }
            defer { g_variant_unref(reply) }
            // The property's value has whatever type the portal gave it.
            guard let boxed = Variant.child(reply, 0) else { throw .secretPortal("unexpected answer to the version query") }
            defer { g_variant_unref(boxed) }
            guard let value = Variant.unboxed(boxed) else { throw .secretPortal("unexpected answer to the version query") }
            defer { g_variant_unref(value) }
            guard Variant.has(value, type: "u") else { throw .secretPortal("its version is not a number (u)") }
            return g_variant_get_uint32(value)
        }
    }

    /// The errors with which a portal says it has no Secret interface (GDBus answers a Get of
    /// an unknown interface with InvalidArgs).
    static let noSecretInterface: Set<String> = [
        "org.freedesktop.DBus.Error.InvalidArgs", "org.freedesktop.DBus.Error.UnknownInterface",
        "org.freedesktop.DBus.Error.UnknownProperty", "org.freedesktop.DBus.Error.UnknownObject",
        "org.freedesktop.DBus.Error.UnknownMethod",
    ]

    /// The app's master secret (`RetrieveSecret`), asked for before `end`: the `Response`
    /// subscribed before the call (`SecretPortalRequest`), the write end of a pipe passed with
    /// the call and our copy closed once it is answered, and after
    /// `Response` 0 exactly `secretSize` bytes read from the pipe (`SecretPipe`). `Response` 1
    /// (cancelled), 2 (failed: the host's keyring is locked and nobody can unlock it now) or no
    /// `Response` within the deadline: `.secretPortal`, nothing read.
    static func retrieveSecret(until end: MonotonicInstant) throws(StorageFailure) -> SecretBytes {
        try withPortal("RetrieveSecret", until: end) { connection, portal, cancellable throws(StorageFailure) in
            let pipe: SecretPipe
            let fdList: UnsafeMutablePointer<GUnixFDList>
            do throws(SecretPipe.Failure) {
                pipe = try SecretPipe()
                fdList = try pipe.fdList()
            } catch {
                throw .secretPortal("RetrieveSecret: \(error.message)")
            }
            let request = SecretPortalRequest(connection: connection, portal: portal)
            defer { request.close() }
            let options = Variant.propertyDictionary([("handle_token", g_variant_new_string(request.token))])
            let reply: OpaquePointer
            do throws(StorageFailure.Classified) {
                defer {
                    g_object_unref(fdList)
                    pipe.closeWriteEnd()
                }
                reply = try BusCall.call(connection, destination: portal, path, interface, "RetrieveSecret",
                                         Variant.tuple([g_variant_new_handle(0), options]), "(o)", .deadline(cancellable),
                                         "RetrieveSecret failed", fdList: fdList)
            } catch {
                throw failure("RetrieveSecret failed", error)
            }
            if let handle = Variant.string(reply, 0), handle != request.path { request.follow(handle) }
            g_variant_unref(reply)
            guard let code = request.wait(cancellable) else {
                throw .secretPortal("no answer to RetrieveSecret (no Response signal); nothing was read")
            }
            guard code == 0 else { throw .secretPortal(refusal(code)) }
            do throws(SecretPipe.Failure) {
                return try pipe.read(exactly: secretSize, until: end, cancellable)
            } catch {
                throw .secretPortal("RetrieveSecret answered success, but the master secret is not \(secretSize) bytes: "
                                    + error.message)
            }
        }
    }

    /// What `Response` `code` (not 0) means here.
    static func refusal(_ code: UInt32) -> String {
        let what: String
        switch code {
        case 1: what = "cancelled (1)"
        case 2: what = "failed (2): the host's keyring could not give this app's master secret now (it may be locked, "
                + "with nobody to unlock it)"
        default: what = "answered \(code)"
        }
        return "RetrieveSecret \(what); the keyring cannot be read now, nothing was read or deleted"
    }

    /// `body` with a connection of its own, the portal's unique name and the cancellable of a
    /// deadline at `end`, as `what` (for messages). Every failure becomes `.secretPortal`.
    private static func withPortal<T>(_ what: String, until end: MonotonicInstant,
                                      _ body: (OpaquePointer, String, UnsafeMutablePointer<GCancellable>) throws(StorageFailure) -> T)
        throws(StorageFailure) -> T {
        ForkSafety.install()
        if ForkSafety.dbusUnusable { throw ForkSafety.childFailure }
        // The time left, rounded up: a call made at once says the deadline it was given.
        let end = max(end, MonotonicInstant.now.advanced(byMilliseconds: 1))
        let milliseconds = UInt32(clamping: end.remainingMilliseconds)
        do {
            return try Deadlines.shared.run(operation: what, until: end, reporting: milliseconds) { deadline throws(StorageFailure) -> T in
                let connection: OpaquePointer
                do throws(StorageFailure) {
                    connection = try BusConnection.open(deadline.cancellable)
                } catch {
                    throw .secretPortal("not reachable: " + error.message)
                }
                defer {
                    g_dbus_connection_close_sync(connection, nil, nil)
                    g_object_unref(UnsafeMutableRawPointer(connection))
                }
                let portal: String
                do throws(StorageFailure) {
                    portal = try ProviderName.resolve(busName, on: connection, deadline.cancellable)
                } catch {
                    throw .secretPortal("not reachable: " + error.message.droppingPrefix("Secret Service unavailable: "))
                }
                return try body(connection, portal, deadline.cancellable)
            }
        } catch {
            if case .timedOut = error { throw .secretPortal("no answer to \(what) within \(milliseconds) ms; nothing was read") }
            throw error
        }
    }

    /// A failed call to the portal, worded.
    private static func failure(_ what: String, _ error: StorageFailure.Classified) -> StorageFailure {
        switch error.kind {
        case .unavailable: return .secretPortal("not reachable (\(what)): \(error.message)")
        default: return .secretPortal("\(what): \(error.message)")
        }
    }
}

private extension String {
    func droppingPrefix(_ prefix: String) -> String {
        hasPrefix(prefix) ? String(dropFirst(prefix.count)) : self
    }
}
