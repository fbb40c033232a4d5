/*
 * persist_session.c — store a session whose Client Session Token the app's own backend issued.
 *
 *   printf '%s' "$TOKEN" | persist_session AUTH_ENVIRONMENT_ID END_USER_ID
 *
 * The token is read from standard input (one trailing newline is stripped), never from the
 * command line, where any user could read it in /proc. A token with other whitespace or control
 * characters is refused (PORTAL_ERR_INVALID_ARGUMENT), not trimmed. Any process of the same user that
 * restores this auth environment (see restore_on_launch.c) then sees the session.
 * Exit status: 0 stored, 2 error. The token is never printed.
 */
#include <portal_keyring.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Larger than the library's limit, so that an oversized token reaches the library and is
 * rejected there (never silently truncated here). */
#define MAX_INPUT (1024 * 1024)

static void wipe(char *p, size_t n) {
    volatile char *v = p;
    while (n--) *v++ = 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s AUTH_ENVIRONMENT_ID END_USER_ID < token\n", argv[0]);
        return 2;
    }

    char *token = malloc(MAX_INPUT + 1);
    if (!token) {
        fprintf(stderr, "error: out of memory\n");
        return 2;
    }
    size_t len = fread(token, 1, MAX_INPUT + 1, stdin);
    if (ferror(stdin) || len > MAX_INPUT || memchr(token, '\0', len)) {
        fprintf(stderr, "error: could not read the token from stdin (unreadable, over %d bytes, "
                        "or contains a NUL byte)\n", MAX_INPUT);
        wipe(token, len);
        free(token);
        return 2;
    }
    if (len > 0 && token[len - 1] == '\n') len--;
    token[len] = '\0';

    int rc = 0;
    portal_auth *auth = NULL;
    portal_session *session = NULL;
    portal_status status = portal_auth_new(&auth, argv[1], "example-app://portal/redirect", NULL);
    if (status == PORTAL_OK) status = portal_auth_persist_session(auth, argv[2], token, &session);
    wipe(token, len + 1); /* everything that was read, including a stripped newline */
    free(token);

    if (status == PORTAL_OK) {
        printf("stored session for end user %s\n", portal_session_get_end_user_id(session));
    } else {
        fprintf(stderr, "error: %s (%d): %s\n", portal_status_str(status), (int)status,
                portal_last_error_message());
        rc = 2;
    }
    portal_session_free(session);
    portal_auth_free(auth);
    return rc;
}
