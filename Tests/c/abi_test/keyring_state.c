/*
 * abi_test: the keyring's states: locked, restarted, shared by threads, no session bus at all.
 */
#include "abi_test.h"

void test_locked(void) {
    begin("locked collection: SESSION_STORAGE, nothing deleted, nothing replaced");
    if (!lock_observable("the locked-collection checks")) return;
    const char *id = new_env_id("locked");
    portal_auth *auth = new_auth(id);
    const char *token = "locked-token\"\xc3\xa9\"";
    CHECK_OK(portal_auth_persist_session(auth, "locked-user", token, NULL));

    locked_by_us = 1;
    keyring_lock();
    portal_session *session = SENTINEL_SESSION;
    double t0 = now_ms();
    CHECK_STATUS(portal_auth_restore_session(auth, &session), PORTAL_ERR_SESSION_STORAGE);
    printf("    restore while locked failed after %.1f ms: %s\n", now_ms() - t0, portal_last_error_message());
    CHECK(session == SENTINEL_SESSION);
    CHECK_ERROR_MENTIONS("locked");
    CHECK_MSG(strstr(portal_last_error_message(), "locked-token") == NULL, "message contains the token");

    /* persist while locked fails and leaves the stored session as it was. */
    t0 = now_ms();
    CHECK_STATUS(portal_auth_persist_session(auth, "other-user", "other-token", &session), PORTAL_ERR_SESSION_STORAGE);
    printf("    persist while locked failed after %.1f ms: %s\n", now_ms() - t0, portal_last_error_message());
    CHECK(session == SENTINEL_SESSION);
    CHECK_ERROR_MENTIONS("locked");

    /* clear while locked cannot delete and says so. */
    CHECK_STATUS(portal_auth_clear_persisted_session(auth), PORTAL_ERR_SESSION_STORAGE);
    CHECK_ERROR_MENTIONS("locked");

    /* A second handle (fresh state) sees the same. */
    portal_auth *other = new_auth(id);
    CHECK_STATUS(portal_auth_restore_session(other, &session), PORTAL_ERR_SESSION_STORAGE);
    CHECK(session == SENTINEL_SESSION);
    portal_auth_free(other);

    /* KeePassXC's search skips a locked database: nothing can be counted until it is unlocked. */
    if (!provider_is("keepassxc"))
        CHECK_MSG(keyring_count(SCHEMA, id) == 1, "%ld items while locked", keyring_count(SCHEMA, id));
    keyring_unlock();
    locked_by_us = 0;
    CHECK(keyring_count(SCHEMA, id) == 1);
    check_restore(auth, id, "locked-user", token);
    CHECK_OK(portal_auth_clear_persisted_session(auth));
    portal_auth_free(auth);
}

/* A session stored, then the provider restarted under this running process: for a keyring
 * with a password it comes back locked (gnome-keyring: loaded locked from disk; KeePassXC:
 * restarted, then lockAllDatabases), which must be reported as locked, never as signed out or
 * as the old session, and clear must not report success; after an unlock the session is there.
 * A passwordless keyring is re-read from its file and must give the token back byte-exact.
 * (Fresh processes after a restart: Tests/c/run.sh and Tests/cli/run.sh.) */
void test_restart(void) {
    begin("provider restarted: locked since login / re-read from disk");
    const char *id = new_env_id("restart");
    portal_auth *auth = new_auth(id);
    /* Escape-like text: the passwordless key file unescapes \\, \n and \t when it is re-read. */
    const char *token = "restart-token\\\\\"q\"\\t\xc3\xa9\\nend";
    CHECK_OK(portal_auth_persist_session(auth, "restart-user", token, NULL));
    portal_auth_free(auth);
    if (provider_is("flatpak")) {
        /* No provider daemon: a new handle reads the file again (Tests/flatpak/run.sh stops and
         * starts the portal from outside). */
        printf("    SKIP the restart in a Flatpak sandbox: no provider daemon; a new handle re-reads the file\n");
        auth = new_auth(id);
        check_restore(auth, id, "restart-user", token);
        CHECK_OK(portal_auth_clear_persisted_session(auth));
        portal_auth_free(auth);
        return;
    }
    if (unlocks_without_user()) {
        keyring_restart("--locked"); /* as after a login: Locked=true until someone unlocks */
        auth = new_auth(id);
        check_restore(auth, id, "restart-user", token);
        CHECK_OK(portal_auth_clear_persisted_session(auth));
        portal_auth_free(auth);
        return;
    }
    locked_by_us = 1;
    keyring_restart("--locked");
    auth = new_auth(id);
    portal_session *session = SENTINEL_SESSION;
    CHECK_STATUS(portal_auth_restore_session(auth, &session), PORTAL_ERR_SESSION_STORAGE);
    CHECK(session == SENTINEL_SESSION);
    CHECK_ERROR_MENTIONS("locked");
    CHECK_STATUS(portal_auth_clear_persisted_session(auth), PORTAL_ERR_SESSION_STORAGE);
    keyring_unlock();
    locked_by_us = 0;
    CHECK(keyring_count(SCHEMA, id) == 1);
    check_restore(auth, id, "restart-user", token);
    CHECK_OK(portal_auth_clear_persisted_session(auth));
    portal_auth_free(auth);
}

