/*
 * header_test.c — Include/portal_keyring.h compiles cleanly as C99 and as C++11, and declares
 * every function of the C ABI with the expected signature.
 *
 * Tests/c/run.sh builds and runs it both ways; by hand, from the repository root:
 *
 *   gcc -std=c99 -Wall -Wextra -pedantic -Werror -IInclude Tests/c/header_test.c \
 *       -o build/c/header_test_c -L.build/debug -lportal-keyring -Wl,-rpath,$PWD/.build/debug
 *   g++ -std=c++11 -Wall -Wextra -pedantic -Werror -x c++ -IInclude Tests/c/header_test.c \
 *       -o build/c/header_test_cxx -L.build/debug -lportal-keyring -Wl,-rpath,$PWD/.build/debug
 *   build/c/header_test_c && build/c/header_test_cxx
 *
 * A missing or changed declaration is a compile error (each function is assigned to a pointer
 * of its exact type); a missing export is a link error. Running it needs no keyring.
 */
#include "portal_keyring.h"
/* A second inclusion must be harmless (include guard). */
#include "portal_keyring.h"

#include <stdio.h>
#include <string.h>

/* Compile-time checks (C99 and C++11 alike): a negative array size fails the build. */
#define STATIC_CHECK(name, cond) typedef char static_check_##name[(cond) ? 1 : -1]

STATIC_CHECK(version_number,
             PORTAL_KEYRING_VERSION_NUMBER == PORTAL_KEYRING_VERSION_MAJOR * 1000000 +
                                                  PORTAL_KEYRING_VERSION_MINOR * 1000 +
                                                  PORTAL_KEYRING_VERSION_PATCH);
STATIC_CHECK(ok_is_zero, PORTAL_OK == 0);
STATIC_CHECK(invalid_argument, PORTAL_ERR_INVALID_ARGUMENT == 1);
STATIC_CHECK(session_storage, PORTAL_ERR_SESSION_STORAGE == 2);
STATIC_CHECK(session_invalidated, PORTAL_ERR_SESSION_INVALIDATED == 3);
STATIC_CHECK(unauthorized, PORTAL_ERR_UNAUTHORIZED == 4);
STATIC_CHECK(network, PORTAL_ERR_NETWORK == 5);
STATIC_CHECK(internal, PORTAL_ERR_INTERNAL == 6);

/* Every function, through a pointer of its exact type (a changed signature fails to compile). */
static uint32_t (*const typed_portal_keyring_version_number)(void) = portal_keyring_version_number;
static const char *(*const typed_portal_keyring_version)(void) = portal_keyring_version;
static const char *(*const typed_portal_status_str)(portal_status) = portal_status_str;
static const char *(*const typed_portal_last_error_message)(void) = portal_last_error_message;
static void (*const typed_portal_string_free)(char *) = portal_string_free;
static portal_status (*const typed_portal_auth_new)(portal_auth **, const char *, const char *,
                                                    const char *) = portal_auth_new;
static void (*const typed_portal_auth_free)(portal_auth *) = portal_auth_free;
static portal_status (*const typed_portal_auth_set_keyring_timeouts)(portal_auth *, uint32_t, uint32_t) =
    portal_auth_set_keyring_timeouts;
static portal_status (*const typed_portal_auth_restore_session)(portal_auth *, portal_session **) =
    portal_auth_restore_session;
static portal_status (*const typed_portal_auth_clear_persisted_session)(portal_auth *) =
    portal_auth_clear_persisted_session;
static portal_status (*const typed_portal_auth_persist_session)(portal_auth *, const char *, const char *,
                                                                portal_session **) =
    portal_auth_persist_session;
static const char *(*const typed_portal_session_get_end_user_id)(const portal_session *) =
    portal_session_get_end_user_id;
static const char *(*const typed_portal_session_get_auth_environment_id)(const portal_session *) =
    portal_session_get_auth_environment_id;
static portal_status (*const typed_portal_session_copy_token)(const portal_session *, char **) =
    portal_session_copy_token;
