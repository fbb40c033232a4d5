/*
 * portal_keyring.hpp — a header-only C++17 RAII wrapper over the C ABI in portal_keyring.h.
 *
 *   #include <portal_keyring.hpp>   // link with -lportal-keyring
 *
 *   portal_keyring::auth auth("YOUR_AUTH_ENVIRONMENT_ID", "myapp://portal/redirect");
 *   if (std::optional<portal_keyring::session> s = auth.restore_session()) {   // no network
 *       portal_keyring::portal portal(*s);               // validates the CST in the background
 *       portal.on_session_invalidated([] { show_sign_in(); });
 *   } else {
 *       show_sign_in();                                  // signed out
 *   }                                                    // session_storage_failure: NOT signed out
 *
 * Everything here is a thin layer over portal_keyring.h; read the C header for what each call
 * does (blocking, keyring I/O, network). The wrapper adds:
 *
 *  - Ownership: auth, session and portal own their library handle and free it in their
 *    destructor. They are move-only; a moved-from object holds no handle (calls on it throw
 *    invalid_argument, as the C functions do for NULL). secret owns a token copy and wipes it
 *    (portal_string_free) when destroyed.
 *  - Errors: every failed call throws a subclass of portal_keyring::error, one per status code,
 *    carrying code() and the library's message() (copied at once from the thread-local
 *    portal_last_error_message(); never a token). "Signed out" is not an error:
 *    auth::restore_session() returns std::nullopt. session_storage_failure means the keyring could
 *    not be read this time: the end user is NOT known to be signed out, and nothing was deleted.
 *  - Strings: std::string arguments containing a NUL byte are rejected with invalid_argument
 *    (a C string would silently truncate them). Tokens can also be passed as const char * so
 *    that no unwiped std::string copy is needed.
 *  - Listeners: portal::on_session_invalidated() takes a std::function<void()>. The wrapper owns
 *    a heap copy of it for exactly as long as the C registration exists: the library's
 *    destroy_notify deletes it (after the single delivery, on cancel, when the portal is
 *    destroyed, at once for a spent registration, or when registration fails). Listeners run on
 *    a library-owned thread (one serial queue per portal), never under a library lock; they may
 *    call anything here, including listener::cancel() on themselves and destroying the portal.
 *    An exception that escapes a listener never crosses into the C library: it is passed to the
 *    handler set with set_listener_exception_handler() (default: one line on stderr); the same
 *    handler gets what escapes a completion callback of portal_keyring_async.hpp.
 *  - listener handles do not own the registration: dropping one does not cancel it. cancel()
 *    is safe after the portal is gone (it then does nothing: destroying the portal cancelled it).
 *
 * Threads: the library is thread-safe; one object may be used from several threads at once, but
 * — as for any C++ object — it must not be destroyed or moved from while another thread uses it.
 *
 * Non-blocking forms (completion queues, results as values, cancellable operations): include
 * portal_keyring_async.hpp instead, which includes this header.
 *
 * Compiles warning-free with -std=c++17 -Wall -Wextra -pedantic (and -Wshadow -Wconversion
 * -Wsign-conversion -Wold-style-cast), with GCC and Clang.
 */
#ifndef PORTAL_KEYRING_HPP
#define PORTAL_KEYRING_HPP

#include "portal_keyring.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace portal_keyring {

// ------------------------------------------------------------------------------------------------
// Versions
// ------------------------------------------------------------------------------------------------

/** The loaded library's version string, e.g. "0.1.0". */
inline const char *version() noexcept { return portal_keyring_version(); }

/** True when the loaded library has the major version of the header this was compiled with. */
inline bool library_matches_header() noexcept {
    return portal_keyring_version_number() / 1000000u == PORTAL_KEYRING_VERSION_MAJOR;
}

// ------------------------------------------------------------------------------------------------
// Errors
// ------------------------------------------------------------------------------------------------

