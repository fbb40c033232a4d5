/*
 * unreadable_test — a stored session that the provider keeps refusing to hand out is "keyring
 * locked", never "signed out", and is not deleted (the "unreadable on the last read attempt"
 * branch of SecretServiceStorage.readSecrets).
 *
 * GetSecrets silently skips items it cannot serve. The library then searches again: an item
 * still there is read again (up to 5 attempts in all), and when the last attempt still gets no
 * secret, the restore fails with "keyring locked" instead of reporting the session absent.
 *
 * The library calls secret_item_load_secrets_sync(NULL, …) right before every GetSecrets when a
 * program interposes the symbol (FaultInjectionSeam.beforeGetSecrets); this program does (linked
 * with -rdynamic) and locks the keyring there with `keyringctl lock`, every time: GetSecrets then
 * skips the item, and the library's next search unlocks it again without a prompt (the provider
 * must unlock without asking anyone: gnome-keyring-passwordless, kwallet). Checks: the restore
 * fails with PORTAL_ERR_SESSION_STORAGE, reaches GetSecrets 5 times, the item is still stored,
 * and a restore without the injection returns it. Prints the failing restore's time (ms).
 *
 * The watch (kwallet watch_test's "burst event that was not signed-in"): the same lock
 * right before the watch's GetSecrets, once. KWallet 5.103 then serves the item with an EMPTY
 * secret; judged as a document, that was an unusable item and a SIGNED_OUT event while the
 * session was stored. Checks: no SIGNED_OUT at any time, and after `keyringctl unlock` the watch's
 * last word is SIGNED_IN "eu-kept" (or nothing, when it never left that state).
 * Needs PORTAL_TEST_KEYRINGCTL. Exit 0 when every check passed.
 */
#define _GNU_SOURCE
#include "provider_test.h"

#include <poll.h>

static volatile int inject, reads;

/* The seam (FaultInjectionSeam.beforeGetSecrets): lock right before every GetSecrets. */
int secret_item_load_secrets_sync(void *items, void *cancellable, void **error);
int secret_item_load_secrets_sync(void *items, void *cancellable, void **error) {
    (void)items, (void)cancellable, (void)error;
    if (inject) {
        reads++;
        CHECK_MSG(keyringctl("lock") == 0, "keyringctl lock before GetSecrets");
        if (inject == 2) inject = 0; /* the watch: once */
    }
    return 1;
}

/* The watch's events: how many SIGNED_OUT, and the last one. */
static int signed_out, events;
static portal_watch_event last_kind;
static char last_user[64];

static void on_event(portal_watch_event kind, const char *end_user_id, void *user_data) {
    (void)user_data;
    events++;
    last_kind = kind;
    snprintf(last_user, sizeof last_user, "%s", end_user_id ? end_user_id : "");
    if (kind == PORTAL_WATCH_SIGNED_OUT) signed_out++;
}

/* Runs the queue's callbacks for `ms` milliseconds. */
static void pump(portal_completion_queue *queue, double ms) {
    double until = now_ms() + ms;
    for (double left = ms; left > 0; left = until - now_ms()) {
        struct pollfd p = {portal_completion_queue_get_fd(queue), POLLIN, 0};
        if (poll(&p, 1, (int)left + 1) > 0) portal_completion_queue_dispatch(queue, NULL);
    }
}

/* The watch reads an item the provider serves with an empty secret (the wallet closed between
 * its search and its GetSecrets): never reported as signed out. */
