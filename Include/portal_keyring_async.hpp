/*
 * portal_keyring_async.hpp — the non-blocking forms of the C++ wrapper (header-only, C++17) over
 * the C ABI's "Non-blocking calls" (portal_keyring.h). Include this header instead of
 * portal_keyring.hpp (it includes it); code that only blocks includes portal_keyring.hpp alone.
 *
 *   portal_keyring::completion_queue queue = portal_keyring::completion_queue::pollable();
 *   portal_keyring::operation op = portal_keyring::async(auth).restore_session(queue,
 *       [](portal_keyring::result<std::optional<portal_keyring::session>> r) {
 *           if (!r) return show_error(r.message());   // NOT signed out
 *           if (!*r) return show_sign_in();           // signed out
 *           use(std::move(**r));
 *       });
 *   // in the loop: poll queue.fd() for POLLIN, then queue.dispatch();
 *
 * async(x) gives the non-blocking form of each call of an auth, session or portal that the C ABI
 * has as *_async. Each returns at once (never keyring or network I/O on the calling thread) and
 * its callback runs exactly once, on the completion_queue passed to it, never before the call
 * returned. What the wrapper adds to the C rules (docs/threading.md#non-blocking-calls):
 *
 *  - Errors: the completion carries a result<T>: status(), message() and the value. It holds what
 *    the blocking form reports: result::value() throws the same portal_keyring::error subclass
 *    the blocking call throws, with the same code and message. A cancelled operation completes
 *    with status PORTAL_ERR_CANCELLED (value() throws portal_keyring::cancelled). Arguments are
 *    checked before anything starts: a bad one throws invalid_argument from the call itself, as
 *    from the blocking form; then the callback never runs and is destroyed at once.
 *  - Ownership of the callback: the wrapper moves it to the heap and hands it to the C library as
 *    user_data; the library's destroy_notify deletes it, exactly once — after the completion, when
 *    the completion is dropped (its pollable queue was freed first: no callback, only the
 *    delete), or when the call is refused. Whatever the callback captured is destroyed then, on
 *    the thread that runs destroy_notify (see the C header; usually the queue's).
 *  - Exceptions never cross into the C library: one escaping a callback is caught in the
 *    trampoline and passed to the handler of set_listener_exception_handler() (the one rule for
 *    every callback of this wrapper; default: a line on stderr), then the callback is destroyed as
 *    usual. Nothing is rethrown later and the process is not terminated.
 *  - operation handles own their operation: destroying one (or cancel()) calls
 *    portal_operation_cancel(); the callback still runs, once, with PORTAL_ERR_CANCELLED unless
 *    the operation had completed. detach() lets it run on without the handle. (A listener handle,
 *    by contrast, does not own its registration.)
 *  - Queues: completion_queue owns a portal_completion_queue and frees it when destroyed; the C
 *    library keeps it alive for operations still running (a pollable one then drops their
 *    completions, a main-context one still delivers them).
 */
#ifndef PORTAL_KEYRING_ASYNC_HPP
#define PORTAL_KEYRING_ASYNC_HPP

#include "portal_keyring.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace portal_keyring {

// ------------------------------------------------------------------------------------------------
// completion_queue
// ------------------------------------------------------------------------------------------------

/** Where completions run (portal_completion_queue). Move-only; frees the queue when destroyed. */
class completion_queue {
public:
    /** A pollable queue: poll fd() for POLLIN, then call dispatch() on the loop's thread. */
    static completion_queue pollable() {
        portal_completion_queue *out = nullptr;
        detail::check(portal_completion_queue_new_pollable(&out));
        return completion_queue(out);
    }
    /** A queue run from a GLib main context: a GMainContext * (the queue keeps a reference), or
     *  nullptr for the calling thread's thread-default context at this call. */
    static completion_queue main_context(void *context = nullptr) {
        portal_completion_queue *out = nullptr;
        detail::check(portal_completion_queue_new_for_main_context(&out, context));
        return completion_queue(out);
    }

