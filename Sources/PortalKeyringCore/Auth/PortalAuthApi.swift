/// The client-auth transport: one request to `/api/v3/auth/*`, its headers, and how a status
/// becomes a `PortalAuthError` (docs/sign-in.md#magic-links; the contract PortalSwift's `PortalAuthApi`
/// speaks). Sequencing, storage and the pending sign-in live in SignIn.swift.
extension PortalAuth {
    /// Longest server text kept in `accountAbstractionUnavailable(message:)` (PortalSwift's cap).
    static let maxServerMessageCharacters = 200
    /// Longest client-auth answer read (256 KiB; docs/security.md, "A planted oversized item"): the largest legitimate one
    /// carries a Client Session Token of at most `maxTokenBytes` (64 KiB), a user JWT and a few
    /// identifiers, with room for JSON escapes. The transfer stops past it, before anything is
    /// parsed: a 2xx answer that long is a `networkFailure` saying so; another status is read
    /// by its status alone.
    static let maxAnswerBytes = 256 << 10

    func authorizeURL(provider: String) throws(PortalAuthError) -> String {
        try pendingSignIn.record()
        // One call answers for both providers; a provider the auth environment has not enabled
        // is absent from `data` (not an error status). Only these parameters: the backend
        // refuses others.
        var path = "/api/v3/auth/oauth/urls?redirectUrl=" + Self.formEncode(redirectUrl)
        if let isAccountAbstracted { path += "&isAccountAbstracted=" + (isAccountAbstracted ? "true" : "false") }
        struct Wire: Decodable { let google: String?; let apple: String? }
        let wire: Wire = try api("GET", path, accountAbstraction: isAccountAbstracted != nil)
        let url = (provider == "GOOGLE" ? wire.google ?? "" : wire.apple ?? "").trimmingWhitespace()
        guard !url.isEmpty else { throw .authMethodUnavailable(method: provider) }
        return url
    }

    /// One client-auth call whose 2xx answer is `{"data": …}` (missing or null `data`:
    /// `malformedResponse(field: "data")`). See `apiResponse` for the request and the errors.
    func api<Response: Decodable>(_ method: String, _ path: String, body: (some Encodable)? = Optional<String>.none,
                                  bearer: SecretBytes? = nil, unauthorized: PortalAuthError = .unauthorized,
                                  accountAbstraction: Bool = false) throws(PortalAuthError) -> Response {
        let response = try apiResponse(method, path, body: body, bearer: bearer, unauthorized: unauthorized,
                                       accountAbstraction: accountAbstraction)
        guard let envelope = try? Self.decode(Envelope<Response>.self, response), let data = envelope.data else {
            throw .malformedResponse(field: "data")
        }
        return data
    }

    /// One client-auth call: headers `x-portal-auth-environment-id`, a fresh `X-Portal-Trace-Id`
    /// (`TraceId`), `Content-Type: application/json` also on a GET (as the Portal SDKs send it),
    /// JSON in. Returns a 2xx response unread; any other status throws
    /// (`error(for:…)`).
    func apiResponse(_ method: String, _ path: String, body: (some Encodable)? = Optional<String>.none,
                     bearer: SecretBytes? = nil, unauthorized: PortalAuthError = .unauthorized,
                     accountAbstraction: Bool = false) throws(PortalAuthError) -> PortalResponse {
        guard let target = TargetURL.forAPI(host: apiHost, path: path) else { throw .invalidArgument(name: "apiHost") }
        var bytes: [UInt8]?
        if let body {
            do { bytes = try JSONTextEncoder.encode(body) } catch { throw .invalidArgument(name: "body") }
        }
        let request = PortalRequest(method: method, target: path,
                                    headers: [(name: "x-portal-auth-environment-id", value: authEnvironmentId),
                                              (name: "Content-Type", value: "application/json"),
                                              (name: TraceId.header, value: TraceId.fresh())], body: bytes)
        let response: PortalResponse
        do {
            response = try http.send(request, to: target, bearer: bearer, maxBodyBytes: Self.maxAnswerBytes)
        } catch {
            // An oversized error answer (a proxy's page) still says what its status says.
            if case .oversized(_, let status) = error, (300..<600).contains(status) {
                throw Self.error(for: PortalResponse(status: status, bodyBytes: SecretBytes(count: 0) { _ in }),
                                 unauthorized: unauthorized, accountAbstraction: accountAbstraction,
                                 authority: target.authority)
            }
            throw .networkFailure(message: error.message(reaching: target.authority))
        }
        guard (200..<300).contains(response.status) else {
            throw Self.error(for: response, unauthorized: unauthorized, accountAbstraction: accountAbstraction,
                             authority: target.authority)
        }
        return response
    }

    /// A non-2xx answer as PortalSwift reads it: 429 → `rateLimited` (its `Retry-After` when
    /// sent; the backend sends none); 401 → `unauthorized` (the route's own case: a rejected
    /// grant, a rejected user JWT); on the routes that take `isAccountAbstracted`, when the app
    /// set it (`accountAbstraction`), 400 with `{"error": String}` → `accountAbstractionUnavailable`
    /// (PortalSwift maps it whether set or not; without the option the backend's 400 — a disabled
    /// method, a refused field — has another cause, and naming account abstraction would send the
    /// app the wrong way: it is `clientError`); 5xx → `internalServerError`
    /// (never a failed sign-in); other 4xx (403 among them) → `clientError`; anything else (a
    /// redirect, which is not followed) → `networkFailure`. Server text is sanitized and capped.
    static func error(for response: PortalResponse, unauthorized: PortalAuthError, accountAbstraction: Bool,
                      authority: String) -> PortalAuthError {
        let detail = try? decode(ErrorBody.self, response)
        switch response.status {
        case 429:
            return .rateLimited(retryAfterSeconds: response.retryAfterSeconds)
        case 401:
            return unauthorized
        case 400 where accountAbstraction && detail?.error != nil:
            let text = DisplayText.sanitized(detail?.error ?? "", limit: maxServerMessageCharacters)
            return .accountAbstractionUnavailable(message: String(text.prefix(maxServerMessageCharacters)))
        case 500..<600:
            return .internalServerError(status: response.status)
        case 400..<500:
            return .clientError(status: response.status,
                                message: (detail?.error ?? detail?.message).map { DisplayText.sanitized($0) } ?? "")
        default:
            return .networkFailure(message: "unexpected HTTP \(response.status) from \(authority)")
        }
    }

    /// Decodes the response body where the library received it (wiped on release): no array or
    /// `Data` copy of a body that may carry a CST is left behind in freed memory.
    static func decode<T: Decodable>(_ type: T.Type, _ response: PortalResponse) throws -> T {
        try response.withBodyBytes { bytes in try JSONTextDecoder.decode(type, from: bytes) }
    }

    /// Form-encodes a query value as the Portal SDKs do (Java's `URLEncoder`, with a space as
    /// `%20`): `A–Z a–z 0–9 - _ . *` kept, every other byte `%XX` in upper case. The backend
    /// compares `redirectUrl` byte for byte with its allow-list, so the form matters.
    static func formEncode(_ value: String) -> String {
        var out = ""
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "*"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                out += "%" + String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 15)]], as: UTF8.self)
            }
        }
        return out
    }
}

private struct Envelope<T: Decodable>: Decodable { let data: T? }
private struct ErrorBody: Decodable { let error: String?; let message: String? }
