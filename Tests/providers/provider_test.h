/*
 * provider_test.h — what the C programs of Tests/providers/ share: the checks (Tests/c/check.h),
 * a monotonic clock in milliseconds, and a keyringctl runner.
 */
#ifndef PORTAL_PROVIDER_TEST_H
#define PORTAL_PROVIDER_TEST_H

#include <portal_keyring.h>

#include "../c/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
