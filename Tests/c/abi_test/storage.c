/*
 * abi_test: what is stored: round trips, clear, shared and independent handles, the stored format,
 * unusable, foreign and look-alike items, tokens with NUL bytes.
 */
#include "abi_test.h"

void test_round_trip(void) {
    begin("persist -> restore round-trips byte-exact");
    const char *id = new_env_id("roundtrip");
    portal_auth *auth = new_auth(id);
    check_restore(auth, id, NULL, NULL); /* nothing stored yet */

    char *t16k = make_token(16 * 1024);
    char *t64k = make_token(64 * 1024);
    char quotes64k[65537];
    memset(quotes64k, '"', 65536); /* doubles in JSON */
    quotes64k[65536] = '\0';
    const struct {
        const char *what, *user, *token;
    } cases[] = {
        {"plain", "user-1", "cst_abc.DEF-123"},
        {"quotes and backslashes", "user-\"quoted\"\\", "\"q\"\\\\\\\\\\u0041\\n\"}"},
        {"JSON-looking", "user-5", "{\"clientSessionToken\":\"evil\",\"endUserId\":\"x\",\"v\":2}"},
        {"non-ASCII", "\xc3\xa9nd-\xe7\x94\xa8\xe6\x88\xb7", "t\xc3\xb6k\xc3\xa9n\xe6\xbc\xa2\xe5\xad\x97\xf0\x9f\x94\x91\xe2\x80\x8b"},
        {"16 KiB", "user-16k", t16k},
        {"64 KiB (the maximum)", "user-64k", t64k},
        {"64 KiB of quotes", "user-64k-quotes", quotes64k},
        {"single byte", "u", "x"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        printf("    token: %s (%zu bytes)\n", cases[i].what, strlen(cases[i].token));
        portal_session *stored = SENTINEL_SESSION;
        CHECK_OK(portal_auth_persist_session(auth, cases[i].user, cases[i].token, &stored));
        CHECK_NO_ERROR();
        CHECK(stored != SENTINEL_SESSION);
        if (stored == SENTINEL_SESSION) continue; /* PORTAL_ABI_TEST_KEEP_GOING=1: nothing to check */
        check_session(stored, id, cases[i].user, cases[i].token);
        /* Same handle, and a new handle in the same process. */
        check_restore(auth, id, cases[i].user, cases[i].token);
        portal_auth *again = new_auth(id);
        check_restore(again, id, cases[i].user, cases[i].token);
        portal_auth_free(again);
        /* Persist replaces: one item only. */
        CHECK_MSG(keyring_count(SCHEMA, id) == 1, "%ld items stored", keyring_count(SCHEMA, id));
        /* The session outlives its auth handle and another restore. */
        check_session(stored, id, cases[i].user, cases[i].token);
        portal_session_free(stored);
    }
    /* out is optional. */
    CHECK_OK(portal_auth_persist_session(auth, "user-no-out", "token-no-out", NULL));
    check_restore(auth, id, "user-no-out", "token-no-out");

    /* Whitespace or a control character anywhere: refused at persist, naming the argument, and
     * the stored session is untouched (a pasted token with a trailing newline). */
    const char *spaced[] = {"tok en", " tok", "tok ", "tok\n", "tok\r\n", "\ttok", "a\x01" "b", "tok\x7f",
                            "tok\xc2\x85", "tok\xc2\xa0", "tok\xe2\x80\xa8", "line one\nline two\n"};
    for (size_t i = 0; i < sizeof spaced / sizeof spaced[0]; i++) {
        portal_session *refused = SENTINEL_SESSION;
        CHECK_STATUS(portal_auth_persist_session(auth, "user-spaced", spaced[i], &refused), PORTAL_ERR_INVALID_ARGUMENT);
        CHECK(refused == SENTINEL_SESSION);
        CHECK_ERROR_MENTIONS("client_session_token");
        CHECK_ERROR_MENTIONS("whitespace or control characters");
    }
    check_restore(auth, id, "user-no-out", "token-no-out");
    /* ... but what an earlier version stored with them is restored byte-exact (only persist checks). */
    const struct {
        const char *doc, *token;
    } earlier[] = {
        {"{\"v\":1,\"endUserId\":\"user-old\",\"clientSessionToken\":\"line one\\u000aline two\\u000A\"}", "line one\nline two\n"},
        {"{\"v\":1,\"endUserId\":\"user-old\",\"clientSessionToken\":\"  tok\\u000d\\u000a\\u0009with space  \"}", "  tok\r\n\twith space  "},
        {"{\"v\":1,\"endUserId\":\"user-old\",\"clientSessionToken\":\"a\\u0001\\u001f\\u007f z\"}", "a\x01\x1f\x7f z"},
    };
    for (size_t i = 0; i < sizeof earlier / sizeof earlier[0]; i++) {
        CHECK_OK(portal_auth_clear_persisted_session(auth));
        keyring_store(SCHEMA, id, "session_generation=0123456789abcdef0123456789abcdef persisted_at=1", earlier[i].doc);
        check_restore(auth, id, "user-old", earlier[i].token);
    }
    CHECK_OK(portal_auth_clear_persisted_session(auth));
    CHECK_OK(portal_auth_persist_session(auth, "user-no-out", "token-no-out", NULL));

    /* 65537 bytes are rejected, not truncated, and the stored session is untouched. */
    char *t65537 = make_token(65537);
    portal_session *session = SENTINEL_SESSION;
    CHECK_STATUS(portal_auth_persist_session(auth, "user-too-long", t65537, &session), PORTAL_ERR_INVALID_ARGUMENT);
    CHECK(session == SENTINEL_SESSION);
    CHECK_ERROR_MENTIONS("client_session_token");
    check_restore(auth, id, "user-no-out", "token-no-out");

    /* The stored item: documented attributes only, nothing secret in them. */
    char listed[4096], attrs[4096] = "";
    CHECK(keyringctl_io(NULL, 0, listed, sizeof listed, "attrs --schema %s auth_environment_id=%s", SCHEMA, id) == 0);
    /* KeePassXC lists its entry fields as attributes too (Title, UserName, URL, Notes, Path:
     * capitalised); they are the provider's, not ours. */
    for (char *save = NULL, *pair = strtok_r(listed, " \n", &save); pair; pair = strtok_r(NULL, " \n", &save)) {
        if (provider_is("keepassxc") && pair[0] >= 'A' && pair[0] <= 'Z') continue;
        if (attrs[0]) strncat(attrs, " ", sizeof attrs - strlen(attrs) - 1);
        strncat(attrs, pair, sizeof attrs - strlen(attrs) - 1);
    }
    strncat(attrs, "\n", sizeof attrs - strlen(attrs) - 1);
    char expect_prefix[512];
    snprintf(expect_prefix, sizeof expect_prefix, "auth_environment_id=%s persisted_at=", id);
    CHECK_MSG(strncmp(attrs, expect_prefix, strlen(expect_prefix)) == 0, "attributes: %s", attrs);
    const char *p = attrs + strlen(expect_prefix);
    size_t digits = strspn(p, "0123456789");
    CHECK_MSG(digits >= 16 && digits <= 20 && strncmp(p + digits, " session_generation=", 20) == 0,
              "persisted_at (microseconds) in: %s", attrs);
    p += digits + 20;
    CHECK_MSG(strspn(p, "0123456789abcdef") == 32 && strcmp(p + 32, " xdg:schema=" SCHEMA "\n") == 0,
              "session_generation (128-bit hex) / schema in: %s", attrs);
    CHECK(strstr(attrs, "token-no-out") == NULL && strstr(attrs, "user-no-out") == NULL);
    /* The secret is the documented version-2 document: base64url fields, no token in clear. */
    char secret[4096];
    CHECK(keyringctl_io(NULL, 0, secret, sizeof secret, "get --schema %s auth_environment_id=%s", SCHEMA, id) == 0);
    CHECK_MSG(strncmp(secret, "portal-keyring-session/2 e=", 27) == 0 && strstr(secret, " u=dXNlci1uby1vdXQ ") &&
                  strstr(secret, " c=dG9rZW4tbm8tb3V0") && !strstr(secret, "token-no-out") &&
                  !strpbrk(secret, "\\\t\n"),
              "stored secret: %s", secret);

    CHECK_OK(portal_auth_clear_persisted_session(auth));
    CHECK(keyring_count(SCHEMA, id) == 0);
    free(t16k);
    free(t64k);
    free(t65537);
    portal_auth_free(auth);
}

void test_clear(void) {
    begin("clear: nothing stored is OK; after clear, restore is OK + NULL");
    const char *id = new_env_id("clear");
    portal_auth *auth = new_auth(id);
    CHECK_OK(portal_auth_clear_persisted_session(auth));
    CHECK_NO_ERROR();
    CHECK_OK(portal_auth_persist_session(auth, "user-clear", "token-clear", NULL));
    CHECK(keyring_count(SCHEMA, id) == 1);
    portal_session *kept = NULL;
    CHECK_OK(portal_auth_restore_session(auth, &kept));
    CHECK_OK(portal_auth_clear_persisted_session(auth));
    CHECK_NO_ERROR();
    CHECK(keyring_count(SCHEMA, id) == 0);
    check_restore(auth, id, NULL, NULL);
    CHECK_OK(portal_auth_clear_persisted_session(auth)); /* idempotent */
    /* A session handle obtained before the clear keeps its copy (clear touches the keyring only). */
    check_session(kept, id, "user-clear", "token-clear");
    portal_session_free(kept);
    /* Several stale items (e.g. written by another process) are all removed. */
    keyring_store(SCHEMA, id, "session_generation=00000000000000000000000000000001 persisted_at=1",
                  "{\"clientSessionToken\":\"a\",\"endUserId\":\"b\",\"v\":1}");
    keyring_store(SCHEMA, id, "session_generation=00000000000000000000000000000002 persisted_at=2",
                  "{\"clientSessionToken\":\"c\",\"endUserId\":\"d\",\"v\":1}");
    CHECK(keyring_count(SCHEMA, id) == 2);
    CHECK_OK(portal_auth_clear_persisted_session(auth));
    CHECK(keyring_count(SCHEMA, id) == 0);
    portal_auth_free(auth);
}

void test_shared_and_independent(void) {
    begin("same id shares one session; different ids are independent");
    const char *id_a = new_env_id("shared-a");
    char id_a_copy[128];
    snprintf(id_a_copy, sizeof id_a_copy, "%s", id_a);
    const char *id_b = new_env_id("shared-b");
    portal_auth *a1 = new_auth(id_a), *a2 = new_auth(id_a_copy), *b = new_auth(id_b);

    CHECK_OK(portal_auth_persist_session(a1, "user-a", "token-a", NULL));
    check_restore(a2, id_a, "user-a", "token-a");
    check_restore(b, id_b, NULL, NULL);
    CHECK_OK(portal_auth_persist_session(b, "user-b", "token-b", NULL));
    check_restore(a1, id_a, "user-a", "token-a");
    check_restore(b, id_b, "user-b", "token-b");
    /* A persist through the second handle replaces the first handle's session. */
    CHECK_OK(portal_auth_persist_session(a2, "user-a2", "token-a2", NULL));
    check_restore(a1, id_a, "user-a2", "token-a2");
    CHECK(keyring_count(SCHEMA, id_a) == 1);
    /* Clearing one id leaves the other alone. */
    CHECK_OK(portal_auth_clear_persisted_session(a1));
    check_restore(a2, id_a, NULL, NULL);
    check_restore(b, id_b, "user-b", "token-b");
    /* An id that is a prefix of another is a different id. */
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s", id_b);
    prefix[strlen(prefix) - 1] = '\0';
    portal_auth *p = new_auth(prefix);
    check_restore(p, prefix, NULL, NULL);
    portal_auth_free(p);
    CHECK_OK(portal_auth_clear_persisted_session(b));
    portal_auth_free(a1);
    portal_auth_free(a2);
    portal_auth_free(b);
}

/* Items stored by another writer in the documented format are read; the newest wins. */
void test_stored_format(void) {
    begin("items in the documented format are restored; newest generation wins");
    const char *id = new_env_id("format");
    portal_auth *auth = new_auth(id);
    /* JSON escapes decode (\u00e9, \n) — except on the passwordless keyring, whose key file the
     * provider itself unescapes whenever it reloads it (the reason version 2 has no backslashes):
     * there the document carries the same characters raw (UTF-8, no line end). */
    int raw = provider_is("gnome-keyring-passwordless");
    const char *newer = raw ? "{\"v\":1,\"endUserId\":\"user-new\",\"clientSessionToken\":\"tok-\xc3\xa9\"}"
                            : "{\"v\":1,\"endUserId\":\"user-new\",\"clientSessionToken\":\"tok-\\u00e9\\n\"}";
    const char *older = "{\"clientSessionToken\":\"tok-old\",\"endUserId\":\"user-old\",\"v\":1}";
    keyring_store(SCHEMA, id, "session_generation=bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb persisted_at=2000000",
                  newer);
    keyring_store(SCHEMA, id, "session_generation=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa persisted_at=1000000",
                  older);
    check_restore(auth, id, "user-new", raw ? "tok-\xc3\xa9" : "tok-\xc3\xa9\n");
    /* A persist removes both older generations. */
    CHECK_OK(portal_auth_persist_session(auth, "user-3", "token-3", NULL));
    CHECK(keyring_count(SCHEMA, id) == 1);
    check_restore(auth, id, "user-3", "token-3");
    CHECK_OK(portal_auth_clear_persisted_session(auth));
    portal_auth_free(auth);
}

void test_unusable_items(void) {
    begin("unusable stored items: restore gives OK + NULL and deletes them");
    /* len 0 means strlen(secret); set it only for secrets with NUL bytes. */
    static const struct {
        const char *what;
        const char *secret;
        size_t len;
    } cases[] = {
        {"invalid JSON", "this is not json", 0},
        {"truncated JSON", "{\"clientSessionToken\":\"t\",\"endUserId\":\"u\",\"v\":1", 0},
        {"v 2", "{\"clientSessionToken\":\"t\",\"endUserId\":\"u\",\"v\":2}", 0},
        {"v 0", "{\"clientSessionToken\":\"t\",\"endUserId\":\"u\",\"v\":0}", 0},
        {"v missing", "{\"clientSessionToken\":\"t\",\"endUserId\":\"u\"}", 0},
        {"v as a string", "{\"clientSessionToken\":\"t\",\"endUserId\":\"u\",\"v\":\"1\"}", 0},
        {"endUserId missing", "{\"clientSessionToken\":\"t\",\"v\":1}", 0},
        {"clientSessionToken missing", "{\"endUserId\":\"u\",\"v\":1}", 0},
        {"token not a string", "{\"clientSessionToken\":42,\"endUserId\":\"u\",\"v\":1}", 0},
        {"token null", "{\"clientSessionToken\":null,\"endUserId\":\"u\",\"v\":1}", 0},
        {"empty token", "{\"clientSessionToken\":\"\",\"endUserId\":\"u\",\"v\":1}", 0},
        {"empty endUserId", "{\"clientSessionToken\":\"t\",\"endUserId\":\"\",\"v\":1}", 0},
        {"JSON array", "[1,2,3]", 0},
        {"JSON string", "\"{}\"", 0},
        {"invalid UTF-8 bytes in the token", "{\"clientSessionToken\":\"t\xff\xfe\",\"endUserId\":\"u\",\"v\":1}", 0},
        {"invalid UTF-8 bytes in endUserId", "{\"clientSessionToken\":\"t\",\"endUserId\":\"u\xc0\xaf\",\"v\":1}", 0},
        {"invalid UTF-8 only", "\xc3\x28\xa0\xa1", 0},
        {"raw NUL byte in JSON", "{\"clientSessionToken\":\"a\0b\",\"endUserId\":\"u\",\"v\":1}", 50},
        {"empty secret", "", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = cases[i].len ? cases[i].len : strlen(cases[i].secret);
        for (int full_attrs = 0; full_attrs <= 1; full_attrs++) {
            printf("    %s%s\n", cases[i].what, full_attrs ? " (with generation attributes)" : "");
            const char *id = new_env_id("unusable");
            keyring_store_bytes(SCHEMA, id,
                                full_attrs ? "session_generation=0123456789abcdef0123456789abcdef persisted_at=1" : "",
                                cases[i].secret, len);
            CHECK(keyring_count(SCHEMA, id) == 1);
            portal_auth *auth = new_auth(id);
            check_restore(auth, id, NULL, NULL);
            CHECK_MSG(keyring_count(SCHEMA, id) == 0, "unusable item (%s) was not deleted", cases[i].what);
            check_restore(auth, id, NULL, NULL);
            portal_auth_free(auth);
        }
    }
}

/* A stored document whose strings contain U+0000 (JSON "\u0000", written by some other writer)
 * cannot be handed out through NUL-terminated C strings without silently truncating them. The
 * library must not return such a session as if it were fine: either restore treats it as
 * unusable (OK + NULL), or the accessors refuse; a truncated token or id is a failure. */
void test_embedded_nul(void) {
    begin("stored token / end user id containing U+0000 are never silently truncated");
    static const struct {
        const char *what, *doc;
    } cases[] = {
        {"token", "{\"clientSessionToken\":\"abc\\u0000def\",\"endUserId\":\"user-nul\",\"v\":1}"},
        {"endUserId", "{\"clientSessionToken\":\"token-nul\",\"endUserId\":\"user\\u0000evil\",\"v\":1}"},
    };
    int truncated[2] = {0, 0}; /* both cases run before the verdict */
    char got[2][64] = {"", ""};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *id = new_env_id("nul");
        keyring_store(SCHEMA, id, "session_generation=0123456789abcdef0123456789abcdef persisted_at=1", cases[i].doc);
        portal_auth *auth = new_auth(id);
        portal_session *session = SENTINEL_SESSION;
        CHECK_OK(portal_auth_restore_session(auth, &session));
        CHECK(session != SENTINEL_SESSION);
        if (session != NULL) {
            const char *user = portal_session_get_end_user_id(session);
            char *token = NULL;
            portal_status st = portal_session_copy_token(session, &token);
            if (i == 0 && st == PORTAL_OK && strcmp(token, "abc") == 0) truncated[i] = 1;
            if (i == 1 && user != NULL && strcmp(user, "user") == 0) truncated[i] = 1;
            snprintf(got[i], sizeof got[i], "%s", i == 0 ? (st == PORTAL_OK ? token : "(refused)")
                                                         : (user ? user : "(refused)"));
            portal_string_free(token);
            portal_session_free(session);
        } else {
            CHECK_MSG(keyring_count(SCHEMA, id) == 0, "unusable item was not deleted");
            snprintf(got[i], sizeof got[i], "(signed out; item deleted)");
        }
        printf("    U+0000 in the %s: restore gave \"%s\"%s\n", cases[i].what, got[i],
               truncated[i] ? "  <-- silently truncated" : "");
        CHECK_OK(portal_auth_clear_persisted_session(auth));
        portal_auth_free(auth);
    }
    CHECK_MSG(!truncated[0], "restore returned the token \"abc\\u0000def\" truncated to \"%s\" (copy_token OK)", got[0]);
    CHECK_MSG(!truncated[1], "restore returned the end user id \"user\\u0000evil\" truncated to \"%s\"", got[1]);
}

void test_foreign_items(void) {
    begin("items of another schema are never returned or deleted");
    const char *id = new_env_id("foreign");
    const char *doc = "{\"clientSessionToken\":\"foreign-token\",\"endUserId\":\"foreign-user\",\"v\":1}";
    keyring_store(FOREIGN_SCHEMA, id, "session_generation=ffffffffffffffffffffffffffffffff persisted_at=9999999999999999",
                  doc);
    CHECK(keyring_count(NULL, id) == 1);
    portal_auth *auth = new_auth(id);
    check_restore(auth, id, NULL, NULL);
    CHECK(keyring_count(FOREIGN_SCHEMA, id) == 1);
    CHECK_OK(portal_auth_clear_persisted_session(auth));
    CHECK(keyring_count(FOREIGN_SCHEMA, id) == 1);
    /* With our own session next to it, ours is returned, and clear removes only ours. */
    CHECK_OK(portal_auth_persist_session(auth, "our-user", "our-token", NULL));
    check_restore(auth, id, "our-user", "our-token");
    CHECK(keyring_count(FOREIGN_SCHEMA, id) == 1);
    CHECK(keyring_count(SCHEMA, id) == 1);
    CHECK_OK(portal_auth_clear_persisted_session(auth));
    CHECK(keyring_count(SCHEMA, id) == 0);
    CHECK(keyring_count(FOREIGN_SCHEMA, id) == 1);
    /* An unusable foreign item is not ours to delete either. */
    keyring_store(FOREIGN_SCHEMA, id, "", "garbage");
    check_restore(auth, id, NULL, NULL);
    CHECK(keyring_count(FOREIGN_SCHEMA, id) == 2);
    char out[64];
    CHECK(keyringctl_io(NULL, 0, out, sizeof out, "delete-all --schema %s auth_environment_id=%s", FOREIGN_SCHEMA, id) == 0);
    portal_auth_free(auth);
}
