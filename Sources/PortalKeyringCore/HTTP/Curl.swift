import CCurl
#if canImport(Glibc)
import Glibc
#endif

/// libcurl, loaded with `dlopen` on the first HTTP request rather than linked.
///
/// Restoring, persisting and clearing sessions never touch the network, and linking libcurl made
/// every host process load ~30 more libraries (TLS, Kerberos, LDAP, …): about +5 ms and +6 MiB
/// per process start (bench/results.md). The library tries `libcurl.so.4` (Debian's OpenSSL
/// build), then `libcurl-gnutls.so.4`, by soname only: the dynamic loader's system search path
/// decides (the release library carries no RUNPATH, so a file placed next to it is not loaded).
/// Loaded once per process, never unloaded; thread-safe.
///
/// Memory: when this library is the first to initialize libcurl in the process, it does so with
/// `curl_global_init_mem` and an allocator whose free and realloc wipe each block first
/// (`malloc_usable_size` bytes), so libcurl's own copies of a request (the request line and
/// headers it builds, with `Authorization: Bearer …`; a copied request body; response buffers)
/// are not left in freed heap memory. If the host process initialized libcurl before, libcurl
/// keeps the host's allocator and those copies stay (docs/security.md). TLS libraries allocate
/// on their own (OpenSSL's buffers of an HTTPS connection are not wiped by this).
struct Curl: @unchecked Sendable {
    typealias Easy = UnsafeMutableRawPointer
    typealias SList = UnsafeMutablePointer<curl_slist>

    let easyInit: @convention(c) () -> Easy?
    let easyCleanup: @convention(c) (Easy?) -> Void
    let easyPerform: @convention(c) (Easy?) -> CURLcode
    let easyStrerror: @convention(c) (CURLcode) -> UnsafePointer<CChar>?
    let slistAppend: @convention(c) (SList?, UnsafePointer<CChar>?) -> SList?
    let slistFreeAll: @convention(c) (SList?) -> Void
    let urlNew: @convention(c) () -> OpaquePointer?
    let urlCleanup: @convention(c) (OpaquePointer?) -> Void
    let urlSet: @convention(c) (OpaquePointer?, CURLUPart, UnsafePointer<CChar>?, UInt32) -> CURLUcode
    let urlGet: @convention(c) (OpaquePointer?, CURLUPart, UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, UInt32) -> CURLUcode
    let free: @convention(c) (UnsafeMutableRawPointer?) -> Void
    /// curl_easy_setopt / curl_easy_getinfo: variadic, called through the shim's typed wrappers.
    let setopt: UnsafeMutableRawPointer
    let getinfo: UnsafeMutableRawPointer

    /// The loaded library, or why it could not be loaded (reported as a network failure).
    static let shared: Result<Curl, HTTPFailure> = load()