/** A failed library call: the status code and the library's detail message. */
class error : public std::runtime_error {
public:
    error(portal_status code, const std::string &message)
        : std::runtime_error(std::string(portal_status_str(code)) + " (" + std::to_string(static_cast<int>(code)) +
                             "): " + message),
          code_(code), message_(message) {}

    /** The status code (PORTAL_ERR_*). */
    portal_status code() const noexcept { return code_; }
    /** The library's static name for the code, e.g. "session storage failure". */
    const char *status_name() const noexcept { return portal_status_str(code_); }
    /** The detail from portal_last_error_message() (never contains a token). */
    const std::string &message() const noexcept { return message_; }

private:
    portal_status code_;
    std::string message_;
};

#define PORTAL_KEYRING_HPP_ERROR(name)                                                        \
    class name : public error {                                                               \
    public:                                                                                   \
        using error::error;                                                                   \
    }

/** PORTAL_ERR_INVALID_ARGUMENT: an argument was rejected (NULL/moved-from, blank, NUL, too long). */
PORTAL_KEYRING_HPP_ERROR(invalid_argument);
/** PORTAL_ERR_SESSION_STORAGE: the keyring could not be used this time; NOT signed out. */
PORTAL_KEYRING_HPP_ERROR(session_storage_failure);
/** PORTAL_ERR_SESSION_INVALIDATED: the session was invalidated; its token is gone. */
PORTAL_KEYRING_HPP_ERROR(session_invalidated);
/** PORTAL_ERR_UNAUTHORIZED: the Portal API rejected the credential (HTTP 401). */
PORTAL_KEYRING_HPP_ERROR(unauthorized);
/** PORTAL_ERR_NETWORK: the Portal API could not be reached or answered unexpectedly. */
PORTAL_KEYRING_HPP_ERROR(network_error);
/** PORTAL_ERR_INTERNAL: an internal error such as out of memory. */
PORTAL_KEYRING_HPP_ERROR(internal_error);
/** PORTAL_ERR_RATE_LIMITED: the Portal API answered HTTP 429. */
PORTAL_KEYRING_HPP_ERROR(rate_limited);
/** PORTAL_ERR_MALFORMED_RESPONSE: a Portal API response lacked a required field. */
PORTAL_KEYRING_HPP_ERROR(malformed_response);
/** PORTAL_ERR_INVALID_GRANT: a sign-in grant was used, expired or unknown. */
PORTAL_KEYRING_HPP_ERROR(invalid_grant);
/** PORTAL_ERR_INVALID_USER_JWT: the user JWT of a TOTP verification was rejected. */
PORTAL_KEYRING_HPP_ERROR(invalid_user_jwt);
/** PORTAL_ERR_AUTHENTICATION_FAILED: sign-in failed (error redirect, wrong TOTP code). */
PORTAL_KEYRING_HPP_ERROR(authentication_failed);
/** PORTAL_ERR_UNSOLICITED_REDIRECT: a redirect no pending sign-in asked for; nothing done. */
PORTAL_KEYRING_HPP_ERROR(unsolicited_redirect);
/** PORTAL_ERR_DIFFERENT_END_USER: another end user's session is stored; nothing stored. */
PORTAL_KEYRING_HPP_ERROR(different_end_user);
/** PORTAL_ERR_CANCELLED: a non-blocking call was cancelled (portal_keyring_async.hpp). */
PORTAL_KEYRING_HPP_ERROR(cancelled);
/** PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED: no magic-link sender and template; nothing sent. */
PORTAL_KEYRING_HPP_ERROR(magic_link_not_configured);
/** PORTAL_ERR_AUTH_METHOD_UNAVAILABLE: the auth environment has not enabled that provider. */
PORTAL_KEYRING_HPP_ERROR(auth_method_unavailable);
/** PORTAL_ERR_ACCOUNT_ABSTRACTION_UNAVAILABLE: the account abstraction asked for is not offered. */
PORTAL_KEYRING_HPP_ERROR(account_abstraction_unavailable);
/** PORTAL_ERR_SERVER: the Portal API answered HTTP 5xx; not a failed sign-in. */
PORTAL_KEYRING_HPP_ERROR(server_error);
/** PORTAL_ERR_REQUEST_REFUSED: the Portal API refused the request (a 4xx other than 401, 429). */
PORTAL_KEYRING_HPP_ERROR(request_refused);
/** PORTAL_ERR_TOTP_QR_UNAVAILABLE: no QR code for that TOTP link (no valid secret, or no libqrencode). */
PORTAL_KEYRING_HPP_ERROR(totp_qr_unavailable);
/** PORTAL_ERR_SIGN_IN_IN_PROGRESS: a desktop sign-in of this auth environment is already waiting. */
PORTAL_KEYRING_HPP_ERROR(sign_in_in_progress);
/** PORTAL_ERR_SIGN_IN_UNAVAILABLE: the desktop could not open the sign-in page; nothing stored. */
PORTAL_KEYRING_HPP_ERROR(sign_in_unavailable);
/** PORTAL_ERR_SIGN_IN_TIMED_OUT: no redirect came back within the desktop sign-in's timeout. */
PORTAL_KEYRING_HPP_ERROR(sign_in_timed_out);

