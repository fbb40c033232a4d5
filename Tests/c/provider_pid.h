/*
 * provider_pid.h — the pid of the keyring provider daemon scripts/with-keyring.sh started, for the
 * tests that stop (SIGSTOP) or restart it: $PORTAL_TEST_KEYRING_DIR/keyring.pid, which
 * scripts/keyring-restart.sh rewrites when a test restarted the daemon, else
 * $PORTAL_TEST_KEYRING_PID. 0 when neither names it. Included from C and C++.
 */
#ifndef PORTAL_TEST_PROVIDER_PID_H
#define PORTAL_TEST_PROVIDER_PID_H

#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

static inline pid_t test_provider_pid(void) {
    long pid = 0;
    const char *dir = getenv("PORTAL_TEST_KEYRING_DIR"), *pid_text = getenv("PORTAL_TEST_KEYRING_PID");
    char path[4096];
    FILE *file = NULL;
    if (dir && snprintf(path, sizeof path, "%s/keyring.pid", dir) < 4096 && (file = fopen(path, "r"))) {
        if (fscanf(file, "%ld", &pid) != 1) pid = 0;
        fclose(file);
    }
    if (pid <= 0 && pid_text) pid = atol(pid_text);
    return pid > 0 ? TEST_CAST(pid_t, pid) : 0;
}

#endif
