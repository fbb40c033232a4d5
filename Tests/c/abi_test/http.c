/*
 * abi_test: a loopback stand-in for the Portal API, and the invalidation listeners' helpers.
 */
#include "abi_test.h"

/* A minimal HTTP/1.1 responder on 127.0.0.1 (one request per connection) standing in for the
 * Portal API, so that the portal_* functions are exercised without the network. Every response
 * has the status in `http_status`; requests are counted and the last one recorded. */
int http_port;
static int http_status = 200;
static pthread_mutex_t http_lock = PTHREAD_MUTEX_INITIALIZER;
static int http_requests;
static char http_last_line[512];
static char http_last_auth[1024];

static void *http_server(void *arg) {
    int listener = *(int *)arg;
    for (;;) {
        int c = accept(listener, NULL, NULL);
        if (c < 0) continue;
        char req[16384];
        size_t len = 0;
        char *end = NULL;
        while (len < sizeof req - 1) {
            ssize_t n = read(c, req + len, sizeof req - 1 - len);
            if (n <= 0) break;
            len += (size_t)n;
            req[len] = '\0';
            if ((end = strstr(req, "\r\n\r\n")) != NULL) break;
        }
        if (!end) {
            close(c);
            continue;
        }
        /* Read (and drop) a body announced by Content-Length. */
        const char *cl = strcasestr(req, "\r\ncontent-length:");
        long body = cl ? strtol(cl + 17, NULL, 10) : 0;
        long have = (long)(len - (size_t)(end + 4 - req));
        char sink[4096];
        while (have < body) {
            ssize_t n = read(c, sink, sizeof sink);
            if (n <= 0) break;
            have += n;
        }
        pthread_mutex_lock(&http_lock);
        http_requests++;
        snprintf(http_last_line, sizeof http_last_line, "%.*s", (int)strcspn(req, "\r\n"), req);
        const char *auth = strcasestr(req, "\r\nauthorization:");
        if (auth) {
            auth += 16;
            while (*auth == ' ') auth++;
            snprintf(http_last_auth, sizeof http_last_auth, "%.*s", (int)strcspn(auth, "\r\n"), auth);
        } else {
            http_last_auth[0] = '\0';
        }
        int status = http_status;
        pthread_mutex_unlock(&http_lock);
        const char *payload = status == 200 ? "{\"data\":{\"id\":\"client-abi\",\"endUserId\":\"u\"}}"
                              : status == 401 ? "{}"
                                              : "{\"error\":\"injected\",\"code\":\"INJECTED\"}";
        char resp[1024];
        int n = snprintf(resp, sizeof resp,
                         "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                         "%sConnection: close\r\n\r\n%s",
                         status, status == 200 ? "OK" : status == 401 ? "Unauthorized" : "Error",
                         strlen(payload), status == 401 ? "WWW-Authenticate: Bearer\r\n" : "", payload);
        if (write(c, resp, (size_t)n) < 0) {
        }
        close(c);
    }
    return NULL;
}

void http_start(void) {
    static int listener = -1;
    if (listener >= 0) return;
    listener = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(listener >= 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(listener, (struct sockaddr *)&addr, sizeof addr) == 0);
    CHECK(listen(listener, 64) == 0);
    socklen_t alen = sizeof addr;
    CHECK(getsockname(listener, (struct sockaddr *)&addr, &alen) == 0);
    http_port = ntohs(addr.sin_port);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, http_server, &listener) == 0);
    pthread_detach(t);
}

/* Starts the server (once) and writes its "127.0.0.1:PORT" into host. */
void http_host(char *host, size_t size) {
    http_start();
    snprintf(host, size, "127.0.0.1:%d", http_port);
}

void http_set_status(int status) {
    pthread_mutex_lock(&http_lock);
    http_status = status;
    pthread_mutex_unlock(&http_lock);
}

int http_count(void) {
    pthread_mutex_lock(&http_lock);
    int n = http_requests;
    pthread_mutex_unlock(&http_lock);
    return n;
}

/* A loopback port with nothing listening. */
int closed_port(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(s >= 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(s, (struct sockaddr *)&addr, sizeof addr) == 0);
    socklen_t alen = sizeof addr;
    CHECK(getsockname(s, (struct sockaddr *)&addr, &alen) == 0);
    close(s);
    return ntohs(addr.sin_port);
}

void on_invalidated(void *user_data) {
    listener_state *s = user_data;
    __atomic_add_fetch(&s->calls, 1, __ATOMIC_SEQ_CST);
}

void on_destroy(void *user_data) {
    listener_state *s = user_data;
    if (__atomic_load_n(&s->calls, __ATOMIC_SEQ_CST) == 0)
        __atomic_store_n(&s->destroyed_before_call, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&s->destroys, 1, __ATOMIC_SEQ_CST);
}

int load(const int *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }

/* Polls until *p == want or timeout; returns whether it got there. */
int wait_for(const int *p, int want, int timeout_ms) {
    double deadline = now_ms() + timeout_ms;
    while (load(p) != want && now_ms() < deadline) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return load(p) == want;
}

void pause_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The server got `count` requests, the last one `line` with `Authorization: Bearer token`. */
void wait_for_request(int count, const char *line, const char *token) {
    double deadline = now_ms() + 5000;
    while (http_count() < count && now_ms() < deadline) pause_ms(5);
    pthread_mutex_lock(&http_lock);
    int n = http_requests;
    char got_line[512], got_auth[1024];
    snprintf(got_line, sizeof got_line, "%s", http_last_line);
    snprintf(got_auth, sizeof got_auth, "%s", http_last_auth);
    pthread_mutex_unlock(&http_lock);
    CHECK_MSG(n == count, "%d requests, expected %d", n, count);
    CHECK_MSG(strncmp(got_line, line, strlen(line)) == 0, "request line \"%s\", expected \"%s\"", got_line, line);
    char want_auth[1024];
    snprintf(want_auth, sizeof want_auth, "Bearer %s", token);
    CHECK_MSG(strcmp(got_auth, want_auth) == 0, "authorization \"%s\"", got_auth);
}
