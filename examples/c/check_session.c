/*
 * check_session.c — restore the session, hand it to Portal, and react to invalidation.
 *
 *   check_session AUTH_ENVIRONMENT_ID API_HOST
 *
 * portal_new() validates the session against the Portal API at once (GET /api/v3/clients/me,
 * on a library thread). If the backend rejects it, the library deletes the stored session and
 * calls the listener exactly once — even though the listener is registered after portal_new().
 * Exit status: 0 session valid, 1 signed out or invalidated (show sign-in), 2 error.
 */
#include <portal_keyring.h>

#include <pthread.h>
#include <stdio.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int invalidated = 0;

/* Runs on a library thread, at most once. */
static void on_invalidated(void *user_data) {
    (void)user_data;
    pthread_mutex_lock(&lock);
    invalidated = 1;
    pthread_cond_signal(&changed);
    pthread_mutex_unlock(&lock);
}

static int fail(portal_status status) {
    fprintf(stderr, "error: %s (%d): %s\n", portal_status_str(status), (int)status,
            portal_last_error_message());
    return 2;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s AUTH_ENVIRONMENT_ID API_HOST\n", argv[0]);
        return 2;
    }
    portal_auth *auth = NULL;
    portal_session *session = NULL;
    portal *client = NULL;
    uint64_t listener = 0;
    long http_status = 0;
    int rc = 2;

    portal_status status = portal_auth_new(&auth, argv[1], "example-app://portal/redirect", argv[2]);
    if (status == PORTAL_OK) status = portal_auth_restore_session(auth, &session);
    if (status != PORTAL_OK) { rc = fail(status); goto done; }
    if (session == NULL) { printf("signed out — show sign-in\n"); rc = 1; goto done; }
    printf("restored session for end user %s\n", portal_session_get_end_user_id(session));

    status = portal_new(&client, session, NULL); /* sends the validation request */
    if (status == PORTAL_OK)
        status = portal_on_session_invalidated(client, on_invalidated, NULL, NULL, &listener);
    if (status == PORTAL_OK) /* an app's own call through the authenticated path */
        status = portal_request(client, "GET", "/api/v3/clients/me", NULL, &http_status, NULL, NULL);
    if (status == PORTAL_ERR_SESSION_INVALIDATED) status = PORTAL_OK; /* the init request got there first */
    if (status != PORTAL_OK) { rc = fail(status); goto done; }

    /* Wait briefly for the listener (it also fires for a rejection of the init request). */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (http_status == 200) ? 0 : 5;
    pthread_mutex_lock(&lock);
    while (!invalidated && pthread_cond_timedwait(&changed, &lock, &until) == 0) {}
    int fired = invalidated;
    pthread_mutex_unlock(&lock);

    if (fired) {
        printf("session rejected by the Portal API — listener fired, stored session deleted; show sign-in\n");
        rc = 1;
    } else if (http_status == 200) {
        printf("session valid (GET /api/v3/clients/me: %ld)\n", http_status);
        rc = 0;
    } else {
        printf("Portal API answered %ld; session kept\n", http_status);
        rc = 0;
    }
done:
    portal_free(client);
    portal_session_free(session);
    portal_auth_free(auth);
    return rc;
}
