/*
 * pagesprobe.c — which mappings a load and one first call make resident (part of the load-cost
 * profile; bench/profile.sh runs it).
 *
 *   pagesprobe portal LIBRARY ENV_ID   dlopen(LIBRARY), then portal_auth_new() +
 *                                      portal_auth_restore_session() (+ frees)
 *   pagesprobe floor LIBRARY           dlopen(LIBRARY), then bench_floor_call("floor")
 *   pagesprobe raw ENV_ID              dlopen("libsecret-1.so.0"), then one
 *                                      secret_password_lookup_nonpageable_sync()
 *
 * Reads /proc/self/smaps three times — at start, after dlopen, after the call — and prints one
 * line per mapping and stage: "STAGE RSS_KIB PRIVATE_DIRTY_KIB SIZE_KIB PERMS PATH" (anonymous
 * mappings are summed into one "[anon]" line per stage; PATH is the file, [heap], [stack], …),
 * then "peak VmHWM_KIB". With PAGESPROBE_PAGES=PREFIX, also the present pages of LIBRARY after
 * dlopen and after the call (dump_pages). Exit 0 when the call succeeded, 2 otherwise. Links only libc (and
 * libdl); each side pays for everything it loads.
 */
#define _GNU_SOURCE
#include "bench_common.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libsecret/secret.h> /* the types only: libsecret is looked up with dlsym */

#include "bench_schema.h"

/* Prints every mapping of /proc/self/smaps under `stage`. The output is buffered in memory
 * first (one fopen of smaps; printing to stdout while reading would not change the figures,
 * but keeps the stages apart). */
static void dump(const char *stage) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) {
        perror("pagesprobe: /proc/self/smaps");
        exit(2);
    }
    char line[4096], perms[8] = "", path[2048] = "";
    long size = 0, rss = 0, dirty = 0, anon_rss = 0, anon_dirty = 0, anon_size = 0;
    bool have = false;
    char out[1 << 16];
    size_t used = 0;
    for (;;) {
        char *got = fgets(line, sizeof line, f);
        unsigned long lo, hi;
        char p[8];
        int n = 0;
        bool header = got && sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, p, &n) == 3 && n > 0;
        if ((header || !got) && have) {
            if (path[0] == '\0') {
                anon_rss += rss, anon_dirty += dirty, anon_size += size;
            } else if (used < sizeof out - 4200) {
                used += (size_t)snprintf(out + used, sizeof out - used, "%s %ld %ld %ld %s %s\n", stage, rss, dirty,
                                         size, perms, path);
            }
            have = false;
        }
        if (!got) break;
        if (header) {
            snprintf(perms, sizeof perms, "%s", p);
            snprintf(path, sizeof path, "%s", line + n);
            path[strcspn(path, "\n")] = '\0';
            size = rss = dirty = 0;
            have = true;
        } else if (strncmp(line, "Size:", 5) == 0) {
            size = strtol(line + 5, NULL, 10);
        } else if (strncmp(line, "Rss:", 4) == 0) {
            rss = strtol(line + 4, NULL, 10);
        } else if (strncmp(line, "Private_Dirty:", 14) == 0) {
            dirty = strtol(line + 14, NULL, 10);
        }
    }
    fclose(f);
    fwrite(out, 1, used, stdout);
    printf("%s %ld %ld %ld ---- [anon]\n", stage, anon_rss, anon_dirty, anon_size);
}

/* With PAGESPROBE_PAGES=PREFIX: writes to PREFIX.STAGE the file offset of every page of `path`'s mappings
 * that is present in this process (/proc/self/pagemap bit 63), one decimal offset a line, for
 * bench/profile.sh to attribute to archives through the link map. */
