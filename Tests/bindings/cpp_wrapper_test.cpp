/*
 * cpp_wrapper_test.cpp — Include/portal_keyring.hpp against the real keyring and the loopback
 * Portal API: ownership and moves, exceptions per status, std::optional for signed out, storage
 * failure on a locked collection, listener lifetime (std::function destroyed exactly once in every
 * path), replay to a late listener, cancel, exceptions escaping listeners, 8 threads.
 *
 * Needs (Tests/bindings/run.sh sets them up): scripts/with-keyring.sh + scripts/with-portal-api.sh
 * (PORTAL_TEST_API_URL, PORTAL_TEST_API_HOST) and PORTAL_TEST_KEYRINGCTL. Exit 0 when every check
 * passed; prints "cpp_wrapper_test: N checks passed".
 */
#include <portal_keyring.hpp>

#include "../c/cpp_tests.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <unistd.h>
#include <vector>

namespace pk = portal_keyring;
using namespace std::chrono_literals;

// ----------------------------------------------------------------------------------- static checks

static_assert(!std::is_copy_constructible_v<pk::auth> && !std::is_copy_assignable_v<pk::auth>);
static_assert(!std::is_copy_constructible_v<pk::session> && !std::is_copy_assignable_v<pk::session>);
static_assert(!std::is_copy_constructible_v<pk::portal> && !std::is_copy_assignable_v<pk::portal>);
static_assert(!std::is_copy_constructible_v<pk::secret> && !std::is_copy_assignable_v<pk::secret>);
static_assert(std::is_nothrow_move_constructible_v<pk::auth> && std::is_nothrow_move_assignable_v<pk::auth>);
static_assert(std::is_nothrow_move_constructible_v<pk::session> && std::is_nothrow_move_assignable_v<pk::session>);
static_assert(std::is_nothrow_move_constructible_v<pk::portal> && std::is_nothrow_move_assignable_v<pk::portal>);
static_assert(std::is_nothrow_move_constructible_v<pk::secret> && std::is_nothrow_move_assignable_v<pk::secret>);
static_assert(std::is_copy_constructible_v<pk::listener>);
static_assert(std::is_base_of_v<pk::error, pk::session_storage_failure>);
static_assert(std::is_base_of_v<std::runtime_error, pk::error>);
static_assert(!std::is_base_of_v<pk::session_invalidated, pk::session_storage_failure>);

// ---------------------------------------------------------------------------------------- harness

/* What went wrong when `body` did not throw E with status `code`; "" when it did. */
template <typename E, typename F> static std::string not_thrown(F body, portal_status code) {
    try {
        body();
    } catch (const E &e) {
        if (e.code() == code) return "";
        return "wrong status " + std::to_string(static_cast<int>(e.code())) + ": " + e.what();
    } catch (const std::exception &e) {
        return std::string("unexpected exception: ") + e.what();
    }
    return "nothing thrown";
}
#define EXPECT_THROW(E, code, ...)                                                                    \
    do {                                                                                              \
        std::string not_thrown_ = not_thrown<E>([&] { __VA_ARGS__; }, code);                          \
        CHECK_MSG(not_thrown_.empty(), "expected " #E ": %s", not_thrown_.c_str());                  \
    } while (0)

template <typename F> static bool wait_for(F predicate, std::chrono::milliseconds timeout = 10s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!predicate()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(5ms);
    }
    return true;
}

static std::string env(const char *name) {
    const char *value = std::getenv(name);
    if (!value || !*value) {
        std::fprintf(stderr, "cpp_wrapper_test: %s is not set (run inside scripts/with-keyring.sh "
                             "scripts/with-portal-api.sh, via Tests/bindings/run.sh)\n", name);
        std::exit(2);
    }
    return value;
}

static std::string run(const std::string &command) {
    std::string out;
    std::FILE *p = popen(command.c_str(), "r");
    if (!p) return out;
    char buffer[512];
    while (std::fgets(buffer, sizeof buffer, p)) out += buffer;
    int rc = pclose(p);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return rc == 0 ? out : std::string("!failed");
}

/* POSTs JSON to an admin route of the loopback API and prints data[field], or for "*" "token sessionId"
 * (Python is in the harness). */
