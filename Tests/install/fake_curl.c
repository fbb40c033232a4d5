/*
 * fake_curl.c — a stand-in libcurl.so.4 that a local attacker could place next to the installed
 * library. Its constructor writes the file named by FAKE_CURL_MARKER (default
 * /tmp/fake-curl-loaded): if that file appears, the fake was loaded and its code ran.
 *
 *   cc -shared -fPIC -o libcurl.so.4 fake_curl.c
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void fake_curl_loaded(void) {
    const char *path = getenv("FAKE_CURL_MARKER");
    int fd = open(path ? path : "/tmp/fake-curl-loaded", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        (void)!write(fd, "loaded\n", 7);
        close(fd);
    }
}
