// swift-tools-version:6.2
// portal-keyring: Portal's client-side session layer for Linux (the Secret Service over GDBus).
import PackageDescription

let package = Package(
    name: "portal-keyring",
    products: [
        // libportal-keyring.so: the C ABI (Include/portal_keyring.h).
        .library(name: "portal-keyring", type: .dynamic, targets: ["PortalKeyringC"]),
        // The Swift API, for Swift apps: the core and its `async` spellings.
        .library(name: "PortalKeyring", targets: ["PortalKeyring"]),
        // The command-line tool for scripts and desktop integration.
        .executable(name: "portal-session", targets: ["portal-session"]),
    ],
    targets: [
        // GLib/GIO (GDBus) and libgcrypt, which the library talks through; libsecret-1's header
        // only, not linked (the module map says more). Header directories come
        // from our own .pc file (absolute path): libsecret-1.pc's private dependencies carry
        // -pthread, which SwiftPM refuses with a warning in this package and every dependent.
        .systemLibrary(
            name: "CGLib",
            pkgConfig: Context.packageDirectory + "/build-support/pkgconfig/portal-keyring-glib.pc",
            providers: [.apt(["libsecret-1-dev"])]
        ),
        // libcurl's headers (Debian: libcurl4-openssl-dev). Not linked: the HTTP client loads
        // libcurl.so.4 with dlopen on its first request, so restore-only hosts never pay for it
        // and its ~30 dependencies (bench/results.md).
        .systemLibrary(name: "CCurl"),
        // The public C header, imported so that `@c @implementation` checks every export against it.
        .systemLibrary(name: "CPortalKeyring", path: "Include"),
        // jsmn (Debian libjsmn-dev), the JSON tokenizer: its definitions compiled once, strict.
        .target(name: "CJsmn"),
        // The core: the keyring, the HTTP client, the sign-ins, the watch; blocking calls only,
        // so that it needs neither Swift's concurrency runtime nor libdispatch.
        .target(
            name: "PortalKeyringCore",
            dependencies: ["CGLib", "CCurl", "CJsmn"]
        ),
        // The Swift API: the core re-exported, with the `async` spellings and main-actor
        // listeners (the concurrency runtime), which the C library does not link.
        .target(
            name: "PortalKeyring",
            dependencies: ["PortalKeyringCore"]
        ),
        .target(
            name: "PortalKeyringC",
            // CGLib for GLib's main contexts: the completion queues of the non-blocking calls.
            dependencies: ["PortalKeyringCore", "CPortalKeyring", "CGLib"]
        ),
        .executableTarget(
            name: "portal-session",
            // Blocking calls only: the core, without the concurrency runtime.
            dependencies: ["PortalKeyringCore"]
        ),
        .testTarget(
            name: "PortalKeyringTests",
            dependencies: ["PortalKeyring", "PortalKeyringCore"]
        ),
    ]
)
