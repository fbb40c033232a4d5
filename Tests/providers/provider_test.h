/*
 * provider_test.h — what the C programs of Tests/providers/ share: the CHECK macro and its
 * counters, a monotonic clock in milliseconds, and a keyringctl runner. Define TEST_NAME (the
 * program's name, a string literal) before including it.
 */
#ifndef PORTAL_PROVIDER_TEST_H
#define PORTAL_PROVIDER_TEST_H

#include <portal_keyring.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef TEST_NAME
#error "define TEST_NAME before including provider_test.h"
#endif

static int failed, checks;

/* Counts a check; when `cond` is false prints "TEST_NAME:LINE: FAILED: <message>" on stderr. */
#define CHECK(cond, ...)                                             \
    do {                                                             \
        checks++;                                                    \
        if (!(cond)) {                                               \
            failed++;                                                \
            fprintf(stderr, TEST_NAME ":%d: FAILED: ", __LINE__);    \
            fprintf(stderr, __VA_ARGS__);                            \
            fputc('\n', stderr);                                     \
        }                                                            \
    } while (0)

/* CLOCK_MONOTONIC in milliseconds. */
static inline double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000.0 + t.tv_nsec / 1e6;
}

/* Runs `$PORTAL_TEST_KEYRINGCTL COMMAND` through the shell; returns system()'s status. */
static inline int keyringctl(const char *command) {
    char line[1024];
    snprintf(line, sizeof line, "'%s' %s", getenv("PORTAL_TEST_KEYRINGCTL"), command);
    return system(line);
}

#endif