static std::string admin(const std::string &route, const std::string &json, const std::string &field = "token") {
    return run("python3 -c 'import json,sys,urllib.request as u; r=u.Request(sys.argv[1],data=sys.argv[2].encode(),"
               "headers={\"Content-Type\":\"application/json\"}); d=json.load(u.urlopen(r))[\"data\"]; f=sys.argv[3];"
               " print(d[\"token\"]+\" \"+d[\"sessionId\"] if f==\"*\" else d.get(f,\"\"))' '" +
               env("PORTAL_TEST_API_URL") + "/_admin/" + route + "' '" + json + "' '" + field + "'");
}

/* How many recent /api/v3/clients/me requests carried the CST of the fake API's session_id. */
static int clients_me_requests(const std::string &session_id) {
    std::string out = run("python3 -c 'import json,sys,urllib.request as u; r=json.load(u.urlopen(sys.argv[1]))[\"data\"][\"recent\"];"
                          " print(sum(1 for x in r if x.get(\"sessionId\")==sys.argv[2] and x.get(\"path\")==\"/api/v3/clients/me\"))' '" +
                          env("PORTAL_TEST_API_URL") + "/_admin/stats?last=200' '" + session_id + "'");
    return out == "!failed" ? -1 : std::atoi(out.c_str());
}

static std::string issue(const std::string &user) { return admin("sessions", "{\"endUserId\":\"" + user + "\"}"); }
static void revoke(const std::string &token) { CHECK(admin("revoke", "{\"token\":\"" + token + "\"}") != "!failed"); }
static bool keyringctl(const std::string &args) {
    return std::system(("'" + env("PORTAL_TEST_KEYRINGCTL") + "' " + args + " >/dev/null").c_str()) == 0;
}

static std::string unique(const char *tag) { return std::string("cpp-") + tag + "-" + std::to_string(getpid()); }

static pk::auth new_auth(const char *tag) {
    pk::auth a(unique(tag), "cpp-test://cb", env("PORTAL_TEST_API_HOST"));
    a.set_keyring_timeouts(5000ms, 2000ms);
    a.clear_persisted_session();
    return a;
}

/* A std::function payload whose copies we can count: use_count() - 1 = live copies. */
using tracker = std::shared_ptr<int>;
static long live_copies(const tracker &t) { return t.use_count() - 1; }

// ------------------------------------------------------------------------------------------ tests

static void test_errors_and_arguments() {
    EXPECT_THROW(pk::invalid_argument, PORTAL_ERR_INVALID_ARGUMENT, pk::auth("", "app://cb"));
    EXPECT_THROW(pk::invalid_argument, PORTAL_ERR_INVALID_ARGUMENT, pk::auth("id", "  "));
    EXPECT_THROW(pk::invalid_argument, PORTAL_ERR_INVALID_ARGUMENT, pk::auth(std::string("a\0b", 3), "app://cb"));
    try {
        pk::auth("   ", "app://cb");
    } catch (const pk::error &e) { // caught through the common base
        CHECK(e.code() == PORTAL_ERR_INVALID_ARGUMENT);
        CHECK(e.message().find("auth_environment_id") != std::string::npos);
        CHECK(std::string(e.what()).rfind("invalid argument (1): ", 0) == 0);
        CHECK(std::string(e.status_name()) == "invalid argument");
    }
    pk::auth a = new_auth("args");
    EXPECT_THROW(pk::invalid_argument, PORTAL_ERR_INVALID_ARGUMENT, a.persist_session("u", ""));
    EXPECT_THROW(pk::invalid_argument, PORTAL_ERR_INVALID_ARGUMENT, a.persist_session("u", std::string("a\0b", 3)));
    EXPECT_THROW(pk::invalid_argument, PORTAL_ERR_INVALID_ARGUMENT, a.persist_session("u", std::string(65537, 'x')));
    EXPECT_THROW(pk::invalid_argument, PORTAL_ERR_INVALID_ARGUMENT, a.persist_session("u", static_cast<const char *>(nullptr)));
    EXPECT_THROW(pk::invalid_argument, PORTAL_ERR_INVALID_ARGUMENT, a.set_keyring_timeouts(0ms, 10ms));
    EXPECT_THROW(pk::invalid_argument, PORTAL_ERR_INVALID_ARGUMENT, a.set_keyring_timeouts(10ms, 601s));
    CHECK(!a.restore_session().has_value());
    CHECK(pk::library_matches_header());
    // The sign-in statuses appended to portal_status each have their class.
    EXPECT_THROW(pk::magic_link_not_configured, PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED,
                 pk::detail::throw_error(PORTAL_ERR_MAGIC_LINK_NOT_CONFIGURED, "m"));
    EXPECT_THROW(pk::auth_method_unavailable, PORTAL_ERR_AUTH_METHOD_UNAVAILABLE,
                 pk::detail::throw_error(PORTAL_ERR_AUTH_METHOD_UNAVAILABLE, "m"));
    EXPECT_THROW(pk::account_abstraction_unavailable, PORTAL_ERR_ACCOUNT_ABSTRACTION_UNAVAILABLE,
                 pk::detail::throw_error(PORTAL_ERR_ACCOUNT_ABSTRACTION_UNAVAILABLE, "m"));
    EXPECT_THROW(pk::server_error, PORTAL_ERR_SERVER, pk::detail::throw_error(PORTAL_ERR_SERVER, "m"));
    EXPECT_THROW(pk::request_refused, PORTAL_ERR_REQUEST_REFUSED, pk::detail::throw_error(PORTAL_ERR_REQUEST_REFUSED, "m"));
}