    completion_queue(completion_queue &&) noexcept = default;
    completion_queue &operator=(completion_queue &&) noexcept = default;
    completion_queue(const completion_queue &) = delete;
    completion_queue &operator=(const completion_queue &) = delete;
    ~completion_queue() = default;

    /** A pollable queue's descriptor (owned by the queue: only poll it); -1 for a main-context one. */
    int fd() const noexcept { return portal_completion_queue_get_fd(handle_.get()); }

    /** Runs the ready completions on the calling thread and returns how many ran; never waits.
     *  @throws invalid_argument for a main-context or moved-from queue. */
    std::size_t dispatch() {
        std::size_t ran = 0;
        detail::check(portal_completion_queue_dispatch(handle_.get(), &ran));
        return ran;
    }

    portal_completion_queue *native_handle() const noexcept { return handle_.get(); }
    explicit operator bool() const noexcept { return handle_ != nullptr; }
    /** Frees the queue now (see the header comment: pending completions of a pollable queue are
     *  dropped, their callbacks destroyed uncalled). */
    void reset() noexcept { handle_.reset(); }

private:
    struct deleter {
        void operator()(portal_completion_queue *q) const noexcept { portal_completion_queue_free(q); }
    };
    explicit completion_queue(portal_completion_queue *owned) noexcept : handle_(owned) {}

    std::unique_ptr<portal_completion_queue, deleter> handle_;
};

// ------------------------------------------------------------------------------------------------
// result
// ------------------------------------------------------------------------------------------------

namespace detail {
template <typename T> class result_base {
public:
    portal_status status() const noexcept { return status_; }
    /** "" on success, else the operation's detail (never a token). */
    const std::string &message() const noexcept { return message_; }
    bool ok() const noexcept { return status_ == PORTAL_OK; }
    bool cancelled() const noexcept { return status_ == PORTAL_ERR_CANCELLED; }
    explicit operator bool() const noexcept { return ok(); }
    /** Throws what the blocking form would have thrown; does nothing on success. */
    void throw_if_failed() const {
        if (!ok()) throw_error(status_, message_);
    }

protected:
    result_base(portal_status status, std::string message) : status_(status), message_(std::move(message)) {}

private:
    portal_status status_;
    std::string message_;
};
} // namespace detail

/** What a non-blocking call completed with: the status, the message and, on success, the value. */
template <typename T> class result : public detail::result_base<T> {
public:
    result(portal_status status, std::string message, std::optional<T> v = std::nullopt)
        : detail::result_base<T>(status, std::move(message)), value_(std::move(v)) {}

    /** The value. @throws the blocking form's exception for a failed status. */
    T &value() & {
        this->throw_if_failed();
        return *value_;
    }
    const T &value() const & {
        this->throw_if_failed();
        return *value_;
    }
    T &&value() && {
        this->throw_if_failed();
        return std::move(*value_);
    }
    T &operator*() { return value(); }
    const T &operator*() const { return value(); }
    T *operator->() { return &value(); }
    const T *operator->() const { return &value(); }

private:
    std::optional<T> value_;
};

/** The result of a call that has no value (clear, invalidate, sign-out, close). */
template <> class result<void> : public detail::result_base<void> {
public:
    result(portal_status status, std::string message) : detail::result_base<void>(status, std::move(message)) {}
    void value() const { throw_if_failed(); }
};

// ------------------------------------------------------------------------------------------------
// operation
// ------------------------------------------------------------------------------------------------

/** A started non-blocking call. Move-only; destroying it cancels the operation (see above). */
class [[nodiscard]] operation {
public:
    operation() noexcept = default;
    explicit operation(std::uint64_t id) noexcept : id_(id) {}
    operation(operation &&other) noexcept : id_(std::exchange(other.id_, 0)) {}
    operation &operator=(operation &&other) noexcept {
        if (this != &other) {
            cancel();
            id_ = std::exchange(other.id_, 0);
        }
        return *this;
    }
    operation(const operation &) = delete;
    operation &operator=(const operation &) = delete;
    ~operation() { cancel(); }

