/*
 * curl_search.c — which libcurl the installed library loads.
 *
 *   cc curl_search.c $(pkg-config --cflags --libs portal-keyring) -Wl,-rpath,LIBDIR -o curl_search
 *   ./curl_search
 *
 * Makes the library load libcurl (portal_request to 127.0.0.1 port 9, which refuses the
 * connection) and prints the outcome: "network: <message>" when a real libcurl reached the
 * network step. Tests/install/run.sh puts a fake libcurl.so.4 next to the installed library
 * first; its constructor leaves a file, which must not appear.
 */
#include <portal_keyring.h>
#include <stdio.h>

int main(void) {
    portal *p = NULL;
    if (portal_new_with_api_key(&p, "curl-search-key", "127.0.0.1:9") != PORTAL_OK) {
        fprintf(stderr, "portal_new_with_api_key: %s\n", portal_last_error_message());
        return 2;
    }
    long status = 0;
    portal_status st = portal_request(p, "GET", "/api/v3/clients/me", NULL, &status, NULL, NULL);
    printf("%s: %s\n", portal_status_str(st), portal_last_error_message());
    portal_free(p);
    return st == PORTAL_ERR_NETWORK ? 0 : 1;
}
