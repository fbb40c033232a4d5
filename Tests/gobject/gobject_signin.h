/*
 * gobject_signin.h — what the sign-in test programs of the GNOME API in Tests/gobject/
 * (signin_test.c, redirect_test.c, end_user_test.c) share: their auth, made against the loopback
 * fake Portal API of scripts/with-portal-api.sh ($PORTAL_TEST_API_HOST), and the grants that API
 * mints, as the links its emails would open.
 *
 *   signin_auth_new(env_id, from_email, template_id)  an initialised auth for REDIRECT (CHECKed);
 *                                                     from_email and template_id may be NULL
 *   mint_grant(end_user, totp, url, size)             a magic-link grant for end_user (with totp,
 *                                                     a TOTP step) as its redirect URL into url
 */
#ifndef PORTAL_TEST_GOBJECT_SIGNIN_H
#define PORTAL_TEST_GOBJECT_SIGNIN_H

#include "fake_api.h"
#include "gobject_wait.h"

#include <portal-keyring-gobject/portal-keyring-gobject.h>

#define REDIRECT "portalkeyring://auth/callback"

static inline PortalKeyringAuth *signin_auth_new(const char *env_id, const char *from_email, const char *template_id) {
    GError *error = NULL;
    PortalKeyringAuth *auth = g_initable_new(PORTAL_KEYRING_TYPE_AUTH, NULL, &error, "auth-environment-id", env_id,
                                             "redirect-url", REDIRECT, "api-host", getenv("PORTAL_TEST_API_HOST"),
                                             "magic-link-from-email", from_email, "magic-link-template-id",
                                             template_id, NULL);
    CHECK_MSG(auth != NULL && error == NULL, "construction failed: %s", error ? error->message : "");
    g_clear_error(&error);
    return auth;
}

static inline void mint_grant(const char *end_user, int totp, char *url, size_t size) {
    char json[256];
    g_snprintf(json, sizeof json,
               "{\"kind\":\"magic_link\",\"endUserId\":\"%s\",\"totpRequired\":%s,\"redirectUrl\":\"" REDIRECT "\"}",
               end_user, totp ? "true" : "false");
    CHECK(fake_api_admin("POST", "/_admin/grants", json, "d[\"data\"][\"redirectUrl\"]", url, size) == 0);
}

#endif