    /** The library's operation id; 0 once cancelled, detached or moved from. */
    std::uint64_t id() const noexcept { return id_; }
    /** Completes the operation at once with PORTAL_ERR_CANCELLED (on its queue) unless it already
     *  completed; a no-op the second time. Any thread, also inside a callback. */
    void cancel() noexcept {
        if (id_ != 0) portal_operation_cancel(std::exchange(id_, 0));
    }
    /** Lets the operation run on without this handle; returns its id. */
    std::uint64_t detach() noexcept { return std::exchange(id_, 0); }

private:
    std::uint64_t id_ = 0;
};

// ------------------------------------------------------------------------------------------------
// The trampolines: the one place a C completion becomes a C++ call
// ------------------------------------------------------------------------------------------------

namespace detail {

/** The heap-owned callback of one operation: user_data of the C call, deleted by destroy_notify. */
struct completion_box {
    completion_box() = default;
    completion_box(const completion_box &) = delete;
    completion_box &operator=(const completion_box &) = delete;
    virtual ~completion_box() = default;
    virtual void complete(portal_status status, portal_result *result, const char *message) = 0;
    virtual void complete_sign_in(portal_status status, portal_sign_in_result *result, const char *message) = 0;
};

/** C result (R: portal_result or portal_sign_in_result) → T, taking what it keeps out of it. */
template <typename T, typename R> using converter = T (*)(R &);

template <typename T, typename R> struct typed_box final : completion_box {
    typed_box(std::function<void(result<T>)> cb, converter<T, R> conv) : callback(std::move(cb)), convert(conv) {}

    void complete(portal_status status, portal_result *r, const char *message) override {
        if constexpr (std::is_same_v<R, portal_result>) {
            deliver(status, r, message);
        } else {
            (void)status, (void)r, (void)message;
        }
    }
    void complete_sign_in(portal_status status, portal_sign_in_result *r, const char *message) override {
        if constexpr (std::is_same_v<R, portal_sign_in_result>) {
            deliver(status, r, message);
        } else {
            (void)status, (void)r, (void)message;
        }
    }

    void deliver(portal_status status, R *r, const char *message) {
        if constexpr (std::is_void_v<T>) {
            (void)r;
            callback(result<void>(status, message));
        } else {
            if (status != PORTAL_OK) return callback(result<T>(status, message));
            callback(result<T>(status, message, convert(*r)));
        }
    }

    std::function<void(result<T>)> callback;
    converter<T, R> convert;
};

inline void report_callback_exception() noexcept { listener_exception_handler_slot.load()(std::current_exception()); }

} // namespace detail

extern "C" {
static inline void portal_keyring_hpp_complete(portal_status status, portal_result *result, const char *message,
                                               void *user_data) noexcept {
    try {
        static_cast<detail::completion_box *>(user_data)->complete(status, result, message);
    } catch (...) {
        detail::report_callback_exception();
    }
}

static inline void portal_keyring_hpp_complete_sign_in(portal_status status, portal_sign_in_result *result,
                                                       const char *message, void *user_data) noexcept {
    try {
        static_cast<detail::completion_box *>(user_data)->complete_sign_in(status, result, message);
    } catch (...) {
        detail::report_callback_exception();
    }
}

static inline void portal_keyring_hpp_release_completion(void *user_data) noexcept {
    delete static_cast<detail::completion_box *>(user_data);
}
}

