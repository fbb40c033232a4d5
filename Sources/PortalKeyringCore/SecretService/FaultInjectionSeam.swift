import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// Points where a test program can act in the middle of an operation, made only when the
/// test program interposes the libsecret symbol named (ELF interposition: a test program that
/// defines the function, linked with -rdynamic, takes precedence for the library). The library
/// never calls either function otherwise, so production processes never pay for them.
///
/// - `secret_item_load_secrets_sync(NULL, …)` right before GetSecrets: the fault-injection suite
///   (`Tests/fault/fault_test.c`, condition 5) locks or deletes items exactly between the search
///   and GetSecrets.
/// - `secret_item_delete_sync(NULL, …)` right before Item.Delete: `Tests/fault/fault_test.c`
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
    private struct Flag: @unchecked Sendable { let interposed: Bool }
    private static func interposed(_ name: String) -> Flag {
        // RTLD_DEFAULT (NULL) finds the first definition in the process, an interposer first;
        // libsecret's handle finds its own.
        guard let global = dlsym(nil, name),
              let library = dlopen("libsecret-1.so.0", RTLD_LAZY | RTLD_NOLOAD) else { return Flag(interposed: false) }
        defer { dlclose(library) }
        return Flag(interposed: dlsym(library, name) != global)
    }
    private static let getSecrets = interposed("secret_item_load_secrets_sync")
    private static let createItem = interposed("secret_item_set_secret_sync")
    private static let lockedCheck = interposed("secret_collection_load_items_sync")
    private static let prompt = interposed("secret_prompt_perform_sync")
    private static let delete = interposed("secret_item_delete_sync")

    static func beforeGetSecrets(_ cancellable: UnsafeMutablePointer<GCancellable>) {
        guard getSecrets.interposed else { return }
        var error: UnsafeMutablePointer<GError>?
        _ = secret_item_load_secrets_sync(nil, cancellable, &error)
        if let error { g_error_free(error) }
    }

    static func beforeDelete(_ cancellable: UnsafeMutablePointer<GCancellable>) {
        guard delete.interposed else { return }
        var error: UnsafeMutablePointer<GError>?
        _ = secret_item_delete_sync(nil, cancellable, &error)
        if let error { g_error_free(error) }
    }

    static func beforeCreateItem(_ cancellable: UnsafeMutablePointer<GCancellable>) {
        guard createItem.interposed else { return }
        var error: UnsafeMutablePointer<GError>?
        _ = secret_item_set_secret_sync(nil, nil, cancellable, &error)
        if let error { g_error_free(error) }
    }

    static func beforeLockedCheck(_ cancellable: UnsafeMutablePointer<GCancellable>) {
        guard lockedCheck.interposed else { return }
        var error: UnsafeMutablePointer<GError>?
        _ = secret_collection_load_items_sync(nil, cancellable, &error)
        if let error { g_error_free(error) }
    }

    static func beforePrompt(_ path: String) {
        guard prompt.interposed else { return }
        var error: UnsafeMutablePointer<GError>?
        if let reply = secret_prompt_perform_sync(nil, path, nil, nil, &error) { g_variant_unref(reply) }
        if let error { g_error_free(error) }
    }
}
