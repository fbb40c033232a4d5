/* memscan_test: the paths that store, restore and sign in, blocking and _async. */
#include "memscan_test.h"

void path_persist(void) {
    struct marker m;
    make_marker(&m, "persist-");
    char env_id[96];
    portal_auth *auth = new_auth("persist", env_id, sizeof env_id);
    sign_out(auth, persist_marker(auth, &m));
    expect_none("persist", &m);
}

/* The file keyring's persist (the backend of a Flatpak sandbox; here named by
 * PORTAL_KEYRING_BACKEND=file:… with a master secret file, outside any sandbox): the item's
 * secret (the session document) is serialized and sealed into the file without a copy in
 * GLib's heap. The variables are read by portal_auth_new, so they are set around it
 * only, before any library thread runs. Tests/flatpak/c.sh runs every path in a sandbox too,
 * where the file keyring is the Secret portal's. */
void path_persist_file(void) {
    char dir[] = "/tmp/memscan-file-XXXXXX", keyring[128], secret[128], backend[160];
    CHECK_MSG(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(keyring, sizeof keyring, "%s/keyrings/default.keyring", dir);
    snprintf(secret, sizeof secret, "%s/master-secret", dir);
    snprintf(backend, sizeof backend, "file:%s", keyring);
    int fd = open(secret, O_WRONLY | O_CREAT | O_EXCL, 0600);
    CHECK_MSG(fd >= 0 && write(fd, "memscan-test-master-secret-memscan-test-master-secret-memscan-te", 64) == 64, "master secret file");
    if (fd >= 0) close(fd);
    setenv("PORTAL_KEYRING_BACKEND", backend, 1);
    setenv("PORTAL_KEYRING_MASTER_SECRET_FILE", secret, 1);
    struct marker m;
    make_marker(&m, "persist-file-");
    char env_id[96];
    portal_auth *auth = new_auth("persist-file", env_id, sizeof env_id);
    unsetenv("PORTAL_KEYRING_BACKEND");
    unsetenv("PORTAL_KEYRING_MASTER_SECRET_FILE");
    /* Three sign-ins of the same token (each replacing the one before): a copy freed unwiped by
     * one persist may be overwritten by the next allocation, hardly all three. */
    for (int round = 0; round < 3; round++) {
        char *token = marker_copy(&m);
        portal_session *session = NULL;
        CHECK_MSG(portal_auth_persist_session(auth, "memscan-user", token, &session) == PORTAL_OK && session,
              "persist into a file keyring");
        drop(token);
        portal_session_free(session);
    }
    struct stat info;
    CHECK_MSG(stat(keyring, &info) == 0 && info.st_size > 0, "the file keyring %s was written", keyring);
    CHECK_MSG(portal_auth_clear_persisted_session(auth) == PORTAL_OK, "clear");
    portal_auth_free(auth);
    expect_none("persist-file", &m);
    char command[300];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    CHECK_MSG(system(command) == 0, "%s", command);
}

void path_restore(int async) {
    struct marker m;
    make_marker(&m, async ? "restore-async-" : "restore-");
    char env_id[96];
    portal_auth *auth = new_auth(async ? "restore-async" : "restore", env_id, sizeof env_id);
    persist_elsewhere(&m, env_id, "memscan-user");
    CHECK_MSG(count_copies(&m) == 0, "the token is in memory before this process restored it");
    portal_session *session = NULL;
    if (async) {
        CHECK_MSG(finish_async(portal_auth_restore_session_async(auth, queue, on_done, NULL, NULL, NULL)) == PORTAL_OK,
              "restore_async");
        session = take_async_session();
        CHECK_MSG(session != NULL, "restore_async delivered the stored session");
    } else {
        CHECK_MSG(portal_auth_restore_session(auth, &session) == PORTAL_OK && session, "restore");
    }
    /* Control: a held copy is seen by the scan. */
    char *copy = copy_of_token(session);
    long held = count_copies(&m);
    CHECK_MSG(held >= 1, "the scan does not see a held copy of the token (%ld): scanner blind", held);
    portal_string_free(copy);
    sign_out(auth, session);
    expect_none(async ? "restore-async" : "restore", &m);
}

void path_sign_in(int async) {
    char env_id[96];
    portal_auth *auth = new_auth(async ? "signin-async" : "signin", env_id, sizeof env_id);
    char redirect[2048] = "";
    CHECK_MSG(admin("grants", "{\"kind\":\"magic_link\",\"endUserId\":\"eu-memscan\",\"redirectUrl\":\"portalkeyring://auth/callback\"}",
                "redirectUrl", redirect, sizeof redirect) == 0 && redirect[0],
          "mint a magic-link grant");
    /* The sign-in is started first, as an app does: handle_redirect refuses an unsolicited one. */
    CHECK_MSG(portal_auth_send_magic_link(auth, "memscan@example.com") == PORTAL_OK, "send_magic_link");
    portal_redirect_kind kind = PORTAL_REDIRECT_NOT_HANDLED;
    portal_session *session = NULL;
    if (async) {
        async_kind = PORTAL_REDIRECT_NOT_HANDLED;
        CHECK_MSG(finish_async(portal_auth_handle_redirect_async(auth, redirect, 0, queue, on_sign_in_done, NULL, NULL, NULL)) ==
                  PORTAL_OK,
              "handle_redirect_async");
        kind = async_kind;
        session = take_async_session();
        CHECK_MSG(kind == PORTAL_REDIRECT_AUTHENTICATED && session, "handle_redirect_async authenticated (kind %d)", (int)kind);
    } else {
        CHECK_MSG(portal_auth_handle_redirect(auth, redirect, &kind, &session, NULL, NULL) == PORTAL_OK &&
                  kind == PORTAL_REDIRECT_AUTHENTICATED && session,
              "handle_redirect");
    }
    struct marker m = {.len = 0};
    char *token = NULL;
    if (session && portal_session_copy_token(session, &token) == PORTAL_OK && token) {
        size_t len = strlen(token);
        CHECK_MSG(len > SKIP + 8 && len < MAX_TOKEN, "the server's CST is %zu bytes", len);
        adopt_marker(&m, token, len); /* wipes token's bytes */
    }
    portal_string_free(token);
    sign_out(auth, session);
    if (m.len > SKIP + 8) expect_none(async ? "sign-in-async" : "sign-in", &m);
}

void path_persist_async(void) {
    struct marker m;
    make_marker(&m, "persist-async-");
    char env_id[96];
    portal_auth *auth = new_auth("persist-async", env_id, sizeof env_id);
    char *token = marker_copy(&m);
    portal_status st = portal_auth_persist_session_async(auth, "memscan-user", token, queue, on_done, NULL, NULL, NULL);
    drop(token);
    CHECK_MSG(finish_async(st) == PORTAL_OK, "persist_async");
    portal_session *session = take_async_session();
    CHECK_MSG(session != NULL, "persist_async delivered the session");
    sign_out(auth, session);
    expect_none("persist-async", &m);
}

/* portal_session_invalidate_async on a live session: the token leaves memory while the caller
 * still holds the handle (dropped before the call returns), and the stored item is deleted. */
void path_invalidate_async(void) {
    struct marker m;
    make_marker(&m, "invalidate-async-");
    char env_id[96];
    portal_auth *auth = new_auth("invalidate-async", env_id, sizeof env_id);
    persist_elsewhere(&m, env_id, "memscan-user");
    portal_session *session = NULL;
    CHECK_MSG(portal_auth_restore_session(auth, &session) == PORTAL_OK && session, "restore");
    long held = count_copies(&m);
    CHECK_MSG(held >= 1, "the restored session's token is not in memory (%ld): scanner blind", held);
    CHECK_MSG(session && finish_async(portal_session_invalidate_async(session, queue, on_done, NULL, NULL, NULL)) == PORTAL_OK,
          "portal_session_invalidate_async");
    long after = count_copies(&m);
    CHECK_MSG(after == 0, "%ld copies of the token remain while the invalidated session's handle is held", after);
    char *copy = NULL;
    CHECK_MSG(session && portal_session_copy_token(session, &copy) == PORTAL_ERR_SESSION_INVALIDATED && !copy,
          "the invalidated session hands out no token");
    portal_session *again = NULL;
    CHECK_MSG(portal_auth_restore_session(auth, &again) == PORTAL_OK && !again, "the stored item was deleted");
    portal_session_free(again);
    portal_session_free(session);
    portal_auth_free(auth);
    expect_none("invalidate-async", &m);
}
