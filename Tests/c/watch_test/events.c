/* watch_test: B's side: the events the watch delivers on a pollable queue, and the checks on them. */
#include "watch_test.h"

event events[4096];
int nevents, destroyed;
portal_completion_queue *queue;

void on_event(portal_watch_event kind, const char *end_user_id, void *user_data) {
    (void)user_data;
    if (nevents < (int)(sizeof events / sizeof events[0])) {
        events[nevents].kind = kind;
        snprintf(events[nevents].user, sizeof events[nevents].user, "%s", end_user_id ? end_user_id : "");
        events[nevents].at = now_ms();
        events[nevents].origin = portal_watch_current_origin();
    }
    nevents++;
    /* Only SIGNED_IN names an end user. */
    if ((kind == PORTAL_WATCH_SIGNED_IN) != (end_user_id != NULL)) failures++, fprintf(stderr, "bad end_user_id\n");
}

void on_destroy(void *user_data) { (*(int *)user_data)++; }

/* Dispatches the queue until `until` (ms, monotonic) or until `stop_at` events were seen. */
void pump(double until, int stop_at) {
    int fd = portal_completion_queue_get_fd(queue);
    while (nevents < stop_at) {
        double left = until - now_ms();
        if (left <= 0) break;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)left + 1) > 0) portal_completion_queue_dispatch(queue, NULL);
    }
}

const char *kind_name(portal_watch_event k) {
    switch (k) {
    case PORTAL_WATCH_SIGNED_IN: return "signed-in";
    case PORTAL_WATCH_SIGNED_OUT: return "signed-out";
    case PORTAL_WATCH_LOCKED: return "locked";
    case PORTAL_WATCH_RESYNC: return "resync";
    case PORTAL_WATCH_STARTED: return "started";  /* portal_auth_watch_async only */
    case PORTAL_WATCH_FAILED: return "failed";
    case PORTAL_WATCH_AVAILABLE: return "available";
    }
    return "?";
}

/* The next event is `kind` (and `user` for SIGNED_IN), within 10 s. */
int expect(portal_watch_event kind, const char *user, const char *what) {
    int index = nevents;
    pump(now_ms() + 10000, index + 1);
    int ok = nevents > index && events[index].kind == kind && (!user || strcmp(events[index].user, user) == 0);
    if (!ok) {
        failures++;
        if (nevents > index)
            fprintf(stderr, "%s: expected %s %s, got %s %s\n", what, kind_name(kind), user ? user : "",
                    kind_name(events[index].kind), events[index].user);
        else
            fprintf(stderr, "%s: expected %s %s, got nothing in 10 s\n", what, kind_name(kind), user ? user : "");
    }
    checks++;
    return ok;
}

/* expect(), and the event's origin is `origin`. */
int expect_from(portal_watch_event kind, const char *user, portal_watch_origin origin, const char *what) {
    int index = nevents;
    if (!expect(kind, user, what)) return 0;
    checks++;
    if (events[index].origin == origin) return 1;
    failures++;
    fprintf(stderr, "%s: origin %d, expected %d\n", what, (int)events[index].origin, (int)origin);
    return 0;
}

/* No event within `ms`. */
void expect_quiet(int ms, const char *what) {
    int before = nevents;
    pump(now_ms() + ms, before + 1);
    checks++;
    if (nevents != before) {
        failures++;
        fprintf(stderr, "%s: expected no event, got %s %s\n", what, kind_name(events[before].kind), events[before].user);
    }
}

/* Voluntary context switches of this process's threads named `name` (summed), or -1. */
long switches(const char *name) {
    DIR *dir = opendir("/proc/self/task");
    if (!dir) return -1;
    long total = -1;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        if (entry->d_name[0] == '.') continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", entry->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(comm, sizeof comm, f)) comm[0] = '\0';
        fclose(f);
        comm[strcspn(comm, "\n")] = '\0';
        if (name && strcmp(comm, name) != 0) continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", entry->d_name);
        if (!(f = fopen(path, "r"))) continue;
        char line[256];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0) total = (total < 0 ? 0 : total) + atol(line + 24);
        fclose(f);
    }
    closedir(dir);
    return total;
}
