/*
 * unlock_race_test — a keyring unlocked in the middle of a restore or clear is never read as
 * "nothing stored" (the KeePassXC unlock race).
 *
 * KeePassXC 2.7.4's SearchItems skips a locked database: it answers nothing, not the items as
 * locked. So when a search finds nothing, the library reads the default collection's Locked
 * property. If the database is unlocked between that search and the Locked read (by the person,
 * or openDatabase), the search said "nothing" and Locked says "unlocked": trusting both answers
 * "signed out" (and clear "cleared", deleting nothing) while the session is stored.
 *
 * The library calls secret_collection_load_items_sync(NULL, …) right before that Locked read
 * only when a program interposes the symbol (FaultInjectionSeam.beforeLockedCheck); this program
 * does (linked with -rdynamic) and unlocks the keyring there with `keyringctl unlock`
 * (openDatabase on KeePassXC; it returns once Locked is false). Each cycle: lock, restore with
 * the unlock injected (must restore the session), lock, clear with the unlock injected (must
 * delete it), persist again. Prints each operation's time (ms). Runs inside
 * scripts/with-keyring.sh on a provider whose search hides locked items (keepassxc,
 * keepassxc-confirm); needs PORTAL_TEST_KEYRINGCTL. Usage: unlock_race_test [CYCLES] (default 3).
 * Exit 0 when every check passed.
 *
 * keepassxc-confirm (UnlockBeforeSearch on): a search of a locked database opens an unlock
 * dialog and blocks (headless: until our call deadline), so the seam is never reached there; the
 * check is then only that the answer is never "signed out" / "cleared".
 */
#define _GNU_SOURCE
#include "provider_test.h"

static volatile int inject, injected;

/* The seam (FaultInjectionSeam.beforeLockedCheck): the keyring is unlocked right here. */
int secret_collection_load_items_sync(void *collection, void *cancellable, void **error);
int secret_collection_load_items_sync(void *collection, void *cancellable, void **error) {
    (void)collection, (void)cancellable, (void)error;
    if (inject) {
        inject = 0;
        injected = 1;
        CHECK_MSG(keyringctl("unlock") == 0, "keyringctl unlock inside the restore");
    }
    return 1;
}

static void lock(void) {
    /* KeePassXC cannot be locked over D-Bus once an unlock dialog was opened (headless,
     * keepassxc-confirm's UnlockBeforeSearch): restart it locked then. */
    if (keyringctl("lock 2>/dev/null") != 0) {
        char line[1024];
        snprintf(line, sizeof line, "'%s' --locked >/dev/null", getenv("PORTAL_TEST_KEYRING_RESTART"));
        CHECK_MSG(system(line) == 0, "keyring-restart.sh --locked");
    }
}

int main(int argc, char **argv) {
    int cycles = argc > 1 ? atoi(argv[1]) : 3;
    alarm(60 + 60 * cycles);
    if (!getenv("PORTAL_TEST_KEYRINGCTL") || !getenv("PORTAL_TEST_KEYRING_RESTART")) {
        fprintf(stderr, "unlock_race_test: run inside scripts/with-keyring.sh with PORTAL_TEST_KEYRINGCTL set\n");
        return 2;
    }
    const char *provider = getenv("PORTAL_TEST_PROVIDER") ? getenv("PORTAL_TEST_PROVIDER") : "gnome-keyring";
    int confirm = strcmp(provider, "keepassxc-confirm") == 0;
    char env[64];
    snprintf(env, sizeof env, "race-%ld", (long)getpid());
    portal_auth *auth = NULL;
    CHECK_MSG(portal_auth_new(&auth, env, "race://cb", NULL) == PORTAL_OK, "portal_auth_new");
    portal_auth_set_keyring_timeouts(auth, 5000, 2000);
    CHECK_MSG(keyringctl("unlock") == 0, "keyringctl unlock");
    /* Stored by this process: KeePassXC with ConfirmAccessItem trusts the creating client. */
    CHECK_MSG(portal_auth_persist_session(auth, "eu-race", "token-race", NULL) == PORTAL_OK, "persist: %s",
          portal_last_error_message());

    for (int cycle = 1; cycle <= cycles; cycle++) {
        lock();
        inject = 1, injected = 0;
        portal_session *session = NULL;
        double start = now_ms();
        portal_status st = portal_auth_restore_session(auth, &session);
        double restore_ms = now_ms() - start;
        const char *user = session ? portal_session_get_end_user_id(session) : st == PORTAL_OK ? "(signed out)" : "(no session)";
        if (confirm) {
            CHECK_MSG(!(st == PORTAL_OK && !session), "cycle %d: restore answered signed out while the session is stored",
                  cycle);
        } else {
            CHECK_MSG(injected, "cycle %d: the unlock was not injected (the restore never read Locked)", cycle);
            CHECK_MSG(st == PORTAL_OK && session && strcmp(user, "eu-race") == 0,
                  "cycle %d: restore with an unlock between search and Locked read: %s %s (%s)", cycle,
                  portal_status_str(st), user, portal_last_error_message());
        }
        printf("  [%s] cycle %d: unlocked during restore: %s %s, %.0f ms\n", provider, cycle,
               portal_status_str(st), user, restore_ms);
        portal_session_free(session);
        inject = 0;

        lock();
        inject = 1, injected = 0;
        start = now_ms();
        st = portal_auth_clear_persisted_session(auth);
        double clear_ms = now_ms() - start;
        inject = 0;
        if (!confirm) keyringctl("unlock");
        char count[256];
        snprintf(count, sizeof count,
                 "'%s' count --schema io.portalhq.PortalKeyring.Session auth_environment_id=%s 2>/dev/null",
                 getenv("PORTAL_TEST_KEYRINGCTL"), env);
        FILE *p = popen(count, "r");
        int left = -1;
        if (p) {
            if (fscanf(p, "%d", &left) != 1) left = -1;
            pclose(p);
        }
        if (confirm) {
            CHECK_MSG(!(st == PORTAL_OK && left != 0), "cycle %d: clear said cleared but %d items are left", cycle, left);
        } else {
            CHECK_MSG(st == PORTAL_OK && left == 0, "cycle %d: clear with an unlock between search and Locked read: %s, %d left (%s)",
                  cycle, portal_status_str(st), left, portal_last_error_message());
        }
        printf("  [%s] cycle %d: unlocked during clear: %s, %d items left, %.0f ms\n", provider, cycle,
               portal_status_str(st), left, clear_ms);
        if (confirm) keyringctl("unlock 2>/dev/null");
        if (left == 0)
            CHECK_MSG(portal_auth_persist_session(auth, "eu-race", "token-race", NULL) == PORTAL_OK, "persist again: %s",
                  portal_last_error_message());
    }
    portal_auth_clear_persisted_session(auth);
    portal_auth_free(auth);
    printf("unlock_race_test [%s]: %d of %d checks passed\n", provider, checks - failures, checks);
    return failures ? 1 : 0;
}
