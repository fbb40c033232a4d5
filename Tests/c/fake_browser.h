/*
 * fake_browser.h — Tests/tools/fake_browser.sh as this process's http(s) handler, for the desktop
 * sign-in tests (Tests/c/desktop_signin_test.c, Tests/gobject/desktop_test.c): its desktop file
 * in the private XDG data directory, the default in mimeapps.list, and a wait until GIO in this
 * process sees it (it notices through a monitor). PORTAL_TEST_FAKE_BROWSER names the script;
 * state_dir is where it keeps its mode and what it was opened with.
 *
 *   fake_browser_handler_is(id)             GIO's http handler is the desktop file id (NULL: none)
 *   fake_browser_register(id, name, dir)    makes the browser the handler; CHECKs that it is
 */
#ifndef PORTAL_TEST_FAKE_BROWSER_H
#define PORTAL_TEST_FAKE_BROWSER_H

#include "check.h"

#include <gio/gio.h>
#include <stdlib.h>
#include <string.h>

static inline int fake_browser_handler_is(const char *want) {
    GAppInfo *info = g_app_info_get_default_for_uri_scheme("http");
    int same = info ? (want && strcmp(g_app_info_get_id(info), want) == 0) : want == NULL;
    if (info) g_object_unref(info);
    return same;
}

static inline void fake_browser_register(const char *desktop_id, const char *name, const char *state_dir) {
    char *apps = g_build_filename(g_get_user_data_dir(), "applications", NULL);
    g_mkdir_with_parents(apps, 0700);
    char *desktop = g_build_filename(apps, desktop_id, NULL);
    char *mimeapps = g_build_filename(g_get_user_config_dir(), "mimeapps.list", NULL);
    char *entry = g_strdup_printf("[Desktop Entry]\nType=Application\nName=%s\nExec=\"%s\" \"%s\" %%u\n"
                                  "MimeType=x-scheme-handler/http;x-scheme-handler/https;\nNoDisplay=true\n",
                                  name, getenv("PORTAL_TEST_FAKE_BROWSER"), state_dir);
    char *defaults = g_strdup_printf("[Default Applications]\nx-scheme-handler/http=%s\nx-scheme-handler/https=%s\n",
                                     desktop_id, desktop_id);
    CHECK(g_file_set_contents(desktop, entry, -1, NULL));
    CHECK(g_file_set_contents(mimeapps, defaults, -1, NULL));
    for (int i = 0; i < 250 && !fake_browser_handler_is(desktop_id); i++) g_usleep(20000);
    CHECK(fake_browser_handler_is(desktop_id));
    g_free(defaults);
    g_free(entry);
    g_free(mimeapps);
    g_free(desktop);
    g_free(apps);
}

#endif
