// The operations of a portal, each written once: its `prepare…` function reads and checks the
// C arguments on the calling thread (a secret through `secretArgument`, wiped when the work is
// released) and returns the work (`PreparedWork`); the blocking export runs that inline, the
// _async export on a worker (`startAsync`, AsyncOperation.swift). Documentation lives in
// Include/portal_keyring.h.
import CPortalKeyring
@_spi(Bindings) import PortalKeyringCore
#if canImport(Glibc)
import Glibc
#endif

// MARK: - request

/// The method (allowlisted), target and body of portal_request(_async), and the core's check
/// of the target, so that the _async form refuses a bad one at once (Tests/c/async_test/portal_calls.c).
private func prepareRequest(_ portal: OpaquePointer?, _ method: UnsafePointer<CChar>?, _ target: UnsafePointer<CChar>?,
                            _ body: UnsafePointer<CChar>?) throws(CFailure) -> PreparedWork {
    let portal = Shared(value: try borrowHandle(portal, as: Portal.self, "portal"))
    let method = try stringArgument(method, "method", maxBytes: 16)
    guard PortalRequest.allowedMethods.contains(method) else {
        throw .invalidArgument("method", "must be GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS")
    }
    let target = try stringArgument(target, "target", maxBytes: 8192)
    let bodyBytes: [UInt8]? = body == nil ? nil : Array(try stringArgument(body, "body", maxBytes: 1 << 20).utf8)
    let request = PortalRequest(method: method, target: target, body: bodyBytes)
    try core(names: ["target": "target"]) { () throws(PortalAuthError) in try portal.value.checkArguments(of: request) }
    return { () throws(CFailure) in
        let response = try core(names: ["target": "target"]) { () throws(PortalAuthError) in
            try portal.value.send(request)
        }
        let copy = try responseBody(response)
        return Outcome(httpStatus: response.status, body: copy, bodyLength: response.bodyCount)
    }
}

/// A caller-owned copy of a response body with a NUL after it (portal_string_free()).
private func responseBody(_ response: PortalResponse) throws(CFailure) -> UnsafeMutablePointer<CChar> {
    guard let copy = malloc(response.bodyCount + 1) else {
        throw CFailure(status: PORTAL_ERR_INTERNAL, message: "out of memory")
    }
    // Straight from the library's wiped copy (`body` would make an unwiped array), and handed out
    // with its whole length, so that portal_string_free wipes past a NUL inside the body.
    response.withBodyBytes { if let base = $0.baseAddress { memcpy(copy, base, $0.count) } }
    copy.storeBytes(of: 0, toByteOffset: response.bodyCount, as: UInt8.self)
    return handOutString(copy.assumingMemoryBound(to: CChar.self), size: response.bodyCount + 1)
}

@c @implementation
public func portal_request(_ portal: OpaquePointer?, _ method: UnsafePointer<CChar>?, _ target: UnsafePointer<CChar>?,
                           _ body: UnsafePointer<CChar>?, _ statusOut: UnsafeMutablePointer<Int>?,
                           _ bodyOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                           _ bodyLenOut: UnsafeMutablePointer<Int>?) -> portal_status {
    exported { () throws(CFailure) in
        let work = try prepareRequest(portal, method, target, body)
        var outcome = try work()
        defer { outcome.release() }
        if let bodyOut { bodyOut.pointee = outcome.body.take() }
        bodyLenOut?.pointee = outcome.bodyLength
        statusOut?.pointee = outcome.httpStatus
    }
}

@c @implementation
public func portal_request_async(_ portal: OpaquePointer?, _ method: UnsafePointer<CChar>?, _ target: UnsafePointer<CChar>?,
                                 _ body: UnsafePointer<CChar>?, _ queue: OpaquePointer?, _ callback: portal_completion_cb?,
                                 _ userData: UnsafeMutableRawPointer?, _ destroyNotify: portal_destroy_notify?,
                                 _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startAsync(queue, callback, userData, destroyNotify, operationOut) { () throws(CFailure) in
        try prepareRequest(portal, method, target, body)
    }
}

// MARK: - report_unauthorized

private func prepareReportUnauthorized(_ portal: OpaquePointer?,
                                       _ rejectedToken: UnsafePointer<CChar>?) throws(CFailure) -> PreparedWork {
    let portal = Shared(value: try borrowHandle(portal, as: Portal.self, "portal"))
    let token = try secretArgument(rejectedToken, "rejected_token", maxBytes: PortalAuth.maxTokenBytes)
    return { () throws(CFailure) in
        let invalidated = try core { () throws(PortalAuthError) in
            try portal.value.reportUnauthorized(rejectedToken: token.value)
        }
        return Outcome(invalidated: invalidated)
    }
}

@c @implementation
public func portal_report_unauthorized(_ portal: OpaquePointer?, _ rejectedToken: UnsafePointer<CChar>?,
                                       _ invalidatedOut: UnsafeMutablePointer<Bool>?) -> portal_status {
    exported { () throws(CFailure) in
        let outcome = try prepareReportUnauthorized(portal, rejectedToken)()
        invalidatedOut?.pointee = outcome.invalidated
    }
}

@c @implementation
public func portal_report_unauthorized_async(_ portal: OpaquePointer?, _ rejectedToken: UnsafePointer<CChar>?,
                                             _ queue: OpaquePointer?, _ callback: portal_completion_cb?,
                                             _ userData: UnsafeMutableRawPointer?, _ destroyNotify: portal_destroy_notify?,
                                             _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startAsync(queue, callback, userData, destroyNotify, operationOut, lane: .keyring) { () throws(CFailure) in
        try prepareReportUnauthorized(portal, rejectedToken)
    }
}

// MARK: - clear_session

private func prepareClearSession(_ portal: OpaquePointer?) throws(CFailure) -> PreparedWork {
    let portal = Shared(value: try borrowHandle(portal, as: Portal.self, "portal"))
    return { () throws(CFailure) in
        try core { () throws(PortalAuthError) in try portal.value.clearSession() }
        return Outcome()
    }
}

@c @implementation
public func portal_clear_session(_ portal: OpaquePointer?) -> portal_status {
    exported { () throws(CFailure) in _ = try prepareClearSession(portal)() }
}

@c @implementation
public func portal_clear_session_async(_ portal: OpaquePointer?, _ queue: OpaquePointer?, _ callback: portal_completion_cb?,
                                       _ userData: UnsafeMutableRawPointer?, _ destroyNotify: portal_destroy_notify?,
                                       _ operationOut: UnsafeMutablePointer<UInt64>?) -> portal_status {
    startAsync(queue, callback, userData, destroyNotify, operationOut, lane: .keyring) { () throws(CFailure) in
        try prepareClearSession(portal)
    }
}
