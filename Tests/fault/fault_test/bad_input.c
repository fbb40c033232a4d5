/* fault_test: condition 13, every entry point with bad input. */
#include "fault_test.h"

static char *mib;      /* 1 MiB of 'a' */
static char *mib_bad;  /* 1 MiB with an invalid byte at the end */
static int bad_cases;

#define EXPECT_INVALID(expr, argname)                                                                      \
    do {                                                                                                   \
        portal_status st_ = (expr);                                                                        \
        const char *m_ = portal_last_error_message();                                                      \
        bad_cases++;                                                                                       \
        if (st_ != PORTAL_ERR_INVALID_ARGUMENT || !m_ || !strstr(m_, argname))                             \
            fail("%s -> %d \"%s\" (expected invalid argument naming %s)", #expr, (int)st_, m_ ? m_ : "(null)", \
                 argname);                                                                                 \
    } while (0)

/* The four bad strings for one string argument of a call. */
#define BAD_STRINGS(call_with, argname)                 \
    do {                                                \
        const char *bad_[] = {NULL, "", "\xff\xfe", mib, mib_bad, " \t\n"}; \
        for (size_t b_ = 0; b_ < 6; b_++) {            \
            const char *S = bad_[b_];                   \
            EXPECT_INVALID(call_with, argname);         \
        }                                               \
    } while (0)

static void noop_cb(void *d) { (void)d; }
static int destroyed;
static void destroy_cb(void *d) { (void)d; destroyed++; }