namespace detail {

/**
 * Starts one C *_async call: `start(cb, user_data, destroy_notify, &id)` with the callback boxed.
 * From the call on, the C library owns the box (destroy_notify deletes it, also on refusal).
 */
template <typename T, typename R, typename Start>
operation start_async(std::function<void(result<T>)> callback, converter<T, R> convert, Start start) {
    if (!callback) throw_invalid("callback: empty std::function");
    auto box = std::make_unique<typed_box<T, R>>(std::move(callback), convert);
    std::uint64_t id = 0;
    if constexpr (std::is_same_v<R, portal_result>) {
        check(start(&portal_keyring_hpp_complete, box.release(), &portal_keyring_hpp_release_completion, &id));
    } else {
        check(start(&portal_keyring_hpp_complete_sign_in, box.release(), &portal_keyring_hpp_release_completion, &id));
    }
    return operation(id);
}

inline portal_session *take_session(portal_session *&field) noexcept { return std::exchange(field, nullptr); }

inline std::optional<session> to_restored(portal_result &r) {
    if (!r.session) return std::nullopt;
    return std::optional<session>(std::in_place, take_session(r.session));
}
inline session to_session(portal_result &r) { return session(take_session(r.session)); }
inline response to_response(portal_result &r) {
    const bool has_body = r.body != nullptr;
    secret body(std::exchange(r.body, nullptr)); // wiped when this returns
    return response{r.http_status, has_body ? std::string(body.c_str(), r.body_len) : std::string()};
}
inline bool to_invalidated(portal_result &r) { return r.invalidated; }

} // namespace detail

// ------------------------------------------------------------------------------------------------
// Sign-in results
// ------------------------------------------------------------------------------------------------

/** auth::get_methods_async(): the auth environment's enabled methods. */
struct methods {
    std::string list; ///< comma-separated, e.g. "email,google"
    bool auto_create_wallet = false;
};

/** What a redirect or a desktop sign-in came to (portal_sign_in_result). Move-only. */
struct sign_in {
    portal_redirect_kind kind = PORTAL_REDIRECT_NOT_HANDLED;
    std::optional<session> signed_in; ///< PORTAL_REDIRECT_AUTHENTICATED: the persisted session
    secret user_jwt;                  ///< PORTAL_REDIRECT_TOTP_REQUIRED: the user JWT (a credential)
    secret totp_link;                 ///< PORTAL_REDIRECT_TOTP_REQUIRED: the otpauth:// link, or empty
};

namespace detail {
inline methods to_methods(portal_sign_in_result &r) {
    secret text(std::exchange(r.text, nullptr));
    return methods{std::string(text.view()), r.auto_create_wallet};
}
inline std::string to_text(portal_sign_in_result &r) { return std::string(secret(std::exchange(r.text, nullptr)).view()); }
inline sign_in to_sign_in(portal_sign_in_result &r) {
    sign_in out;
    out.kind = r.kind;
    if (r.session) out.signed_in.emplace(std::exchange(r.session, nullptr));
    out.user_jwt = secret(std::exchange(r.user_jwt, nullptr));
    out.totp_link = secret(std::exchange(r.totp_link, nullptr));
    return out;
}
inline session to_signed_in(portal_sign_in_result &r) { return session(std::exchange(r.session, nullptr)); }
} // namespace detail

// ------------------------------------------------------------------------------------------------
// watch: the stored session's changes, on a completion queue
// ------------------------------------------------------------------------------------------------

namespace detail {
/** The heap-owned watch callback: user_data of portal_auth_watch_async, deleted by destroy_notify. */
struct watch_box {
    std::function<void(portal_watch_event, std::string_view)> callback;
};
} // namespace detail

extern "C" {
static inline void portal_keyring_hpp_watch_event(portal_watch_event event, const char *end_user_id,
                                                  void *user_data) noexcept {
    try {
        static_cast<detail::watch_box *>(user_data)->callback(
            event, end_user_id ? std::string_view(end_user_id) : std::string_view());
    } catch (...) {
        detail::report_callback_exception();
    }
}

static inline void portal_keyring_hpp_release_watch(void *user_data) noexcept {
    delete static_cast<detail::watch_box *>(user_data);
}
}

/**
 * A running watch (portal_watch). Move-only; destroying it (or reset()) stops the watch without
 * waiting (portal_watch_free): called on the queue's thread, no event is delivered after that.
 * The callback is deleted by destroy_notify once no delivery holds it.
 */
class watch {
public:
    watch() noexcept = default;
    watch(watch &&) noexcept = default;
    watch &operator=(watch &&) noexcept = default;
    watch(const watch &) = delete;
    watch &operator=(const watch &) = delete;
    ~watch() = default;

