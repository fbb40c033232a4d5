/* async_test: the pollable queue, driven from a plain poll() loop. */
#include "async_test.h"

/* The pollable queue, from a plain poll() loop on this thread (no GLib iteration at all). */
void test_pollable_queue(portal_auth *auth) {
    portal_completion_queue *queue = NULL;
    CHECK(portal_completion_queue_new_pollable(&queue) == PORTAL_OK);
    int fd = portal_completion_queue_get_fd(queue);
    CHECK(fd >= 0);
    probe restored, cleared;
    probe_init(&restored);
    probe_init(&cleared);
    CHECK(portal_auth_restore_session_async(auth, queue, on_done, &restored, on_destroy, NULL) == PORTAL_OK);
    CHECK(portal_auth_clear_persisted_session_async(auth, queue, on_done, &cleared, on_destroy, NULL) == PORTAL_OK);
    size_t total = 0;
    int wakeups = 0;
    gint64 end = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
    while (total < 2 && g_get_monotonic_time() < end) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 100) > 0 && (pfd.revents & POLLIN)) {
            wakeups++;
            size_t ran = 0;
            CHECK(portal_completion_queue_dispatch(queue, &ran) == PORTAL_OK);
            total += ran;
        }
    }
    expect_once(&restored, PORTAL_OK, "", "restore on the pollable queue");
    expect_once(&cleared, PORTAL_OK, "", "clear on the pollable queue");
    CHECK(total == 2 && wakeups >= 1);
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    CHECK(poll(&pfd, 1, 0) == 0); /* drained: not readable */
    portal_session_free(restored.session);
    size_t ran = 1;
    CHECK(portal_completion_queue_dispatch(queue, &ran) == PORTAL_OK && ran == 0);

    /* A queue freed with an operation pending drops it: destroy_notify only, exactly once. */
    probe dropped;
    probe_init(&dropped);
    CHECK(portal_auth_restore_session_async(auth, queue, on_done, &dropped, on_destroy, NULL) == PORTAL_OK);
    portal_completion_queue_free(queue);
    for (int i = 0; i < 500 && __atomic_load_n(&dropped.destroyed, __ATOMIC_ACQUIRE) < 1; i++) usleep(10000);
    CHECK(dropped.calls == 0 && dropped.destroyed == 1);
    CHECK(portal_completion_queue_dispatch(queue, NULL) == PORTAL_ERR_INVALID_ARGUMENT); /* freed handle */
    portal_completion_queue *context_queue = NULL;
    CHECK(portal_completion_queue_new_for_main_context(&context_queue, NULL) == PORTAL_OK);
    CHECK(portal_completion_queue_dispatch(context_queue, NULL) == PORTAL_ERR_INVALID_ARGUMENT);
    portal_completion_queue_free(context_queue);
}

/* A pollable queue freed by a callback in the middle of a dispatch round: the round stops there,
 * and the other completion of the round is dropped (destroy_notify once, its callback never), as
 * portal_completion_queue_free() promises; before, the round went on calling into the app. */
static portal_completion_queue *freed_in_callback;
static void on_done_freeing_the_queue(portal_status status, portal_result *result, const char *message, void *data) {
    on_done(status, result, message, data);
    portal_completion_queue_free(freed_in_callback);
    freed_in_callback = NULL;
}

void test_pollable_queue_freed_by_its_callback(portal_auth *auth) {
    CHECK(portal_completion_queue_new_pollable(&freed_in_callback) == PORTAL_OK);
    portal_completion_queue *queue = freed_in_callback;
    probe first, second;
    probe_init(&first);
    probe_init(&second);
    uint64_t one = 0, two = 0;
    CHECK(portal_auth_restore_session_async(auth, queue, on_done_freeing_the_queue, &first, on_destroy, &one) == PORTAL_OK);
    CHECK(portal_auth_restore_session_async(auth, queue, on_done_freeing_the_queue, &second, on_destroy, &two) == PORTAL_OK);
    int fd = portal_completion_queue_get_fd(queue);
    CHECK(fd >= 0);
    /* Cancelled: both completions are queued when these return, so one dispatch round holds
     * both. (An operation that finished on its own just before its cancel may post a moment
     * later, in a round of its own: then it is dropped at once, and the checks still hold.) */
    CHECK(portal_operation_cancel(one) == PORTAL_OK);
    CHECK(portal_operation_cancel(two) == PORTAL_OK);
    size_t ran = 0;
    gint64 end = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
    while (first.calls + second.calls == 0 && g_get_monotonic_time() < end) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        size_t round = 0;
        if (poll(&pfd, 1, 100) > 0 && portal_completion_queue_dispatch(queue, &round) == PORTAL_OK) ran += round;
    }
    for (int i = 0; i < 500 && __atomic_load_n(&second.destroyed, __ATOMIC_ACQUIRE) + __atomic_load_n(&first.destroyed, __ATOMIC_ACQUIRE) < 2; i++)
        usleep(10000);
    if (ran != 1 || first.calls + second.calls != 1 || first.destroyed != 1 || second.destroyed != 1)
        fprintf(stderr, "queue freed by its callback: ran %zu, calls %d + %d, destroyed %d + %d\n", ran, first.calls,
                second.calls, first.destroyed, second.destroyed);
    CHECK(ran == 1);
    CHECK(first.calls + second.calls == 1);
    CHECK(first.destroyed == 1 && second.destroyed == 1);
    CHECK(freed_in_callback == NULL);
    portal_session_free(first.session);
    portal_session_free(second.session);
}