static void (*const typed_portal_session_free)(portal_session *) = portal_session_free;
static portal_status (*const typed_portal_session_invalidate)(portal_session *) = portal_session_invalidate;
static portal_status (*const typed_portal_new)(portal **, const portal_session *, const char *) = portal_new;
static portal_status (*const typed_portal_new_with_api_key)(portal **, const char *, const char *) =
    portal_new_with_api_key;
static void (*const typed_portal_free)(portal *) = portal_free;
static portal_status (*const typed_portal_on_session_invalidated)(portal *, portal_session_invalidated_cb, void *,
                                                                  portal_destroy_notify, uint64_t *) =
    portal_on_session_invalidated;
static portal_status (*const typed_portal_listener_cancel)(portal *, uint64_t) = portal_listener_cancel;
static portal_status (*const typed_portal_report_unauthorized)(portal *, const char *, bool *) =
    portal_report_unauthorized;
static portal_status (*const typed_portal_clear_session)(portal *) = portal_clear_session;
static portal_status (*const typed_portal_request)(portal *, const char *, const char *, const char *, long *, char **,
                                                   size_t *) = portal_request;
static portal_status (*const typed_portal_auth_get_methods)(portal_auth *, char **, bool *) = portal_auth_get_methods;
static portal_status (*const typed_portal_auth_send_magic_link)(portal_auth *, const char *) = portal_auth_send_magic_link;
static portal_status (*const typed_portal_auth_set_magic_link)(portal_auth *, const char *, const char *) = portal_auth_set_magic_link;
static portal_status (*const typed_portal_auth_set_account_abstraction)(portal_auth *, portal_account_abstraction) =
    portal_auth_set_account_abstraction;
static portal_status (*const typed_portal_auth_login_with_google)(portal_auth *, char **) = portal_auth_login_with_google;
static portal_status (*const typed_portal_auth_login_with_apple)(portal_auth *, char **) = portal_auth_login_with_apple;
static portal_status (*const typed_portal_auth_handle_redirect)(portal_auth *, const char *, portal_redirect_kind *,
                                                                portal_session **, char **, char **) = portal_auth_handle_redirect;
static portal_status (*const typed_portal_auth_handle_redirect_v2)(portal_auth *, const char *, uint32_t, portal_redirect_kind *,
                                                                   portal_session **, char **, char **) = portal_auth_handle_redirect_v2;
static portal_status (*const typed_portal_auth_verify_totp)(portal_auth *, const char *, const char *,
                                                            portal_session **) = portal_auth_verify_totp;
static portal_status (*const typed_portal_auth_sign_in_with_google)(portal_auth *, uint32_t, portal_redirect_kind *,
                                                                    portal_session **, char **, char **) =
    portal_auth_sign_in_with_google;
static portal_status (*const typed_portal_auth_sign_in_with_apple)(portal_auth *, uint32_t, portal_redirect_kind *,
                                                                   portal_session **, char **, char **) =
    portal_auth_sign_in_with_apple;
/* What a sign-in says besides the session. */
static const char *(*const typed_portal_session_get_client_id)(const portal_session *) = portal_session_get_client_id;
static int (*const typed_portal_session_get_is_account_abstracted)(const portal_session *) =
    portal_session_get_is_account_abstracted;
static portal_status (*const typed_portal_user_jwt_get_end_user_id)(const char *, char **) = portal_user_jwt_get_end_user_id;
static portal_status (*const typed_portal_totp_link_get_secret)(const char *, char **) = portal_totp_link_get_secret;
static portal_status (*const typed_portal_totp_qr_code)(const char *, size_t *, char **) = portal_totp_qr_code;
static portal_status (*const typed_portal_totp_qr_svg)(const char *, char **) = portal_totp_qr_svg;

/* The non-blocking calls. */
static portal_status (*const typed_portal_completion_queue_new_for_main_context)(portal_completion_queue **, void *) =
    portal_completion_queue_new_for_main_context;