static void test_round_trip_and_moves() {
    pk::auth a = new_auth("rt");
    CHECK(!a.restore_session()); // std::nullopt: signed out
    const std::string tokens[] = {"tøkén\"q\"\\\\n\\t", std::string(65536, 'y'), issue("cpp-user")};
    for (const std::string &token : tokens) {
        pk::session stored = a.persist_session("cpp-user", token);
        CHECK(stored.end_user_id() == "cpp-user");
        CHECK(stored.copy_token().view() == token);
        std::optional<pk::session> restored = a.restore_session();
        CHECK(restored.has_value());
        if (restored) {
            CHECK(restored->auth_environment_id() == unique("rt"));
            pk::secret copy = restored->copy_token();
            pk::secret moved = std::move(copy);
            CHECK(copy.empty() && moved.view() == token);
            CHECK(moved.size() == token.size());
            moved.reset();
            CHECK(moved.empty());
        }
    }
    // Moves: the moved-from object holds nothing; using it throws invalid_argument (C's NULL).
    pk::auth b = std::move(a);
    CHECK(!a && b);
    EXPECT_THROW(pk::invalid_argument, PORTAL_ERR_INVALID_ARGUMENT, a.restore_session());
    std::optional<pk::session> s = b.restore_session();
    CHECK(s.has_value());
    if (!s) return;
    pk::session t = std::move(*s);
    CHECK(!*s && t);
    EXPECT_THROW(pk::invalid_argument, PORTAL_ERR_INVALID_ARGUMENT, s->end_user_id());
    EXPECT_THROW(pk::invalid_argument, PORTAL_ERR_INVALID_ARGUMENT, s->copy_token());
    pk::session u = b.persist_session("other", "tok-other");
    u = std::move(t); // move-assign frees u's previous handle
    CHECK(u.end_user_id() == "cpp-user");
    u.invalidate();
    u.invalidate(); // idempotent
    CHECK(!u.valid());
    EXPECT_THROW(pk::session_invalidated, PORTAL_ERR_SESSION_INVALIDATED, u.copy_token());
    // u (the older sign-in) only deletes its own item: the newer "other" sign-in survives.
    std::optional<pk::session> newer = b.restore_session();
    CHECK(newer && newer->end_user_id() == "other");
}

static void test_storage_failure_is_not_signed_out() {
    pk::auth a = new_auth("locked");
    a.persist_session("u-locked", "t-locked");
    CHECK(keyringctl("lock"));
    EXPECT_THROW(pk::session_storage_failure, PORTAL_ERR_SESSION_STORAGE, a.restore_session());
    EXPECT_THROW(pk::session_storage_failure, PORTAL_ERR_SESSION_STORAGE, a.clear_persisted_session());
    try {
        a.restore_session();
    } catch (const pk::session_storage_failure &e) {
        CHECK(e.message().find("lock") != std::string::npos);
        CHECK(e.message().find("t-locked") == std::string::npos);
    }
    CHECK(keyringctl("unlock"));
    std::optional<pk::session> s = a.restore_session();
    CHECK(s && s->end_user_id() == "u-locked" && s->copy_token().view() == "t-locked");
    a.clear_persisted_session();
}

