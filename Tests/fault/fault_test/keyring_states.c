/* fault_test: conditions 5, 6 and 9, the keyring's own states: a secret gone between search and read, a locked restore, look-alike items. */
#include "fault_test.h"

typedef int (*load_secrets_fn)(void *items, void *cancellable, void **error);
static volatile int inject; /* 0 none, 1 lock the collection, 2 delete the env's items */
static const char *inject_env;

int secret_item_load_secrets_sync(void *items, void *cancellable, void **error);
int secret_item_load_secrets_sync(void *items, void *cancellable, void **error) {
    static load_secrets_fn real;
    if (!real) real = (load_secrets_fn)dlsym(RTLD_NEXT, "secret_item_load_secrets_sync");
    int what = inject;
    inject = 0;
    if (what == 1) keyring_lock();
    if (what == 2) sh_io(NULL, 0, NULL, 0, "'%s' delete-all --schema %s auth_environment_id='%s' >/dev/null", kctl(), SCHEMA, inject_env);
    return real ? real(items, cancellable, error) : 0;
}

void test_absent_secret(void) {
    check_context = "5 absent secret";
    const char *env = "fault-absent";
    portal_auth *auth = new_auth(env);
    CHECK_MSG(portal_auth_persist_session(auth, "user-a", "token-a", NULL) == PORTAL_OK, "persist a session");

    inject = 1;
    portal_session *s = (portal_session *)&s;
    double t0 = now_ms();
    portal_status st = portal_auth_restore_session(auth, &s);
    double t1 = now_ms();
    CHECK_MSG(st == PORTAL_ERR_SESSION_STORAGE, "collection locked between search and GetSecrets: storage failure (%d)", (int)st);
    CHECK_MSG(s == (portal_session *)&s, "no output written on failure");
    CHECK_MSG(strstr(portal_last_error_message(), "locked") != NULL, "message says locked: \"%s\"", portal_last_error_message());
    printf("time  [%s] restore with the item locked before GetSecrets: %.1f ms, status %d, \"%s\"\n", check_context,
           t1 - t0, (int)st, portal_last_error_message());
    CHECK_MSG(keyring_unlock() == 0, "unlock with keyringctl");
    CHECK_MSG(count_items(SCHEMA, env) == 1, "nothing was deleted");
    expect_restore(auth, "user-a", "token-a", 7, "after unlocking");

    inject = 2;
    inject_env = env;
    t0 = now_ms();
    st = portal_auth_restore_session(auth, &s);
    t1 = now_ms();
    CHECK_MSG(st == PORTAL_OK && s == NULL, "item deleted between search and GetSecrets: signed out, not an error (%d)", (int)st);
    printf("time  [%s] restore with the item deleted before GetSecrets: %.1f ms, status %d\n", check_context, t1 - t0, (int)st);
    portal_auth_free(auth);
}

static int listener_calls;
static void count_call(void *data) {
    (void)data;
    __atomic_add_fetch(&listener_calls, 1, __ATOMIC_SEQ_CST);
}

