/*
 * cpp_async_test.cpp — Include/portal_keyring_async.hpp against the real keyring and the loopback
 * Portal API: restore → persist → restore → clear on a pollable queue driven by poll() and on a
 * GMainContext; requests, report_unauthorized, queued listeners and close(); cancel completes
 * once with PORTAL_ERR_CANCELLED (also by dropping the operation); each callback's captured state
 * is destroyed exactly once (completed, cancelled, refused, thrown from, dropped with its queue);
 * with the provider SIGSTOPped the loop's 10 ms timer never gaps over gap_bound_ms (200 ms: the C
 * tests' MAX_GAP_MS, Tests/c/main_loop.h says why; a blocking call would stall it for seconds).
 *
 * Run by the C suite (Tests/c/run.sh) on every provider of the matrix, built by Tests/c/build.sh;
 * needs scripts/with-keyring.sh + scripts/with-portal-api.sh. Tests/bindings/run.sh compiles it
 * with every compiler and the strict warning flags.
 * Exit 0 when every check passed; prints "cpp_async_test: N checks passed".
 */
#include <portal_keyring_async.hpp>

#include "cpp_tests.hpp"
#include "fake_api.h"
#include "provider_pid.h"

#include <glib.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <poll.h>
#include <string>
#include <thread>
#include <type_traits>
#include <unistd.h>
#include <utility>
#include <vector>

namespace pk = portal_keyring;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

static_assert(!std::is_copy_constructible_v<pk::operation> && std::is_nothrow_move_constructible_v<pk::operation>);
static_assert(!std::is_copy_constructible_v<pk::completion_queue>);
static_assert(std::is_nothrow_move_assignable_v<pk::completion_queue>);

// ---------------------------------------------------------------------------------------- harness

static std::string env(const char *name) {
    const char *value = std::getenv(name);
    if (!value || !*value) {
        std::fprintf(stderr, "cpp_async_test: %s is not set (run via Tests/bindings/run.sh)\n", name);
        std::exit(2);
    }
    return value;
}

static std::string unique(const char *tag) { return std::string("cpp-async-") + tag + "-" + std::to_string(getpid()); }

static pk::auth new_auth(const char *tag, std::chrono::milliseconds call = 5000ms) {
    pk::auth a(unique(tag), "cpp-test://cb", env("PORTAL_TEST_API_HOST"));
    a.set_keyring_timeouts(call, 2000ms);
    a.clear_persisted_session();
    return a;
}

/* Counts its destructions: captured by a callback (through a shared_ptr, so that the callback's
 * copies share it), it is destroyed when the last copy of the callback is — exactly once. */
struct witness {
    std::atomic<int> &destroyed;
    explicit witness(std::atomic<int> &counter) : destroyed(counter) {}
    witness(const witness &) = delete;
    witness &operator=(const witness &) = delete;
    ~witness() { destroyed++; }
};

/* The largest gap allowed: Tests/c/main_loop.h's MAX_GAP_MS. */
static constexpr double gap_bound_ms = 200.0;

/* One event loop over either queue kind, with a 10 ms timer whose largest gap it records. */
class loop {
public:
    virtual ~loop() = default;
    virtual const pk::completion_queue &queue() const = 0;
    /* Runs until `done` or the timeout; false on timeout. */
    bool run_until(const std::function<bool()> &done, std::chrono::milliseconds timeout = 10s) {
        const auto end = steady::now() + timeout;
        last_tick_ = steady::now();
        while (!done()) {
            if (steady::now() > end) return false;
            turn();
            const auto now = steady::now();
            if (now - last_tick_ >= 10ms) {
                max_gap_ = std::max(max_gap_, std::chrono::duration_cast<std::chrono::microseconds>(now - last_tick_));
                last_tick_ = now;
            }
        }
        return true;
    }
    double max_gap_ms() const { return static_cast<double>(max_gap_.count()) / 1000.0; }
    void reset_gap() { max_gap_ = {}; }

protected:
    /* Waits at most until the next timer tick, then runs what is ready. */
    virtual void turn() = 0;
    int ms_to_tick() const {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(last_tick_ + 10ms - steady::now()).count();
        return left < 0 ? 0 : static_cast<int>(left);
    }

private:
    steady::time_point last_tick_ = steady::now();
    std::chrono::microseconds max_gap_{};
};

