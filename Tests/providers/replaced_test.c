/*
 * replaced_test — a session replaced by another process between the library's search and its
 * GetSecrets is restored as the new session, never as "signed out" (the restore and persist race
 * of the sixth trial: KWallet 13 of 1,078 restores, KeePassXC 1 in about 500, with three
 * processes persisting at once).
 *
 * A persist creates the new item and then removes the older ones, so the item the search found
 * can be gone by the time its secret is read, while the new one is stored. GetSecrets then skips
 * it (gnome-keyring), or fails (KWallet 5.103: InvalidArgs "Can't find item at path"; KeePassXC).
 * The library must search again and read the new item.
 *
 * The library calls secret_item_load_secrets_sync(NULL, …) right before every GetSecrets when a
 * program interposes the symbol (FaultInjectionSeam.beforeGetSecrets); this program does (linked
 * with -rdynamic) and runs `portal-session persist` for a new end user there, as another process
 * of the app would. Checks:
 *   1. replaced once: the restore returns the new end user;
 *   2. replaced before each of the first 3 reads: the restore returns the last one;
 *   3. replaced before every read: the restore fails with a storage error, never "signed out",
 *      and a session is still stored.
 * Usage: replaced_test PORTAL_SESSION_BIN. Runs inside scripts/with-keyring.sh on a provider
 * where another process may read and delete our items (not keepassxc-confirm); needs
 * PORTAL_TEST_KEYRINGCTL. Exit 0 when every check passed.
 */
#define _GNU_SOURCE
#include "provider_test.h"

static const char *portal_session_bin;
static char env[64];
static volatile int replacements_left, replaced;

/* Another process of the app signs a new end user in: `portal-session persist`. */
static void persist_elsewhere(int n) {
    char line[1024];
    snprintf(line, sizeof line, "printf 'token-new-%d' | '%s' --env '%s' persist --end-user-id eu-new-%d >/dev/null",
             n, portal_session_bin, env, n);
    CHECK_MSG(system(line) == 0, "portal-session persist eu-new-%d", n);
}

/* The seam (FaultInjectionSeam.beforeGetSecrets): the session is replaced right here. */
int secret_item_load_secrets_sync(void *items, void *cancellable, void **error);
int secret_item_load_secrets_sync(void *items, void *cancellable, void **error) {
    (void)items, (void)cancellable, (void)error;
    if (replacements_left > 0) {
        replacements_left--;
        persist_elsewhere(++replaced);
    }
    return 1;
}

/* Restores with the session replaced before the first `times` reads; returns the status and
 * writes the end user id (or "") to `user`. */
static portal_status restore_replaced(portal_auth *auth, int times, char *user, size_t size) {
    int before = replaced;
    replacements_left = times;
    portal_session *session = NULL;
    double start = now_ms();
    portal_status st = portal_auth_restore_session(auth, &session);
    double ms = now_ms() - start;
    replacements_left = 0;
    snprintf(user, size, "%s", session ? portal_session_get_end_user_id(session) : "");
    const char *outcome = st != PORTAL_OK ? portal_last_error_message() : session ? user : "signed out";
    printf("  replaced before %d read(s): %s (%s) after %.0f ms\n", replaced - before, portal_status_str(st), outcome, ms);
    portal_session_free(session);
    return st;
}

int main(int argc, char **argv) {
    alarm(240);
    if (argc != 2 || !getenv("PORTAL_TEST_KEYRINGCTL")) {
        fprintf(stderr, "usage: replaced_test PORTAL_SESSION_BIN (inside scripts/with-keyring.sh, PORTAL_TEST_KEYRINGCTL set)\n");
        return 2;
    }
    portal_session_bin = argv[1];
    snprintf(env, sizeof env, "replaced-%ld", (long)getpid());
    char count[512];
    snprintf(count, sizeof count,
             "test \"$('%s' count --schema io.portalhq.PortalKeyring.Session auth_environment_id=%s)\" -ge 1",
             getenv("PORTAL_TEST_KEYRINGCTL"), env);
    portal_auth *auth = NULL;
    CHECK_MSG(portal_auth_new(&auth, env, "replaced://cb", NULL) == PORTAL_OK, "portal_auth_new");
    portal_auth_set_keyring_timeouts(auth, 20000, 2000);
    CHECK_MSG(portal_auth_persist_session(auth, "eu-old", "token-old", NULL) == PORTAL_OK, "persist: %s",
          portal_last_error_message());

    char user[128], want[64];
    portal_status st = restore_replaced(auth, 1, user, sizeof user);
    snprintf(want, sizeof want, "eu-new-%d", replaced);
    CHECK_MSG(st == PORTAL_OK && strcmp(user, want) == 0, "replaced once: restored '%s' (%s), wanted %s", user,
          portal_status_str(st), want);

    st = restore_replaced(auth, 3, user, sizeof user);
    snprintf(want, sizeof want, "eu-new-%d", replaced);
    CHECK_MSG(st == PORTAL_OK && strcmp(user, want) == 0, "replaced before 3 reads: restored '%s' (%s), wanted %s", user,
          portal_status_str(st), want);

    st = restore_replaced(auth, 1000, user, sizeof user);
    CHECK_MSG(st != PORTAL_OK || user[0], "replaced before every read: never signed out");
    CHECK_MSG(st == PORTAL_OK || st == PORTAL_ERR_SESSION_STORAGE, "replaced before every read: %s", portal_status_str(st));
    CHECK_MSG(system(count) == 0, "a session is still stored");

    portal_auth_clear_persisted_session(auth);
    portal_auth_free(auth);
    printf("replaced_test: %d of %d checks passed\n", checks - failures, checks);
    return failures ? 1 : 0;
}
