/*
 * fake_api.h — the admin routes of the loopback fake Portal API (Tests/portal-api/, started by
 * scripts/with-portal-api.sh at $PORTAL_TEST_API_URL), as the C test programs call them: to mint
 * grants and sessions, read the links it "emailed", and set faults. One helper, so that every
 * program asks the same way and reads the answer the same way.
 *
 *   fake_api_admin(method, path, json, pick, out, size)   0 on success, -1 otherwise
 */
#ifndef PORTAL_TEST_FAKE_API_H
#define PORTAL_TEST_FAKE_API_H

#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* METHOD PATH [JSON] against $PORTAL_TEST_API_URL; prints the value of the Python expression
 * `pick` over the decoded answer `d` into out (its first line; "" when there is none). */
static inline int fake_api_admin(const char *method, const char *path, const char *json, const char *pick, char *out,
                                 size_t size) {
    const char *api_url = getenv("PORTAL_TEST_API_URL");
    char command[4096];
    snprintf(command, sizeof command,
             "python3 -c 'import json,sys,urllib.request as u; b=sys.argv[3]; "
             "r=u.Request(sys.argv[1]+sys.argv[2],data=b.encode() if b else None,method=sys.argv[4],"
             "headers={\"Content-Type\":\"application/json\"}); d=json.load(u.urlopen(r)); print(%s)' "
             "'%s' '%s' '%s' '%s'",
             pick, api_url ? api_url : "", path, json ? json : "", method);
    FILE *p = popen(command, "r");
    if (!p) return -1;
    out[0] = '\0';
    if (!fgets(out, TEST_CAST(int, size < 65536 ? size : 65536), p)) out[0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    return pclose(p) == 0 ? 0 : -1;
}

#endif
