/* fault_test: condition 10, token bytes: a round trip or an explicit rejection. */
#include "fault_test.h"

void test_tokens(void) {
    check_context = "10 token bytes";
    const char *env = "fault-tokens";
    portal_auth *auth = new_auth(env);
    struct { const char *name; const char *bytes; } exact[] = {
        {"quotes, backslashes", "\"q\"\\\\/\\u0000"},
        {"non-ASCII", "\xc3\xa9\xe6\xbc\xa2\xf0\x9f\x94\x91\xef\xbb\xbf"},
    };
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        portal_status st = portal_auth_persist_session(auth, "user-10", exact[i].bytes, NULL);
        CHECK_MSG(st == PORTAL_OK, "%s: persisted", exact[i].name);
        expect_restore(auth, "user-10", exact[i].bytes, strlen(exact[i].bytes), exact[i].name);
    }
    /* Whitespace or control characters: refused at persist, the stored token intact. */
    struct { const char *name; const char *bytes; } spaced[] = {
        {"newlines and CR", "line1\nline2\r\nline3\n"}, {"a tab", "\ttab"},
        {"control characters", "\x01\x02\x1f\x7f-ctl"}, {"leading/trailing spaces", "  padded token  "},
        {"U+2028", "a\xe2\x80\xa8" "b"},
    };
    for (size_t i = 0; i < sizeof spaced / sizeof spaced[0]; i++) {
        portal_status st = portal_auth_persist_session(auth, "user-10", spaced[i].bytes, NULL);
        CHECK_MSG(st == PORTAL_ERR_INVALID_ARGUMENT && strstr(portal_last_error_message(), "client_session_token"),
              "%s: PORTAL_ERR_INVALID_ARGUMENT naming client_session_token (\"%s\")", spaced[i].name,
              portal_last_error_message());
        expect_restore(auth, "user-10", exact[1].bytes, strlen(exact[1].bytes), "the stored token is intact");
    }
    /* ... but an earlier version's item holding them is restored byte-exact (only persist checks). */
    struct { const char *doc; const char *bytes; } earlier[] = {
        {"{\"clientSessionToken\":\"line1\\nline2\\r\\nline3\\n\",\"endUserId\":\"user-10\",\"v\":1}", "line1\nline2\r\nline3\n"},
        {"{\"clientSessionToken\":\"\\u0001\\t  padded token  \",\"endUserId\":\"user-10\",\"v\":1}", "\x01\t  padded token  "},
    };
    for (size_t i = 0; i < sizeof earlier / sizeof earlier[0]; i++) {
        portal_auth_clear_persisted_session(auth);
        CHECK_MSG(store_raw(SCHEMA, env, earlier[i].doc, strlen(earlier[i].doc)) == 0, "store an earlier version's item");
        expect_restore(auth, "user-10", earlier[i].bytes, strlen(earlier[i].bytes), "an earlier version's token");
    }
    char *big = malloc(65537 + 1);
    for (size_t i = 0; i < 65537; i++) big[i] = (char)('!' + i % 90);
    big[65536] = '\0';
    CHECK_MSG(portal_auth_persist_session(auth, "user-10", big, NULL) == PORTAL_OK, "64 KiB (65536 bytes): persisted");
    expect_restore(auth, "user-10", big, 65536, "64 KiB");
    big[65536] = 'x';
    big[65537] = '\0';
    portal_status st = portal_auth_persist_session(auth, "user-10", big, NULL);
    CHECK_MSG(st == PORTAL_ERR_INVALID_ARGUMENT && strstr(portal_last_error_message(), "client_session_token"),
          "65537 bytes: PORTAL_ERR_INVALID_ARGUMENT naming client_session_token (\"%s\")", portal_last_error_message());
    big[65536] = '\0';
    expect_restore(auth, "user-10", big, 65536, "after the rejected 65537-byte token, the 64 KiB one is intact");

    struct { const char *name; const char *bytes; } bad[] = {
        {"a lone 0xff byte", "abc\xff"},       {"an overlong encoding", "a\xc0\xaf"},
        {"a UTF-16 surrogate", "a\xed\xa0\x80"}, {"a truncated sequence", "a\xe2\x82"},
        {"a lone continuation byte", "\x80z"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st = portal_auth_persist_session(auth, "user-10", bad[i].bytes, NULL);
        CHECK_MSG(st == PORTAL_ERR_INVALID_ARGUMENT && strstr(portal_last_error_message(), "UTF-8"),
              "%s: rejected as not valid UTF-8 (\"%s\")", bad[i].name, portal_last_error_message());
    }
    expect_restore(auth, "user-10", big, 65536, "rejected tokens changed nothing stored");
    /* A C string ends at its first NUL: what the library receives is "a", stored whole. */
    CHECK_MSG(portal_auth_persist_session(auth, "user-10", "a\0b", NULL) == PORTAL_OK, "\"a\\0b\" is the C string \"a\"");
    expect_restore(auth, "user-10", "a", 1, "stored as \"a\"");
    free(big);

    /* Stored documents the C ABI could not hand out whole are unusable (deleted, signed out). */
    portal_auth_clear_persisted_session(auth);
    const char *nul_doc = "{\"clientSessionToken\":\"a\\u0000b\",\"endUserId\":\"u\",\"v\":1}";
    store_raw(SCHEMA, env, nul_doc, strlen(nul_doc));
    expect_restore(auth, NULL, NULL, 0, "a stored token with \\u0000 is unusable: signed out");
    CHECK_MSG(count_items(SCHEMA, env) == 0, "... and the unusable item was deleted");
    const char *bad_utf8 = "{\"clientSessionToken\":\"\xff\",\"endUserId\":\"u\",\"v\":1}";
    store_raw(SCHEMA, env, bad_utf8, strlen(bad_utf8));
    expect_restore(auth, NULL, NULL, 0, "a stored document with invalid UTF-8 is unusable: signed out");
    portal_auth_free(auth);
}
