/* memscan_test: the scan of this process's memory for copies of a marker. */
#include "memscan_test.h"

static int show_where;
static const char *scan_mapping;
static unsigned long scan_base;

/* PORTAL_MEMSCAN_WHERE=1: where each copy is, with the 40 bytes before it (never the token). */
static void show(const unsigned char *p, size_t i) {
    char context[41];
    size_t from = i >= SKIP + 40 ? i - SKIP - 40 : 0, n = 0;
    for (size_t k = from; k + SKIP < i && n < 40; k++) context[n++] = p[k] >= 0x20 && p[k] < 0x7f ? (char)p[k] : '.';
    context[n] = '\0';
    printf("      at %#lx in %.*s after \"%s\"\n", scan_base + i, (int)strcspn(scan_mapping, "\n"), scan_mapping, context);
}

long scan_buffer(const struct marker *m, const unsigned char *p, size_t len) {
    const size_t tail = m->len - SKIP;
    const unsigned char first = m->masked[SKIP] ^ MASK;
    long found = 0;
    for (size_t i = 0; i + tail <= len; i++) {
        if (p[i] != first) continue;
        size_t k = 1;
        while (k < tail && p[i + k] == (unsigned char)(m->masked[SKIP + k] ^ MASK)) k++;
        if (k == tail) {
            if (show_where) show(p, i);
            found++;
            i += tail - 1;
        }
    }
    return found;
}

/* Copies of the marker's bytes SKIP..end in every readable, writable mapping. The mappings are
 * read through /proc/self/mem in chunks (with an overlap), so the scanner's own buffer holds a
 * copy only transiently and is wiped; a chunk is never a copy of itself because the buffer is an
 * mmap'd region outside the scan (it is skipped by address). */
long count_copies(const struct marker *m) {
    enum { CHUNK = 1 << 20 };
    static unsigned char *buffer;
    if (!buffer) buffer = malloc(CHUNK + MAX_TOKEN);
    if (!buffer) abort();
    FILE *maps = fopen("/proc/self/maps", "r");
    int mem = open("/proc/self/mem", O_RDONLY);
    if (!maps || mem < 0) {
        if (maps) fclose(maps);
        if (mem >= 0) close(mem);
        return -1;
    }
    char line[1024];
    long total = 0;
    uintptr_t skip_lo = (uintptr_t)buffer, skip_hi = skip_lo + CHUNK + MAX_TOKEN;
    while (fgets(line, sizeof line, maps)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3) continue;
        if (perms[0] != 'r' || perms[1] != 'w') continue;
        if (strstr(line, "[vvar]") || strstr(line, "[vsyscall]")) continue;
        size_t overlap = m->len - SKIP - 1;
        for (unsigned long at = lo; at < hi;) {
            size_t want = hi - at < CHUNK ? hi - at : CHUNK;
            ssize_t got = pread(mem, buffer, want, (off_t)at);
            if (got <= 0) break;
            /* The scanner's own buffer is read as it is being overwritten: blank its range. */
            for (ssize_t i = 0; i < got; i++)
                if (at + (uintptr_t)i >= skip_lo && at + (uintptr_t)i < skip_hi) buffer[i] = 0;
            scan_mapping = strchr(line, '/') ? strchr(line, '/') : strchr(line, '[') ? strchr(line, '[') : "anonymous";
            scan_base = at;
            total += scan_buffer(m, buffer, (size_t)got);
            if ((size_t)got < want || at + (size_t)got >= hi) break;
            at += (size_t)got - overlap;
        }
    }
    explicit_bzero(buffer, CHUNK + MAX_TOKEN);
    close(mem);
    fclose(maps);
    return total;
}

/* The copies a path is known to leave: none. (Sign-in left 1 or 2 until SignIn.swift decoded the
 * exchange response in place and zeroed the decoder's token String.) Kept as a function so that a
 * path with a documented, unavoidable copy can say so here. */
static long known_copies(const char *path) { (void)path; return 0; }

static int paths_failed;
/* No copy of the token, nor of its stored form (stored_form), is left in memory. */
void expect_none(const char *path, const struct marker *m) {
    struct marker stored;
    stored_form(m, &stored);
    show_where = getenv("PORTAL_MEMSCAN_WHERE") != NULL;
    long n = count_copies(m), s = count_copies(&stored);
    show_where = 0;
    printf("  %-20s %ld cop%s of the token, %ld of its stored form, after the handles were freed\n", path, n,
           n == 1 ? "y" : "ies", s);
    if (report_only) return;
    long known = known_copies(path);
    CHECK_MSG(n <= known, "%s: %ld copies of the token remain in memory (known and documented: at most %ld)", path, n, known);
    CHECK_MSG(s == 0, "%s: %ld copies of the token's stored form (base64url, as in a session document) remain in memory", path, s);
    if (n > known || s > 0) paths_failed++;
}