static portal_status (*const typed_portal_completion_queue_new_pollable)(portal_completion_queue **) = portal_completion_queue_new_pollable;
static int (*const typed_portal_completion_queue_get_fd)(const portal_completion_queue *) = portal_completion_queue_get_fd;
static portal_status (*const typed_portal_completion_queue_dispatch)(portal_completion_queue *, size_t *) = portal_completion_queue_dispatch;
static void (*const typed_portal_completion_queue_free)(portal_completion_queue *) = portal_completion_queue_free;
static portal_status (*const typed_portal_operation_cancel)(uint64_t) = portal_operation_cancel;
static portal_status (*const typed_portal_auth_restore_session_async)(portal_auth *, portal_completion_queue *, portal_completion_cb,
                                                                      void *, portal_destroy_notify, uint64_t *) =
    portal_auth_restore_session_async;
static portal_status (*const typed_portal_auth_persist_session_async)(portal_auth *, const char *, const char *,
                                                                      portal_completion_queue *, portal_completion_cb, void *,
                                                                      portal_destroy_notify, uint64_t *) =
    portal_auth_persist_session_async;
static portal_status (*const typed_portal_auth_clear_persisted_session_async)(portal_auth *, portal_completion_queue *,
                                                                              portal_completion_cb, void *, portal_destroy_notify,
                                                                              uint64_t *) = portal_auth_clear_persisted_session_async;
static portal_status (*const typed_portal_session_invalidate_async)(portal_session *, portal_completion_queue *, portal_completion_cb,
                                                                    void *, portal_destroy_notify, uint64_t *) =
    portal_session_invalidate_async;
static portal_status (*const typed_portal_request_async)(portal *, const char *, const char *, const char *, portal_completion_queue *,
                                                         portal_completion_cb, void *, portal_destroy_notify, uint64_t *) =
    portal_request_async;
static portal_status (*const typed_portal_report_unauthorized_async)(portal *, const char *, portal_completion_queue *,
                                                                     portal_completion_cb, void *, portal_destroy_notify,
                                                                     uint64_t *) = portal_report_unauthorized_async;
static portal_status (*const typed_portal_clear_session_async)(portal *, portal_completion_queue *, portal_completion_cb, void *,
                                                               portal_destroy_notify, uint64_t *) = portal_clear_session_async;
static portal_status (*const typed_portal_on_session_invalidated_queued)(portal *, portal_completion_queue *,
                                                                         portal_session_invalidated_cb, void *,
                                                                         portal_destroy_notify, uint64_t *) =
    portal_on_session_invalidated_queued;
static portal_status (*const typed_portal_free_async)(portal *, portal_completion_queue *, portal_completion_cb, void *,
                                                      portal_destroy_notify) = portal_free_async;
static portal_status (*const typed_portal_auth_get_methods_async)(portal_auth *, portal_completion_queue *, portal_sign_in_cb,
                                                                 void *, portal_destroy_notify, uint64_t *) =
    portal_auth_get_methods_async;
static portal_status (*const typed_portal_auth_send_magic_link_async)(portal_auth *, const char *, portal_completion_queue *,
                                                                     portal_sign_in_cb, void *, portal_destroy_notify,
                                                                     uint64_t *) = portal_auth_send_magic_link_async;
static portal_status (*const typed_portal_auth_login_with_google_async)(portal_auth *, portal_completion_queue *, portal_sign_in_cb,
                                                                       void *, portal_destroy_notify, uint64_t *) =
    portal_auth_login_with_google_async;
static portal_status (*const typed_portal_auth_login_with_apple_async)(portal_auth *, portal_completion_queue *, portal_sign_in_cb,
                                                                      void *, portal_destroy_notify, uint64_t *) =
    portal_auth_login_with_apple_async;
static portal_status (*const typed_portal_auth_handle_redirect_async)(portal_auth *, const char *, uint32_t,
                                                                     portal_completion_queue *, portal_sign_in_cb, void *,
                                                                     portal_destroy_notify, uint64_t *) =
    portal_auth_handle_redirect_async;