#undef PORTAL_KEYRING_HPP_ERROR

namespace detail {

/** Throws the exception for `code` with `message`. */
[[noreturn]] inline void throw_error(portal_status code, const std::string &message) {
    switch (code) {
    case PORTAL_ERR_INVALID_ARGUMENT: throw invalid_argument(code, message);
    case PORTAL_ERR_SESSION_STORAGE: throw session_storage_failure(code, message);
    case PORTAL_ERR_SESSION_INVALIDATED: throw session_invalidated(code, message);
    case PORTAL_ERR_UNAUTHORIZED: throw unauthorized(code, message);
    case PORTAL_ERR_NETWORK: throw network_error(code, message);
    case PORTAL_ERR_INTERNAL: throw internal_error(code, message);
    case PORTAL_ERR_RATE_LIMITED: throw rate_limited(code, message);
    case PORTAL_ERR_MALFORMED_RESPONSE: throw malformed_response(code, message);
    case PORTAL_ERR_INVALID_GRANT: throw invalid_grant(code, message);
    case PORTAL_ERR_INVALID_USER_JWT: throw invalid_user_jwt(code, message);
    case PORTAL_ERR_AUTHENTICATION_FAILED: throw authentication_failed(code, message);
    case PORTAL_ERR_UNSOLICITED_REDIRECT: throw unsolicited_redirect(code, message);
    case PORTAL_ERR_DIFFERENT_END_USER: throw different_end_user(code, message);
    case PORTAL_ERR_CANCELLED: throw cancelled(code, message);
    case PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED: throw magic_link_not_configured(code, message);
    case PORTAL_ERR_AUTH_METHOD_UNAVAILABLE: throw auth_method_unavailable(code, message);
    case PORTAL_ERR_ACCOUNT_ABSTRACTION_UNAVAILABLE: throw account_abstraction_unavailable(code, message);
    case PORTAL_ERR_SERVER: throw server_error(code, message);
    case PORTAL_ERR_REQUEST_REFUSED: throw request_refused(code, message);
    case PORTAL_ERR_TOTP_QR_UNAVAILABLE: throw totp_qr_unavailable(code, message);
    case PORTAL_ERR_SIGN_IN_IN_PROGRESS: throw sign_in_in_progress(code, message);
    case PORTAL_ERR_SIGN_IN_UNAVAILABLE: throw sign_in_unavailable(code, message);
    case PORTAL_ERR_SIGN_IN_TIMED_OUT: throw sign_in_timed_out(code, message);
    case PORTAL_OK: break;
    }
    throw error(code, message); // a code newer than this header
}

/** Throws for a failed status, with the calling thread's last error message (copied at once). */
inline void check(portal_status status) {
    if (status != PORTAL_OK) throw_error(status, portal_last_error_message());
}

[[noreturn]] inline void throw_invalid(const std::string &message) {
    throw_error(PORTAL_ERR_INVALID_ARGUMENT, message);
}

/** A std::string as a C string argument; NUL bytes would truncate it, so they are rejected. */
inline const char *c_arg(const std::string &value, const char *name) {
    if (value.find('\0') != std::string::npos) throw_invalid(std::string(name) + ": contains a NUL byte");
    return value.c_str();
}

inline const char *c_arg(const std::optional<std::string> &value, const char *name) {
    return value ? c_arg(*value, name) : nullptr;
}

struct auth_deleter {
    void operator()(portal_auth *p) const noexcept { portal_auth_free(p); }
};
struct session_deleter {
    void operator()(portal_session *p) const noexcept { portal_session_free(p); }
};
/** How a portal is freed when its last reference goes: portal_free, unless portal_async::close()
 *  set `instead` (portal_free_async; never throws). Shared with the portal object, since reading
 *  a shared_ptr's deleter back (std::get_deleter) needs RTTI. */
using portal_closer = std::shared_ptr<std::function<void(::portal *)>>;
struct portal_deleter {
    portal_closer instead;
    void operator()(::portal *p) const noexcept {
        if (instead && *instead) {
            (*instead)(p);
        } else {
            portal_free(p);
        }
    }
};

/** A duration in milliseconds as the C library takes it (1 … 600 s). */
inline std::uint32_t to_ms(std::chrono::milliseconds value, const char *name) {
    if (value.count() < 1 || value.count() > 600000) throw_invalid(std::string(name) + ": must be 1 … 600000");
    return static_cast<std::uint32_t>(value.count());
}

/** A wait in milliseconds whose range the C call checks itself (0 may mean its default): only a
 *  negative one is refused here; one beyond uint32_t reaches the C call as UINT32_MAX. */
inline std::uint32_t to_wait_ms(std::chrono::milliseconds value, const char *name) {
    if (value.count() < 0) throw_invalid(std::string(name) + ": must not be negative");
    return static_cast<std::uint32_t>(std::min<std::chrono::milliseconds::rep>(value.count(), UINT32_MAX));
}

/** Called with the exception that escaped a listener or completion callback (on its thread). */
using listener_exception_handler = void (*)(std::exception_ptr) noexcept;

inline void default_listener_exception_handler(std::exception_ptr exception) noexcept {
    try {
        std::rethrow_exception(exception);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "portal_keyring: a callback threw: %s\n", e.what());
    } catch (...) {
        std::fprintf(stderr, "portal_keyring: a callback threw a non-std exception\n");
    }
}