static void test_listener_lifetime() {
    pk::auth a = new_auth("life");
    std::string token = issue("u-life");
    pk::session s = a.persist_session("u-life", token);
    tracker t = std::make_shared<int>(0);
    std::atomic<int> calls{0};
    {
        pk::portal p(s);
        // Cancelled: destroy_notify deletes the std::function at once.
        pk::listener l1 = p.on_session_invalidated([t, &calls] { calls++; });
        CHECK(live_copies(t) == 1 && l1.id() != 0 && !l1.spent());
        l1.cancel();
        l1.cancel();
        CHECK(live_copies(t) == 0);
        // Registered, then the portal is destroyed: deleted by portal_free.
        pk::listener l2 = p.on_session_invalidated([t, &calls] { calls++; });
        pk::listener l3 = p.on_session_invalidated([t, &calls] { calls++; });
        CHECK(live_copies(t) == 2);
        // A moved portal keeps its registrations; the handles still work.
        pk::portal q = std::move(p);
        CHECK(!p && q);
        EXPECT_THROW(pk::invalid_argument, PORTAL_ERR_INVALID_ARGUMENT, p.on_session_invalidated([t] {}));
        CHECK(live_copies(t) == 2); // the failed registration's copy was released by destroy_notify
        EXPECT_THROW(pk::invalid_argument, PORTAL_ERR_INVALID_ARGUMENT, q.on_session_invalidated(nullptr));
        l3.cancel();
        CHECK(live_copies(t) == 1);
        (void)l2;
    }
    CHECK(live_copies(t) == 0);
    // Delivered: deleted after the callback returns, on the library thread.
    pk::portal p(s);
    pk::listener late_cancel;
    {
        pk::listener l = p.on_session_invalidated([t, &calls] { calls++; });
        late_cancel = l; // copies of the handle are fine
    }
    CHECK(live_copies(t) == 1); // dropping handles does not cancel
    CHECK(p.report_unauthorized(token));
    CHECK(wait_for([&] { return calls.load() == 1 && live_copies(t) == 0; }));
    late_cancel.cancel(); // after delivery: harmless
    // A listener handle outliving its portal: cancel() is a no-op.
    pk::listener orphan;
    {
        pk::portal r(s);
        orphan = r.on_session_invalidated([t] {});
        // s was invalidated above, so this registration is a replay; it may already be delivered.
    }
    orphan.cancel();
    CHECK(wait_for([&] { return live_copies(t) == 0; }));
    // API-key portal: spent at once, the function destroyed before on_session_invalidated returns.
    pk::portal keyed = pk::portal::with_api_key("static-key", env("PORTAL_TEST_API_HOST"));
    pk::listener spent = keyed.on_session_invalidated([t] {});
    CHECK(spent.spent() && spent.id() == 0 && live_copies(t) == 0);
    spent.cancel();
    CHECK(calls.load() == 1);
}

static void test_late_listener_cancel_and_exceptions() {
    pk::auth a = new_auth("late");
    std::string token = issue("u-late");
    pk::session s = a.persist_session("u-late", token);
    revoke(token);
    pk::portal p(s); // the validation request will be rejected
    std::atomic<int> early{0}, late{0}, self{0}, after{0};
    std::atomic<bool> other_thread{false};
    const std::thread::id main_thread = std::this_thread::get_id();
    p.on_session_invalidated([&] {
        early++;
        other_thread = std::this_thread::get_id() != main_thread;
    });
    // (Cancel before delivery is checked in test_listener_lifetime, where no rejection races it.)
    CHECK(wait_for([&] { return !s.valid(); }));
    // Registered after the rejection: exactly one replay each.
    pk::listener self_handle;
    std::mutex m;
    {
        std::lock_guard<std::mutex> lock(m);
        self_handle = p.on_session_invalidated([&] {
            self++;
            std::lock_guard<std::mutex> inner(m);
            self_handle.cancel(); // cancelling its own registration from inside the callback
        });
    }
    p.on_session_invalidated([&] { late++; });
    static std::atomic<int> reported{0};
    pk::set_listener_exception_handler([](std::exception_ptr) noexcept { reported++; });
    p.on_session_invalidated([] { throw std::runtime_error("listener failed"); });
    p.on_session_invalidated([] { throw 42; });
    p.on_session_invalidated([&] { after++; });
    CHECK(wait_for([&] { return early == 1 && late == 1 && self == 1 && after == 1 && reported == 2; }));
    std::this_thread::sleep_for(200ms);
    CHECK(early == 1 && late == 1 && self == 1 && after == 1 && reported == 2);
    CHECK(other_thread.load());
    pk::set_listener_exception_handler(nullptr);
    CHECK(!a.restore_session()); // that sign-in's item was deleted
    EXPECT_THROW(pk::session_invalidated, PORTAL_ERR_SESSION_INVALIDATED, p.request("GET", "/api/v3/clients/me"));
}