static portal_status (*const typed_portal_auth_sign_in_with_google_async)(portal_auth *, uint32_t, portal_completion_queue *,
                                                                          portal_sign_in_cb, void *, portal_destroy_notify,
                                                                          uint64_t *) = portal_auth_sign_in_with_google_async;
static portal_status (*const typed_portal_auth_sign_in_with_apple_async)(portal_auth *, uint32_t, portal_completion_queue *,
                                                                         portal_sign_in_cb, void *, portal_destroy_notify,
                                                                         uint64_t *) = portal_auth_sign_in_with_apple_async;
static portal_status (*const typed_portal_auth_watch)(portal_auth *, portal_completion_queue *, portal_watch_cb, void *,
                                                     portal_destroy_notify, portal_watch **) = portal_auth_watch;
static portal_status (*const typed_portal_auth_watch_async)(portal_auth *, portal_completion_queue *, portal_watch_cb, void *,
                                                           portal_destroy_notify, portal_watch **) = portal_auth_watch_async;
static void (*const typed_portal_watch_free)(portal_watch *) = portal_watch_free;
static portal_watch_origin (*const typed_portal_watch_current_origin)(void) = portal_watch_current_origin;
static portal_status (*const typed_portal_auth_verify_totp_async)(portal_auth *, const char *, const char *,
                                                                 portal_completion_queue *, portal_sign_in_cb, void *,
                                                                 portal_destroy_notify, uint64_t *) = portal_auth_verify_totp_async;
static void sample_sign_in(portal_status status, portal_sign_in_result *result, const char *message, void *user_data) {
    (void)status; (void)result; (void)message; (void)user_data;
}
static const portal_sign_in_cb sample_signed_in = sample_sign_in;
static void sample_completion(portal_status status, portal_result *result, const char *message, void *user_data) {
    (void)status; (void)result; (void)message; (void)user_data;
}
static const portal_completion_cb sample_completed = sample_completion;

/* The callback typedefs have the documented shapes. */
static void sample_callback(void *user_data) { (void)user_data; }
static const portal_session_invalidated_cb sample_invalidated = sample_callback;
static const portal_destroy_notify sample_destroy = sample_callback;

/* Each function's name, address and typed pointer in one row (void (*)(void) is the generic
 * function pointer); a typed pointer without its row is unused, an error in the C build. */
typedef void (*any_function)(void);
#define ENTRY(f) { #f, (any_function)(f), (any_function)(typed_##f) }