    private static func load() -> Result<Curl, HTTPFailure> {
        var handle: UnsafeMutableRawPointer?
        var reasons: [String] = []
        for name in ["libcurl.so.4", "libcurl-gnutls.so.4"] {
            handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)
            if handle != nil { break }
            reasons.append(dlerror().map { String(cString: $0) } ?? name)
        }
        guard let handle else {
            return .failure(.transport("libcurl could not be loaded (\(reasons.joined(separator: "; "))); install libcurl4"))
        }
        var missing: [String] = []
        func address(_ name: String) -> UnsafeMutableRawPointer? {
            let address = dlsym(handle, name)
            if address == nil { missing.append(name) }
            return address
        }
        let symbols = ["curl_easy_init", "curl_easy_cleanup", "curl_easy_perform", "curl_easy_strerror",
                       "curl_slist_append", "curl_slist_free_all", "curl_url", "curl_url_cleanup", "curl_url_set",
                       "curl_url_get", "curl_free", "curl_easy_setopt", "curl_easy_getinfo", "curl_global_init_mem"]
        let found = symbols.map(address)
        guard missing.isEmpty else {
            return .failure(.transport("libcurl lacks \(missing.joined(separator: ", "))"))
        }
        let f = found.map { $0! }  // trusted: `missing` is empty, so every symbol was found
        guard unsafeBitCast(f[13], to: GlobalInitMem.self)(Int(CURL_GLOBAL_DEFAULT), wipingMalloc, wipingFree,
                                                            wipingRealloc, wipingStrdup, wipingCalloc) == CURLE_OK else {
            return .failure(.transport("libcurl could not be initialized"))
        }
        return .success(Curl(
            easyInit: unsafeBitCast(f[0], to: (@convention(c) () -> Easy?).self),
            easyCleanup: unsafeBitCast(f[1], to: (@convention(c) (Easy?) -> Void).self),
            easyPerform: unsafeBitCast(f[2], to: (@convention(c) (Easy?) -> CURLcode).self),
            easyStrerror: unsafeBitCast(f[3], to: (@convention(c) (CURLcode) -> UnsafePointer<CChar>?).self),
            slistAppend: unsafeBitCast(f[4], to: (@convention(c) (SList?, UnsafePointer<CChar>?) -> SList?).self),
            slistFreeAll: unsafeBitCast(f[5], to: (@convention(c) (SList?) -> Void).self),
            urlNew: unsafeBitCast(f[6], to: (@convention(c) () -> OpaquePointer?).self),
            urlCleanup: unsafeBitCast(f[7], to: (@convention(c) (OpaquePointer?) -> Void).self),
            urlSet: unsafeBitCast(f[8], to: (@convention(c) (OpaquePointer?, CURLUPart, UnsafePointer<CChar>?, UInt32) -> CURLUcode).self),
            urlGet: unsafeBitCast(f[9], to: (@convention(c) (OpaquePointer?, CURLUPart,
                                                             UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, UInt32) -> CURLUcode).self),
            free: unsafeBitCast(f[10], to: (@convention(c) (UnsafeMutableRawPointer?) -> Void).self),
            setopt: f[11],
            getinfo: f[12]))
    }
}

extension Curl {
    /// Wipes the text of every entry of a header list (one may be the bearer), then returns it
    /// for `curl_slist_free_all`.
    static func wipe(_ list: SList?) -> SList? {
        var entry = list
        while let current = entry {
            if let data = current.pointee.data { SecretBytes.wipe(data, strlen(data)) }
            entry = current.pointee.next
        }
        return list
    }

    typealias GlobalInitMem = @convention(c) (
        Int,
        @convention(c) (Int) -> UnsafeMutableRawPointer?,
        @convention(c) (UnsafeMutableRawPointer?) -> Void,
        @convention(c) (UnsafeMutableRawPointer?, Int) -> UnsafeMutableRawPointer?,
        @convention(c) (UnsafePointer<CChar>?) -> UnsafeMutablePointer<CChar>?,
        @convention(c) (Int, Int) -> UnsafeMutableRawPointer?
    ) -> CURLcode
}

// libcurl's allocator (curl_global_init_mem): the C library's, except that a block is wiped
// before it is freed, and a growing realloc moves into a new block and wipes the old one.
private let wipingMalloc: @convention(c) (Int) -> UnsafeMutableRawPointer? = { malloc($0) }
private let wipingCalloc: @convention(c) (Int, Int) -> UnsafeMutableRawPointer? = { calloc($0, $1) }
private let wipingStrdup: @convention(c) (UnsafePointer<CChar>?) -> UnsafeMutablePointer<CChar>? = { $0.flatMap { strdup($0) } }
private let wipingFree: @convention(c) (UnsafeMutableRawPointer?) -> Void = { block in
    guard let block else { return }
    SecretBytes.wipe(block, portal_malloc_usable_size(block))
    free(block)
}
private let wipingRealloc: @convention(c) (UnsafeMutableRawPointer?, Int) -> UnsafeMutableRawPointer? = { block, size in
    guard let block else { return malloc(size) }
    let usable = portal_malloc_usable_size(block)
    if size <= usable && size > 0 { return block }
    guard let moved = malloc(max(size, 1)) else { return nil }
    moved.copyMemory(from: block, byteCount: min(usable, size))
    SecretBytes.wipe(block, usable)
    free(block)
    return moved
}