inline std::atomic<listener_exception_handler> listener_exception_handler_slot{&default_listener_exception_handler};

/** The heap-owned listener: user_data of one C registration, deleted by its destroy_notify. */
struct listener_box {
    std::function<void()> callback;
};

} // namespace detail

/**
 * Sets what happens to an exception that escapes a listener or a completion callback (it never
 * reaches the C library, and is not rethrown). The handler runs on the callback's thread.
 * nullptr restores the default (a line on stderr). Returns the previous handler.
 */
inline detail::listener_exception_handler
set_listener_exception_handler(detail::listener_exception_handler handler) noexcept {
    return detail::listener_exception_handler_slot.exchange(handler ? handler
                                                                    : &detail::default_listener_exception_handler);
}

// C language linkage for the function pointers handed to the C library; internal linkage so that
// every translation unit has its own copy and nothing is exported.
extern "C" {
static inline void portal_keyring_hpp_deliver(void *user_data) noexcept {
    auto *box = static_cast<detail::listener_box *>(user_data);
    try {
        box->callback();
    } catch (...) {
        detail::listener_exception_handler_slot.load()(std::current_exception());
    }
}

static inline void portal_keyring_hpp_release(void *user_data) noexcept {
    delete static_cast<detail::listener_box *>(user_data);
}
}

// ------------------------------------------------------------------------------------------------
// secret: a caller-owned library string (a token copy), wiped on destruction
// ------------------------------------------------------------------------------------------------

