// cpp_tests.hpp — how the C++ test programs (cpp_wrapper_test, cpp_async_test) run their tests:
// each test in turn, an exception that escapes one counted as a failure, one "ok"/"FAIL" line a
// test and the closing "N checks passed" / "N of M checks FAILED" line. The checks themselves are
// Tests/c/check.h's (CHECK, CHECK_MSG and their counters).
#ifndef PORTAL_TEST_CPP_TESTS_HPP
#define PORTAL_TEST_CPP_TESTS_HPP

#include "check.h"

#include <cstddef>
#include <cstdio>
#include <exception>

struct named_test {
    const char *name;
    void (*run)();
};

// Runs tests; the program's exit status (1 when any check failed).
template <std::size_t N> int run_tests(const char *program, const named_test (&tests)[N]) {
    for (const auto &test : tests) {
        int before = failures;
        try {
            test.run();
        } catch (const std::exception &e) {
            failures++;
            std::fprintf(stderr, "%s: %s: unexpected exception: %s\n", program, test.name, e.what());
        }
        std::printf("  %s  %s\n", failures == before ? "ok  " : "FAIL", test.name);
    }
    if (failures) {
        std::printf("%s: %d of %d checks FAILED\n", program, failures, checks);
        return 1;
    }
    std::printf("%s: %d checks passed\n", program, checks);
    return 0;
}

#endif
