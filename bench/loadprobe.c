/*
 * loadprobe.c — load cost: dlopen() + the first call, in a fresh process, timed from inside.
 *
 *   loadprobe raw ENV_ID               dlopen("libsecret-1.so.0"), then one
 *                                      secret_password_lookup_nonpageable_sync()
 *   loadprobe portal LIBRARY ENV_ID    dlopen(LIBRARY), then portal_auth_new() +
 *                                      portal_auth_restore_session() (+ copy token, frees)
 *   loadprobe floor LIBRARY ENV_ID     the Swift-runtime floor: what raw does, plus
 *                                      dlopen(LIBRARY) (bench/floor/floor.swift, built as ours
 *                                      is) and one bench_floor_call("floor") — the least a Swift
 *                                      library doing raw's lookup could cost
 *
 * The probe itself links neither library (only libc), so each side pays for everything it loads
 * (libsecret pulls in GLib/GIO and libgcrypt; libportal-keyring also the Swift runtime linked
 * into it, libcurl and libstdc++). Prints "dlopen_ns first_call_ns peak_rss_kib" — the peak RSS
 * of this process image (VmHWM, which starts afresh at exec; getrusage's ru_maxrss would carry
 * over the RSS of a large parent such as the Python driver). Exit 0 when the session was found,
 * 2 otherwise.
 */
#define _GNU_SOURCE
#include "bench_common.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

/* Only the types: libsecret is not linked (its functions are looked up with dlsym). */
#include <libsecret/secret.h>

#include "bench_schema.h"

/* VmHWM from /proc/self/status, in KiB (-1 if unreadable). */
static long peak_rss_kib(void) {
    char line[256];
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kib = strtol(line + 6, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kib;
}

static void *sym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) fprintf(stderr, "loadprobe: %s: %s\n", name, dlerror());
    return p;
}

/* One raw lookup through the libsecret handle `lib`; true when the bench document came back. */
static bool raw_lookup(void *lib, const char *env) {
    gchar *(*lookup)(const SecretSchema *, GCancellable *, GError **, ...) =
        (gchar * (*)(const SecretSchema *, GCancellable *, GError **, ...)) sym(lib, "secret_password_lookup_nonpageable_sync");
    void (*pw_free)(gchar *) = (void (*)(gchar *))sym(lib, "secret_password_free");
    if (!lookup || !pw_free) return false;
    GError *error = NULL;
    gchar *doc = lookup(&schema, NULL, &error, "auth_environment_id", env, NULL);
    bool found = doc != NULL && strstr(doc, "\"clientSessionToken\"") != NULL;
    if (doc) pw_free(doc);
    if (error) fprintf(stderr, "loadprobe: lookup: %s\n", error->message);
    return found;
}

int main(int argc, char **argv) {
    bool raw = argc == 3 && strcmp(argv[1], "raw") == 0;
    bool portal = argc == 4 && strcmp(argv[1], "portal") == 0;
    bool floor_ = argc == 4 && strcmp(argv[1], "floor") == 0;
    if (!raw && !portal && !floor_) {
        fprintf(stderr, "usage: %s raw ENV_ID | portal LIBRARY ENV_ID | floor LIBRARY ENV_ID\n", argv[0]);
        return 2;
    }
    const char *env = argv[argc - 1];
    bool found = false;
    uint64_t t0 = bench_now_ns();
    void *lib = dlopen(raw ? "libsecret-1.so.0" : argv[2], RTLD_NOW | RTLD_LOCAL);
    void *secret = floor_ && lib ? dlopen("libsecret-1.so.0", RTLD_NOW | RTLD_LOCAL) : NULL;
    uint64_t t1 = bench_now_ns();
    if (!lib || (floor_ && !secret)) {
        fprintf(stderr, "loadprobe: dlopen: %s\n", dlerror());
        return 2;
    }
    if (floor_) {
        int (*call)(const char *) = (int (*)(const char *))sym(lib, "bench_floor_call");
        found = call != NULL && call("floor") == 5 && raw_lookup(secret, env);
    } else if (raw) {
        found = raw_lookup(lib, env);
    } else {
        int (*auth_new)(void **, const char *, const char *, const char *) =
            (int (*)(void **, const char *, const char *, const char *))sym(lib, "portal_auth_new");
        int (*restore)(void *, void **) = (int (*)(void *, void **))sym(lib, "portal_auth_restore_session");
        int (*copy_token)(const void *, char **) = (int (*)(const void *, char **))sym(lib, "portal_session_copy_token");
        void (*string_free)(char *) = (void (*)(char *))sym(lib, "portal_string_free");
        void (*session_free)(void *) = (void (*)(void *))sym(lib, "portal_session_free");
        void (*auth_free)(void *) = (void (*)(void *))sym(lib, "portal_auth_free");
        const char *(*last_error)(void) = (const char *(*)(void))sym(lib, "portal_last_error_message");
        if (!auth_new || !restore || !copy_token || !string_free || !session_free || !auth_free || !last_error)
            return 2;
        void *auth = NULL, *session = NULL;
        char *token = NULL;
        if (auth_new(&auth, env, BENCH_REDIRECT_URL, NULL) == 0 && restore(auth, &session) == 0 && session &&
            copy_token(session, &token) == 0) {
            found = true;
            string_free(token);
        } else {
            fprintf(stderr, "loadprobe: restore: %s\n", last_error());
        }
        session_free(session);
        auth_free(auth);
    }
    uint64_t t2 = bench_now_ns();
    printf("%llu %llu %ld\n", (unsigned long long)(t1 - t0), (unsigned long long)(t2 - t1), peak_rss_kib());
    return found ? 0 : 2;
}
