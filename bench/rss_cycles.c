/*
 * rss_cycles.c — memory drift over many restore cycles in one process.
 *
 *   rss_cycles portal N   one cycle: portal_auth_new, portal_auth_restore_session,
 *                         portal_session_copy_token, portal_string_free, portal_session_free,
 *                         portal_auth_free — a whole restore through the C ABI
 *   rss_cycles raw N      one cycle: secret_password_lookup_nonpageable_sync +
 *                         secret_password_free (the floor: what libsecret itself keeps)
 *
 * Built twice by bench/run.sh: rss_cycles (both modes) and rss_cycles_raw (-DBENCH_RAW_ONLY: raw
 * mode only, without libportal-keyring loaded, so its absolute RSS is libsecret's alone).
 * Each side stores its own item first. RSS (resident pages from /proc/self/statm) is sampled
 * after a warm-up of min(1000, N/10) cycles (the baseline: GLib, the D-Bus connection and caches
 * in place) and then 20 times, evenly spaced, up to cycle N. Prints "cycle rss_kib elapsed_ns"
 * per sample. Exit 2 if a cycle fails.
 */
#include "bench_common.h"

#ifndef BENCH_RAW_ONLY
#include <portal_keyring.h>
#endif
#include <libsecret/secret.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PORTAL_ENV "bench-rss-portal"
#define RAW_ENV "bench-rss-raw"

#include "bench_schema.h"

static long rss_kib(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

#ifndef BENCH_RAW_ONLY
static void die(const char *what, portal_status st) {
    fprintf(stderr, "rss_cycles: %s: %s: %s\n", what, portal_status_str(st), portal_last_error_message());
    exit(2);
}

static void portal_cycle(void) {
    portal_auth *auth = NULL;
    portal_session *session = NULL;
    char *token = NULL;
    portal_status st = portal_auth_new(&auth, PORTAL_ENV, BENCH_REDIRECT_URL, NULL);
    if (st != PORTAL_OK) die("portal_auth_new", st);
    st = portal_auth_restore_session(auth, &session);
    if (st != PORTAL_OK) die("portal_auth_restore_session", st);
    if (!session) die("portal_auth_restore_session: no session", st);
    st = portal_session_copy_token(session, &token);
    if (st != PORTAL_OK) die("portal_session_copy_token", st);
    portal_string_free(token);
    portal_session_free(session);
    portal_auth_free(auth);
}
#endif

static void raw_cycle(void) {
    GError *error = NULL;
    gchar *doc = secret_password_lookup_nonpageable_sync(&schema, NULL, &error, "auth_environment_id", RAW_ENV, NULL);
    if (error || !doc) {
        fprintf(stderr, "rss_cycles: lookup: %s\n", error ? error->message : "nothing found");
        exit(2);
    }
    secret_password_free(doc);
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "portal") && strcmp(argv[1], "raw"))) {
        fprintf(stderr, "usage: %s portal|raw N\n", argv[0]);
        return 2;
    }
    int portal = strcmp(argv[1], "portal") == 0;
    long n = strtol(argv[2], NULL, 10);
    if (n < 20) n = 20;
#ifdef BENCH_RAW_ONLY
    if (portal) {
        fprintf(stderr, "rss_cycles: built without libportal-keyring (BENCH_RAW_ONLY)\n");
        return 2;
    }
#else
    portal_auth *auth = NULL;
    if (portal) {
        portal_status st = portal_auth_new(&auth, PORTAL_ENV, BENCH_REDIRECT_URL, NULL);
        if (st != PORTAL_OK) die("portal_auth_new", st);
        st = portal_auth_persist_session(auth, BENCH_END_USER_ID, BENCH_TOKEN, NULL);
        if (st != PORTAL_OK) die("portal_auth_persist_session", st);
    } else
#endif
    {
        GError *error = NULL;
        if (!secret_password_store_sync(&schema, SECRET_COLLECTION_DEFAULT, "Portal session (bench baseline)",
                                        BENCH_DOCUMENT, NULL, &error, "auth_environment_id", RAW_ENV,
                                        "session_generation", "00000000000000000000000000000000",
                                        "persisted_at", "1700000000000000", NULL)) {
            fprintf(stderr, "rss_cycles: store: %s\n", error ? error->message : "?");
            return 2;
        }
    }
#ifdef BENCH_RAW_ONLY
    void (*cycle)(void) = raw_cycle;
#else
    void (*cycle)(void) = portal ? portal_cycle : raw_cycle;
#endif

    long warmup = n / 10 < 1000 ? n / 10 : 1000;
    for (long i = 0; i < warmup; i++) cycle();
    uint64_t t0 = bench_now_ns();
    printf("%ld %ld %llu\n", 0L, rss_kib(), 0ULL);
    fflush(stdout);
    for (int s = 1; s <= 20; s++) {
        long until = n * s / 20;
        for (long i = n * (s - 1) / 20; i < until; i++) cycle();
        printf("%ld %ld %llu\n", until, rss_kib(), (unsigned long long)(bench_now_ns() - t0));
        fflush(stdout);
    }
#ifndef BENCH_RAW_ONLY
    if (portal) {
        portal_auth_clear_persisted_session(auth);
        portal_auth_free(auth);
    } else
#endif
    {
        secret_password_clear_sync(&schema, NULL, NULL, "auth_environment_id", RAW_ENV, NULL);
    }
    return 0;
}
