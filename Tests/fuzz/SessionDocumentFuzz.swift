// SessionDocumentFuzz.swift — libFuzzer target for the stored-session decoder
// (`SessionDocument.decode`, Sources/PortalKeyringCore/Storage/SessionDocument.swift).
//
// Built by Tests/fuzz/run.sh together with the PortalKeyringCore sources as one module (so internal
// API is visible), with `swiftc -sanitize=fuzzer,address -parse-as-library`. Not part of the
// Swift package.
//
// Checked for every input, besides "no crash, no trap, no leak reported by ASan":
//  - a decoded session is one `persistSession` would accept: the end user id passes
//    `PortalAuth.check`, the token `PortalAuth.checkToken` (non-empty, no NUL, at most 64 KiB,
//    not blank) — so the C ABI can always hand it out whole;
//  - decoding is deterministic;
//  - a decoded session (either version) survives encode (version 2) → decode byte-exact.
#if canImport(Glibc)
import Glibc
#endif

private func same(_ a: SecretBytes, _ b: SecretBytes) -> Bool {
    a.withUnsafeBytes { x in b.withUnsafeBytes { y in x.elementsEqual(y) } }
}

private func violation(_ what: String) -> Never {
    fputs("SessionDocumentFuzz: invariant violated: \(what)\n", stderr)
    abort()
}

@_cdecl("LLVMFuzzerTestOneInput")
public func sessionDocumentFuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size)
    guard let decoded = SessionDocument.decode(input) else {
        return 0
    }
    do {
        try PortalAuth.check(decoded.endUserId, name: "endUserId")
        try PortalAuth.checkToken(decoded.token, name: "clientSessionToken")
    } catch {
        violation("decode returned a session that persist would reject (\(error))")
    }
    guard let again = SessionDocument.decode(input), again.endUserId == decoded.endUserId,
          same(again.token, decoded.token) else {
        violation("decode is not deterministic")
    }
    let encoded = SessionDocument.encode(authEnvironmentId: decoded.authEnvironmentId ?? "env",
                                         endUserId: decoded.endUserId, token: decoded.token,
                                         generation: decoded.generation.map { g in g.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) && g.utf8.count <= 64 ? g : "0" } ?? "0",
                                         persistedAt: decoded.persistedAt ?? 0)
    guard let roundTrip = encoded.withUnsafeBytes({ SessionDocument.decode($0) }),
          roundTrip.endUserId == decoded.endUserId, same(roundTrip.token, decoded.token),
          roundTrip.authEnvironmentId == (decoded.authEnvironmentId ?? "env") else {
        violation("encode → decode does not round-trip")
    }
    return 0
}
