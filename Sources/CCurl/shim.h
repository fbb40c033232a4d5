/* libcurl's declarations only: the library is loaded with dlopen on the first HTTP request
 * (Sources/PortalKeyringCore/HTTP/Curl.swift), so a host that only restores sessions never loads it. */
#include <curl/curl.h>
/* curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: typed wrappers
 * that call the dlsym'd function through its real (variadic) type. */
typedef CURLcode (*portal_curl_variadic_fn)(CURL *, int, ...);
static inline CURLcode portal_curl_setopt_long(void *fn, CURL *c, CURLoption o, long v) {
    return ((portal_curl_variadic_fn)fn)(c, (int)o, v);
}
static inline CURLcode portal_curl_setopt_ptr(void *fn, CURL *c, CURLoption o, const void *v) {
    return ((portal_curl_variadic_fn)fn)(c, (int)o, v);
}
static inline CURLcode portal_curl_setopt_write(void *fn, CURL *c, size_t (*f)(char *, size_t, size_t, void *)) {
    return ((portal_curl_variadic_fn)fn)(c, (int)CURLOPT_WRITEFUNCTION, f);
}
static inline CURLcode portal_curl_setopt_xferinfo(void *fn, CURL *c,
                                                   int (*f)(void *, curl_off_t, curl_off_t, curl_off_t, curl_off_t)) {
    return ((portal_curl_variadic_fn)fn)(c, (int)CURLOPT_XFERINFOFUNCTION, f);
}
static inline CURLcode portal_curl_getinfo_long(void *fn, CURL *c, CURLINFO i, long *v) {
    return ((portal_curl_variadic_fn)fn)(c, (int)i, v);
}
static inline CURLcode portal_curl_getinfo_off(void *fn, CURL *c, CURLINFO i, curl_off_t *v) {
    return ((portal_curl_variadic_fn)fn)(c, (int)i, v);
}
/* The usable size of a malloc'd block (glibc's <malloc.h>, which the Swift Glibc module does not
 * export): the wiping allocator given to curl_global_init_mem wipes that many bytes. */
#include <malloc.h>
static inline size_t portal_malloc_usable_size(void *block) { return malloc_usable_size(block); }
/* prctl is variadic, which Swift cannot call: PR_SET_DUMPABLE / PR_GET_DUMPABLE for
 * ProcessHardening.swift (the portal-session command makes itself non-dumpable). */
#include <sys/prctl.h>
static inline int portal_prctl_set_dumpable(int dumpable) {
    return prctl(PR_SET_DUMPABLE, (unsigned long)dumpable, 0UL, 0UL, 0UL);
}
static inline int portal_prctl_get_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0UL, 0UL, 0UL, 0UL); }
