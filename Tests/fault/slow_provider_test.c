/*
 * slow_provider_test.c — condition 15 of the fault-injection suite (Tests/fault/run.sh): one
 * restore is one operation under one deadline, also when it reads, lists attributes and deletes
 * an unusable item (docs/security.md, "One read policy").
 *
 * The provider (gnome-keyring-daemon, PORTAL_TEST_KEYRING_PID) is made slow, not dead: it is
 * stopped (SIGSTOP) for SLOW_MS right before the restore's GetSecrets and again right before its
 * Item.Delete, and continued by a thread after SLOW_MS. Each call alone answers well within the
 * 1000 ms call deadline; together they take about 2 x SLOW_MS. A restore with one deadline fails
 * at 1000 ms with a storage failure; one that opens a deadline per call (as the restore did while
 * it made separate storage calls) answers after about 1200 ms. Nothing usable is deleted, and the
 * other auth environment's item is untouched.
 *
 * The stops are made from two functions this program defines, which take precedence over
 * libsecret's for the library (ELF interposition, linked with -rdynamic): the adapter calls
 * secret_item_load_secrets_sync(NULL, ...) right before GetSecrets and secret_item_delete_sync(NULL,
 * ...) right before Item.Delete, only when a test program replaced them
 * (Sources/PortalKeyringCore/Storage/SecretService/FaultInjectionSeam.swift).
 *
 * Needs PORTAL_TEST_KEYRINGCTL and PORTAL_TEST_KEYRING_PID (scripts/with-keyring.sh).
 * Output: "ok ..."/"FAIL ..." per check, "time ..." for the measurement; exit 1 on a failure.
 */
#define _GNU_SOURCE
#include "portal_keyring.h"
#include "../c/check.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define SCHEMA "io.portalhq.PortalKeyring.Session"
#define CALL_MS 1000
#define SLOW_MS 600
#define MARGIN_MS 300

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static const char *kctl(void) {
    const char *p = getenv("PORTAL_TEST_KEYRINGCTL");
    if (!p || !*p || strchr(p, '\'')) {
        fprintf(stderr, "slow_provider_test: set PORTAL_TEST_KEYRINGCTL\n");
        exit(2);
    }
    return p;
}

static long count_items(const char *env) {
    char cmd[1024], out[64] = "";
    snprintf(cmd, sizeof cmd, "'%s' count --schema '%s' auth_environment_id='%s'", kctl(), SCHEMA, env);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    return pclose(p) == 0 ? strtol(out, NULL, 10) : -1;
}

/* An unusable item of ours ("garbage" is no session document), with these attributes. */
static int store_garbage(const char *env, const char *attributes) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "printf garbage | '%s' store --schema '%s' auth_environment_id='%s' %s >/dev/null", kctl(),
             SCHEMA, env, attributes);
    return system(cmd);
}

/* ------------------------------------------------------------------ the slow provider */

static pid_t provider;
static volatile int armed;
static pthread_t continuers[2];
static int continuer_count;

static void *continue_later(void *arg) {
    (void)arg;
    usleep(SLOW_MS * 1000);
    kill(provider, SIGCONT);
    return NULL;
}

/* Stops the provider now and continues it SLOW_MS later: the call about to be sent waits. */
static void slow_down(void) {
    if (!armed || continuer_count >= 2) return;
    kill(provider, SIGSTOP);
    if (pthread_create(&continuers[continuer_count], NULL, continue_later, NULL) == 0) {
        continuer_count++;
    } else {
        kill(provider, SIGCONT);
    }
}

int secret_item_load_secrets_sync(void *items, void *cancellable, void **error);
int secret_item_load_secrets_sync(void *items, void *cancellable, void **error) {
    (void)items, (void)cancellable, (void)error;
    slow_down();
    return 0;
}

int secret_item_delete_sync(void *item, void *cancellable, void **error);
int secret_item_delete_sync(void *item, void *cancellable, void **error) {
    (void)item, (void)cancellable, (void)error;
    slow_down();
    return 0;
}

/* ------------------------------------------------------------------------------ main */

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    check_verbose = 1;
    check_context = "15 slow provider";
    alarm(60);
    const char *pid = getenv("PORTAL_TEST_KEYRING_PID");
    if (!pid || atoi(pid) <= 0) {
        fprintf(stderr, "slow_provider_test: set PORTAL_TEST_KEYRING_PID\n");
        return 2;
    }
    provider = (pid_t)atoi(pid);
    const char *env = "fault-slow", *other = "fault-slow-other";

    portal_auth *auth = NULL;
    if (portal_auth_new(&auth, env, "fault-test://redirect", NULL) != PORTAL_OK) {
        fprintf(stderr, "slow_provider_test: portal_auth_new: %s\n", portal_last_error_message());
        return 2;
    }
    CHECK_MSG(portal_auth_set_keyring_timeouts(auth, CALL_MS, CALL_MS) == PORTAL_OK, "call deadline %d ms", CALL_MS);
    CHECK_MSG(portal_auth_persist_session(auth, "user-a", "token-a", NULL) == PORTAL_OK, "persist a usable session");
    /* Ranked above the usable session (its persisted_at is later), so the restore deletes it. */
    CHECK_MSG(store_garbage(env, "session_generation=ff persisted_at=99999999999999999") == 0,
          "store an unusable item ranked above it");
    CHECK_MSG(store_garbage(other, "") == 0, "store an unusable item of another auth environment");

    armed = 1;
    portal_session *s = (portal_session *)&s;
    double t0 = now_ms();
    portal_status st = portal_auth_restore_session(auth, &s);
    double t1 = now_ms();
    armed = 0;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", st == PORTAL_OK ? "" : portal_last_error_message());
    for (int i = 0; i < continuer_count; i++) pthread_join(continuers[i], NULL);
    kill(provider, SIGCONT);
    printf("time  [15 slow provider] restore with GetSecrets and Delete each answered after %d ms: %.1f ms, status %d, "
           "\"%s\"\n",
           SLOW_MS, t1 - t0, (int)st, msg);
    CHECK_MSG(continuer_count == 2, "the provider was slow for GetSecrets and for the Delete (%d stops)", continuer_count);
    CHECK_MSG(st == PORTAL_ERR_SESSION_STORAGE, "the restore fails with a storage failure (status %d)", (int)st);
    CHECK_MSG(s == (portal_session *)&s, "no output written on failure");
    CHECK_MSG(strstr(msg, "within 1000 ms") != NULL, "the message names the one deadline: \"%s\"", msg);
    CHECK_MSG(t1 - t0 < CALL_MS + MARGIN_MS, "the restore ends within its one deadline (%.0f ms < %d ms)", t1 - t0,
          CALL_MS + MARGIN_MS);

    long others = count_items(other);
    CHECK_MSG(others == 1, "the other auth environment's item is untouched (%ld)", others);
    s = NULL;
    st = portal_auth_restore_session(auth, &s);
    CHECK_MSG(st == PORTAL_OK && s && strcmp(portal_session_get_end_user_id(s), "user-a") == 0,
          "the usable session is still stored and restores (status %d)", (int)st);
    portal_session_free(s);
    long left = count_items(env);
    CHECK_MSG(left == 1, "only the usable item is left (%ld)", left);
    portal_auth_free(auth);
    return failures ? 1 : 0;
}
