/*
 * spawnbench.c — wall time and peak RSS of whole processes, two commands alternating.
 *
 *   spawnbench [--timeout-ms T] N -- CMD_A [ARGS...] -- CMD_B [ARGS...]
 *
 * Runs A and B N times each after 3 warm-up runs of each, alternating (A B, B A, A B, …) so
 * that drift hits both sides alike. Each run is timed from just before posix_spawn() to the
 * return of wait4() (process start, dynamic loading, the work, exit), and its peak RSS is read
 * from wait4()'s rusage. Children's stdout goes to /dev/null; stderr is inherited.
 * Prints one line per pair: "a_ns b_ns a_maxrss_kib b_maxrss_kib".
 * Exit 2 (with the command named) if a run does not exit 0.
 *
 * With --timeout-ms T a run still going after T ms is killed (SIGKILL) and its pair is not
 * printed; a line "hung a" or "hung b" says which side it was (libsecret 0.20.5's file backend
 * waits forever now and then for a portal answer it subscribed to too late). Warm-up
 * runs that hang are retried.
 */
#define _GNU_SOURCE
#include "bench_common.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static posix_spawn_file_actions_t actions;
static int timeout_ms = -1; /* -1: wait for ever */

/* Runs argv once; returns 0, or 1 when it outlived timeout_ms and was killed. */
static int run(char **argv, uint64_t *ns, long *maxrss) {
    pid_t pid;
    uint64_t t0 = bench_now_ns();
    int err = posix_spawnp(&pid, argv[0], &actions, NULL, argv, environ);
    if (err) {
        fprintf(stderr, "spawnbench: cannot start %s: %s\n", argv[0], strerror(err));
        exit(2);
    }
    if (timeout_ms >= 0) {
        int fd = pidfd_open(pid, 0);
        if (fd < 0) {
            perror("spawnbench: pidfd_open");
            exit(2);
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ready;
        while ((ready = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {}
        close(fd);
        if (ready == 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return 1;
        }
    }
    int status;
    struct rusage usage;
    if (wait4(pid, &status, 0, &usage) != pid) {
        perror("spawnbench: wait4");
        exit(2);
    }
    *ns = bench_now_ns() - t0;
    *maxrss = usage.ru_maxrss;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "spawnbench: %s", argv[0]);
        for (char **p = argv + 1; *p; p++) fprintf(stderr, " %s", *p);
        if (WIFEXITED(status)) fprintf(stderr, ": exit status %d\n", WEXITSTATUS(status));
        else fprintf(stderr, ": killed by signal %d\n", WTERMSIG(status));
        exit(2);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "--timeout-ms") == 0) {
        timeout_ms = (int)strtol(argv[2], NULL, 10);
        argv += 2;
        argc -= 2;
    }
    if (argc < 6 || strcmp(argv[2], "--") != 0 || timeout_ms == 0 || timeout_ms < -1) {
        fprintf(stderr, "usage: %s [--timeout-ms T] N -- CMD_A [ARGS...] -- CMD_B [ARGS...]\n", argv[0]);
        return 2;
    }
    long n = strtol(argv[1], NULL, 10);
    char **a = argv + 3, **b = NULL;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            argv[i] = NULL;
            b = argv + i + 1;
            break;
        }
    }
    if (!b || !*a || !*b || n < 1) {
        fprintf(stderr, "spawnbench: need N >= 1 and two commands\n");
        return 2;
    }
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);

    uint64_t ta, tb;
    long ra, rb;
    for (int i = 0, hangs = 0; i < 3; i++) {
        if (run(a, &ta, &ra) + run(b, &tb, &rb) && ++hangs < 10) i--;
    }
    for (long i = 0; i < n; i++) {
        int hung_a, hung_b;
        if (i & 1) {
            hung_b = run(b, &tb, &rb);
            hung_a = run(a, &ta, &ra);
        } else {
            hung_a = run(a, &ta, &ra);
            hung_b = run(b, &tb, &rb);
        }
        if (hung_a) printf("hung a\n");
        if (hung_b) printf("hung b\n");
        if (hung_a || hung_b) continue;
        printf("%llu %llu %ld %ld\n", (unsigned long long)ta, (unsigned long long)tb, ra, rb);
    }
    return 0;
}