int main(void) {
    /* A local table: its rows read the typed pointers, which C99 allows only in an automatic
     * initializer (they are const variables, not constant expressions). */
    const struct {
        const char *name;
        any_function address;
        any_function typed; /* the same function through its typed pointer above */
    } functions[] = {
        ENTRY(portal_keyring_version_number),
        ENTRY(portal_keyring_version),
        ENTRY(portal_status_str),
        ENTRY(portal_last_error_message),
        ENTRY(portal_string_free),
        ENTRY(portal_auth_new),
        ENTRY(portal_auth_free),
        ENTRY(portal_auth_set_keyring_timeouts),
        ENTRY(portal_auth_restore_session),
        ENTRY(portal_auth_clear_persisted_session),
        ENTRY(portal_auth_persist_session),
        ENTRY(portal_session_get_end_user_id),
        ENTRY(portal_session_get_auth_environment_id),
        ENTRY(portal_session_copy_token),
        ENTRY(portal_session_free),
        ENTRY(portal_session_invalidate),
        ENTRY(portal_new),
        ENTRY(portal_new_with_api_key),
        ENTRY(portal_free),
        ENTRY(portal_on_session_invalidated),
        ENTRY(portal_listener_cancel),
        ENTRY(portal_report_unauthorized),
        ENTRY(portal_clear_session),
        ENTRY(portal_request),
        ENTRY(portal_auth_get_methods),
        ENTRY(portal_auth_send_magic_link),
        ENTRY(portal_auth_login_with_google),
        ENTRY(portal_auth_login_with_apple),
        ENTRY(portal_auth_handle_redirect),
        ENTRY(portal_auth_verify_totp),
        ENTRY(portal_auth_handle_redirect_v2),
        ENTRY(portal_completion_queue_new_for_main_context),
        ENTRY(portal_completion_queue_new_pollable),
        ENTRY(portal_completion_queue_get_fd),
        ENTRY(portal_completion_queue_dispatch),
        ENTRY(portal_completion_queue_free),
        ENTRY(portal_operation_cancel),
        ENTRY(portal_auth_restore_session_async),
        ENTRY(portal_auth_persist_session_async),
        ENTRY(portal_auth_clear_persisted_session_async),
        ENTRY(portal_session_invalidate_async),
        ENTRY(portal_request_async),
        ENTRY(portal_report_unauthorized_async),
        ENTRY(portal_clear_session_async),
        ENTRY(portal_on_session_invalidated_queued),
        ENTRY(portal_free_async),
        ENTRY(portal_auth_get_methods_async),
        ENTRY(portal_auth_send_magic_link_async),
        ENTRY(portal_auth_login_with_google_async),
        ENTRY(portal_auth_login_with_apple_async),
        ENTRY(portal_auth_handle_redirect_async),
        ENTRY(portal_auth_verify_totp_async),
        ENTRY(portal_auth_sign_in_with_google),
        ENTRY(portal_auth_sign_in_with_apple),
        ENTRY(portal_auth_sign_in_with_google_async),
        ENTRY(portal_auth_sign_in_with_apple_async),
        ENTRY(portal_auth_watch),
        ENTRY(portal_auth_watch_async),
        ENTRY(portal_watch_free),
        ENTRY(portal_watch_current_origin),
        ENTRY(portal_session_get_client_id),
        ENTRY(portal_session_get_is_account_abstracted),
        ENTRY(portal_user_jwt_get_end_user_id),
        ENTRY(portal_totp_link_get_secret),
        ENTRY(portal_auth_set_magic_link),
        ENTRY(portal_auth_set_account_abstraction),
        ENTRY(portal_totp_qr_code),
        ENTRY(portal_totp_qr_svg),
    };
    const size_t n = sizeof functions / sizeof functions[0];
    size_t i;
    int failures = 0;
    portal_status status = PORTAL_OK;
    bool flag = true; /* <stdbool.h> comes with the header */
    size_t size = sizeof(portal_status);
    int64_t wide = 0; /* <stdint.h> too */

    for (i = 0; i < n; i++) {
        if (functions[i].address == NULL || functions[i].address != functions[i].typed) {
            fprintf(stderr, "header_test: %s has no address\n", functions[i].name);
            failures++;
        }
    }
    /* Calls that need no keyring: the header and the loaded library agree. */
    if (portal_keyring_version_number() != PORTAL_KEYRING_VERSION_NUMBER ||
        strcmp(portal_keyring_version(), PORTAL_KEYRING_VERSION_STRING) != 0) {
        fprintf(stderr, "header_test: header %s (%d) but library %s (%u)\n",
                PORTAL_KEYRING_VERSION_STRING, PORTAL_KEYRING_VERSION_NUMBER,
                portal_keyring_version(), (unsigned)portal_keyring_version_number());
        failures++;
    }
    if (strcmp(portal_status_str(status), "ok") != 0 || !flag || size == 0 || wide != 0) failures++;
    sample_completed(PORTAL_ERR_CANCELLED, NULL, "", NULL);
    sample_signed_in(PORTAL_ERR_CANCELLED, NULL, "", NULL);
    sample_invalidated(NULL);
    sample_destroy(NULL);

    printf("header_test (%s): %u functions declared and linked, %s\n",
#ifdef __cplusplus
           "C++",
#else
           "C",
#endif
           (unsigned)n, failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
