/*
 * check.h — the checks of every C and C++ test program (C11 or C++17, GCC or Clang) linked
 * against libportal-keyring.so:
 *
 *   CHECK(cond)                   one check; `cond` is evaluated once
 *   CHECK_MSG(cond, fmt, ...)     the same with a printf-style message, evaluated only when it
 *                                 is printed
 *   CHECK_STATUS(expr, status)    `expr` returns that portal_status
 *   CHECK_OK(expr)                `expr` returns PORTAL_OK
 *   CHECK_ERROR_MENTIONS(needle)  the thread's last error message contains `needle`, in any case
 *                                 (strcasestr: define _GNU_SOURCE first)
 *   CHECK_NO_ERROR()              the thread's last error message is empty
 *
 * A failed check prints one line on stderr, and the program goes on:
 *
 *   FILE:LINE: check failed[ in CONTEXT]: COND[: MESSAGE] (last error: "...")
 *
 * ("check failed" is what Tests/flatpak/c.sh and Tests/mutants/run.sh pick out of a log.) What a
 * program reads and sets, from any thread:
 *
 *   checks, failures     the checks made and those that failed (counted atomically)
 *   check_context        NULL, or what runs now (a test case, a fault condition)
 *   check_stop_at_first  nonzero: exit(1) at the first failed check (to step through it)
 *   check_verbose        nonzero: every check prints a line on stdout instead, "ok    [CONTEXT]
 *                        MESSAGE" or "FAIL  [CONTEXT] MESSAGE  (last error: ...)" (the lines that
 *                        Tests/fault/run.sh counts)
 *
 * They are weak definitions in every file that includes this header: a program of several files
 * (Tests/c/abi_test/) has one of each.
 */
#ifndef PORTAL_TEST_CHECK_H
#define PORTAL_TEST_CHECK_H

/* A conversion that compiles as C and as C++ with -Wold-style-cast (the C++ tests include the
 * shared test headers). */
#ifdef __cplusplus
#define TEST_CAST(type, value) static_cast<type>(value)
#else
#define TEST_CAST(type, value) ((type)(value))
#endif

#include "portal_keyring.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((weak)) int checks, failures;
__attribute__((weak)) const char *check_context;
__attribute__((weak)) int check_stop_at_first, check_verbose;

/* Reports a check that failed, or any check when check_verbose is set, and counts a failure. */
static inline void check_report_(int passed, const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static inline void check_report_(int passed, const char *file, int line, const char *cond, const char *fmt, ...) {
    char message[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    const char *context = check_context ? check_context : "";
    /* One write per line: the lines of checks failing on several threads stay whole. */
    if (check_verbose && passed) {
        printf("ok    [%s] %s\n", context, message);
        fflush(stdout);
    } else if (check_verbose) {
        printf("FAIL  [%s] %s  (last error: %s)\n", context, message, portal_last_error_message());
        fflush(stdout);
    } else if (!passed) {
        fprintf(stderr, "%s:%d: check failed%s%s: %s%s%s (last error: \"%s\")\n", file, line, *context ? " in " : "",
                context, cond, *message ? ": " : "", message, portal_last_error_message());
    }
    if (passed) return;
    __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
    if (check_stop_at_first) {
        fflush(NULL);
        exit(1);
    }
}

#define CHECK(cond) CHECK_AS_(cond, #cond, "%s", "")
#define CHECK_MSG(cond, ...) CHECK_AS_(cond, #cond, __VA_ARGS__)
#define CHECK_AS_(cond, text, ...)                                                                                \
    do {                                                                                                          \
        int check_passed_ = (cond) ? 1 : 0;                                                                       \
        __atomic_add_fetch(&checks, 1, __ATOMIC_RELAXED);                                                         \
        if (!check_passed_ || check_verbose) check_report_(check_passed_, __FILE__, __LINE__, text, __VA_ARGS__);  \
    } while (0)

#define CHECK_STATUS(expr, expected)                                                                              \
    do {                                                                                                          \
        portal_status check_status_ = (expr);                                                                     \
        CHECK_AS_(check_status_ == (expected), #expr " == " #expected, "%s returned %d (%s), expected %d (%s)",   \
                  #expr, (int)check_status_, portal_status_str(check_status_), (int)(expected),                   \
                  portal_status_str(expected));                                                                   \
    } while (0)

#define CHECK_OK(expr) CHECK_STATUS(expr, PORTAL_OK)

#define CHECK_ERROR_MENTIONS(needle)                                                                              \
    CHECK_MSG(strcasestr(portal_last_error_message(), (needle)) != NULL, "last error \"%s\" does not mention \"%s\"", \
              portal_last_error_message(), (needle))

#define CHECK_NO_ERROR()                                                                                          \
    CHECK_MSG(portal_last_error_message()[0] == '\0', "last error is \"%s\", expected \"\"",                    \
              portal_last_error_message())

#endif
