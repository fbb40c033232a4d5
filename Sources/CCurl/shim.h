#include <curl/curl.h>
/* curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: typed wrappers. */
static inline CURLcode portal_curl_setopt_long(CURL *c, CURLoption o, long v) { return curl_easy_setopt(c, o, v); }
static inline CURLcode portal_curl_setopt_ptr(CURL *c, CURLoption o, const void *v) { return curl_easy_setopt(c, o, v); }
static inline CURLcode portal_curl_setopt_write(CURL *c, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, f); }
static inline CURLcode portal_curl_getinfo_long(CURL *c, CURLINFO i, long *v) { return curl_easy_getinfo(c, i, v); }