/** Owns a string the library returned as caller-owned; portal_string_free() wipes and frees it. */
class secret {
public:
    secret() noexcept = default;
    /** Adopts a string the library returned (NULL allowed). */
    explicit secret(char *owned) noexcept : data_(owned) {}
    secret(secret &&other) noexcept : data_(std::exchange(other.data_, nullptr)) {}
    secret &operator=(secret &&other) noexcept {
        if (this != &other) {
            reset();
            data_ = std::exchange(other.data_, nullptr);
        }
        return *this;
    }
    secret(const secret &) = delete;
    secret &operator=(const secret &) = delete;
    ~secret() { reset(); }

    /** The NUL-terminated bytes ("" when empty); valid until reset or destruction. */
    const char *c_str() const noexcept { return data_ ? data_ : ""; }
    std::string_view view() const noexcept { return data_ ? std::string_view(data_) : std::string_view(); }
    std::size_t size() const noexcept { return data_ ? std::strlen(data_) : 0; }
    bool empty() const noexcept { return size() == 0; }
    /** Wipes and frees now. */
    void reset() noexcept { portal_string_free(std::exchange(data_, nullptr)); }

private:
    char *data_ = nullptr;
};

// ------------------------------------------------------------------------------------------------
// session
// ------------------------------------------------------------------------------------------------

/** A signed-in end user's session (portal_session). Move-only. */
class session {
public:
    /** Adopts a handle (for example from the C API); the session frees it. */
    explicit session(portal_session *owned) noexcept : handle_(owned) {}
    session(session &&) noexcept = default;
    session &operator=(session &&) noexcept = default;
    session(const session &) = delete;
    session &operator=(const session &) = delete;
    ~session() = default;

    /** The end user id; valid as long as this session holds its handle. */
    std::string_view end_user_id() const { return borrowed(portal_session_get_end_user_id(handle_.get())); }
    /** The auth environment id; valid as long as this session holds its handle. */
    std::string_view auth_environment_id() const {
        return borrowed(portal_session_get_auth_environment_id(handle_.get()));
    }

    /** A copy of the Client Session Token, wiped when the secret is destroyed.
     *  @throws session_invalidated once the session was invalidated. */
    secret copy_token() const {
        char *out = nullptr;
        detail::check(portal_session_copy_token(handle_.get(), &out));
        return secret(out);
    }

    /** False once the session has been invalidated (its token is gone). */
    bool valid() const {
        try {
            copy_token();
            return true;
        } catch (const session_invalidated &) {
            return false;
        }
    }

    /** Drops the token, then deletes the stored item if it still holds this sign-in. Blocks.
     *  @throws session_storage_failure if the delete failed (the token is gone regardless). */
    void invalidate() { detail::check(portal_session_invalidate(handle_.get())); }

    portal_session *native_handle() const noexcept { return handle_.get(); }
    /** Gives up ownership; the caller frees the handle with portal_session_free(). */
    portal_session *release() noexcept { return handle_.release(); }
    explicit operator bool() const noexcept { return handle_ != nullptr; }

private:
    static std::string_view borrowed(const char *value) {
        if (!value) detail::check(PORTAL_ERR_INVALID_ARGUMENT);
        return value;
    }

    std::unique_ptr<portal_session, detail::session_deleter> handle_;
};

// ------------------------------------------------------------------------------------------------
// auth
// ------------------------------------------------------------------------------------------------

/** Client auth for one Portal auth environment (portal_auth). Move-only. No I/O on creation. */
class auth {
public:
    /**
     * @param auth_environment_id  not blank, at most 2048 bytes.
     * @param redirect_url         the app's sign-in redirect URL.
     * @param api_host             "host" or "host:port"; std::nullopt for api.portalhq.io.
     * @throws invalid_argument naming the first bad argument.
     */
    auth(const std::string &auth_environment_id, const std::string &redirect_url,
         const std::optional<std::string> &api_host = std::nullopt) {
        portal_auth *out = nullptr;
        detail::check(portal_auth_new(&out, detail::c_arg(auth_environment_id, "auth_environment_id"),
                                      detail::c_arg(redirect_url, "redirect_url"), detail::c_arg(api_host, "api_host")));
        handle_.reset(out);
    }
    auth(auth &&) noexcept = default;
    auth &operator=(auth &&) noexcept = default;
    auth(const auth &) = delete;
    auth &operator=(const auth &) = delete;
    ~auth() = default;

