/*
 * refused_test — a create or delete prompt that is dismissed gives "keyring refused", and nothing
 * is lost: every prompt a provider returns is run; a dismissed one is never success and never
 * "signed out".
 *
 * KeePassXC answers every CreateItem and Item.Delete with a prompt. The library calls
 * secret_prompt_perform_sync(NULL, PROMPT_PATH, …) right before its Prompt.Prompt call when a
 * program interposes the symbol (FaultInjectionSeam.beforePrompt); this program does (linked with
 * -rdynamic) and dismisses that prompt there (Prompt.Dismiss from another connection, as a person
 * closing the dialog or another program would). KeePassXC then emits Completed(dismissed=true)
 * and removes the prompt. Checks: clear fails with PORTAL_ERR_SESSION_STORAGE "keyring refused …
 * delete … dismissed" (a dismissal reported as one: the check after every prompt, that the item is
 * gone, would refuse it too, as "still there"), the session is still stored and restores; persist
 * fails "keyring refused … store … dismissed", the
 * older session is still the one restored and the only item. Prints each call's time (ms). Runs
 * inside scripts/with-keyring.sh --provider keepassxc; needs PORTAL_TEST_KEYRINGCTL. Exit 0 when
 * every check passed.
 */
#define _GNU_SOURCE
#include "provider_test.h"

static volatile int inject, dismissed;

/* The seam (FaultInjectionSeam.beforePrompt): dismiss the prompt right before it is run. */
void *secret_prompt_perform_sync(void *self, const char *path, void *cancellable, const void *type, void **error);
void *secret_prompt_perform_sync(void *self, const char *path, void *cancellable, const void *type, void **error) {
    (void)self, (void)cancellable, (void)type, (void)error;
    if (inject && path && strncmp(path, "/org/freedesktop/secrets/prompt/", 32) == 0 && !strchr(path, '\'')) {
        inject = 0;
        char line[1024];
        snprintf(line, sizeof line,
                 "timeout 10 gdbus call --session --dest org.freedesktop.secrets --object-path '%s' "
                 "--method org.freedesktop.Secret.Prompt.Dismiss >/dev/null",
                 path);
        CHECK_MSG(system(line) == 0, "Prompt.Dismiss of %s", path);
        dismissed = 1;
    }
    return NULL;
}

static int stored(const char *env) {
    char line[512];
    snprintf(line, sizeof line, "'%s' count --schema io.portalhq.PortalKeyring.Session auth_environment_id=%s",
             getenv("PORTAL_TEST_KEYRINGCTL"), env);
    FILE *p = popen(line, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1) n = -1;
        pclose(p);
    }
    return n;
}

static const char *restored_user(portal_auth *auth) {
    static char user[64];
    portal_session *session = NULL;
    portal_status st = portal_auth_restore_session(auth, &session);
    snprintf(user, sizeof user, "%s", st != PORTAL_OK ? portal_status_str(st) : session ? portal_session_get_end_user_id(session) : "(signed out)");
    portal_session_free(session);
    return user;
}

int main(void) {
    alarm(120);
    if (!getenv("PORTAL_TEST_KEYRINGCTL")) {
        fprintf(stderr, "refused_test: run inside scripts/with-keyring.sh with PORTAL_TEST_KEYRINGCTL set\n");
        return 2;
    }
    char env[64];
    snprintf(env, sizeof env, "refused-%ld", (long)getpid());
    portal_auth *auth = NULL;
    CHECK_MSG(portal_auth_new(&auth, env, "refused://cb", NULL) == PORTAL_OK, "portal_auth_new");
    portal_auth_set_keyring_timeouts(auth, 5000, 3000);
    CHECK_MSG(portal_auth_persist_session(auth, "eu-old", "token-old", NULL) == PORTAL_OK, "persist: %s",
          portal_last_error_message());

    inject = 1, dismissed = 0;
    double start = now_ms();
    portal_status st = portal_auth_clear_persisted_session(auth);
    double ms = now_ms() - start;
    CHECK_MSG(dismissed, "the delete prompt was reached and dismissed");
    CHECK_MSG(st == PORTAL_ERR_SESSION_STORAGE && strstr(portal_last_error_message(), "keyring refused") &&
              strstr(portal_last_error_message(), "delete") && strstr(portal_last_error_message(), "dismissed"),
          "a dismissed delete prompt: %s: %s", portal_status_str(st), portal_last_error_message());
    printf("  clear, delete prompt dismissed: %s, %.0f ms: %s\n", portal_status_str(st), ms, portal_last_error_message());
    CHECK_MSG(stored(env) == 1, "the session is still stored (%d)", stored(env));
    const char *user = restored_user(auth);
    CHECK_MSG(strcmp(user, "eu-old") == 0, "restore after the refused clear: %s", user);

    inject = 1, dismissed = 0;
    start = now_ms();
    st = portal_auth_persist_session(auth, "eu-new", "token-new", NULL);
    ms = now_ms() - start;
    CHECK_MSG(dismissed, "the create prompt was reached and dismissed");
    CHECK_MSG(st == PORTAL_ERR_SESSION_STORAGE && strstr(portal_last_error_message(), "keyring refused") &&
              strstr(portal_last_error_message(), "store") && strstr(portal_last_error_message(), "dismissed"),
          "a dismissed create prompt: %s: %s", portal_status_str(st), portal_last_error_message());
    printf("  persist, create prompt dismissed: %s, %.0f ms: %s\n", portal_status_str(st), ms, portal_last_error_message());
    inject = 0;
    user = restored_user(auth);
    CHECK_MSG(strcmp(user, "eu-old") == 0, "the older session is still the one restored: %s", user);
    CHECK_MSG(stored(env) == 1, "one item stored (%d)", stored(env));

    CHECK_MSG(portal_auth_clear_persisted_session(auth) == PORTAL_OK, "clear: %s", portal_last_error_message());
    CHECK_MSG(stored(env) == 0, "cleared (%d left)", stored(env));
    portal_auth_free(auth);
    printf("refused_test: %d of %d checks passed\n", checks - failures, checks);
    return failures ? 1 : 0;
}
