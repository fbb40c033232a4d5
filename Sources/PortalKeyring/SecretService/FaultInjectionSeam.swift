import CLibSecret
#if canImport(Glibc)
import Glibc
#endif

/// A no-op call of `secret_item_load_secrets_sync` (an empty list: no D-Bus traffic) right
/// before GetSecrets, made only when that symbol is interposed: the fault-injection suite
/// (`Tests/fault/fault_test.c`, condition 5) defines it in the test program to lock or delete
/// items exactly between the search and GetSecrets. Production processes never pay for it.
enum FaultInjectionSeam {
    private struct Flag: @unchecked Sendable { let interposed: Bool }
    private static let flag: Flag = {
        let name = "secret_item_load_secrets_sync"
        // RTLD_DEFAULT (NULL) finds the first definition in the process, an interposer first;
        // libsecret's handle finds its own.
        guard let global = dlsym(nil, name),
              let library = dlopen("libsecret-1.so.0", RTLD_LAZY | RTLD_NOLOAD) else { return Flag(interposed: false) }
        defer { dlclose(library) }
        return Flag(interposed: dlsym(library, name) != global)
    }()

    static func beforeGetSecrets(_ cancellable: UnsafeMutablePointer<GCancellable>) {
        guard flag.interposed else { return }
        var error: UnsafeMutablePointer<GError>?
        _ = secret_item_load_secrets_sync(nil, cancellable, &error)
        if let error { g_error_free(error) }
    }
}