    void reset() noexcept { handle_.reset(); }
    portal_watch *native_handle() const noexcept { return handle_.get(); }
    explicit operator bool() const noexcept { return handle_ != nullptr; }

private:
    friend class auth_async;
    struct deleter {
        void operator()(portal_watch *w) const noexcept { portal_watch_free(w); }
    };
    explicit watch(portal_watch *owned) noexcept : handle_(owned) {}

    std::unique_ptr<portal_watch, deleter> handle_;
};

// ------------------------------------------------------------------------------------------------
// The non-blocking calls
// ------------------------------------------------------------------------------------------------

/** The non-blocking calls of one auth (which must outlive only the call itself: the C library
 *  keeps what it needs). Obtained with async(auth). */
class auth_async {
public:
    explicit auth_async(auth &a) noexcept : auth_(a.native_handle()) {}

    /** restore_session() without blocking: the session, or std::nullopt when signed out. */
    operation restore_session(const completion_queue &q, std::function<void(result<std::optional<session>>)> done) {
        return detail::start_async(std::move(done), &detail::to_restored, [&](auto cb, void *ud, auto dn, std::uint64_t *id) {
            return portal_auth_restore_session_async(auth_, q.native_handle(), cb, ud, dn, id);
        });
    }
    /** persist_session() without blocking; the strings are copied before this returns. */
    operation persist_session(const std::string &end_user_id, const char *client_session_token, const completion_queue &q,
                              std::function<void(result<session>)> done) {
        const char *user = detail::c_arg(end_user_id, "end_user_id");
        return detail::start_async(std::move(done), &detail::to_session, [&](auto cb, void *ud, auto dn, std::uint64_t *id) {
            return portal_auth_persist_session_async(auth_, user, client_session_token, q.native_handle(), cb, ud, dn, id);
        });
    }
    operation persist_session(const std::string &end_user_id, const std::string &client_session_token,
                              const completion_queue &q, std::function<void(result<session>)> done) {
        return persist_session(end_user_id, detail::c_arg(client_session_token, "client_session_token"), q, std::move(done));
    }
    /** clear_persisted_session() without blocking. */
    operation clear_persisted_session(const completion_queue &q, std::function<void(result<void>)> done) {
        return detail::start_async<void, portal_result>(std::move(done), nullptr, [&](auto cb, void *ud, auto dn, std::uint64_t *id) {
            return portal_auth_clear_persisted_session_async(auth_, q.native_handle(), cb, ud, dn, id);
        });
    }