static void dump_pages(const char *path, const char *stage) {
    const char *prefix = getenv("PAGESPROBE_PAGES");
    if (!prefix || !*prefix) return;
    char target[4096];
    snprintf(target, sizeof target, "%s.%s", prefix, stage);
    char *real = realpath(path, NULL);
    FILE *maps = fopen("/proc/self/maps", "r"), *pm = fopen("/proc/self/pagemap", "rb"), *out = fopen(target, "w");
    if (!real || !maps || !pm || !out) {
        perror("pagesprobe: pagemap");
        exit(2);
    }
    char line[4096];
    while (fgets(line, sizeof line, maps)) {
        unsigned long lo, hi, off;
        int n = 0;
        if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %n", &lo, &hi, &off, &n) != 3 || n == 0) continue;
        char *name = line + n;
        name[strcspn(name, "\n")] = '\0';
        if (strcmp(name, real) != 0) continue;
        for (unsigned long va = lo; va < hi; va += 4096) {
            uint64_t entry = 0;
            if (fseek(pm, (long)(va / 4096 * 8), SEEK_SET) != 0 || fread(&entry, 8, 1, pm) != 1) continue;
            if (entry >> 63) fprintf(out, "%lu\n", off + (va - lo));
        }
    }
    fclose(out);
    fclose(pm);
    fclose(maps);
    free(real);
}

static long peak_rss_kib(void) {
    char line[256];
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) kib = strtol(line + 6, NULL, 10);
    fclose(f);
    return kib;
}

static void *sym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "pagesprobe: %s: %s\n", name, dlerror());
        exit(2);
    }
    return p;
}

int main(int argc, char **argv) {
    bool portal = argc == 4 && strcmp(argv[1], "portal") == 0;
    bool floor_ = argc == 3 && strcmp(argv[1], "floor") == 0;
    bool raw = argc == 3 && strcmp(argv[1], "raw") == 0;
    if (!portal && !floor_ && !raw) {
        fprintf(stderr, "usage: %s portal LIBRARY ENV_ID | floor LIBRARY | raw ENV_ID\n", argv[0]);
        return 2;
    }
    dump("start");
    void *lib = dlopen(raw ? "libsecret-1.so.0" : argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "pagesprobe: dlopen: %s\n", dlerror());
        return 2;
    }
    dump("dlopen");
    if (!raw) dump_pages(argv[2], "dlopen");
    bool ok = false;
    if (floor_) {
        int (*call)(const char *) = (int (*)(const char *))sym(lib, "bench_floor_call");
        ok = call("floor") == 5;
    } else if (raw) {
        gchar *(*lookup)(const SecretSchema *, GCancellable *, GError **, ...) =
            (gchar * (*)(const SecretSchema *, GCancellable *, GError **, ...)) sym(lib, "secret_password_lookup_nonpageable_sync");
        void (*pw_free)(gchar *) = (void (*)(gchar *))sym(lib, "secret_password_free");
        GError *error = NULL;
        gchar *doc = lookup(&schema, NULL, &error, "auth_environment_id", argv[2], NULL);
        ok = doc != NULL;
        if (doc) pw_free(doc);
    } else {
        int (*auth_new)(void **, const char *, const char *, const char *) =
            (int (*)(void **, const char *, const char *, const char *))sym(lib, "portal_auth_new");
        int (*restore)(void *, void **) = (int (*)(void *, void **))sym(lib, "portal_auth_restore_session");
        void (*session_free)(void *) = (void (*)(void *))sym(lib, "portal_session_free");
        void (*auth_free)(void *) = (void (*)(void *))sym(lib, "portal_auth_free");
        const char *(*last_error)(void) = (const char *(*)(void))sym(lib, "portal_last_error_message");
        void *auth = NULL, *session = NULL;
        ok = auth_new(&auth, argv[3], BENCH_REDIRECT_URL, NULL) == 0 && restore(auth, &session) == 0 && session;
        if (!ok) fprintf(stderr, "pagesprobe: restore: %s\n", last_error());
        session_free(session);
        auth_free(auth);
    }
    dump("call");
    if (!raw) dump_pages(argv[2], "call");
    printf("peak %ld\n", peak_rss_kib());
    return ok ? 0 : 2;
}