void test_bad_input(void) {
    check_context = "13 bad input";
    mib = malloc((1u << 20) + 1);
    memset(mib, 'a', 1u << 20);
    mib[1u << 20] = '\0';
    mib_bad = malloc((1u << 20) + 1);
    memset(mib_bad, 'b', 1u << 20);
    mib_bad[(1u << 20) - 1] = '\xff';
    mib_bad[1u << 20] = '\0';
    portal_auth *auth = new_auth("fault-bad-input");
    portal_auth *a = NULL;
    BAD_STRINGS(portal_auth_new(&a, S, REDIRECT, NULL), "auth_environment_id");
    BAD_STRINGS(portal_auth_new(&a, "env", S, NULL), "redirect_url");
    {
        const char *bad_[] = {"", "\xff\xfe", mib, mib_bad, " ", "host/path", "user@host", "h ost"};
        for (size_t i = 0; i < 8; i++) EXPECT_INVALID(portal_auth_new(&a, "env", REDIRECT, bad_[i]), "api_host");
    }
    EXPECT_INVALID(portal_auth_new(NULL, "env", REDIRECT, NULL), "out");
    CHECK_MSG(a == NULL, "portal_auth_new wrote no output on failure");
    EXPECT_INVALID(portal_auth_set_keyring_timeouts(NULL, 1000, 1000), "auth");
    EXPECT_INVALID(portal_auth_set_keyring_timeouts(auth, 0, 1000), "call_timeout_ms");
    EXPECT_INVALID(portal_auth_set_keyring_timeouts(auth, 600001, 1000), "call_timeout_ms");
    EXPECT_INVALID(portal_auth_set_keyring_timeouts(auth, 1000, 0), "prompt_timeout_ms");
    EXPECT_INVALID(portal_auth_set_keyring_timeouts(auth, 1000, UINT32_MAX), "prompt_timeout_ms");
    portal_session *s = NULL;
    EXPECT_INVALID(portal_auth_restore_session(NULL, &s), "auth");
    EXPECT_INVALID(portal_auth_restore_session(auth, NULL), "out");
    EXPECT_INVALID(portal_auth_clear_persisted_session(NULL), "auth");
    EXPECT_INVALID(portal_auth_persist_session(NULL, "u", "t", NULL), "auth");
    BAD_STRINGS(portal_auth_persist_session(auth, S, "token", NULL), "end_user_id");
    BAD_STRINGS(portal_auth_persist_session(auth, "user", S, NULL), "client_session_token");
    CHECK_MSG(portal_session_get_end_user_id(NULL) == NULL && strstr(portal_last_error_message(), "session"),
          "portal_session_get_end_user_id(NULL) = NULL with a message");
    CHECK_MSG(portal_session_get_auth_environment_id(NULL) == NULL && strstr(portal_last_error_message(), "session"),
          "portal_session_get_auth_environment_id(NULL) = NULL with a message");
    char *tok = NULL;
    EXPECT_INVALID(portal_session_copy_token(NULL, &tok), "session");
    EXPECT_INVALID(portal_session_invalidate(NULL), "session");
    portal *p = NULL;
    EXPECT_INVALID(portal_new(&p, NULL, NULL), "session");
    EXPECT_INVALID(portal_new(NULL, NULL, NULL), "out");
    BAD_STRINGS(portal_new_with_api_key(&p, S, NULL), "api_key");
    {
        const char *bad_[] = {"", "\xff\xfe", mib, " ", "a/b"};
        for (size_t i = 0; i < 5; i++) EXPECT_INVALID(portal_new_with_api_key(&p, "key", bad_[i]), "api_host");
    }
    EXPECT_INVALID(portal_new_with_api_key(NULL, "key", NULL), "out");
    uint64_t h = 0;
    destroyed = 0;
    EXPECT_INVALID(portal_on_session_invalidated(NULL, noop_cb, NULL, destroy_cb, &h), "portal");
    CHECK_MSG(destroyed == 1, "destroy_notify ran once on a failed registration");
    EXPECT_INVALID(portal_listener_cancel(NULL, 1), "portal");
    EXPECT_INVALID(portal_report_unauthorized(NULL, "t", NULL), "portal");
    EXPECT_INVALID(portal_clear_session(NULL), "portal");
    long status = 0;
    EXPECT_INVALID(portal_request(NULL, "GET", "/x", NULL, &status, NULL, NULL), "portal");

    /* With real handles: the remaining string arguments. */
    portal_session *session = NULL;
    if (portal_auth_persist_session(auth, "user-13", "token-13", &session) != PORTAL_OK) {
        fail("persist for the handle cases");
    } else {
        EXPECT_INVALID(portal_session_copy_token(session, NULL), "out");
        {
            const char *bad_[] = {"", "\xff\xfe", mib, " ", "host/x"};
            for (size_t i = 0; i < 5; i++) EXPECT_INVALID(portal_new(&p, session, bad_[i]), "api_host");
        }
        if (portal_new(&p, session, "127.0.0.1:9") == PORTAL_OK) {
            destroyed = 0;
            EXPECT_INVALID(portal_on_session_invalidated(p, NULL, NULL, destroy_cb, &h), "callback");
            CHECK_MSG(destroyed == 1, "destroy_notify ran once per failed registration (%d)", destroyed);
            /* out is optional: without it the registration lives on, owned by the portal. */
            CHECK_MSG(portal_on_session_invalidated(p, noop_cb, NULL, destroy_cb, NULL) == PORTAL_OK && destroyed == 1,
                      "a registration without out registers (%d)", destroyed);
            BAD_STRINGS(portal_report_unauthorized(p, S, NULL), "rejected_token");
            BAD_STRINGS(portal_request(p, S, "/api/v3/clients/me", NULL, &status, NULL, NULL), "method");
            EXPECT_INVALID(portal_request(p, "TRACE", "/x", NULL, &status, NULL, NULL), "method");
            BAD_STRINGS(portal_request(p, "GET", S, NULL, &status, NULL, NULL), "target");
            {
                const char *bad_[] = {"\xff\xfe", mib_bad};
                for (size_t i = 0; i < 2; i++) EXPECT_INVALID(portal_request(p, "POST", "/x", bad_[i], &status, NULL, NULL), "body");
            }
            portal_free(p);
            CHECK_MSG(destroyed == 2, "portal_free ended the registration without out (%d)", destroyed);
        } else {
            fail("portal_new for the handle cases");
        }
        portal_session_free(session);
    }
    portal_auth_clear_persisted_session(auth);
    /* Frees of NULL are no-ops; unknown status codes have a name. */
    portal_auth_free(NULL);
    portal_session_free(NULL);
    portal_free(NULL);
    portal_string_free(NULL);
    CHECK_MSG(strcmp(portal_status_str((portal_status)12345), "unknown status") == 0 &&
              strcmp(portal_status_str((portal_status)-1), "unknown status") == 0,
          "portal_status_str of unknown codes");
    ok("%d bad-argument calls checked (NULL, \"\", invalid UTF-8, 1 MiB, blank), *_free(NULL) are no-ops",
       bad_cases);
    portal_auth_free(auth);
    free(mib);
    free(mib_bad);
}