static void test_request_and_destroy_inside_callback() {
    pk::auth a = new_auth("req");
    std::string issued = admin("sessions", "{\"endUserId\":\"u-req\"}", "*");
    std::string::size_type space = issued.find(' ');
    CHECK(space != std::string::npos);
    std::string token = issued.substr(0, space), session_id = issued.substr(space + 1);
    pk::session s = a.persist_session("u-req", token);
    std::optional<pk::portal> p(std::in_place, s);
    pk::response ok = p->request("GET", "/api/v3/clients/me");
    CHECK(ok.status == 200 && ok.body.find("u-req") != std::string::npos);
    // The portal's own validation request runs in the background: let it finish before the
    // revoke, so that the 401 below answers our request.
    CHECK(wait_for([&] { return clients_me_requests(session_id) >= 2; }));
    std::atomic<int> calls{0};
    std::atomic<bool> destroyed{false};
    p->on_session_invalidated([&] {
        calls++;
        p.reset(); // destroying the portal from inside its own callback
        destroyed = true;
    });
    p->on_session_invalidated([&] { calls += 100; }); // cancelled by the destruction
    revoke(token);
    pk::response rejected = p->request("GET", "/api/v3/clients/me");
    CHECK(rejected.status == 401);
    CHECK(wait_for([&] { return destroyed.load(); }));
    std::this_thread::sleep_for(200ms);
    CHECK(calls == 1);
}

static void test_eight_threads() {
    pk::auth a = new_auth("threads");
    std::string token = issue("u-threads");
    pk::session s = a.persist_session("u-threads", token);
    pk::portal p(s);
    std::atomic<int> calls{0}, winners{0}, ready{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; i++) {
        threads.emplace_back([&, i] {
            pk::auth own(unique("thread") + "-" + std::to_string(i), "cpp-test://cb");
            for (int round = 0; round < 5; round++) {
                std::string value = "tok-" + std::to_string(i) + "-" + std::to_string(round);
                own.persist_session("u", value);
                std::optional<pk::session> r = own.restore_session();
                CHECK(r && r->copy_token().view() == value);
                std::optional<pk::session> shared = a.restore_session();
                CHECK(shared && shared->end_user_id() == "u-threads");
            }
            own.clear_persisted_session();
            p.on_session_invalidated([&] { calls++; });
            ready++;
            while (ready.load() < 8) std::this_thread::yield();
            if (p.report_unauthorized(token)) winners++;
        });
    }
    for (std::thread &t : threads) t.join();
    CHECK(winners == 1);
    CHECK(wait_for([&] { return calls.load() == 8; }));
    std::this_thread::sleep_for(200ms);
    CHECK(calls == 8);
    CHECK(!a.restore_session());
}

int main() {
    env("PORTAL_TEST_KEYRING_DIR");
    env("PORTAL_TEST_KEYRINGCTL");
    static const named_test tests[] = {
        {"errors and arguments", test_errors_and_arguments},
        {"round trip and moves", test_round_trip_and_moves},
        {"storage failure is not signed out", test_storage_failure_is_not_signed_out},
        {"listener lifetime", test_listener_lifetime},
        {"late listener, cancel, exceptions", test_late_listener_cancel_and_exceptions},
        {"request, destroy inside a callback", test_request_and_destroy_inside_callback},
        {"eight threads", test_eight_threads},
    };
    return run_tests("cpp_wrapper_test", tests);
}
