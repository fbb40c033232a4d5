/*
 * wipe_test.c — token memory the library owns is wiped before release: a memory
 * scan of this whole process for a marker token, with a fixed bound on the copies left behind.
 *
 *   scripts/with-keyring.sh build/c/wipe_test        (Tests/c/run.sh builds and runs it)
 *
 * Method. The marker is a 160-byte random token. This program keeps it only XOR-masked, so its
 * own data never holds it in clear (a plain copy it hands to the library is wiped at once). The
 * scan walks every readable and writable mapping in /proc/self/maps (heap, anonymous memory,
 * thread stacks, .data/.bss) and counts occurrences of the marker's bytes 32..159: free() writes
 * its list links over the first 16 bytes of a freed block, so a full-token search would miss a
 * freed, unwiped copy. For each kind of owned memory:
 *   1. count the copies (baseline);
 *   2. make 64 copies and hold them: the count must rise by at least 64 - BOUND (the scan sees
 *      them; a new copy may land in a freed block the baseline counted);
 *   3. release them: the count must be back within BOUND of the baseline.
 * Without a wipe, step 3 leaves (nearly) every one of the 64 freed blocks holding the tail.
 * BOUND covers the copies the library documents as unwipeable (Swift Strings made from C
 * arguments and by the JSON coder: freed blocks that the next call reuses; Tests/fault/README.md,
 * condition 12), which do not grow with the number of calls.
 *
 * Kinds: strings from portal_session_copy_token (portal_string_free), sessions restored from the
 * keyring (portal_session_free, the session's SecretBytes), and API-key portals (portal_free,
 * the key's SecretBytes). Exit 0 when every check passed; every failed check is reported.
 */
#define _GNU_SOURCE
#include <portal_keyring.h>
#include "check.h"

#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TOKEN_LEN 160
#define TAIL_OFFSET 32
#define COPIES 64
#define BOUND 4
#define MASK 0x5A

static unsigned char masked[TOKEN_LEN];

static void make_marker(void) {
    static const char hex[] = "0123456789abcdef";
    const char *prefix = "wipe-marker-";
    srandom((unsigned)time(NULL) ^ (unsigned)getpid());
    for (size_t i = 0; i < TOKEN_LEN; i++) {
        char c = i < strlen(prefix) ? prefix[i] : hex[random() % 16];
        masked[i] = (unsigned char)c ^ MASK;
    }
}

/* A plain, NUL-terminated copy of the marker for one library call; release with drop(). */
static char *marker_copy(void) {
    char *plain = malloc(TOKEN_LEN + 1);
    if (!plain) abort();
    for (size_t i = 0; i < TOKEN_LEN; i++) plain[i] = (char)(masked[i] ^ MASK);
    plain[TOKEN_LEN] = '\0';
    return plain;
}

static void drop(char *plain) {
    explicit_bzero(plain, TOKEN_LEN + 1);
    free(plain);
}

/* A mapping that faults when read (a file mapping past its end) is skipped, not fatal. */
static sigjmp_buf scan_fault;
static void on_fault(int sig) {
    (void)sig;
    siglongjmp(scan_fault, 1);
}

static long scan_region(const volatile unsigned char *p, size_t len) {
    const size_t tail = TOKEN_LEN - TAIL_OFFSET;
    const unsigned char first = masked[TAIL_OFFSET] ^ MASK;
    long found = 0;
    for (size_t i = 0; i + tail <= len; i++) {
        if (p[i] != first) continue;
        size_t k = 1;
        while (k < tail && p[i + k] == (unsigned char)(masked[TAIL_OFFSET + k] ^ MASK)) k++;
        if (k == tail) {
            found++;
            i += tail - 1;
        }
    }
    return found;
}