    /** Keyring deadlines of later calls (1 ms … 600 s each; defaults 5 s and 30 s). */
    void set_keyring_timeouts(std::chrono::milliseconds call_timeout, std::chrono::milliseconds prompt_timeout) {
        detail::check(portal_auth_set_keyring_timeouts(handle_.get(), detail::to_ms(call_timeout, "call_timeout_ms"),
                                                       detail::to_ms(prompt_timeout, "prompt_timeout_ms")));
    }

    /**
     * Restores the persisted session without a network call. Blocks (keyring I/O).
     * @return the session, or std::nullopt when the end user is signed out.
     * @throws session_storage_failure when the keyring cannot be read this time (NOT signed out).
     */
    std::optional<session> restore_session() {
        portal_session *out = nullptr;
        detail::check(portal_auth_restore_session(handle_.get(), &out));
        if (!out) return std::nullopt;
        return std::optional<session>(std::in_place, out);
    }

    /** Deletes every stored session of this auth environment. Blocks (keyring I/O). */
    void clear_persisted_session() { detail::check(portal_auth_clear_persisted_session(handle_.get())); }

    /** Stores a CST that the app's own backend issued and returns the session. Blocks. */
    session persist_session(const std::string &end_user_id, const char *client_session_token) {
        portal_session *out = nullptr;
        detail::check(portal_auth_persist_session(handle_.get(), detail::c_arg(end_user_id, "end_user_id"),
                                                  client_session_token, &out));
        return session(out);
    }
    session persist_session(const std::string &end_user_id, const std::string &client_session_token) {
        return persist_session(end_user_id, detail::c_arg(client_session_token, "client_session_token"));
    }

    portal_auth *native_handle() const noexcept { return handle_.get(); }
    explicit operator bool() const noexcept { return handle_ != nullptr; }

private:
    std::unique_ptr<portal_auth, detail::auth_deleter> handle_;
};

// ------------------------------------------------------------------------------------------------
// portal and listeners
// ------------------------------------------------------------------------------------------------

class portal_async;

/**
 * One listener registration. Copyable; does not own the registration (dropping it does not
 * cancel). Holds only a weak reference to its portal.
 */
class listener {
public:
    listener() noexcept = default;

    /** The library's handle id; 0 for a spent registration (never called). */
    std::uint64_t id() const noexcept { return id_; }
    bool spent() const noexcept { return id_ == 0; }

    /** After this returns the callback is never entered (a running one is waited for, unless
     *  this is called from inside it). A no-op when spent, repeated, or the portal is gone. */
    void cancel() {
        if (id_ == 0) return;
        if (std::shared_ptr<::portal> p = portal_.lock()) detail::check(portal_listener_cancel(p.get(), id_));
    }

private:
    friend class portal;
    listener(std::weak_ptr<::portal> owner, std::uint64_t id) noexcept : portal_(std::move(owner)), id_(id) {}

    std::weak_ptr<::portal> portal_;
    std::uint64_t id_ = 0;
};

/** An HTTP response from portal::request(). */
struct response {
    long status = 0;
    std::string body;
};

/**
 * The Portal client for one credential (portal). Move-only. Construction validates the session
 * in the background (GET /api/v3/clients/me); a 401 invalidates it and fires every listener once,
 * including listeners registered later (replay). Destruction cancels every listener.
 */
class portal {
public:
    /** @param api_host "host" or "host:port"; std::nullopt for the session's auth host. */
    explicit portal(const session &credentials, const std::optional<std::string> &api_host = std::nullopt) {
        ::portal *out = nullptr;
        detail::check(portal_new(&out, credentials.native_handle(), detail::c_arg(api_host, "api_host")));
        handle_.reset(out, detail::portal_deleter{closer_});
    }