/* Handles are shared between threads. */
#define N_THREADS 8
static portal_auth *shared_auth;
static const char *shared_id;

static void *restore_thread(void *arg) {
    (void)arg;
    for (int i = 0; i < 5; i++) check_restore(shared_auth, shared_id, "threads-user", "threads-token");
    return NULL;
}

void test_threads(void) {
    begin("one auth handle used from several threads at once");
    shared_id = new_env_id("threads");
    shared_auth = new_auth(shared_id);
    CHECK_OK(portal_auth_persist_session(shared_auth, "threads-user", "threads-token", NULL));
    pthread_t threads[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) CHECK(pthread_create(&threads[i], NULL, restore_thread, NULL) == 0);
    for (int i = 0; i < N_THREADS; i++) CHECK(pthread_join(threads[i], NULL) == 0);
    CHECK_OK(portal_auth_clear_persisted_session(shared_auth));
    portal_auth_free(shared_auth);
}

/* ------------------------------------------------------------------------------ no bus */

#define NO_BUS_LIMIT_MS 1000.0

/* Child: the session bus address is unusable from the start of the process. */
int no_bus_child(int fd) {
    const char *addr = getenv("DBUS_SESSION_BUS_ADDRESS");
    check_context = addr ? addr : "(DBUS_SESSION_BUS_ADDRESS unset)";
    const char *id = new_env_id("nobus");
    portal_auth *auth = new_auth(id);
    for (int round = 0; round < 2; round++) {
        portal_session *session = SENTINEL_SESSION;
        double t0 = now_ms();
        CHECK_STATUS(portal_auth_restore_session(auth, &session), PORTAL_ERR_SESSION_STORAGE);
        double t_restore = now_ms() - t0;
        CHECK(session == SENTINEL_SESSION);
        CHECK(portal_last_error_message()[0] != '\0');
        printf("    restore: SESSION_STORAGE after %.1f ms: %s\n", t_restore, portal_last_error_message());

        t0 = now_ms();
        CHECK_STATUS(portal_auth_persist_session(auth, "user", "token", &session), PORTAL_ERR_SESSION_STORAGE);
        double t_persist = now_ms() - t0;
        CHECK(session == SENTINEL_SESSION);
        CHECK(portal_last_error_message()[0] != '\0');
        printf("    persist: SESSION_STORAGE after %.1f ms: %s\n", t_persist, portal_last_error_message());

        t0 = now_ms();
        CHECK_STATUS(portal_auth_clear_persisted_session(auth), PORTAL_ERR_SESSION_STORAGE);
        double t_clear = now_ms() - t0;
        CHECK(portal_last_error_message()[0] != '\0');
        printf("    clear:   SESSION_STORAGE after %.1f ms: %s\n", t_clear, portal_last_error_message());

        CHECK_MSG(t_restore < NO_BUS_LIMIT_MS, "restore took %.1f ms", t_restore);
        CHECK_MSG(t_persist < NO_BUS_LIMIT_MS, "persist took %.1f ms", t_persist);
        CHECK_MSG(t_clear < NO_BUS_LIMIT_MS, "clear took %.1f ms", t_clear);
    }
    portal_auth_free(auth);
    fflush(stdout);
    dprintf(fd, "%d\n", checks);
    close(fd);
    return failures ? 1 : 0;
}

/* Runs this program as a child with DBUS_SESSION_BUS_ADDRESS = address (NULL: unset). */
static void run_no_bus_child(const char *address) {
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        if (address) setenv("DBUS_SESSION_BUS_ADDRESS", address, 1);
        else unsetenv("DBUS_SESSION_BUS_ADDRESS");
        char fd_arg[16];
        snprintf(fd_arg, sizeof fd_arg, "%d", fds[1]);
        execl("/proc/self/exe", "abi_test", "--no-bus-child", fd_arg, (char *)NULL);
        perror("exec /proc/self/exe");
        _exit(127);
    }
    close(fds[1]);
    char buf[32] = {0};
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "no-bus child failed (status 0x%x)", status);
    CHECK_MSG(n > 0, "no-bus child reported no count");
    checks += (int)strtol(buf, NULL, 10);
}

void test_no_bus(void) {
    begin("no session bus: SESSION_STORAGE quickly, in a fresh process");
    printf("    DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent\n");
    run_no_bus_child("unix:path=/nonexistent");
    char bus[4096];
    snprintf(bus, sizeof bus, "%s/bus", getenv("XDG_RUNTIME_DIR") ? getenv("XDG_RUNTIME_DIR") : "/nonexistent");
    if (provider_is("flatpak") && access(bus, F_OK) == 0) {
        /* As flatpak run sets it up: GLib finds the bus at $XDG_RUNTIME_DIR/bus without it. */
        printf("    SKIP DBUS_SESSION_BUS_ADDRESS unset in a Flatpak sandbox: the bus is at %s\n", bus);
        return;
    }
    printf("    DBUS_SESSION_BUS_ADDRESS unset (no X11 display to autolaunch on)\n");
    run_no_bus_child(NULL);
}
