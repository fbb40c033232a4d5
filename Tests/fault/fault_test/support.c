/* fault_test: the watchdog and the helpers that write and read the keyring beside the library. */
#include "fault_test.h"

static void on_alarm(int sig) {
    static const char msg[] = "FAIL  watchdog: the test did not finish in time (deadlock or hang)\n";
    (void)sig;
    ssize_t r = write(STDOUT_FILENO, msg, sizeof msg - 1);
    (void)r;
    _exit(1);
}

void watchdog(unsigned seconds) {
    signal(SIGALRM, on_alarm);
    alarm(seconds);
}

const char *kctl(void) {
    const char *p = getenv("PORTAL_TEST_KEYRINGCTL");
    if (!p || !*p || strchr(p, '\'')) {
        fprintf(stderr, "fault_test: set PORTAL_TEST_KEYRINGCTL\n");
        exit(2);
    }
    return p;
}

/* Runs a shell command; with `input`, feeds it input[0..len); with `out`, captures stdout. */
int sh_io(const char *input, size_t len, char *out, size_t cap, const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    FILE *p;
    int status;
    if (input) {
        p = popen(cmd, "w");
        if (!p) return -1;
        if (len) fwrite(input, 1, len, p);
        status = pclose(p);
    } else if (out) {
        p = popen(cmd, "r");
        if (!p) return -1;
        size_t n = fread(out, 1, cap - 1, p);
        out[n] = '\0';
        char drain[4096];
        while (fread(drain, 1, sizeof drain, p) > 0) {
        }
        status = pclose(p);
    } else {
        status = system(cmd);
    }
    return (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
}

long count_items(const char *schema, const char *env) {
    char out[64];
    int rc = schema ? sh_io(NULL, 0, out, sizeof out, "'%s' count --schema '%s' auth_environment_id='%s'", kctl(), schema, env)
                    : sh_io(NULL, 0, out, sizeof out, "'%s' count auth_environment_id='%s'", kctl(), env);
    return rc == 0 ? strtol(out, NULL, 10) : -1;
}

int store_raw(const char *schema, const char *env, const char *secret, size_t len) {
    return sh_io(secret, len, NULL, 0, "'%s' store --schema '%s' auth_environment_id='%s' >/dev/null", kctl(), schema, env);
}

int keyring_lock(void) { return sh_io(NULL, 0, NULL, 0, "'%s' lock", kctl()); }
int keyring_unlock(void) { return sh_io(NULL, 0, NULL, 0, "'%s' unlock", kctl()); }

portal_auth *new_auth(const char *env) {
    portal_auth *auth = NULL;
    if (portal_auth_new(&auth, env, REDIRECT, NULL) != PORTAL_OK) {
        fail("portal_auth_new(%s)", env);
        exit(1);
    }
    return auth;
}

/* Restores and compares: user NULL = signed out expected. Returns the status. */
portal_status expect_restore(portal_auth *auth, const char *user, const char *token, size_t token_len,
                                    const char *what) {
    portal_session *s = NULL;
    portal_status st = portal_auth_restore_session(auth, &s);
    if (st != PORTAL_OK) {
        fail("%s: restore returned %d", what, (int)st);
        return st;
    }
    if (!user) {
        CHECK_MSG(s == NULL, "%s: signed out", what);
    } else if (!s) {
        fail("%s: signed out, expected user %s", what, user);
    } else {
        char *copy = NULL;
        portal_status cst = portal_session_copy_token(s, &copy);
        int same = cst == PORTAL_OK && strcmp(portal_session_get_end_user_id(s), user) == 0 &&
                   strlen(copy) == token_len && memcmp(copy, token, token_len) == 0;
        CHECK_MSG(same, "%s: restored user %s with a byte-exact token (%zu bytes)", what, user, token_len);
        portal_string_free(copy);
    }
    portal_session_free(s);
    return st;
}