    /** A client from a static API key: never invalidates; listeners are spent at once. */
    static portal with_api_key(const std::string &api_key, const std::optional<std::string> &api_host = std::nullopt) {
        ::portal *out = nullptr;
        detail::check(portal_new_with_api_key(&out, detail::c_arg(api_key, "api_key"), detail::c_arg(api_host, "api_host")));
        return portal(out);
    }

    portal(portal &&) noexcept = default;
    portal &operator=(portal &&) noexcept = default;
    portal(const portal &) = delete;
    portal &operator=(const portal &) = delete;
    ~portal() = default;

    /**
     * Registers a listener for session invalidation: called at most once, on a library thread.
     * The std::function is kept until the registration ends, then destroyed (on the library
     * thread after delivery, or on the thread that cancels / destroys the portal).
     * @throws invalid_argument for an empty function or a moved-from portal.
     */
    listener on_session_invalidated(std::function<void()> callback) {
        return register_listener(std::move(callback), [&](auto cb, void *user_data, auto release, std::uint64_t *id) {
            return portal_on_session_invalidated(handle_.get(), cb, user_data, release, id);
        });
    }

    /** Reports that the app's own request with rejected_token as bearer got HTTP 401.
     *  @return true if this call invalidated the session. */
    bool report_unauthorized(const char *rejected_token) {
        bool invalidated = false;
        detail::check(portal_report_unauthorized(handle_.get(), rejected_token, &invalidated));
        return invalidated;
    }
    bool report_unauthorized(const std::string &rejected_token) {
        return report_unauthorized(detail::c_arg(rejected_token, "rejected_token"));
    }

    /** Host-initiated sign-out: drops the token, deletes the stored sessions, fires nothing. */
    void clear_session() { detail::check(portal_clear_session(handle_.get())); }

    /** Sends an authenticated request and waits (network, up to 30 s). */
    response request(const std::string &method, const std::string &target,
                     const std::optional<std::string> &body = std::nullopt) {
        long status = 0;
        char *out = nullptr;
        std::size_t length = 0;
        detail::check(portal_request(handle_.get(), detail::c_arg(method, "method"), detail::c_arg(target, "target"),
                                     detail::c_arg(body, "body"), &status, &out, &length));
        secret owned(out);
        return response{status, out != nullptr ? std::string(out, length) : std::string()};
    }

    ::portal *native_handle() const noexcept { return handle_.get(); }
    explicit operator bool() const noexcept { return handle_ != nullptr; }
    /** Frees the portal now (cancelling its listeners). */
    void reset() noexcept { handle_.reset(); }

private:
    friend class portal_async; // portal_keyring_async.hpp: queued listeners, close()

    explicit portal(::portal *owned) : handle_(owned, detail::portal_deleter{closer_}) {}

    /** Registers callback through `start(deliver, user_data, release, &id)` (a C registration call). */
    template <typename Start> listener register_listener(std::function<void()> callback, Start start) {
        if (!callback) detail::throw_invalid("callback: empty std::function");
        auto box = std::make_unique<detail::listener_box>();
        box->callback = std::move(callback);
        std::uint64_t id = 0;
        // From here the C library owns the box: destroy_notify deletes it, also when this fails.
        detail::check(start(&portal_keyring_hpp_deliver, box.release(), &portal_keyring_hpp_release, &id));
        return listener(handle_, id);
    }

    /** Drops this object's handle, freeing the portal with `free_instead` (noexcept in effect). */
    void close_with(std::function<void(::portal *)> free_instead) {
        if (!handle_) detail::throw_invalid("portal: moved from or closed");
        *closer_ = std::move(free_instead);
        closer_.reset();
        handle_.reset();
    }

    detail::portal_closer closer_ = std::make_shared<std::function<void(::portal *)>>(); // before handle_
    std::shared_ptr<::portal> handle_; // shared only with listener handles' weak references
};

} // namespace portal_keyring

#endif /* PORTAL_KEYRING_HPP */
