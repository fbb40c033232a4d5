/*
 * secret-paths-check.c — the build's check of the libsecret functions the keyring adapter relies
 * on beyond libsecret's stable API (secret-paths.h and the session accessors, marked
 * SECRET_API_SUBJECT_TO_CHANGE). Compiled with -Werror by scripts/test.sh and `make`: a libsecret
 * that drops or changes one of them fails the build here, naming the function, instead of
 * misbehaving at run time. Sources/PortalKeyring/SecretService/SecretBus.swift uses them to encrypt
 * and decrypt secrets with the transfer session (the token never crosses the bus in clear:
 * Tests/providers/run.sh checks a bus capture on every provider).
 */
#define SECRET_WITH_UNSTABLE 1
#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <libsecret/secret.h>

GVariant *(*const check_encode)(SecretService *, SecretValue *) = secret_service_encode_dbus_secret;
SecretValue *(*const check_decode)(SecretService *, GVariant *) = secret_service_decode_dbus_secret;
const gchar *(*const check_session_path)(SecretService *) = secret_service_get_session_dbus_path;
gboolean (*const check_ensure_session)(SecretService *, GCancellable *, GError **) = secret_service_ensure_session_sync;
const gchar *(*const check_algorithms)(SecretService *) = secret_service_get_session_algorithms;
GType (*const check_service_type)(void) = secret_service_get_type;

#if !SECRET_CHECK_VERSION(0, 20, 0)
#error "libsecret 0.20 or later is required"
#endif

int main(void) {
    return 0;
}