void test_locked_app(void) {
    check_context = "6 locked restore";
    const char *env = "fault-locked-app";
    portal_auth *auth = new_auth(env);
    portal_session *session = NULL;
    CHECK_MSG(portal_auth_persist_session(auth, "user-6", "token-6", &session) == PORTAL_OK, "persist a session");
    portal *p = NULL;
    /* A closed loopback port: the validation request fails with a network error (never invalidates). */
    CHECK_MSG(portal_new(&p, session, "127.0.0.1:9") == PORTAL_OK, "portal_new with a listener");
    uint64_t handle = 0;
    CHECK_MSG(portal_on_session_invalidated(p, count_call, NULL, NULL, &handle) == PORTAL_OK, "listener registered");
    CHECK_MSG(keyring_lock() == 0, "keyringctl lock");

    portal_session *again = NULL;
    double t0 = now_ms();
    portal_status st = portal_auth_restore_session(auth, &again);
    double t1 = now_ms();
    CHECK_MSG(st == PORTAL_ERR_SESSION_STORAGE, "restore while locked: PORTAL_ERR_SESSION_STORAGE (%d)", (int)st);
    printf("time  [%s] restore while locked: %.1f ms, status %d, \"%s\"\n", check_context, t1 - t0, (int)st,
           portal_last_error_message());
    /* The app's usual handling (docs/api.md#signed-out-vs-unavailable): report it, keep the current session, retry later. It
     * also keeps making requests; a network error never invalidates. */
    long http = 0;
    st = portal_request(p, "GET", "/api/v3/clients/me", NULL, &http, NULL, NULL);
    CHECK_MSG(st == PORTAL_ERR_NETWORK, "a request meanwhile fails with a network error (%d), not an invalidation", (int)st);
    char *token = NULL;
    CHECK_MSG(portal_session_copy_token(session, &token) == PORTAL_OK && strcmp(token, "token-6") == 0,
          "the in-memory session is still valid");
    portal_string_free(token);
    st = portal_auth_restore_session(auth, &again);
    CHECK_MSG(st == PORTAL_ERR_SESSION_STORAGE, "a retry while still locked fails the same way");
    usleep(500 * 1000);
    CHECK_MSG(__atomic_load_n(&listener_calls, __ATOMIC_SEQ_CST) == 0, "no invalidation listener fired");
    CHECK_MSG(keyring_unlock() == 0, "keyringctl unlock");
    CHECK_MSG(count_items(SCHEMA, env) == 1, "nothing was deleted");
    expect_restore(auth, "user-6", "token-6", 7, "after unlocking, the same session");
    CHECK_MSG(__atomic_load_n(&listener_calls, __ATOMIC_SEQ_CST) == 0, "still no listener call");
    portal_free(p);
    portal_session_free(session);
    portal_auth_free(auth);
}

void test_lookalike(void) {
    check_context = "9 look-alike items";
    const char *env = "fault-lookalike";
    const char *doc = "{\"clientSessionToken\":\"FOREIGN-TOKEN\",\"endUserId\":\"intruder\",\"v\":1}";
    static const char *const schemas[] = {
        "io.portalhq.PortalKeyring.Session.v2", "io.portalhq.portalkeyring.session", "io.portalhq.PortalKeyring",
        "org.freedesktop.Secret.Generic", "org.example.Other",
    };
    size_t n = sizeof schemas / sizeof schemas[0];
    /* No xdg:schema at all (secret-tool stores without a schema), same attribute. First: its
     * store replaces any item whose attributes include {auth_environment_id} (gnome-keyring's
     * CreateItem replace semantics), which would eat one of the others. */
    int rc = sh_io(doc, strlen(doc), NULL, 0, "secret-tool store --label=lookalike auth_environment_id '%s'", env);
    CHECK_MSG(rc == 0, "secret-tool stored an item without xdg:schema");
    for (size_t i = 0; i < n; i++) store_raw(schemas[i], env, doc, strlen(doc));
    /* Our schema, other auth environments that look like ours. */
    store_raw(SCHEMA, "fault-lookalike ", doc, strlen(doc));
    store_raw(SCHEMA, "fault-lookalik", doc, strlen(doc));
    store_raw(SCHEMA, "FAULT-LOOKALIKE", doc, strlen(doc));
    long before = count_items(NULL, env);
    CHECK_MSG(before == (long)n + 1, "%ld look-alike items with auth_environment_id=%s", before, env);

    portal_auth *auth = new_auth(env);
    expect_restore(auth, NULL, NULL, 0, "restore ignores every look-alike");
    CHECK_MSG(portal_auth_clear_persisted_session(auth) == PORTAL_OK, "clear succeeds");
    CHECK_MSG(count_items(NULL, env) == before, "clear deleted no look-alike");
    CHECK_MSG(portal_auth_persist_session(auth, "user-9", "token-9", NULL) == PORTAL_OK, "persist ours");
    CHECK_MSG(count_items(NULL, env) == before + 1, "persist removed no look-alike");
    expect_restore(auth, "user-9", "token-9", 7, "restore returns ours only");
    CHECK_MSG(portal_auth_clear_persisted_session(auth) == PORTAL_OK, "clear ours");
    CHECK_MSG(count_items(SCHEMA, env) == 0 && count_items(NULL, env) == before, "only ours was deleted");
    CHECK_MSG(count_items(SCHEMA, "fault-lookalike ") == 1 && count_items(SCHEMA, "fault-lookalik") == 1 &&
              count_items(SCHEMA, "FAULT-LOOKALIKE") == 1,
          "items of look-alike auth environments are untouched");
    portal_auth_free(auth);
}