static void watch_check(portal_auth *auth, const char *env) {
    portal_completion_queue *queue = NULL;
    portal_watch *watch = NULL;
    CHECK_MSG(portal_completion_queue_new_pollable(&queue) == PORTAL_OK, "completion queue");
    CHECK_MSG(portal_auth_watch(auth, queue, on_event, NULL, NULL, &watch) == PORTAL_OK, "watch: %s",
          portal_last_error_message());
    if (!watch) {
        portal_completion_queue_free(queue);
        return;
    }
    int before = reads;
    inject = 2;
    /* Any Secret Service signal makes the watch read: an item of another schema. */
    char store[1024];
    snprintf(store, sizeof store, "printf x | '%s' store --schema org.example.Unrelated --label unrelated app=%s-other",
             getenv("PORTAL_TEST_KEYRINGCTL"), env);
    CHECK_MSG(system(store) == 0, "keyringctl store (a signal for the watch)");
    pump(queue, 3000);
    CHECK_MSG(reads > before, "the watch reached GetSecrets (%d reads)", reads - before);
    inject = 0;
    CHECK_MSG(keyringctl("unlock") == 0, "keyringctl unlock");
    pump(queue, 3000);
    CHECK_MSG(signed_out == 0, "the watch reported SIGNED_OUT %d times while the session was stored", signed_out);
    CHECK_MSG(events == 0 || (last_kind == PORTAL_WATCH_SIGNED_IN && strcmp(last_user, "eu-kept") == 0),
          "after the unlock the watch's last event is signed-in eu-kept (%d events, last kind %d %s)", events,
          (int)last_kind, last_user);
    printf("  the watch across a wallet closed before GetSecrets: %d events, %d signed-out\n", events, signed_out);
    portal_watch_free(watch);
    portal_completion_queue_free(queue);
}

int main(void) {
    alarm(120);
    if (!getenv("PORTAL_TEST_KEYRINGCTL")) {
        fprintf(stderr, "unreadable_test: run inside scripts/with-keyring.sh with PORTAL_TEST_KEYRINGCTL set\n");
        return 2;
    }
    char env[64], count[512];
    snprintf(env, sizeof env, "unreadable-%ld", (long)getpid());
    snprintf(count, sizeof count,
             "test \"$('%s' count --schema io.portalhq.PortalKeyring.Session auth_environment_id=%s)\" = 1",
             getenv("PORTAL_TEST_KEYRINGCTL"), env);
    portal_auth *auth = NULL;
    CHECK_MSG(portal_auth_new(&auth, env, "unreadable://cb", NULL) == PORTAL_OK, "portal_auth_new");
    portal_auth_set_keyring_timeouts(auth, 5000, 2000);
    CHECK_MSG(portal_auth_persist_session(auth, "eu-kept", "token-kept", NULL) == PORTAL_OK, "persist: %s",
          portal_last_error_message());

    inject = 1;
    portal_session *session = NULL;
    double start = now_ms();
    portal_status st = portal_auth_restore_session(auth, &session);
    double ms = now_ms() - start;
    inject = 0;
    CHECK_MSG(st == PORTAL_ERR_SESSION_STORAGE && !session,
          "a session GetSecrets never returns is a storage failure, not signed out (got %s, session %s: %s)",
          portal_status_str(st), session ? "returned" : "none", portal_last_error_message());
    CHECK_MSG(strstr(portal_last_error_message(), "keyring locked") != NULL, "the message says keyring locked: %s",
          portal_last_error_message());
    CHECK_MSG(reads == 5, "GetSecrets attempts: %d, wanted 5", reads);
    printf("  unreadable on every attempt: %s after %d reads, %.0f ms: %s\n", portal_status_str(st), reads, ms,
           portal_last_error_message());
    portal_session_free(session);
    session = NULL;
    CHECK_MSG(keyringctl("unlock") == 0, "keyringctl unlock");
    CHECK_MSG(system(count) == 0, "the item is still stored");
    st = portal_auth_restore_session(auth, &session);
    CHECK_MSG(st == PORTAL_OK && session && strcmp(portal_session_get_end_user_id(session), "eu-kept") == 0,
          "restored afterwards (%s)", portal_status_str(st));
    portal_session_free(session);
    watch_check(auth, env);
    portal_auth_clear_persisted_session(auth);
    portal_auth_free(auth);
    printf("unreadable_test: %d of %d checks passed\n", checks - failures, checks);
    return failures ? 1 : 0;
}
