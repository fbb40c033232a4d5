/*
 * restore_on_launch.c — what a desktop app does at start-up with portal-keyring.
 *
 *   restore_on_launch AUTH_ENVIRONMENT_ID
 *
 * Exit status: 0 session restored, 1 signed out (show sign-in), 2 error (the keyring could not
 * be read this time: the end user is NOT known to be signed out, so do not show sign-in as if
 * they were). The Client Session Token is never printed.
 */
#include <portal_keyring.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(portal_status status) {
    fprintf(stderr, "error: %s (%d): %s\n", portal_status_str(status), (int)status,
            portal_last_error_message());
    return 2;
}

/* Creates each directory of `path` (like mkdir -p); 0 on success. */
static int make_dirs(char *path) {
    for (char *p = path + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            int failed = mkdir(path, 0700) != 0 && errno != EEXIST;
            *p = saved;
            if (failed || saved == '\0') return failed ? -1 : 0;
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s AUTH_ENVIRONMENT_ID\n", argv[0]);
        return 2;
    }
    const char *env_id = argv[1];

    portal_auth *auth = NULL;
    portal_status status = portal_auth_new(&auth, env_id, "example-app://portal/redirect", NULL);
    if (status != PORTAL_OK) return fail(status);

    /* Keyring items survive uninstall and reinstall, so the first launch after install starts
     * from a clean slate. The flag lives in $XDG_STATE_HOME (default ~/.local/state). */
    char dir[4096], flag[4096 + 512];
    const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    if (state && state[0] == '/') snprintf(dir, sizeof dir, "%s/portal-keyring-example", state);
    else snprintf(dir, sizeof dir, "%s/.local/state/portal-keyring-example", home ? home : ".");
    snprintf(flag, sizeof flag, "%s/%.200s.launched", dir, env_id); /* fits NAME_MAX */
    for (char *p = flag + strlen(dir) + 1; *p; p++) if (*p == '/') *p = '_'; /* id as file name */
    if (make_dirs(dir) != 0) {
        fprintf(stderr, "error: cannot create %s: %s\n", dir, strerror(errno));
        portal_auth_free(auth);
        return 2;
    }
    if (access(flag, F_OK) != 0) {
        status = portal_auth_clear_persisted_session(auth);
        if (status != PORTAL_OK) { /* no flag: try again on the next launch */
            int rc = fail(status);
            portal_auth_free(auth);
            return rc;
        }
        FILE *f = fopen(flag, "w");
        if (!f || fclose(f) != 0) fprintf(stderr, "warning: cannot create %s\n", flag);
    }

    /* Restore without a network call: OK + session, OK + NULL (signed out), or an error. */
    portal_session *session = NULL;
    int rc;
    status = portal_auth_restore_session(auth, &session);
    if (status != PORTAL_OK) {
        rc = fail(status);
    } else if (session == NULL) {
        printf("signed out — show sign-in\n");
        rc = 1;
    } else {
        printf("restored session for end user %s\n", portal_session_get_end_user_id(session));
        rc = 0;
    }
    portal_session_free(session);
    portal_auth_free(auth);
    return rc;
}
