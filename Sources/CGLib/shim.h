#include <libsecret/secret.h>
#include <gcrypt.h>
#include <glib-unix.h>
#include <sys/inotify.h>

/* libgcrypt's setup as a library must do it (gcry_control is variadic, so not callable from
 * Swift): only when neither the application nor another library (libsecret does the same) has
 * finished it. Returns 0 when the loaded libgcrypt is older than the headers or not operational
 * (libgcrypt aborts the process when most functions are called in that state).
 * The transfer session's exponent is a secure-memory MPI (TransferCrypto.swift): libgcrypt sets
 * up its secure pool on the first one, and where it cannot lock the pool (RLIMIT_MEMLOCK without
 * CAP_IPC_LOCK) it printed "Warning: using insecure memory!" on the host's stderr; a library has
 * no business writing there, and the pool is still wiped. */
static inline int portal_gcrypt_initialize(void)
{
    if (!gcry_control(GCRYCTL_INITIALIZATION_FINISHED_P)) {
        if (!gcry_check_version(GCRYPT_VERSION))
            return 0;
        gcry_control(GCRYCTL_DISABLE_SECMEM_WARN, 0);
        gcry_control(GCRYCTL_INITIALIZATION_FINISHED, 0);
    }
    return gcry_control(GCRYCTL_OPERATIONAL_P) ? 1 : 0;
}

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>
/* renameat2(2), through syscall(): glibc declares it only under _GNU_SOURCE, which the Swift
 * importer does not see here. The file keyring's writer replaces the file and checks what it
 * replaced in one step (RENAME_EXCHANGE), or creates it only where none is (RENAME_NOREPLACE).
 * -1 with errno ENOSYS on a kernel without it (before 3.15), EINVAL on a filesystem without it. */
#define PORTAL_RENAME_NOREPLACE 1u
#define PORTAL_RENAME_EXCHANGE 2u
static inline int portal_renameat2(const char *from, const char *to, unsigned int flags)
{
    return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, flags);
}
