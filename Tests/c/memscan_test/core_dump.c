/* memscan_test: a held session's token is left out of a core dump of this process. */
#include "memscan_test.h"

/* Copies of the marker in a file (a core dump), read in chunks with an overlap. */
static long count_in_file(const struct marker *m, const char *path) {
    enum { CHUNK = 1 << 20 };
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    unsigned char *buffer = malloc(CHUNK);
    if (!buffer) abort();
    long total = 0;
    size_t overlap = m->len - SKIP - 1;
    off_t at = 0;
    for (;;) {
        ssize_t got = pread(fd, buffer, CHUNK, at);
        if (got <= 0) break;
        total += scan_buffer(m, buffer, (size_t)got);
        if (got < CHUNK) break;
        at += got - (ssize_t)overlap;
    }
    explicit_bzero(buffer, CHUNK);
    free(buffer);
    close(fd);
    return total;
}

/* gcore of this process; the number of marker copies in the dump, or -1. */
static long copies_in_core(const struct marker *m) {
    char prefix[128], command[512], core[160];
    snprintf(prefix, sizeof prefix, "/tmp/memscan-core.%d", (int)getpid());
    snprintf(core, sizeof core, "%s.%d", prefix, (int)getpid());
    unlink(core);
    snprintf(command, sizeof command, "gcore -o '%s' %d >/dev/null 2>&1", prefix, (int)getpid());
    if (system(command) != 0) return -1;
    long n = count_in_file(m, core);
    unlink(core);
    return n;
}

/* Core dumps: a held session's token lives in MADV_DONTDUMP memory, so gcore
 * of the host leaves it out, while this process's own scan sees it. Two sizes: a 160-byte token
 * (a slot of the library's secret pool) and a 3000-byte one (pages of its own). Control: a
 * caller-owned portal_session_copy_token string (ordinary heap) is in the dump. */
static void core_dump_case(const char *label, size_t len) {
    struct marker m;
    make_marker_of(&m, "core-dump-", len);
    char env_id[96];
    portal_auth *auth = new_auth(label, env_id, sizeof env_id);
    persist_elsewhere(&m, env_id, "memscan-user");
    portal_session *session = NULL;
    CHECK_MSG(portal_auth_restore_session(auth, &session) == PORTAL_OK && session, "restore");
    long live = count_copies(&m), dumped = copies_in_core(&m);
    printf("  core-dump   a held session (%zu-byte token): %ld cop%s in memory, %ld in a gcore dump\n", len, live,
           live == 1 ? "y" : "ies", dumped);
    CHECK_MSG(live >= 1, "the held session's token is not in memory (%ld): scanner blind", live);
    CHECK_MSG(dumped == 0, "gcore dumped %ld copies of a held session's %zu-byte token (MADV_DONTDUMP; -1: gcore failed)", dumped, len);
    char *copy = copy_of_token(session);
    long control = copies_in_core(&m);
    CHECK_MSG(control >= 1, "control: gcore does not show a caller-owned token copy (%ld): the dump check proves nothing", control);
    portal_string_free(copy);
    sign_out(auth, session);
}

void path_core_dump(void) {
    core_dump_case("core-small", 160);
    core_dump_case("core-large", 3000);
}
