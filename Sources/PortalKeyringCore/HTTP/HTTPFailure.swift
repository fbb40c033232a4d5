/// Why a request did not produce a response.
enum HTTPFailure: Error, Equatable {
    /// The library refused to send it (for example a bearer over plain HTTP to a non-loopback host).
    case refused(String)
    /// Connection failure, TLS failure, reset or timeout.
    case transport(String)
    /// The answer's body ran past `limit` bytes, the most the request reads (`HTTPClient.send`'s
    /// `maxBodyBytes`): the transfer was stopped there and nothing of the body is used. `status`
    /// is the answer's HTTP status (0 when none had come).
    case oversized(limit: Int, status: Int)

    var message: String {
        switch self {
        case .refused(let m): return "request refused: \(m)"
        case .transport(let m): return m
        case .oversized(let limit, _): return "the answer was larger than \(limit) bytes, the most this request reads; it was not read"
        }
    }

    /// The message of a `networkFailure` for a request to `authority` (host[:port]): names the
    /// host, and says "network" once (the error's own description adds "network failure:").
    func message(reaching authority: String) -> String {
        switch self {
        case .refused(let m): return "request to \(authority) refused: \(m)"
        case .transport(let m): return "could not reach \(authority): \(m)"
        case .oversized(let limit, _):
            return "the answer from \(authority) was larger than \(limit) bytes, the most this request reads; it was not read"
        }
    }
}
