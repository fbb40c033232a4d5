/*
 * app.c — the install test's C program, built exactly as an application would build it:
 *
 *   cc app.c $(pkg-config --cflags --libs portal-keyring) -o app
 *
 *   app version                          header macros agree with each other and with the library
 *   app persist ENV_ID END_USER TOKEN    store a session
 *   app restore ENV_ID END_USER TOKEN    restore it (a separate process) and compare both fields
 *   app clear ENV_ID                     delete it; a restore afterwards must say "signed out"
 *
 * Exit status: 0 success, 1 a check failed, 2 a library call failed (status and message printed).
 * Tokens are never printed.
 */
#include <portal_keyring.h>

#include <stdio.h>
#include <string.h>

#define REDIRECT_URL "portal-install-test://auth/callback"

static int failed_call(const char *what, portal_status st) {
    fprintf(stderr, "app: %s: %s (%d): %s\n", what, portal_status_str(st), (int)st,
            portal_last_error_message());
    return 2;
}

static int version(void) {
    char expected[64];
    snprintf(expected, sizeof expected, "%d.%d.%d", PORTAL_KEYRING_VERSION_MAJOR,
             PORTAL_KEYRING_VERSION_MINOR, PORTAL_KEYRING_VERSION_PATCH);
    unsigned long number = PORTAL_KEYRING_VERSION_MAJOR * 1000000UL + PORTAL_KEYRING_VERSION_MINOR * 1000UL +
                           PORTAL_KEYRING_VERSION_PATCH;
    int ok = 1;
    if (number != (unsigned long)PORTAL_KEYRING_VERSION_NUMBER) {
        fprintf(stderr, "app: PORTAL_KEYRING_VERSION_NUMBER is %lu, the MAJOR/MINOR/PATCH macros give %lu\n",
                (unsigned long)PORTAL_KEYRING_VERSION_NUMBER, number);
        ok = 0;
    }
    if (strcmp(expected, PORTAL_KEYRING_VERSION_STRING) != 0) {
        fprintf(stderr, "app: PORTAL_KEYRING_VERSION_STRING is \"%s\", the MAJOR/MINOR/PATCH macros give \"%s\"\n",
                PORTAL_KEYRING_VERSION_STRING, expected);
        ok = 0;
    }
    if (portal_keyring_version_number() != PORTAL_KEYRING_VERSION_NUMBER) {
        fprintf(stderr, "app: portal_keyring_version_number() is %lu, the header says %lu\n",
                (unsigned long)portal_keyring_version_number(), (unsigned long)PORTAL_KEYRING_VERSION_NUMBER);
        ok = 0;
    }
    const char *runtime = portal_keyring_version();
    if (runtime == NULL || strcmp(runtime, PORTAL_KEYRING_VERSION_STRING) != 0) {
        fprintf(stderr, "app: portal_keyring_version() is \"%s\", the header says \"%s\"\n",
                runtime ? runtime : "(null)", PORTAL_KEYRING_VERSION_STRING);
        ok = 0;
    }
    printf("header %s (%lu), library %s (%lu)\n", PORTAL_KEYRING_VERSION_STRING,
           (unsigned long)PORTAL_KEYRING_VERSION_NUMBER, runtime ? runtime : "(null)",
           (unsigned long)portal_keyring_version_number());
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "version") == 0) return version();

    const char *cmd = argc >= 3 ? argv[1] : "";
    int full = strcmp(cmd, "persist") == 0 || strcmp(cmd, "restore") == 0;
    if (!((full && argc == 5) || (strcmp(cmd, "clear") == 0 && argc == 3))) {
        fprintf(stderr, "usage: app version | app persist|restore ENV_ID END_USER TOKEN | app clear ENV_ID\n");
        return 64;
    }

    portal_auth *auth = NULL;
    portal_status st = portal_auth_new(&auth, argv[2], REDIRECT_URL, NULL);
    if (st != PORTAL_OK) return failed_call("portal_auth_new", st);

    int rc = 0;
    portal_session *session = NULL;
    char *token = NULL;
    if (strcmp(cmd, "persist") == 0) {
        st = portal_auth_persist_session(auth, argv[3], argv[4], NULL);
        if (st != PORTAL_OK) rc = failed_call("portal_auth_persist_session", st);
        else printf("stored session for end user %s\n", argv[3]);
    } else if (strcmp(cmd, "restore") == 0) {
        st = portal_auth_restore_session(auth, &session);
        if (st != PORTAL_OK) {
            rc = failed_call("portal_auth_restore_session", st);
        } else if (session == NULL) {
            fprintf(stderr, "app: signed out, expected a session for %s\n", argv[3]);
            rc = 1;
        } else if ((st = portal_session_copy_token(session, &token)) != PORTAL_OK) {
            rc = failed_call("portal_session_copy_token", st);
        } else {
            const char *user = portal_session_get_end_user_id(session);
            const char *env = portal_session_get_auth_environment_id(session);
            if (user == NULL || strcmp(user, argv[3]) != 0 || env == NULL || strcmp(env, argv[2]) != 0) {
                fprintf(stderr, "app: restored end user '%s' of '%s', expected '%s' of '%s'\n",
                        user ? user : "(null)", env ? env : "(null)", argv[3], argv[2]);
                rc = 1;
            } else if (strcmp(token, argv[4]) != 0) {
                fprintf(stderr, "app: the restored token differs from the stored one\n");
                rc = 1;
            } else {
                printf("restored session for end user %s\n", user);
            }
        }
    } else {
        st = portal_auth_clear_persisted_session(auth);
        if (st != PORTAL_OK) {
            rc = failed_call("portal_auth_clear_persisted_session", st);
        } else if ((st = portal_auth_restore_session(auth, &session)) != PORTAL_OK) {
            rc = failed_call("portal_auth_restore_session", st);
        } else if (session != NULL) {
            fprintf(stderr, "app: a session is still stored after the clear\n");
            rc = 1;
        } else {
            printf("signed out\n");
        }
    }
    portal_string_free(token);
    portal_session_free(session);
    portal_auth_free(auth);
    return rc;
}
