/*
 * memscan_test — no copy of the Client Session Token is left in this process's memory after
 * each API path, once its handles are freed.
 *
 *   scripts/with-keyring.sh scripts/with-portal-api.sh build/c/memscan_test   (Tests/c/run.sh)
 *
 * Paths, each with its own token (so a copy is attributed to the path that left it):
 *   persist-file the same into a file keyring (PORTAL_KEYRING_BACKEND=file:… with a master
 *               secret file: the file backend a Flatpak sandbox uses, outside one), three times;
 *   persist     portal_auth_persist_session, then portal_session_free / portal_auth_free;
 *   restore     a session stored by another process (portal-session persist), restored here;
 *   sign-in     a magic-link grant from the fake Portal API exchanged by
 *               portal_auth_handle_redirect (the CST is made by the server: this process first
 *               sees it through the library);
 *   request     portal_new (validation request with the bearer) + portal_request with a body out
 *               (portal_string_free), on a restored session;
 *   nul-body    a response body "ok\0<token>" from a loopback server (portal_request,
 *               portal_string_free must wipe past the NUL);
 *   invalidate  portal_request answered 401 (the token was revoked): the session is invalidated,
 *               its item deleted, the listener fired; then portal_session_invalidate.
 *   the _async forms of these (docs/security.md, "Token copies left in memory"): persist-async,
 *   restore-async, sign-in-async (portal_auth_handle_redirect_async), request-async (the bearer
 *   of portal_request_async to the Portal API), invalidate-401-async (portal_request_async
 *   answered 401, then portal_session_invalidate_async), invalidate-async
 *   (portal_session_invalidate_async on a live session: the token also leaves memory before the
 *   handle is freed), nul-body-async (portal_request_async's body "ok\0<token>");
 *   the other exports that take a secret, each blocking and async: report (the rejected token
 *   of portal_report_unauthorized and _async), api-key (portal_new_with_api_key; no _async
 *   form), totp-jwt (the user JWT of portal_auth_verify_totp and _async, answered 401 by the API);
 *   core-dump   a held session's token is left out of a gcore dump of this
 *               process (MADV_DONTDUMP pages); control: a held copy_token string is in it.
 * After each path every readable, writable mapping of /proc/self/maps is read through
 * /proc/self/mem (heap, anonymous mappings, thread stacks, .data/.bss; a read error skips the
 * rest of a mapping) and the occurrences of the token's bytes 16..end are counted: free() writes
 * its list links over the first 16 bytes of a freed block, so a full-token search would miss a
 * freed, unwiped copy. So are those of its stored form (stored_form: base64url, as a session
 * document holds it; bytes 16..end as well): a copy of a stored document — the secret of a
 * file-keyring item copied into GLib's heap on its way into the file — holds no byte
 * of the token as such. Both counts must be 0 on every path.
 *
 * This program never keeps a token in clear: it holds it XOR-masked, and wipes every clear copy
 * it makes for a call (or reads from a child's pipe) at once. A control check makes sure the
 * scan sees a copy: a held portal_session_copy_token string must be found.
 *
 * PORTAL_MEMSCAN_REPORT=1 prints the counts without failing (for before/after figures).
 * Exit 0 when every check passed; every failed check is reported.
 */
#include "memscan_test.h"

int report_only;
const char *api_url, *api_host, *cli;

int main(void) {
    api_url = getenv("PORTAL_TEST_API_URL");
    api_host = getenv("PORTAL_TEST_API_HOST");
    cli = getenv("PORTAL_SESSION_BIN");
    if (!getenv("PORTAL_TEST_KEYRING_PID") || !api_url || !api_host || !cli) {
        fprintf(stderr, "memscan_test: run inside scripts/with-keyring.sh and scripts/with-portal-api.sh, "
                        "with PORTAL_SESSION_BIN set\n");
        return 2;
    }
    report_only = getenv("PORTAL_MEMSCAN_REPORT") && strcmp(getenv("PORTAL_MEMSCAN_REPORT"), "1") == 0;
    srandom((unsigned)time(NULL) ^ (unsigned)getpid());
    path_persist_file(); /* first: it sets environment variables, before any library thread runs */
    CHECK_MSG(portal_completion_queue_new_pollable(&queue) == PORTAL_OK, "pollable queue");
    path_persist();
    path_restore(0);
    path_restore(1);
    path_sign_in(0);
    path_sign_in(1);
    path_request(0, 0);
    path_request(1, 0);
    path_request(0, 1);
    path_request(1, 1);
    path_invalidate_async();
    path_persist_async();
    path_report();
    path_api_key();
    path_totp_jwt();
    path_core_dump();
    portal_completion_queue_free(queue);
    printf("memscan_test: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
