/*
 * bench_schema.h — the portal-keyring item schema as libsecret sees it, for the benchmark
 * programs that store or look up through libsecret (the raw side of each comparison): the
 * library's schema name, flags and attributes (bench_common.h names the schema).
 */
#ifndef BENCH_SCHEMA_H
#define BENCH_SCHEMA_H

#include <libsecret/secret.h>

#include "bench_common.h"

static const SecretSchema schema = {
    BENCH_SCHEMA_NAME,
    SECRET_SCHEMA_NONE,
    {
        {"auth_environment_id", SECRET_SCHEMA_ATTRIBUTE_STRING},
        {"session_generation", SECRET_SCHEMA_ATTRIBUTE_STRING},
        {"persisted_at", SECRET_SCHEMA_ATTRIBUTE_STRING},
        {NULL, 0},
    },
    0, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
};

#endif
