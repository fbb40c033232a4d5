/*
 * restore_on_launch.cpp — what a desktop app does at start-up, with the C++ wrapper's
 * non-blocking calls (Include/portal_keyring_async.hpp) on a pollable completion queue that a
 * plain poll() loop runs (a Qt app watches queue.fd() with a QSocketNotifier instead). The same
 * program as examples/c/restore_on_launch.c.
 *
 *   restore_on_launch AUTH_ENVIRONMENT_ID
 *
 * Exit status: 0 session restored, 1 signed out (show sign-in), 2 error (the keyring could not
 * be read this time: the end user is NOT known to be signed out, so do not show sign-in as if
 * they were). The Client Session Token is never printed.
 *
 * Build: g++ -std=c++17 -I Include restore_on_launch.cpp -L .build/debug -lportal-keyring
 */
#include <portal_keyring_async.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <poll.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace {

namespace pk = portal_keyring;

/* The app's event loop, reduced to what this program waits for: one completion on `queue`. */
template <typename T> pk::result<T> run_until_complete(pk::completion_queue &queue, pk::operation started,
                                                       std::optional<pk::result<T>> &slot) {
    while (!slot) {
        struct pollfd fd = {queue.fd(), POLLIN, 0};
        if (poll(&fd, 1, -1) > 0) queue.dispatch();
    }
    started.detach();
    return std::move(*slot);
}

int fail(const portal_keyring::error &e) {
    std::fprintf(stderr, "error: %s (%d): %s\n", e.status_name(), static_cast<int>(e.code()), e.message().c_str());
    return 2;
}

/* Creates each directory of `path` (like mkdir -p, mode 0700); true on success. */
bool make_dirs(const std::string &path) {
    for (std::string::size_type i = 1; i <= path.size(); i++) {
        if (i == path.size() || path[i] == '/') {
            if (mkdir(path.substr(0, i).c_str(), 0700) != 0 && errno != EEXIST) return false;
        }
    }
    return true;
}

/* $XDG_STATE_HOME/portal-keyring-example (default ~/.local/state/portal-keyring-example). */
std::string state_dir() {
    const char *state = std::getenv("XDG_STATE_HOME");
    const char *home = std::getenv("HOME");
    if (state && state[0] == '/') return std::string(state) + "/portal-keyring-example";
    return std::string(home ? home : ".") + "/.local/state/portal-keyring-example";
}

} // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s AUTH_ENVIRONMENT_ID\n", argv[0]);
        return 2;
    }
    const std::string env_id = argv[1];

    try {
        portal_keyring::auth auth(env_id, "example-app://portal/redirect");
        pk::completion_queue queue = pk::completion_queue::pollable();

        /* Keyring items survive uninstall and reinstall, so the first launch after install starts
         * from a clean slate. The flag lives in $XDG_STATE_HOME (default ~/.local/state). */
        const std::string dir = state_dir();
        std::string name = env_id.substr(0, 200); /* fits NAME_MAX */
        for (char &c : name) {
            if (c == '/') c = '_'; /* the id as a file name */
        }
        const std::string flag = dir + "/" + name + ".launched";
        if (!make_dirs(dir)) {
            std::fprintf(stderr, "error: cannot create %s: %s\n", dir.c_str(), std::strerror(errno));
            return 2;
        }
        if (access(flag.c_str(), F_OK) != 0) {
            std::optional<pk::result<void>> cleared;
            pk::operation clear = pk::async(auth).clear_persisted_session(
                queue, [&cleared](pk::result<void> r) { cleared.emplace(std::move(r)); });
            /* value() throws: no flag, so this is tried again next launch */
            run_until_complete(queue, std::move(clear), cleared).value();
            std::FILE *f = std::fopen(flag.c_str(), "w");
            if (!f || std::fclose(f) != 0) std::fprintf(stderr, "warning: cannot create %s\n", flag.c_str());
        }

        /* Restore without a network call: a session, std::nullopt (signed out), or an error
         * status, which value() throws as the blocking restore_session() would. */
        std::optional<pk::result<std::optional<pk::session>>> restored;
        pk::operation restore = pk::async(auth).restore_session(
            queue, [&restored](pk::result<std::optional<pk::session>> r) { restored.emplace(std::move(r)); });
        std::optional<pk::session> session = run_until_complete(queue, std::move(restore), restored).value();
        if (!session) {
            std::printf("signed out — show sign-in\n");
            return 1;
        }
        std::printf("restored session for end user %.*s\n", static_cast<int>(session->end_user_id().size()),
                    session->end_user_id().data());
        return 0;
    } catch (const portal_keyring::error &e) {
        return fail(e);
    }
}
