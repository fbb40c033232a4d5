#include <libsecret/secret.h>
#include <gcrypt.h>
#include <glib-unix.h>
#include <sys/inotify.h>

/* libgcrypt's setup as a library must do it (gcry_control is variadic, so not callable from
 * Swift): only when neither the application nor another library (libsecret does the same) has
 * finished it. Returns 0 when the loaded libgcrypt is older than the headers or not operational
 * (libgcrypt aborts the process when most functions are called in that state). */
static inline int portal_gcrypt_initialize(void)
{
    if (!gcry_control(GCRYCTL_INITIALIZATION_FINISHED_P)) {
        if (!gcry_check_version(GCRYPT_VERSION))
            return 0;
        gcry_control(GCRYCTL_INITIALIZATION_FINISHED, 0);
    }
    return gcry_control(GCRYCTL_OPERATIONAL_P) ? 1 : 0;
}
