// The Swift module apps import: the core (PortalKeyringCore: the keyring, the HTTP client, the
// sign-ins, the watch) and, in this module, the `async` spellings and the main-actor listeners.
// They live apart because they need Swift's concurrency runtime (and, on Linux, libdispatch):
// the C library (PortalKeyringC) links the core alone, so it loads neither (bench/results.md).
@_exported import PortalKeyringCore
