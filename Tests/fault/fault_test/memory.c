/* fault_test: condition 12, a marker token in memory across restore and free rounds (gcore reads it). */
#include "fault_test.h"

void test_memory(const char *env, int first, int second) {
    check_context = "12 memory";
    char marker[80];
    FILE *r = fopen("/dev/urandom", "rb");
    unsigned char raw[16];
    if (!r || fread(raw, 1, sizeof raw, r) != sizeof raw) exit(2);
    fclose(r);
    int off = snprintf(marker, sizeof marker, "MARKER-");
    for (size_t i = 0; i < sizeof raw; i++) off += snprintf(marker + off, sizeof marker - (size_t)off, "%02x", raw[i]);
    portal_auth *auth = new_auth(env);
    if (portal_auth_persist_session(auth, "user-12", marker, NULL) != PORTAL_OK) {
        fail("persist the marker");
        exit(1);
    }
    /* Tell the script the marker through the pipe, then forget our own copies of it. */
    char line[128];
    int n = snprintf(line, sizeof line, "MARKER %s\n", marker);
    if (write(STDOUT_FILENO, line, (size_t)n) != n) exit(2);
    explicit_bzero(line, sizeof line);
    explicit_bzero(marker, sizeof marker);
    explicit_bzero(raw, sizeof raw);
    int total = 0;
    int plan[2] = {first, second};
    for (int phase = 0; phase < 2; phase++) {
        for (int i = 0; i < plan[phase]; i++) {
            portal_session *s = NULL;
            if (portal_auth_restore_session(auth, &s) != PORTAL_OK || !s) {
                fail("restore %d", total);
                exit(1);
            }
            portal_session_free(s);
            total++;
        }
        n = snprintf(line, sizeof line, "PAUSE %d\n", total);
        if (write(STDOUT_FILENO, line, (size_t)n) != n) exit(2);
        if (read(STDIN_FILENO, line, sizeof line) <= 0) exit(2);
    }
    /* Control for the method: while a restored session and a token copy are held, the marker
     * must be found (the session's buffer and the caller's copy). */
    portal_session *held = NULL;
    char *copy = NULL;
    if (portal_auth_restore_session(auth, &held) != PORTAL_OK || !held || portal_session_copy_token(held, &copy) != PORTAL_OK) {
        fail("restore for the control dump");
        exit(1);
    }
    n = snprintf(line, sizeof line, "PAUSE held\n");
    if (write(STDOUT_FILENO, line, (size_t)n) != n) exit(2);
    if (read(STDIN_FILENO, line, sizeof line) <= 0) exit(2);
    portal_string_free(copy);
    portal_session_free(held);
    portal_auth_clear_persisted_session(auth);
    portal_auth_free(auth);
}
