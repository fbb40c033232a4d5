import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// Points where a test program can act in the middle of an operation, made only when the
/// test program defines the libsecret function named (linked with -rdynamic, so that the library
/// finds it with dlsym). The library neither links libsecret nor calls these otherwise, so
/// production processes never pay for them.
///
/// - `secret_item_load_secrets_sync(NULL, …)` right before GetSecrets: the fault-injection suite
///   (`Tests/fault/fault_test/keyring_states.c`, condition 5) locks or deletes items exactly between the search
///   and GetSecrets.
/// - `secret_item_delete_sync(NULL, …)` right before Item.Delete: `Tests/fault/slow_provider_test.c`
///   (condition 15) stops the provider there, so a restore's delete of an unusable item finds it
///   slow, and the restore must end at its one deadline.
/// - `secret_item_set_secret_sync(NULL, NULL, …)` right before CreateItem: `Tests/c/persist_order_test.c`
///   locks the collection (the create fails while the older item is deletable), or stores a newer
///   sign-in from another process (which persist must not remove).
/// - `secret_prompt_perform_sync(NULL, PROMPT_PATH, …)` right before `Prompt.Prompt` of a create or
///   delete prompt (subscribed to its `Completed` already): `Tests/providers/refused_test.c`
///   dismisses the prompt there, as a person or another program could.
/// - `secret_collection_load_items_sync(NULL, …)` right before the default collection's Locked
///   property is read, when a search found nothing: `Tests/providers/unlock_race_test.c` unlocks
///   KeePassXC exactly there (its searches skip a locked database).
enum FaultInjectionSeam {
    /// The interposer's definition of a libsecret function, or nil. The library does not link
    /// libsecret: a definition that RTLD_DEFAULT finds is an interposer unless it is libsecret's
    /// own (an application that uses libsecret has it loaded).
    private struct Interposer: @unchecked Sendable { let function: UnsafeMutableRawPointer? }
    private static func interposer(_ name: String) -> Interposer {
        guard let global = dlsym(nil, name) else { return Interposer(function: nil) }
        if let library = dlopen("libsecret-1.so.0", RTLD_LAZY | RTLD_NOLOAD) {
            defer { dlclose(library) }
            if dlsym(library, name) == global { return Interposer(function: nil) }
        }
        return Interposer(function: global)
    }
    private static let getSecrets = interposer("secret_item_load_secrets_sync")
    private static let createItem = interposer("secret_item_set_secret_sync")
    private static let lockedCheck = interposer("secret_collection_load_items_sync")
    private static let prompt = interposer("secret_prompt_perform_sync")
    private static let delete = interposer("secret_item_delete_sync")

    /// `gboolean f(object, GCancellable *, GError **)`: the shape of three of the seams (the
    /// object, a GList * or a SecretItem * or a SecretCollection *, is always NULL here).
    private typealias ObjectCall = @convention(c) (
        UnsafeMutableRawPointer?, UnsafeMutablePointer<GCancellable>?, UnsafeMutablePointer<UnsafeMutablePointer<GError>?>?
    ) -> gboolean

    private static func call(_ seam: Interposer, _ cancellable: UnsafeMutablePointer<GCancellable>) {
        guard let function = seam.function else { return }
        var error: UnsafeMutablePointer<GError>?
        _ = unsafeBitCast(function, to: ObjectCall.self)(nil, cancellable, &error)
        if let error { g_error_free(error) }
    }

    static func beforeGetSecrets(_ cancellable: UnsafeMutablePointer<GCancellable>) { call(getSecrets, cancellable) }

    static func beforeDelete(_ cancellable: UnsafeMutablePointer<GCancellable>) { call(delete, cancellable) }

    static func beforeLockedCheck(_ cancellable: UnsafeMutablePointer<GCancellable>) { call(lockedCheck, cancellable) }

    /// `secret_item_set_secret_sync(SecretItem *, SecretValue *, GCancellable *, GError **)`.
    static func beforeCreateItem(_ cancellable: UnsafeMutablePointer<GCancellable>) {
        guard let function = createItem.function else { return }
        typealias SetSecret = @convention(c) (
            UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, UnsafeMutablePointer<GCancellable>?,
            UnsafeMutablePointer<UnsafeMutablePointer<GError>?>?
        ) -> gboolean
        var error: UnsafeMutablePointer<GError>?
        _ = unsafeBitCast(function, to: SetSecret.self)(nil, nil, cancellable, &error)
        if let error { g_error_free(error) }
    }

    /// `secret_prompt_perform_sync(SecretPrompt *, const gchar *window_id, GCancellable *,
    /// const GVariantType *, GError **)`, with the prompt's object path as the window id.
    static func beforePrompt(_ path: String) {
        guard let function = prompt.function else { return }
        typealias Perform = @convention(c) (
            UnsafeMutableRawPointer?, UnsafePointer<CChar>?, UnsafeMutablePointer<GCancellable>?, UnsafeRawPointer?,
            UnsafeMutablePointer<UnsafeMutablePointer<GError>?>?
        ) -> OpaquePointer?
        var error: UnsafeMutablePointer<GError>?
        if let reply = unsafeBitCast(function, to: Perform.self)(nil, path, nil, nil, &error) { g_variant_unref(reply) }
        if let error { g_error_free(error) }
    }
}