class poll_loop final : public loop {
public:
    const pk::completion_queue &queue() const override { return queue_; }

protected:
    void turn() override {
        struct pollfd fd = {queue_.fd(), POLLIN, 0};
        if (poll(&fd, 1, ms_to_tick()) > 0) queue_.dispatch();
    }

private:
    pk::completion_queue queue_ = pk::completion_queue::pollable();
};

class glib_loop final : public loop {
public:
    glib_loop() : context_(g_main_context_new()), queue_(pk::completion_queue::main_context(context_)) {}
    ~glib_loop() override {
        queue_.reset();
        while (g_main_context_iteration(context_, FALSE)) {
        }
        g_main_context_unref(context_);
    }
    glib_loop(const glib_loop &) = delete;
    glib_loop &operator=(const glib_loop &) = delete;
    const pk::completion_queue &queue() const override { return queue_; }

protected:
    void turn() override {
        // One bounded wait: the context's own poll, woken by a completion's idle source.
        GSource *tick = g_timeout_source_new(static_cast<guint>(ms_to_tick()));
        g_source_set_callback(tick, [](gpointer) -> gboolean { return FALSE; }, nullptr, nullptr);
        g_source_attach(tick, context_);
        g_main_context_iteration(context_, TRUE);
        g_source_destroy(tick);
        g_source_unref(tick);
    }

private:
    GMainContext *context_;
    pk::completion_queue queue_;
};

/* SIGSTOPs the provider for its lifetime (SIGCONT when destroyed, also on a failed check). */
struct provider_stopped {
    pid_t pid = test_provider_pid();
    provider_stopped() { CHECK(kill(pid, SIGSTOP) == 0); }
    provider_stopped(const provider_stopped &) = delete;
    provider_stopped &operator=(const provider_stopped &) = delete;
    ~provider_stopped() { kill(pid, SIGCONT); }
};

// ------------------------------------------------------------------------------------------ tests

/* restore (signed out) → persist → restore (signed in) → clear → restore (signed out), each
 * completion on the loop's own thread. */
static void round_trip(loop &l, const char *tag) {
    pk::auth a = new_auth(tag);
    const std::thread::id me = std::this_thread::get_id();
    int completions = 0;
    bool on_loop_thread = true;
    std::optional<pk::result<std::optional<pk::session>>> restored;
    auto restore = [&] {
        restored.reset();
        pk::async(a).restore_session(l.queue(), [&](pk::result<std::optional<pk::session>> r) {
            completions++;
            on_loop_thread = on_loop_thread && std::this_thread::get_id() == me;
            restored.emplace(std::move(r));
        }).detach();
        CHECK(!restored); // never before the call returned
        CHECK(l.run_until([&] { return restored.has_value(); }));
    };
    restore();
    CHECK(restored && restored->ok() && !restored->value().has_value());

    std::optional<pk::result<pk::session>> persisted;
    pk::operation op = pk::async(a).persist_session("u-async", "tok-async", l.queue(), [&](pk::result<pk::session> r) {
        completions++;
        persisted.emplace(std::move(r));
    });
    CHECK(op.id() != 0);
    CHECK(l.run_until([&] { return persisted.has_value(); }));
    CHECK(persisted && persisted->ok() && (*persisted)->end_user_id() == "u-async");

    restore();
    CHECK(restored && restored->ok() && restored->value().has_value());
    if (restored && restored->ok() && restored->value()) {
        CHECK(restored->value()->end_user_id() == "u-async");
        CHECK((*restored)->value().copy_token().view() == "tok-async");
    }

    std::optional<pk::result<void>> cleared;
    pk::operation clear = pk::async(a).clear_persisted_session(l.queue(), [&](pk::result<void> r) {
        completions++;
        cleared.emplace(std::move(r));
    });
    CHECK(l.run_until([&] { return cleared.has_value(); }));
    CHECK(cleared && cleared->ok() && cleared->message().empty());
    restore();
    CHECK(restored && restored->ok() && !restored->value());
    CHECK(completions == 5 && on_loop_thread);
    std::printf("  %s round trip: largest timer gap %.1f ms\n", tag, l.max_gap_ms());
}

