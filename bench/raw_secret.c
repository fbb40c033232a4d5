/*
 * raw_secret.c — the baseline: what an app would write with libsecret alone.
 *
 *   raw_secret lookup ENV_ID   one secret_password_lookup_nonpageable_sync() of the session
 *                              document (the cold-restore baseline: process start → lookup → exit)
 *   raw_secret store ENV_ID    one secret_password_store_sync() of the same document
 *   raw_secret clear ENV_ID    secret_password_clear_sync() of every item for ENV_ID
 *
 * Same schema name, flags and attributes as portal-keyring (bench_common.h), default collection.
 * The stored attributes are fixed (session_generation, persisted_at), so a repeated store
 * replaces the one item, as an app using libsecret directly would do.
 * Exit status: 0 found/done, 1 nothing stored, 2 error.
 */
#include "bench_common.h"

#include <libsecret/secret.h>
#include <stdio.h>
#include <string.h>

#include "bench_schema.h"

static int fail(const char *what, GError *error) {
    fprintf(stderr, "raw_secret: %s: %s\n", what, error ? error->message : "unknown error");
    g_clear_error(&error);
    return 2;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s lookup|store|clear ENV_ID\n", argv[0]);
        return 2;
    }
    const char *env = argv[2];
    GError *error = NULL;
    if (strcmp(argv[1], "lookup") == 0) {
        gchar *doc = secret_password_lookup_nonpageable_sync(&schema, NULL, &error,
                                                             "auth_environment_id", env, NULL);
        if (error) return fail("lookup", error);
        if (!doc) {
            printf("signed out\n");
            return 1;
        }
        int ok = strstr(doc, "\"clientSessionToken\"") != NULL;
        printf(ok ? "restored session for end user %s\n" : "unusable item\n", BENCH_END_USER_ID);
        secret_password_free(doc);
        return ok ? 0 : 1;
    }
    if (strcmp(argv[1], "store") == 0) {
        if (!secret_password_store_sync(&schema, SECRET_COLLECTION_DEFAULT, "Portal session (bench baseline)",
                                        BENCH_DOCUMENT, NULL, &error, "auth_environment_id", env,
                                        "session_generation", "00000000000000000000000000000000",
                                        "persisted_at", "1700000000000000", NULL))
            return fail("store", error);
        return 0;
    }
    if (strcmp(argv[1], "clear") == 0) {
        secret_password_clear_sync(&schema, NULL, &error, "auth_environment_id", env, NULL);
        if (error) return fail("clear", error);
        return 0;
    }
    fprintf(stderr, "raw_secret: unknown command %s\n", argv[1]);
    return 2;
}
