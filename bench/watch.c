/*
 * watch.c — the session watch's benchmark: how soon a watch in process B learns of a persist in process A.
 *
 *   watch ROUNDS IDLE_SECONDS     (inside scripts/with-keyring.sh; run by bench/bench.py)
 *
 * B (this process) starts A (itself, `watch --actor`) with two pipes, then for each round:
 *   1. raw signal: A stamps the time and emits a D-Bus signal (io.portalhq.Bench.Ping) on the
 *      session bus; B, subscribed on its own GDBus connection, stamps its arrival;
 *   2. A persists a new sign-in (portal_auth_persist_session) and stamps the time it returned;
 *      B stamps the PORTAL_WATCH_SIGNED_IN callback of its portal_auth_watch (a main-context
 *      queue on the same loop as the raw subscription);
 *   3. 250 ms pause, so that every round measures an isolated change (the watch spaces its
 *      keyring reads 100 ms apart while signals keep coming: a change right after another one
 *      waits for that spacing, by design).
 * After the rounds (and 1 s for A's final clear to settle), the idle figure.
 * Prints one line per round: "RAW_NS WATCH_FROM_RETURN_NS WATCH_FROM_START_NS" (signed: the watch
 * reads at ItemCreated, which the provider emits before A's persist has returned), then
 * "IDLE WAKEUPS_PER_MINUTE" of the portal-watch thread over IDLE_SECONDS without changes.
 */
#define _GNU_SOURCE 1
#include <portal_keyring.h>

#include <dirent.h>
#include <gio/gio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"

static int64_t now_ns(void) { return (int64_t)bench_now_ns(); }

static int actor(int in, int out, const char *env) {
    portal_auth *auth = NULL;
    if (portal_auth_new(&auth, env, BENCH_REDIRECT_URL, NULL) != PORTAL_OK) return 2;
    GDBusConnection *bus = g_bus_get_sync(G_BUS_TYPE_SESSION, NULL, NULL);
    if (!bus) return 2;
    char command;
    int round = 0;
    while (read(in, &command, 1) == 1) {
        int64_t stamps[2] = {0, 0};
        if (command == 'p') {
            stamps[0] = now_ns();
            g_dbus_connection_emit_signal(bus, NULL, "/io/portalhq/Bench", "io.portalhq.Bench", "Ping",
                                          g_variant_new("(x)", (gint64)stamps[0]), NULL);
            g_dbus_connection_flush_sync(bus, NULL, NULL);
        } else if (command == 's') {
            char user[32];
            snprintf(user, sizeof user, "eu_watch_%d", round++);
            portal_session *session = NULL;
            stamps[0] = now_ns();
            if (portal_auth_persist_session(auth, user, BENCH_TOKEN, &session) != PORTAL_OK) return 1;
            stamps[1] = now_ns();
            portal_session_free(session);
        } else {
            break;
        }
        if (write(out, stamps, sizeof stamps) != sizeof stamps) return 1;
    }
    portal_auth_clear_persisted_session(auth);
    portal_auth_free(auth);
    g_object_unref(bus);
    return 0;
}

static int64_t raw_arrival, watch_arrival;

static void on_ping(GDBusConnection *c, const gchar *s, const gchar *p, const gchar *i, const gchar *n,
                    GVariant *parameters, gpointer data) {
    (void)c, (void)s, (void)p, (void)i, (void)n, (void)parameters, (void)data;
    raw_arrival = now_ns();
}

static void on_change(portal_watch_event event, const char *end_user_id, void *data) {
    (void)end_user_id, (void)data;
    if (event == PORTAL_WATCH_SIGNED_IN) watch_arrival = now_ns();
}

static gboolean set_flag(gpointer flag) {
    *(int *)flag = 1;
    return G_SOURCE_REMOVE;
}

/* Runs the default main context (blocking in poll) until *stamp is set or limit_ms passed. */
static void wait_for(int64_t *stamp, guint limit_ms) {
    int expired = 0;
    guint timer = g_timeout_add(limit_ms, set_flag, &expired);
    while (*stamp == 0 && !expired) g_main_context_iteration(NULL, TRUE);
    if (!expired) g_source_remove(timer);
}

