/*
 * bench_common.h — what every benchmark program stores and looks up, so that both sides of each
 * comparison move the same bytes: the portal-keyring schema name and attributes and a
 * session document of the same shape and size as the library's own
 * ({"clientSessionToken":…,"endUserId":…,"v":1}, sorted keys, as SessionDocument.encode writes it).
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stdint.h>
#include <time.h>

#define BENCH_SCHEMA_NAME "io.portalhq.PortalKeyring.Session"
#define BENCH_REDIRECT_URL "bench-app://portal/redirect"
/* A CST-shaped token: 88 characters of URL-safe base64-ish text. */
#define BENCH_TOKEN "cst_3q2+7w8Jc1pN0bRkA4sVxYd6Lh9mTzEuGf5aWiOoKjQ-_rSvBnCyDxFgHeIlMtPuRwZs2a7b8c9d0e1f2g3h"
#define BENCH_END_USER_ID "eu_bench_0123456789abcdef"
/* The same shape and size as the library's document: sorted keys, with the sign-in's
 * generation (g, 128-bit hex) and persisted_at (t, microseconds). */
#define BENCH_DOCUMENT "{\"clientSessionToken\":\"" BENCH_TOKEN "\",\"endUserId\":\"" BENCH_END_USER_ID \
    "\",\"g\":\"0f1e2d3c4b5a69788796a5b4c3d2e1f0\",\"t\":1796000000000000,\"v\":1}"

static inline uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