/* Copies of the marker's tail in every readable, writable mapping of this process. */
static long count_copies(void) {
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) return -1;
    struct sigaction sa = {0}, old_segv, old_bus;
    sa.sa_handler = on_fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    char line[1024];
    long total = 0;
    while (fgets(line, sizeof line, maps)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3) continue;
        if (perms[0] != 'r' || perms[1] != 'w') continue;
        if (strstr(line, "[vvar]") || strstr(line, "[vsyscall]")) continue;
        if (sigsetjmp(scan_fault, 1) == 0) total += scan_region((const volatile unsigned char *)lo, hi - lo);
    }
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    fclose(maps);
    return total;
}

static void report(const char *what, long base, long held, long after) {
    printf("  %-44s baseline %ld, holding %d: %ld, released: %ld\n", what, base, COPIES, held, after);
    /* The control allows BOUND misses: a held copy may reuse a freed, unwiped block that the
     * baseline already counted. */
    CHECK_MSG(held >= base + COPIES - BOUND, "%s: the scan found %ld copies while %d were held (baseline %ld): scanner blind? (or unwiped blocks of an earlier failure being reused)",
          what, held, COPIES, base);
    CHECK_MSG(after <= base + BOUND, "%s: %ld copies of the token remain after release (baseline %ld, bound +%d): not wiped",
          what, after, base, BOUND);
}

/* portal_session_copy_token strings, released with portal_string_free. */
static void test_string_free(portal_session *session) {
    char *copies[COPIES] = {0};
    long base = count_copies();
    for (int i = 0; i < COPIES; i++)
        CHECK_MSG(portal_session_copy_token(session, &copies[i]) == PORTAL_OK && copies[i], "copy_token #%d", i);
    long held = count_copies();
    for (int i = 0; i < COPIES; i++) portal_string_free(copies[i]);
    long after = count_copies();
    report("portal_string_free (copied tokens)", base, held, after);
}

/* Sessions restored from the keyring, released with portal_session_free. */
static void test_session_free(portal_auth *auth) {
    portal_session *sessions[COPIES] = {0};
    long base = count_copies();
    for (int i = 0; i < COPIES; i++)
        CHECK_MSG(portal_auth_restore_session(auth, &sessions[i]) == PORTAL_OK && sessions[i], "restore #%d", i);
    long held = count_copies();
    for (int i = 0; i < COPIES; i++) portal_session_free(sessions[i]);
    long after = count_copies();
    report("portal_session_free (restored sessions)", base, held, after);
}

/* Portals built from an API key (the marker), released with portal_free. */
static void test_portal_free(void) {
    portal *portals[COPIES] = {0};
    long base = count_copies();
    for (int i = 0; i < COPIES; i++) {
        char *key = marker_copy();
        CHECK_MSG(portal_new_with_api_key(&portals[i], key, "127.0.0.1:9") == PORTAL_OK && portals[i], "portal #%d", i);
        drop(key);
    }
    long held = count_copies();
    for (int i = 0; i < COPIES; i++) portal_free(portals[i]);
    long after = count_copies();
    report("portal_free (API-key portals)", base, held, after);
}

int main(void) {
    if (!getenv("PORTAL_TEST_KEYRING_PID")) {
        fprintf(stderr, "wipe_test: run inside scripts/with-keyring.sh (it stores a session)\n");
        return 2;
    }
    make_marker();
    CHECK_MSG(count_copies() == 0, "the marker is in memory before the library saw it");

    char env_id[96];
    snprintf(env_id, sizeof env_id, "c-wipe-%d", (int)getpid());
    portal_auth *auth = NULL;
    CHECK_MSG(portal_auth_new(&auth, env_id, "app://cb", "127.0.0.1:9") == PORTAL_OK, "portal_auth_new");
    char *token = marker_copy();
    portal_session *session = NULL;
    CHECK_MSG(portal_auth_persist_session(auth, "wipe-user", token, &session) == PORTAL_OK && session, "persist");
    drop(token);

    if (session) test_string_free(session);
    test_session_free(auth);
    portal_session_free(session);
    test_portal_free();

    CHECK_MSG(portal_auth_clear_persisted_session(auth) == PORTAL_OK, "clear");
    portal_auth_free(auth);
    printf("wipe_test: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