static void test_round_trip_pollable() {
    poll_loop l;
    round_trip(l, "poll");
}

static void test_round_trip_main_context() {
    glib_loop l;
    round_trip(l, "glib");
}

/* Errors as values: the status and message the blocking form throws with, and value() throws it. */
static void test_errors_as_values() {
    poll_loop l;
    pk::auth a = new_auth("err");
    std::optional<pk::result<pk::response>> got;
    pk::portal keyed = pk::portal::with_api_key("static-key", env("PORTAL_TEST_API_HOST"));
    pk::operation op = pk::async(keyed).request("GET", "/api/v3/clients/me", std::nullopt, l.queue(),
                                                [&](pk::result<pk::response> r) { got.emplace(std::move(r)); });
    CHECK(l.run_until([&] { return got.has_value(); }));
    CHECK(got && got->ok() && got->value().status >= 200); // any HTTP status is a success

    // A refused call throws from the *_async method itself, as the blocking form does.
    std::atomic<int> destroyed{0};
    auto w = std::make_shared<witness>(destroyed);
    bool thrown = false;
    try {
        pk::operation never = pk::async(a).persist_session("u", "", l.queue(), [w](pk::result<pk::session>) {});
    } catch (const pk::invalid_argument &e) {
        thrown = e.code() == PORTAL_ERR_INVALID_ARGUMENT;
    }
    w.reset();
    CHECK(thrown && destroyed == 1);

    // A status from the worker: the message is the operation's, value() throws its class.
    pk::session s = a.persist_session("u-err", "tok-err");
    pk::portal p(s);
    pk::async(s).invalidate(l.queue(), [](pk::result<void> v) { CHECK(v.ok()); }).detach();
    std::string caught;
    std::optional<pk::result<pk::response>> after;
    pk::operation req = pk::async(p).request("GET", "/x", std::nullopt, l.queue(),
                                             [&](pk::result<pk::response> v) { after.emplace(std::move(v)); });
    CHECK(l.run_until([&] { return after.has_value(); }));
    CHECK(after && after->status() == PORTAL_ERR_SESSION_INVALIDATED && !after->message().empty());
    try {
        after->value();
    } catch (const pk::session_invalidated &e) {
        caught = e.message();
    }
    CHECK(after && !caught.empty() && caught == after->message());
}

/* report_unauthorized, the queued listener on the loop's thread, clear_session and close(). */
static void test_portal_calls() {
    poll_loop l;
    pk::auth a = new_auth("portal");
    // A token the fake API issued: the portal's validation request (GET /clients/me when it is
    // made) must pass, or its 401 would invalidate the session before report_unauthorized does —
    // which then rightly answers "not by this call" (false).
    char token[512];
    CHECK(fake_api_admin("POST", "/_admin/sessions", "{\"endUserId\": \"u-portal\"}", "d[\"data\"][\"token\"]", token,
                         sizeof token) == 0 &&
          token[0]);
    pk::session s = a.persist_session("u-portal", token);
    std::optional<pk::portal> p(std::in_place, s);
    const std::thread::id me = std::this_thread::get_id();
    int heard = 0;
    bool heard_here = false;
    pk::listener l1 = pk::async(*p).on_session_invalidated(l.queue(), [&] {
        heard++;
        heard_here = std::this_thread::get_id() == me;
    });
    std::optional<pk::result<bool>> reported;
    pk::operation op = pk::async(*p).report_unauthorized(token, l.queue(),
                                                         [&](pk::result<bool> r) { reported.emplace(std::move(r)); });
    CHECK(l.run_until([&] { return reported.has_value() && heard == 1; }));
    CHECK(reported && reported->ok() && **reported);
    CHECK(heard == 1 && heard_here);
    CHECK(!a.restore_session());

    std::optional<pk::result<void>> signed_out, closed;
    pk::async(*p).clear_session(l.queue(), [&](pk::result<void> r) { signed_out.emplace(std::move(r)); }).detach();
    CHECK(l.run_until([&] { return signed_out.has_value(); }));
    CHECK(signed_out && signed_out->ok());
    pk::async(*p).close(l.queue(), [&](pk::result<void> r) { closed.emplace(std::move(r)); });
    CHECK(!*p);
    CHECK(l.run_until([&] { return closed.has_value(); }));
    CHECK(closed && closed->ok());
    bool refused = false;
    try {
        pk::async(*p).close(l.queue());
    } catch (const pk::invalid_argument &) {
        refused = true;
    }
    CHECK(refused);
}

