import CCurl
#if canImport(Glibc)
import Glibc
#endif

/// libcurl, loaded with `dlopen` on the first HTTP request rather than linked.
///
/// Restoring, persisting and clearing sessions never touch the network, and linking libcurl made
/// every host process load ~30 more libraries (TLS, Kerberos, LDAP, …): about +5 ms and +6 MiB
/// per process start (bench/results.md). The library tries `libcurl.so.4` (Debian's OpenSSL
/// build), then `libcurl-gnutls.so.4`. Loaded once per process, never unloaded; thread-safe.
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
                       "curl_url_get", "curl_free", "curl_easy_setopt", "curl_easy_getinfo", "curl_global_init"]
        let found = symbols.map(address)
        guard missing.isEmpty else {
            return .failure(.transport("libcurl lacks \(missing.joined(separator: ", "))"))
        }
        let f = found.map { $0! }
        typealias GlobalInit = @convention(c) (Int) -> CURLcode
        guard unsafeBitCast(f[13], to: GlobalInit.self)(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK else {
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