    /** portal_auth_get_methods_async(). */
    operation get_methods(const completion_queue &q, std::function<void(result<methods>)> done) {
        return sign_in_call<methods>(std::move(done), &detail::to_methods, [&](auto cb, void *ud, auto dn, std::uint64_t *id) {
            return portal_auth_get_methods_async(auth_, q.native_handle(), cb, ud, dn, id);
        });
    }
    /** portal_auth_send_magic_link_async(). */
    operation send_magic_link(const std::string &email, const completion_queue &q, std::function<void(result<void>)> done) {
        const char *address = detail::c_arg(email, "email");
        return sign_in_call<void>(std::move(done), nullptr, [&](auto cb, void *ud, auto dn, std::uint64_t *id) {
            return portal_auth_send_magic_link_async(auth_, address, q.native_handle(), cb, ud, dn, id);
        });
    }
    /** portal_auth_login_with_google_async(): the authorize URL. */
    operation login_with_google(const completion_queue &q, std::function<void(result<std::string>)> done) {
        return sign_in_call<std::string>(std::move(done), &detail::to_text, [&](auto cb, void *ud, auto dn, std::uint64_t *id) {
            return portal_auth_login_with_google_async(auth_, q.native_handle(), cb, ud, dn, id);
        });
    }
    /** portal_auth_login_with_apple_async(): the authorize URL. */
    operation login_with_apple(const completion_queue &q, std::function<void(result<std::string>)> done) {
        return sign_in_call<std::string>(std::move(done), &detail::to_text, [&](auto cb, void *ud, auto dn, std::uint64_t *id) {
            return portal_auth_login_with_apple_async(auth_, q.native_handle(), cb, ud, dn, id);
        });
    }
    /** portal_auth_handle_redirect_async() (flags: portal_redirect_flags). */
    operation handle_redirect(const std::string &url, std::uint32_t flags, const completion_queue &q,
                              std::function<void(result<sign_in>)> done) {
        const char *c_url = detail::c_arg(url, "url");
        return sign_in_call<sign_in>(std::move(done), &detail::to_sign_in, [&](auto cb, void *ud, auto dn, std::uint64_t *id) {
            return portal_auth_handle_redirect_async(auth_, c_url, flags, q.native_handle(), cb, ud, dn, id);
        });
    }
    /** portal_auth_sign_in_with_google_async(). */
    operation sign_in_with_google(std::chrono::milliseconds timeout, const completion_queue &q,
                                  std::function<void(result<sign_in>)> done) {
        const std::uint32_t ms = detail::to_wait_ms(timeout, "timeout_ms");
        return sign_in_call<sign_in>(std::move(done), &detail::to_sign_in, [&](auto cb, void *ud, auto dn, std::uint64_t *id) {
            return portal_auth_sign_in_with_google_async(auth_, ms, q.native_handle(), cb, ud, dn, id);
        });
    }
    /** portal_auth_sign_in_with_apple_async(). */
    operation sign_in_with_apple(std::chrono::milliseconds timeout, const completion_queue &q,
                                 std::function<void(result<sign_in>)> done) {
        const std::uint32_t ms = detail::to_wait_ms(timeout, "timeout_ms");
        return sign_in_call<sign_in>(std::move(done), &detail::to_sign_in, [&](auto cb, void *ud, auto dn, std::uint64_t *id) {
            return portal_auth_sign_in_with_apple_async(auth_, ms, q.native_handle(), cb, ud, dn, id);
        });
    }
    /** portal_auth_verify_totp_async(): the persisted session. */
    operation verify_totp(const std::string &code, const char *user_jwt, const completion_queue &q,
                          std::function<void(result<session>)> done) {
        const char *c_code = detail::c_arg(code, "code");
        return sign_in_call<session>(std::move(done), &detail::to_signed_in, [&](auto cb, void *ud, auto dn, std::uint64_t *id) {
            return portal_auth_verify_totp_async(auth_, c_code, user_jwt, q.native_handle(), cb, ud, dn, id);
        });
    }

    /**
     * portal_auth_watch_async(): the first event is PORTAL_WATCH_STARTED, or PORTAL_WATCH_FAILED
     * with the reason in the text; then the changes, in order (the text: the end user id of
     * PORTAL_WATCH_SIGNED_IN, else empty; valid during the call).
     */
    watch watch_session(const completion_queue &q, std::function<void(portal_watch_event, std::string_view)> on_event) {
        if (!on_event) detail::throw_invalid("callback: empty std::function");
        auto box = std::make_unique<detail::watch_box>();
        box->callback = std::move(on_event);
        portal_watch *out = nullptr;
        // From here the C library owns the box: destroy_notify deletes it, also when this fails.
        detail::check(portal_auth_watch_async(auth_, q.native_handle(), &portal_keyring_hpp_watch_event, box.release(),
                                              &portal_keyring_hpp_release_watch, &out));
        return watch(out);
    }

private:
    template <typename T, typename Start>
    static operation sign_in_call(std::function<void(result<T>)> done, detail::converter<T, portal_sign_in_result> convert,
                                  Start start) {
        return detail::start_async<T, portal_sign_in_result>(std::move(done), convert, start);
    }

    portal_auth *auth_;
};

/** The non-blocking calls of one session. */
class session_async {
public:
    explicit session_async(session &s) noexcept : session_(s.native_handle()) {}

    /** invalidate() without blocking: the token is dropped before this returns; the delete runs later. */
    operation invalidate(const completion_queue &q, std::function<void(result<void>)> done) {
        return detail::start_async<void, portal_result>(std::move(done), nullptr, [&](auto cb, void *ud, auto dn, std::uint64_t *id) {
            return portal_session_invalidate_async(session_, q.native_handle(), cb, ud, dn, id);
        });
    }

private:
    portal_session *session_;
};

