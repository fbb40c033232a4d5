/* watch_test: process A (this binary re-executed as `watch_test act ...`) and the other processes B starts. */
#include "watch_test.h"

char self_path[4096];

/* ---------------------------------------------------------------- process A */

int act(int argc, char **argv) {
    if (argc < 4) return 2;
    const char *what = argv[2], *env = argv[3];
    portal_auth *auth = NULL;
    if (portal_auth_new(&auth, env, "app://cb", getenv("PORTAL_TEST_API_HOST")) != PORTAL_OK) return 2;
    portal_status st = PORTAL_OK;
    if (strcmp(what, "persist") == 0 && argc == 5) {
        portal_session *s = NULL;
        st = portal_auth_persist_session(auth, argv[4], "token-watch-test", &s);
        portal_session_free(s);
    } else if (strcmp(what, "clear") == 0) {
        st = portal_auth_clear_persisted_session(auth);
    } else if (strcmp(what, "invalidate") == 0) {
        st = invalidate_stored(auth);
    } else if (strcmp(what, "burst") == 0 && argc == 5) {
        int n = atoi(argv[4]);
        for (int i = 0; i < n && st == PORTAL_OK; i++) {
            char user[32];
            snprintf(user, sizeof user, "b%d", i);
            portal_session *s = NULL;
            st = portal_auth_persist_session(auth, user, "token-burst", &s);
            portal_session_free(s);
        }
    } else {
        st = PORTAL_ERR_INVALID_ARGUMENT;
    }
    if (st != PORTAL_OK) fprintf(stderr, "watch_test act %s: %s\n", what, portal_last_error_message());
    portal_auth_free(auth);
    return st == PORTAL_OK ? 0 : 1;
}

/* The stored session invalidated by a 401: restore, portal_new against the loopback Portal API,
 * report_unauthorized; then nothing is stored. */
portal_status invalidate_stored(portal_auth *auth) {
    portal_session *s = NULL;
    portal_status st = portal_auth_restore_session(auth, &s);
    if (st == PORTAL_OK && s) {
        portal *client = NULL;
        char *token = NULL;
        st = portal_session_copy_token(s, &token);
        if (st == PORTAL_OK) st = portal_new(&client, s, NULL);
        bool invalidated = false;
        /* The validation request may have seen the 401 first: either way the item goes. */
        if (st == PORTAL_OK) st = portal_report_unauthorized(client, token, &invalidated);
        portal_free(client);
        portal_string_free(token);
        portal_session *again = NULL;
        if (st == PORTAL_OK) st = portal_auth_restore_session(auth, &again);
        if (again) st = PORTAL_ERR_INTERNAL; /* still stored */
        portal_session_free(again);
    } else if (st == PORTAL_OK) {
        st = PORTAL_ERR_INTERNAL;
    }
    portal_session_free(s);
    return st;
}

/* Runs argv to completion; its exit status (or -1). */
static int run(char *const argv[]) {
    pid_t pid;
    if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0) return -1;
    int status = 0;
    if (waitpid(pid, &status, 0) < 0) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* run() with stdout sent to /dev/null (the tools print paths, pids and counts). */
int run_quiet(char *const argv[]) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int spawned = posix_spawn(&pid, argv[0], &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) return -1;
    int status = 0;
    if (waitpid(pid, &status, 0) < 0) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int run_act(const char *what, const char *env, const char *arg) {
    char *argv[] = {self_path, "act", (char *)what, (char *)env, (char *)arg, NULL};
    return run(argv);
}

int keyringctl(const char *a, const char *b, const char *c, const char *d, const char *e) {
    char *argv[] = {getenv("PORTAL_TEST_KEYRINGCTL"), (char *)a, (char *)b, (char *)c, (char *)d, (char *)e, NULL};
    return run_quiet(argv);
}