/* The sign-in calls' own result type (portal_sign_in_result) through the same trampolines. */
static void test_sign_in_calls() {
    poll_loop l;
    pk::auth a = new_auth("signin");
    std::optional<pk::result<pk::methods>> methods;
    std::optional<pk::result<std::string>> google;
    pk::operation m = pk::async(a).get_methods(l.queue(), [&](pk::result<pk::methods> r) { methods.emplace(std::move(r)); });
    pk::operation g = pk::async(a).login_with_google(l.queue(), [&](pk::result<std::string> r) { google.emplace(std::move(r)); });
    CHECK(l.run_until([&] { return methods.has_value() && google.has_value(); }));
    CHECK_MSG(methods && methods->ok() && (*methods)->list.find("EMAIL_MAGIC_LINK") != std::string::npos, "%s",
              methods ? methods->message().c_str() : "");
    CHECK(google && google->ok() && (*google)->find("http") == 0);
    std::optional<pk::result<pk::sign_in>> redirect;
    pk::operation h = pk::async(a).handle_redirect("other-app://x", PORTAL_REDIRECT_FLAGS_NONE, l.queue(),
                                                   [&](pk::result<pk::sign_in> r) { redirect.emplace(std::move(r)); });
    CHECK(l.run_until([&] { return redirect.has_value(); }));
    CHECK(redirect && redirect->ok() && (*redirect)->kind == PORTAL_REDIRECT_NOT_HANDLED && !(*redirect)->signed_in);
}

/* A watch on the loop: STARTED, then another process's sign-in; stopping it destroys the callback. */
static void test_watch() {
    poll_loop l;
    pk::auth a = new_auth("watch");
    std::atomic<int> destroyed{0};
    auto w = std::make_shared<witness>(destroyed);
    std::vector<std::pair<portal_watch_event, std::string>> events;
    pk::watch watching = pk::async(a).watch_session(l.queue(), [&, w](portal_watch_event e, std::string_view text) {
        events.emplace_back(e, std::string(text));
    });
    w.reset();
    CHECK(l.run_until([&] { return !events.empty(); }));
    CHECK(!events.empty() && events[0].first == PORTAL_WATCH_STARTED);
    pk::auth other(unique("watch"), "cpp-test://cb");
    other.persist_session("u-watched", "tok-watched");
    CHECK(l.run_until([&] { return events.size() >= 2; }));
    CHECK(events.size() >= 2 && events.back().first == PORTAL_WATCH_SIGNED_IN && events.back().second == "u-watched");
    CHECK(destroyed == 0);
    watching.reset();
    CHECK(l.run_until([&] { return destroyed == 1; }, 2s));
    a.clear_persisted_session();
}

/* Cancel completes once with PORTAL_ERR_CANCELLED, at once, also when the handle is dropped; the
 * callback's state is destroyed exactly once in every path. */
