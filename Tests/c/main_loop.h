/*
 * main_loop.h — the C test programs that run a GLib main loop (async_test, async_signin_test,
 * desktop_signin_test, watch_loop_test) measure it with one timer: tick(), added as a 10 ms
 * timeout, records the largest gap between its ticks, so a call that blocks the loop shows as a
 * gap.
 *
 *   gap_reset()          starts a measurement
 *   gap_report(what)     prints its largest gap; a check that it is at most MAX_GAP_MS
 *   run_until(flag, want, timeout_ms), run_for(ms)   iterate the default main context
 */
#ifndef PORTAL_TEST_MAIN_LOOP_H
#define PORTAL_TEST_MAIN_LOOP_H

#include "check.h"

#include <glib.h>

/* The largest main-loop gap allowed. Every blocking scenario here would stall the loop for 900 ms
 * or more (prompt and call deadlines, API delays, portal_free's wait); a loaded 2-core machine
 * shows scheduler gaps up to about 100 ms (92.7 ms seen with other builds running), so 200 ms
 * tells the two apart without failing on load. */
#define MAX_GAP_MS 200

/* Weak, as check.h's counters: a program of several files (Tests/c/async_test/) has one timer,
 * ticked in one file and read in others. */
__attribute__((weak)) gint64 last_tick, max_gap;

static inline gboolean tick(gpointer data) {
    (void)data;
    gint64 now = g_get_monotonic_time();
    if (last_tick && now - last_tick > max_gap) max_gap = now - last_tick;
    last_tick = now;
    return G_SOURCE_CONTINUE;
}

static inline void gap_reset(void) {
    max_gap = 0;
    last_tick = g_get_monotonic_time();
}

static inline void gap_report(const char *what) {
    printf("%s: largest main-loop timer gap %.1f ms\n", what, max_gap / 1000.0);
    CHECK_MSG(max_gap <= MAX_GAP_MS * 1000, "%s: the main loop stalled for %.1f ms", what, max_gap / 1000.0);
}

/* Runs the default context until *flag >= want or timeout_ms passed; true when reached. */
static inline int run_until(int *flag, int want, int timeout_ms) {
    gint64 end = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    while (*flag < want && g_get_monotonic_time() < end) g_main_context_iteration(NULL, TRUE);
    return *flag >= want;
}

static inline void run_for(int ms) {
    int never = 0;
    run_until(&never, 1, ms);
}

#endif
