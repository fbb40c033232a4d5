/*
 * load_time.c — time dlopen() plus the first calls of libportal-keyring against raw libsecret.
 *
 *   load_time portal  LIBRARY ENV_ID   dlopen LIBRARY, portal_keyring_version_number(), then
 *                                      portal_auth_new() + portal_auth_restore_session()
 *   load_time secret  LIBRARY ENV_ID   dlopen LIBRARY (libsecret-1.so.0), secret_schema_new(),
 *                                      then secret_password_lookup_sync() of the same item
 *
 * Prints one line: "<mode> dlopen_us=… first_call_us=… restore_us=…". Both restores look up the
 * item of auth environment ENV_ID in the default collection (schema io.portalhq.PortalKeyring.Session),
 * so they do the same D-Bus work; run inside scripts/with-keyring.sh. Exits 0 on success.
 * Built by Tests/install/run.sh with: cc -O2 load_time.c -ldl (no library linked at build time).
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void *sym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (p == NULL) fprintf(stderr, "load_time: dlsym(%s): %s\n", name, dlerror());
    return p;
}

static int run_portal(const char *path, const char *env_id) {
    double t0 = now_us();
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    double t1 = now_us();
    if (lib == NULL) {
        fprintf(stderr, "load_time: dlopen(%s): %s\n", path, dlerror());
        return 1;
    }
    uint32_t (*version_number)(void) = (uint32_t (*)(void))sym(lib, "portal_keyring_version_number");
    int (*auth_new)(void **, const char *, const char *, const char *) =
        (int (*)(void **, const char *, const char *, const char *))sym(lib, "portal_auth_new");
    int (*restore)(void *, void **) = (int (*)(void *, void **))sym(lib, "portal_auth_restore_session");
    void (*session_free)(void *) = (void (*)(void *))sym(lib, "portal_session_free");
    void (*auth_free)(void *) = (void (*)(void *))sym(lib, "portal_auth_free");
    if (!version_number || !auth_new || !restore || !session_free || !auth_free) return 1;
    double t2 = now_us();
    uint32_t v = version_number();
    double t3 = now_us();
    void *auth = NULL, *session = NULL;
    int st = auth_new(&auth, env_id, "load-time://redirect", NULL);
    if (st == 0) st = restore(auth, &session);
    double t4 = now_us();
    session_free(session);
    auth_free(auth);
    if (st != 0) {
        fprintf(stderr, "load_time: restore failed with status %d\n", st);
        return 1;
    }
    printf("portal dlopen_us=%.0f first_call_us=%.0f restore_us=%.0f version=%u\n", t1 - t0, t3 - t2,
           t4 - t3, (unsigned)v);
    return 0;
}

/* The parts of <libsecret/secret.h> used here (ABI-stable since libsecret 0.7). */
typedef struct { const char *name; int type; } attr_t;
typedef struct {
    const char *name;
    int flags;
    attr_t attributes[32];
    int reserved;
    void *reserved1, *reserved2, *reserved3, *reserved4, *reserved5, *reserved6, *reserved7;
} schema_t;

static int run_secret(const char *path, const char *env_id) {
    double t0 = now_us();
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    double t1 = now_us();
    if (lib == NULL) {
        fprintf(stderr, "load_time: dlopen(%s): %s\n", path, dlerror());
        return 1;
    }
    char *(*lookup)(const schema_t *, void *, void **, ...) =
        (char *(*)(const schema_t *, void *, void **, ...))sym(lib, "secret_password_lookup_sync");
    void (*pw_free)(char *) = (void (*)(char *))sym(lib, "secret_password_free");
    void *(*schema_ref)(void *) = (void *(*)(void *))sym(lib, "secret_schema_ref");
    if (!lookup || !pw_free || !schema_ref) return 1;
    static schema_t schema;
    memset(&schema, 0, sizeof schema);
    schema.name = "io.portalhq.PortalKeyring.Session";
    schema.attributes[0].name = "auth_environment_id";
    schema.attributes[0].type = 0; /* SECRET_SCHEMA_ATTRIBUTE_STRING */
    double t2 = now_us();
    schema_ref(&schema); /* a trivial first call, like portal_keyring_version_number() */
    double t3 = now_us();
    void *error = NULL;
    char *secret = lookup(&schema, NULL, &error, "auth_environment_id", env_id, (char *)NULL);
    double t4 = now_us();
    if (error != NULL) {
        fprintf(stderr, "load_time: secret_password_lookup_sync failed\n");
        return 1;
    }
    pw_free(secret);
    printf("secret dlopen_us=%.0f first_call_us=%.0f restore_us=%.0f\n", t1 - t0, t3 - t2, t4 - t3);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: load_time portal|secret LIBRARY ENV_ID\n");
        return 2;
    }
    if (strcmp(argv[1], "portal") == 0) return run_portal(argv[2], argv[3]);
    if (strcmp(argv[1], "secret") == 0) return run_secret(argv[2], argv[3]);
    fprintf(stderr, "usage: load_time portal|secret LIBRARY ENV_ID\n");
    return 2;
}