static long watch_switches(void) {
    DIR *dir = opendir("/proc/self/task");
    long total = -1;
    struct dirent *entry;
    while (dir && (entry = readdir(dir))) {
        char path[300], comm[64] = "", line[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", entry->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(comm, sizeof comm, f)) comm[0] = '\0';
        fclose(f);
        if (strcmp(comm, "portal-watch\n") != 0) continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", entry->d_name);
        if (!(f = fopen(path, "r"))) continue;
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0) total = (total < 0 ? 0 : total) + atol(line + 24);
        fclose(f);
    }
    if (dir) closedir(dir);
    return total;
}

int main(int argc, char **argv) {
    char env[64];
    if (argc == 5 && strcmp(argv[1], "--actor") == 0) return actor(atoi(argv[2]), atoi(argv[3]), argv[4]);
    if (argc != 3) {
        fprintf(stderr, "usage: watch ROUNDS IDLE_SECONDS\n");
        return 64;
    }
    int rounds = atoi(argv[1]), idle = atoi(argv[2]);
    snprintf(env, sizeof env, "bench-watch-%d", (int)getpid());
    int to_actor[2], from_actor[2];
    if (pipe(to_actor) || pipe(from_actor)) return 2;
    pid_t pid = fork();
    if (pid == 0) {
        char in[16], out[16], self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) _exit(2);
        self[n] = '\0';
        close(to_actor[1]), close(from_actor[0]);
        snprintf(in, sizeof in, "%d", to_actor[0]);
        snprintf(out, sizeof out, "%d", from_actor[1]);
        execl(self, self, "--actor", in, out, env, (char *)NULL);
        _exit(2);
    }
    close(to_actor[0]), close(from_actor[1]);

    GDBusConnection *bus = g_bus_get_sync(G_BUS_TYPE_SESSION, NULL, NULL);
    if (!bus) return 2;
    g_dbus_connection_signal_subscribe(bus, NULL, "io.portalhq.Bench", "Ping", "/io/portalhq/Bench", NULL,
                                       G_DBUS_SIGNAL_FLAGS_NONE, on_ping, NULL, NULL);
    portal_auth *auth = NULL;
    portal_watch *watch = NULL;
    portal_completion_queue *queue = NULL;
    if (portal_auth_new(&auth, env, BENCH_REDIRECT_URL, NULL) != PORTAL_OK ||
        portal_completion_queue_new_for_main_context(&queue, NULL) != PORTAL_OK ||
        portal_auth_watch(auth, queue, on_change, NULL, NULL, &watch) != PORTAL_OK) {
        fprintf(stderr, "watch: %s\n", portal_last_error_message());
        return 1;
    }
    int status = 0;
    for (int i = 0; i < rounds && status == 0; i++) {
        int64_t stamps[2];
        raw_arrival = watch_arrival = 0;
        if (write(to_actor[1], "p", 1) != 1 || read(from_actor[0], stamps, sizeof stamps) != sizeof stamps) status = 1;
        wait_for(&raw_arrival, 5000);
        int64_t raw = raw_arrival - stamps[0];
        if (write(to_actor[1], "s", 1) != 1) status = 1;
        wait_for(&watch_arrival, 5000);
        if (read(from_actor[0], stamps, sizeof stamps) != sizeof stamps) status = 1;
        if (!raw_arrival || !watch_arrival) {
            fprintf(stderr, "watch: round %d: no %s\n", i, raw_arrival ? "watch event" : "raw signal");
            status = 1;
            break;
        }
        printf("%lld %lld %lld\n", (long long)raw, (long long)(watch_arrival - stamps[1]),
               (long long)(watch_arrival - stamps[0]));
        int64_t never = 0;
        wait_for(&never, 250);
    }
    if (write(to_actor[1], "q", 1) != 1) status = 1;
    waitpid(pid, NULL, 0);
    int64_t never = 0;
    wait_for(&never, 1000); /* A's final clear and the reads it causes settle first */
    long before = watch_switches();
    sleep((unsigned)idle);
    long after = watch_switches();
    printf("IDLE %ld\n", before < 0 || after < 0 ? -1 : (after - before) * 60 / (idle > 0 ? idle : 1));
    portal_watch_free(watch);
    portal_completion_queue_free(queue);
    portal_auth_free(auth);
    g_object_unref(bus);
    return status;
}