static void test_cancel_and_destroy_once() {
    pk::auth a = new_auth("cancel", 3000ms);
    poll_loop l;
    std::atomic<int> destroyed{0};
    int calls = 0;
    std::optional<portal_status> status;
    {
        provider_stopped stopped;
        auto w = std::make_shared<witness>(destroyed);
        pk::operation op = pk::async(a).restore_session(l.queue(), [&, w](pk::result<std::optional<pk::session>> r) {
            calls++;
            status = r.status();
        });
        w.reset();
        l.run_until([] { return false; }, 100ms); // the operation waits on the stopped provider
        CHECK(calls == 0 && destroyed == 0);
        const auto before = steady::now();
        op.cancel();
        op.cancel(); // a no-op the second time
        CHECK(l.run_until([&] { return destroyed == 1; }, 1s));
        CHECK_MSG(steady::now() - before < 500ms, "the cancel completed late");
        CHECK(calls == 1 && status == PORTAL_ERR_CANCELLED);

        // Dropping the handle cancels too.
        auto w2 = std::make_shared<witness>(destroyed);
        status.reset();
        { pk::operation dropped = pk::async(a).clear_persisted_session(l.queue(), [&, w2](pk::result<void> r) {
              calls++;
              status = r.status();
          }); }
        w2.reset();
        CHECK(l.run_until([&] { return destroyed == 2; }, 1s));
        CHECK(calls == 2 && status == PORTAL_ERR_CANCELLED);

        // The queue freed with an operation pending: the callback is never called, and its state
        // is destroyed once, when the completion is dropped.
        auto dropped_queue = std::make_unique<poll_loop>();
        auto w3 = std::make_shared<witness>(destroyed);
        pk::async(a).restore_session(dropped_queue->queue(), [&, w3](pk::result<std::optional<pk::session>>) {
            calls += 100;
        }).detach();
        w3.reset();
        dropped_queue.reset();
        CHECK(destroyed == 2);
    }
    // Provider continued: the dropped completion arrives on the worker and is destroyed there.
    CHECK(l.run_until([&] { return destroyed == 3; }, 10s));
    l.run_until([] { return false; }, 300ms);
    CHECK(calls == 2 && destroyed == 3);

    // An exception thrown by the callback goes to the handler, never further; destroyed once.
    static std::atomic<int> reported{0};
    pk::set_listener_exception_handler([](std::exception_ptr) noexcept { reported++; });
    auto w4 = std::make_shared<witness>(destroyed);
    pk::operation thrower = pk::async(a).restore_session(l.queue(), [w4](pk::result<std::optional<pk::session>>) {
        throw std::runtime_error("callback failed");
    });
    w4.reset();
    CHECK(l.run_until([&] { return destroyed == 4; }));
    CHECK(reported == 1);
    pk::set_listener_exception_handler(nullptr);
}

/* The provider stopped: the loop never blocks; the call deadline ends the restore. */
static void provider_stopped_never_blocks(loop &l, const char *tag) {
    pk::auth a = new_auth(tag, 1000ms);
    std::optional<pk::result<std::optional<pk::session>>> restored;
    steady::time_point started, ended;
    {
        provider_stopped stopped;
        l.reset_gap();
        started = steady::now();
        pk::operation op = pk::async(a).restore_session(l.queue(), [&](pk::result<std::optional<pk::session>> r) {
            ended = steady::now();
            restored.emplace(std::move(r));
        });
        CHECK(l.run_until([&] { return restored.has_value(); }, 10s));
    }
    const double took = std::chrono::duration<double, std::milli>(ended - started).count();
    std::printf("  %s, provider stopped: completed after %.0f ms, largest timer gap %.1f ms\n", tag, took, l.max_gap_ms());
    CHECK(restored && restored->status() == PORTAL_ERR_SESSION_STORAGE);
    CHECK_MSG(l.max_gap_ms() <= gap_bound_ms, "the loop's 10 ms timer gapped %.1f ms", l.max_gap_ms());
}

static void test_provider_stopped() {
    poll_loop p;
    provider_stopped_never_blocks(p, "poll");
    glib_loop g;
    provider_stopped_never_blocks(g, "glib");
}

int main() {
    env("PORTAL_TEST_KEYRING_DIR");
    static const named_test tests[] = {
        {"round trip on a pollable queue (poll)", test_round_trip_pollable},
        {"round trip on a GMainContext queue", test_round_trip_main_context},
        {"errors as values", test_errors_as_values},
        {"portal calls, queued listener, close", test_portal_calls},
        {"sign-in calls", test_sign_in_calls},
        {"watch", test_watch},
        {"cancel, destroy exactly once", test_cancel_and_destroy_once},
        {"provider stopped: the loop never blocks", test_provider_stopped},
    };
    return run_tests("cpp_async_test", tests);
}