/** The non-blocking calls of one portal. */
class portal_async {
public:
    explicit portal_async(portal &p) noexcept : portal_(&p) {}

    /** request() without blocking: the HTTP status and body. */
    operation request(const std::string &method, const std::string &target, const std::optional<std::string> &body,
                      const completion_queue &q, std::function<void(result<response>)> done) {
        const char *m = detail::c_arg(method, "method"), *t = detail::c_arg(target, "target"), *b = detail::c_arg(body, "body");
        return detail::start_async(std::move(done), &detail::to_response, [&](auto cb, void *ud, auto dn, std::uint64_t *id) {
            return portal_request_async(portal_->native_handle(), m, t, b, q.native_handle(), cb, ud, dn, id);
        });
    }
    /** report_unauthorized() without blocking: whether this call invalidated the session. */
    operation report_unauthorized(const char *rejected_token, const completion_queue &q,
                                  std::function<void(result<bool>)> done) {
        return detail::start_async(std::move(done), &detail::to_invalidated, [&](auto cb, void *ud, auto dn, std::uint64_t *id) {
            return portal_report_unauthorized_async(portal_->native_handle(), rejected_token, q.native_handle(), cb, ud, dn, id);
        });
    }
    operation report_unauthorized(const std::string &rejected_token, const completion_queue &q,
                                  std::function<void(result<bool>)> done) {
        return report_unauthorized(detail::c_arg(rejected_token, "rejected_token"), q, std::move(done));
    }
    /** clear_session() without blocking. */
    operation clear_session(const completion_queue &q, std::function<void(result<void>)> done) {
        return detail::start_async<void, portal_result>(std::move(done), nullptr, [&](auto cb, void *ud, auto dn, std::uint64_t *id) {
            return portal_clear_session_async(portal_->native_handle(), q.native_handle(), cb, ud, dn, id);
        });
    }
    /** on_session_invalidated() delivered on q instead of a library thread
     *  (portal_on_session_invalidated_queued: once queued, it runs even if cancelled meanwhile). */
    listener on_session_invalidated(const completion_queue &q, std::function<void()> callback) {
        return portal_->register_listener(std::move(callback), [&](auto cb, void *ud, auto dn, std::uint64_t *id) {
            return portal_on_session_invalidated_queued(portal_->native_handle(), q.native_handle(), cb, ud, dn, id);
        });
    }
    /**
     * Frees the portal without blocking (portal_free_async): requests aborted and every listener
     * cancelled before this returns; `done` (optional) runs on q once everything the free waits
     * for has returned — only then may the process exit. The portal object is empty afterwards.
     */
    void close(const completion_queue &q, std::function<void(result<void>)> done = {}) {
        std::unique_ptr<detail::typed_box<void, portal_result>> box;
        if (done) box = std::make_unique<detail::typed_box<void, portal_result>>(std::move(done), nullptr);
        portal_completion_queue *queue = q.native_handle();
        portal_completion_cb complete = box ? &portal_keyring_hpp_complete : nullptr;
        portal_destroy_notify release = box ? &portal_keyring_hpp_release_completion : nullptr;
        detail::completion_box *user_data = box.get();
        // Runs when the last reference goes (a listener::cancel() in progress may hold one); it
        // cannot fail: the handle is not NULL, and an argument error would only be a NULL portal.
        portal_->close_with([queue, complete, user_data, release](::portal *p) {
            portal_free_async(p, queue, complete, user_data, release);
        });
        (void)box.release(); // the C library's now: destroy_notify deletes it
    }

private:
    portal *portal_;
};

/** The non-blocking forms of an object's calls: async(auth).restore_session(queue, callback). */
inline auth_async async(auth &a) noexcept { return auth_async(a); }
inline session_async async(session &s) noexcept { return session_async(s); }
inline portal_async async(portal &p) noexcept { return portal_async(p); }

} // namespace portal_keyring

#endif /* PORTAL_KEYRING_ASYNC_HPP */
