"""bench.py — runs every benchmark figure and prints the results table (bench/run.sh runs it
inside scripts/with-keyring.sh; do not run it against your own keyring).

    python3 bench/bench.py --bin DIR --lib LIB --cli CLI [--python PY] [--floor LIB] [--gi DIR]
                           [--only STEP,…] [--smoke] [--out FILE]

--floor is the Swift-runtime floor library (bench/build-floor.sh): the load-cost figures print it
beside ours, and judge ours by it. --gi is the GNOME API built against LIB (libportal-keyring-gobject-1
and PortalKeyring-1.typelib; bench/gi_figures.py). --only runs the steps whose names contain one of
the comma-separated words (e.g. --only GNOME). --out keeps the file's "# History" section.

Every comparison is measured in the same run, the two sides alternating (A B, B A, …), and
reported as median [min – max] per side plus the ratio of the medians with the 5th–95th
percentile of the per-pair ratios. Timings never make this script fail: it exits 1 only when a
benchmark program failed to run (or broke the exactly-once invalidation contract), after
printing everything else.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Repetitions: (full, smoke).
COUNTS = {
    "warm_restore": (2000, 20),
    "warm_persist": (400, 10),
    "cold_c": (300, 5),
    "cold_cli": (300, 5),
    "py_warm": (300, 10),
    "py_cold": (30, 2),
    "load": (200, 5),
    "inval_rounds": (200, 3),
    "inval_single": (200, 3),
    "rss_cycles": (100_000, 500),
    "rss_cycles_raw": (25_000, 500),  # the libsecret floor, run alongside (bytes per lookup)
    "async_restore": (1000, 20),
    "async_prompt_ms": (30_000, 1500),  # the prompt deadline the loop waits through
    "watch_rounds": (200, 5),
    "watch_idle_s": (60, 2),
    "sandbox_cold": (200, 3),
    "sandbox_warm": (2000, 20),
    "gi_python": (2000, 20),
    "gi_gjs": (2000, 20),
    "gi_async": (1000, 20),
}
INVALIDATION_THREADS = 1000
HISTORY_HEADING = "# History"
REDIRECT = "bench-app://portal/redirect"


def read_common():
    values = {}
    with open(os.path.join(HERE, "bench_common.h"), encoding="utf-8") as f:
        for line in f:
            parts = line.split(None, 2)
            if len(parts) == 3 and parts[0] == "#define":
                values[parts[1]] = parts[2].strip().strip('"')
    return values["BENCH_TOKEN"], values["BENCH_END_USER_ID"]


TOKEN, END_USER = read_common()


class ProgramFailed(Exception):
    pass


def run(cmd, stdin=None, ok=(0,), env=None):
    """Runs cmd; returns stdout. Raises ProgramFailed (with stderr) on an unexpected status."""
    try:
        p = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env)
    except OSError as e:
        raise ProgramFailed("%s: %s" % (" ".join(cmd), e)) from None
    if p.returncode not in ok:
        raise ProgramFailed("%s: exit status %d\n%s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    return p.stdout


def popen(cmd, **kwargs):
    try:
        return subprocess.Popen(cmd, **kwargs)
    except OSError as e:
        raise ProgramFailed("%s: %s" % (" ".join(cmd), e)) from None


def rows(text, width):
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != width:
            raise ProgramFailed("unexpected output line: %r" % line)
        out.append([int(x) for x in parts])
    if not out:
        raise ProgramFailed("no samples")
    return out


def pct(values, p):
    """Nearest-rank percentile (p in 0..100)."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def ms(ns):
    return ns / 1e6


def fmt_ms(ns):
    v = ms(ns)
    if v >= 100:
        return "%.0f ms" % v
    if v >= 10:
        return "%.1f ms" % v
    return "%.2f ms" % v


def spread(ns_values):
    return "%s [%s – %s]" % (fmt_ms(statistics.median(ns_values)), fmt_ms(min(ns_values)), fmt_ms(max(ns_values)))


class Table:
    def __init__(self, smoke=False):
        self.smoke = smoke
        self.rows = []
        self.notes = []
        self.failures = []
        self.samples = {}  # a figure's samples that a later figure compares with

    def add(self, figure, ours, baseline, ratio, target, verdict, n):
        if self.smoke and not verdict.startswith(("VIOLATED", "met: exactly")):
            verdict = "not judged (smoke run)"
        self.rows.append((figure, ours, baseline, ratio, target, verdict, str(n)))

    def failed(self, figure, target, message):
        self.failures.append("%s: %s" % (figure, message))
        self.rows.append((figure, "FAILED TO RUN", "", "", target, "not measured", ""))

    def not_run(self, figure, target, message):
        """A figure whose baseline could not be set up (not a failure of a benchmark program)."""
        self.notes.append("NOT RUN: %s: %s." % (figure, message))
        self.rows.append((figure, "NOT RUN (see notes)", "", "", target, "not measured", ""))

    def markdown(self):
        head = ("figure", "portal-keyring: median [min – max]", "compared with: median [min – max]",
                "ratio (paired p5–p95)", "target", "result", "n")
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in self.rows:
            lines.append("| " + " | ".join(r) + " |")
        return "\n".join(lines)


def ratio_cell(a, b):
    r = statistics.median(a) / statistics.median(b)
    paired = [x / y for x, y in zip(a, b)]
    return r, "**%.2f×** (%.2f–%.2f; of the minimums %.2f×)" % (r, pct(paired, 5), pct(paired, 95), min(a) / min(b))


def at_most_verdict(r, limit, base_median_ns, ours_median_ns):
    if r <= limit:
        return "met"
    need = base_median_ns * limit
    return "MISSED by %.2f ms (%.0f%% over: needs ≤ %s)" % (
        ms(ours_median_ns - need), (ours_median_ns / need - 1) * 100, fmt_ms(need))


# ---------------------------------------------------------------------------------- figures


def fig_warm(t, a, kind, n):
    label = {"restore": "warm restore, one process (C ABI), item present",
             "persist": "warm persist (C ABI)"}[kind]
    base = {"restore": "`secret_password_lookup_nonpageable_sync`",
            "persist": "`secret_password_store_sync`"}[kind]
    try:
        data = rows(run([os.path.join(a.bin, "warm"), kind, str(n)]), 2)
    except ProgramFailed as e:
        return t.failed(label, "≤ 1.05×", str(e))
    ours, raw = [r[0] for r in data], [r[1] for r in data]
    t.samples["warm " + kind] = ours
    r, cell = ratio_cell(ours, raw)
    t.add(label, spread(ours), "%s: %s" % (base, spread(raw)), cell, "≤ 1.05×",
          at_most_verdict(r, 1.05, statistics.median(raw), statistics.median(ours)), n)


def fig_watch(t, a, rounds, idle_s):
    """The session watch: a persist in process A seen by a watch in process B, next to a raw D-Bus signal
    from A to B in the same run (bench/watch.c); then the watch thread's idle wake-ups."""
    label = "watch: persist returned in process A → event in process B (C ABI, isolated changes)"
    target = "p50 ≤ 1.5× the raw signal"
    try:
        lines = run([os.path.join(a.bin, "watch"), str(rounds), str(idle_s)]).splitlines()
        data = rows("\n".join(l for l in lines if not l.startswith("IDLE ")), 3)
        idle = [int(l.split()[1]) for l in lines if l.startswith("IDLE ")]
    except ProgramFailed as e:
        return t.failed(label, target, str(e))
    raw, ret, start = [r[0] for r in data], [r[1] for r in data], [r[2] for r in data]
    r = pct(ret, 50) / pct(raw, 50)
    t.add(label, "p50 **%s**, p99 %s (from the persist's start: p50 %s, p99 %s)" % (
              fmt_ms(pct(ret, 50)), fmt_ms(pct(ret, 99)), fmt_ms(pct(start, 50)), fmt_ms(pct(start, 99))),
          "raw D-Bus signal A → B: p50 %s, p99 %s" % (fmt_ms(pct(raw, 50)), fmt_ms(pct(raw, 99))),
          "**%.2f×**" % r, target, "met" if r <= 1.5 else "MISSED (%.2f×)" % r, len(data))
    t.notes.append("watch latency: the watch reads the keyring at the provider's ItemCreated, which comes "
                   "before A's persist has removed the older sign-in and returned, so an event can precede "
                   "the return (negative figures); rounds are 250 ms apart, since the watch spaces reads 100 ms "
                   "apart while signals keep coming.")
    wakeups = idle[0] if idle else -1
    t.add("watch: wake-ups of the portal-watch thread while nothing changes",
          "%d per minute (voluntary context switches over %d s)" % (wakeups, idle_s), "—", "—", "0",
          "met: exactly 0" if wakeups == 0 else "MISSED (%d)" % wakeups, idle_s)


def fig_async(t, a, n, prompt_ms):
    """The non-blocking restore vs the blocking one, and the main loop during a prompt."""
    label = "async restore on a GMainLoop, completion included (C ABI), item present"
    try:
        data = rows(run([os.path.join(a.bin, "async"), "restore", str(n)]), 2)
    except ProgramFailed as e:
        t.failed(label, "≤ 1.10×", str(e))
    else:
        ours, sync = [r[0] for r in data], [r[1] for r in data]
        r, cell = ratio_cell(ours, sync)
        t.add(label, spread(ours), "`portal_auth_restore_session` (blocking): %s" % spread(sync), cell, "≤ 1.10×",
              at_most_verdict(r, 1.10, statistics.median(sync), statistics.median(ours)), n)
    label = "main-loop latency during an unanswered unlock prompt (%g s), async restore" % (prompt_ms / 1000)
    kctl = os.path.join(a.bin, "keyringctl")
    try:
        gap_ns, elapsed_ns, ticks, status = rows(run([os.path.join(a.bin, "async"), "prompt", str(prompt_ms), kctl]), 4)[0]
    except ProgramFailed as e:
        return t.failed(label, "max timer gap ≤ 50 ms", str(e))
    verdict = "met" if gap_ns <= 50e6 else "MISSED (max gap %s)" % fmt_ms(gap_ns)
    t.add(label, "max gap of a 10 ms GLib timer **%s** (%d ticks)" % (fmt_ms(gap_ns), ticks),
          "completion after %s (status %d%s)" % (
              fmt_ms(elapsed_ns), status, ", PORTAL_ERR_SESSION_STORAGE: prompt not answered" if status == 2 else ""), "—",
          "max timer gap ≤ 50 ms", verdict, 1)


def persist_cli(a, env_id):
    run([a.cli, "--env", env_id, "--redirect-url", REDIRECT, "persist", "--end-user-id", END_USER], stdin=TOKEN)


def fig_cold_c(t, a, n):
    label = "cold restore: process start → restored → exit (`examples/c/restore_on_launch.c`)"
    try:
        env_id = "bench-cold-c"
        example = os.path.join(a.bin, "restore_on_launch")
        run([example, env_id], ok=(0, 1))  # first launch: clears, sets the flag, signed out
        persist_cli(a, env_id)
        run([os.path.join(a.bin, "raw_secret"), "store", "bench-cold-raw"])
        data = rows(run([os.path.join(a.bin, "spawnbench"), str(n), "--", example, env_id, "--",
                         os.path.join(a.bin, "raw_secret"), "lookup", "bench-cold-raw"]), 4)
    except ProgramFailed as e:
        return t.failed(label, "≤ 1.10×", str(e))
    ours, raw = [r[0] for r in data], [r[1] for r in data]
    r, cell = ratio_cell(ours, raw)
    t.add(label, spread(ours), "raw libsecret C program, one lookup: %s" % spread(raw), cell, "≤ 1.10×",
          at_most_verdict(r, 1.10, statistics.median(raw), statistics.median(ours)), n)
    t.notes.append("Cold restore peak RSS: C example %.1f MiB, raw libsecret program %.1f MiB (medians)." % (
        statistics.median(r[2] for r in data) / 1024, statistics.median(r[3] for r in data) / 1024))


def fig_cold_cli(t, a, n):
    label = "cold restore: `portal-session restore`"
    try:
        env_id = "bench-cold-cli"
        persist_cli(a, env_id)
        run([os.path.join(a.bin, "raw_secret"), "store", "bench-cold-raw"])
        data = rows(run([os.path.join(a.bin, "spawnbench"), str(n), "--",
                         a.cli, "--env", env_id, "--redirect-url", REDIRECT, "restore", "--",
                         "secret-tool", "lookup", "auth_environment_id", "bench-cold-raw"]), 4)
    except ProgramFailed as e:
        return t.failed(label, "≤ 1.10×", str(e))
    ours, raw = [r[0] for r in data], [r[1] for r in data]
    r, cell = ratio_cell(ours, raw)
    t.add(label, spread(ours), "`secret-tool lookup`: %s" % spread(raw), cell, "≤ 1.10×",
          at_most_verdict(r, 1.10, statistics.median(raw), statistics.median(ours)), n)
    t.notes.append("`portal-session restore` peak RSS %.1f MiB, `secret-tool lookup` %.1f MiB (medians)." % (
        statistics.median(r[2] for r in data) / 1024, statistics.median(r[3] for r in data) / 1024))


def fig_sandbox(t, a, n_cold, n_warm):
    """Restore inside the Flatpak sandbox emulation (scripts/with-flatpak-sandbox.sh,
    bench/sandbox.py), cold against secret-tool (libsecret's file backend) in the same sandbox,
    warm against our host restore (the warm row, measured earlier in this run)."""
    label_cold = "Flatpak sandbox, cold restore: `portal-session restore` (file keyring, the portal's secret)"
    label_warm = "Flatpak sandbox, warm restore, one process (C ABI, file keyring)"
    cmd = [os.path.join(ROOT, "scripts", "with-flatpak-sandbox.sh"), "--host", sys.executable,
           os.path.join(HERE, "sandbox.py"), "--bin", a.bin, "--cli", a.cli, "--cold", str(n_cold), "--warm", str(n_warm)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    try:
        got = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        got = {}
    if p.returncode != 0 or "error" in got or not got:
        why = got.get("error") or "%s: exit status %d\n%s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-3000:])
        t.failed(label_cold, "≤ 1.10×", why)
        return t.failed(label_warm, "≤ 1.00× the host's", why)
    cold, hung = got["cold"], got["cold_hung"]
    ours, lib = [r[0] for r in cold], [r[1] for r in cold]
    r, cell = ratio_cell(ours, lib)
    verdict = at_most_verdict(r, 1.10, statistics.median(lib), statistics.median(ours))
    if hung["ours"]:
        verdict = "VIOLATED: %d of ours hung (killed after 3 s)" % hung["ours"]
    t.add(label_cold, spread(ours), "`secret-tool lookup` (libsecret's file backend) in the same sandbox: %s; "
          "%d of %d hung, killed after 3 s (pairs left out)" % (spread(lib), hung["libsecret"], n_cold),
          cell, "≤ 1.10×", verdict, len(cold))
    t.notes.append("Flatpak sandbox cold restore peak RSS: `portal-session restore` %.1f MiB, `secret-tool lookup` "
                   "%.1f MiB (medians); each process asks the portal for the app's secret and derives the key." % (
                       statistics.median(r[2] for r in cold) / 1024, statistics.median(r[3] for r in cold) / 1024))
    warm = got["warm"]
    ours, lib = [r[0] for r in warm], [r[1] for r in warm]
    host = t.samples.get("warm restore")
    if not host:
        return t.failed(label_warm, "≤ 1.00× the host's", "the host's warm restore row did not run")
    r = statistics.median(ours) / statistics.median(host)
    t.add(label_warm, spread(ours), "our host restore (gnome-keyring, the warm row above): %s; libsecret's file "
          "backend in the same process: %s" % (spread(host), spread(lib)),
          "**%.2f×** the host's (not paired: two processes in turn)" % r, "≤ 1.00× the host's",
          "met" if r <= 1.0 else "MISSED (%.2f×)" % r, len(warm))
    if got["warm_tries"] > 1:
        t.notes.append("Flatpak sandbox warm restore: %d runs of bench/warm.c hung at libsecret's first portal "
                       "call and were retried." % (got["warm_tries"] - 1))


def fig_python(t, a, n_warm, n_cold):
    label = "restore from Python (ctypes module), in one process"
    label_cold = "restore from Python, whole process (import + one restore)"
    if not a.python:
        msg = "PyPI keyring could not be installed into build/bench/venv (see the bench/run.sh output)"
        t.not_run(label, "≥ 10× faster", msg)
        return t.not_run(label_cold, "(info)", msg)
    script = os.path.join(HERE, "py_restore.py")
    try:
        run([a.python, script, "setup"])
        info = run([a.python, script, "info"]).strip()
        data = rows(run([a.python, script, "warm", str(n_warm)]), 2)
    except ProgramFailed as e:
        t.failed(label, "≥ 10× faster", str(e))
        data = None
    if data:
        ours, theirs = [r[0] for r in data], [r[1] for r in data]
        speedup = statistics.median(theirs) / statistics.median(ours)
        paired = [y / x for x, y in zip(ours, theirs)]
        verdict = "met" if speedup >= 10 else "MISSED: %.1f× faster (needs ours ≤ %s)" % (
            speedup, fmt_ms(statistics.median(theirs) / 10))
        t.add(label, spread(ours), "`keyring.get_password` (SecretService): %s" % spread(theirs),
              "**%.1f× faster** (%.1f–%.1f; of the minimums %.1f×)" % (
                  speedup, pct(paired, 5), pct(paired, 95), min(theirs) / min(ours)), "≥ 10× faster",
              verdict, n_warm)
        t.notes.append("Python: " + info.replace("\n", "; ") + ".")
    try:
        data = rows(run([os.path.join(a.bin, "spawnbench"), str(n_cold), "--", a.python, script, "cold-ours", "--",
                         a.python, script, "cold-theirs"]), 4)
    except ProgramFailed as e:
        return t.failed(label_cold, "(info)", str(e))
    ours, theirs = [r[0] for r in data], [r[1] for r in data]
    speedup = statistics.median(theirs) / statistics.median(ours)
    paired = [y / x for x, y in zip(ours, theirs)]
    t.add(label_cold, spread(ours), "`import keyring; keyring.get_password`: %s" % spread(theirs),
          "%.1f× faster (%.1f–%.1f; of the minimums %.1f×)" % (
              speedup, pct(paired, 5), pct(paired, 95), min(theirs) / min(ours)), "(info)", "—", n_cold)


def fig_load(t, a, n):
    """dlopen + first call and peak RSS, three sides alternating in rotation: ours (one restore), raw
    libsecret (one lookup) and the Swift-runtime floor (raw's lookup plus bench/floor/floor.swift
    loaded and called once), each in a fresh process (bench/loadprobe.c). Targets: time ≤ the
    floor's + 0.3 ms (median of the paired differences, ours − floor, taken in the same rotation);
    RSS extra over raw ≤ the floor's extra + 1 MiB."""
    label_t = "load cost: `dlopen` + first call (restore), extra time"
    label_m = "load cost: peak RSS after `dlopen` + first restore, extra"
    label_ft = "floor: raw's lookup + `dlopen` + one call of a minimal Swift library built the same way, extra time"
    label_fm = "floor: peak RSS of raw's lookup + a minimal Swift library loaded and called once, extra"
    target_t, target_m = "≤ floor + 0.3 ms (paired median)", "≤ floor's extra + 1 MiB"
    probe = os.path.join(a.bin, "loadprobe")
    try:
        run([os.path.join(a.bin, "raw_secret"), "store", "bench-load-raw"])
        run([a.cli, "--env", "bench-load-portal", "--redirect-url", REDIRECT, "clear"])
        persist_cli(a, "bench-load-portal")
        cmds = {"ours": [probe, "portal", a.lib, "bench-load-portal"], "raw": [probe, "raw", "bench-load-raw"]}
        if a.floor:
            cmds["floor"] = [probe, "floor", a.floor, "bench-load-raw"]
        got = {k: [] for k in cmds}
        sides = list(cmds)
        for _ in range(2):  # warm-up (page cache)
            for k in sides:
                run(cmds[k])
        for i in range(n):
            for k in sides[i % len(sides):] + sides[:i % len(sides)]:
                got[k].append(rows(run(cmds[k]), 3)[0])
    except ProgramFailed as e:
        t.failed(label_t, target_t, str(e))
        return t.failed(label_m, target_m, str(e))
    ours, raw = got["ours"], got["raw"]
    tot = {k: [x[0] + x[1] for x in v] for k, v in got.items()}
    r_tot = tot["raw"]

    def time_cells(k, what):
        extra = statistics.median(tot[k]) - statistics.median(r_tot)
        paired = [x - y for x, y in zip(tot[k], r_tot)]
        return extra, (spread(tot[k]) + " (dlopen %s + %s %s)" % (
            fmt_ms(statistics.median(x[0] for x in got[k])), what, fmt_ms(statistics.median(x[1] for x in got[k]))),
            "raw: `dlopen(libsecret)` + first lookup: %s (dlopen %s + first call %s)" % (
                spread(r_tot), fmt_ms(statistics.median(x[0] for x in raw)), fmt_ms(statistics.median(x[1] for x in raw))),
            "**%+.2f ms** (paired p5–p95 %+.2f … %+.2f ms; of the minimums %+.2f ms)" % (
                ms(extra), ms(pct(paired, 5)), ms(pct(paired, 95)), ms(min(tot[k]) - min(r_tot))))

    def rss_cells(k):
        o, r = [x[2] for x in got[k]], [x[2] for x in raw]
        extra = statistics.median(o) - statistics.median(r)
        return extra, ("%.1f MiB [%.1f – %.1f]" % (statistics.median(o) / 1024, min(o) / 1024, max(o) / 1024),
                       "raw: %.1f MiB [%.1f – %.1f]" % (statistics.median(r) / 1024, min(r) / 1024, max(r) / 1024),
                       "**%+.1f MiB**" % (extra / 1024))

    extra, cells = time_cells("ours", "first call")
    if "floor" in got:
        over = statistics.median([x - y for x, y in zip(tot["ours"], tot["floor"])])
        verdict = "met" if over <= 0.3e6 else "MISSED by %s" % fmt_ms(over - 0.3e6)
        t.add(label_t, *cells, target_t, "%s (ours − floor: %+.2f ms)" % (verdict, ms(over)), n)
    else:
        t.add(label_t, *cells, target_t, "not judged: no floor library", n)
    extra_kib, cells = rss_cells("ours")
    if "floor" in got:
        floor_kib, _ = rss_cells("floor")
        limit = floor_kib + 1024
        t.add(label_m, *cells, "%s (%.1f MiB)" % (target_m, limit / 1024),
              "met" if extra_kib <= limit else "MISSED by %.1f MiB" % ((extra_kib - limit) / 1024), n)
        f_extra, cells = time_cells("floor", "first calls")
        t.add(label_ft, *cells, "(the floor)", "—", n)
        _, cells = rss_cells("floor")
        t.add(label_fm, *cells, "(the floor)", "—", n)
    else:
        t.add(label_m, *cells, target_m, "not judged: no floor library", n)


def fig_size(t, a):
    """The stripped file sizes (≤ 7 MB), ours beside the floor."""
    label = "stripped library size (`libportal-keyring.so`)"
    ours = os.path.getsize(os.path.realpath(a.lib))
    floor = os.path.getsize(a.floor) if a.floor else 0
    t.add(label, "**%.2f MB** (%d bytes)" % (ours / 1e6, ours),
          "floor (minimal Swift library, same build): %.2f MB" % (floor / 1e6) if floor else "no floor library",
          "%+.2f MB over the floor" % ((ours - floor) / 1e6) if floor else "—", "≤ 7 MB",
          "met" if ours <= 7e6 else "MISSED by %.2f MB" % ((ours - 7e6) / 1e6), 1)


def fig_invalidation(t, a, rounds, single_rounds):
    label = "invalidation: %d concurrent rejections → listener" % INVALIDATION_THREADS
    label1 = "invalidation: one rejection → listener (no contention)"
    for lbl, threads, n in ((label, INVALIDATION_THREADS, rounds), (label1, 1, single_rounds)):
        try:
            try:
                p = subprocess.run([os.path.join(a.bin, "invalidate"), str(n), str(threads)], capture_output=True,
                                   text=True)
            except OSError as e:
                raise ProgramFailed("invalidate: %s" % e) from None
            data = rows(p.stdout, 4) if p.stdout.strip() else []
            if p.returncode not in (0, 3) or not data:
                raise ProgramFailed("invalidate: exit status %d\n%s" % (p.returncode, p.stderr.strip()))
        except ProgramFailed as e:
            t.failed(lbl, "exactly once", str(e))
            continue
        once = sum(1 for r in data if r[2] == 1 and r[3] == 1)
        lat = [r[0] for r in data]
        call = [r[1] for r in data]
        verdict = "met: exactly once in %d/%d rounds" % (once, len(data)) if once == len(data) and p.returncode == 0 \
            else "VIOLATED: exactly once in only %d/%d rounds" % (once, len(data))
        if p.returncode == 3:
            t.failures.append("%s: %s\n%s" % (lbl, verdict, p.stderr.strip()))
        t.add(lbl, "report→callback p50 **%s**, p99 **%s** [min %s, max %s]" % (
            fmt_ms(pct(lat, 50)), fmt_ms(pct(lat, 99)), fmt_ms(min(lat)), fmt_ms(max(lat))),
            "the winning `portal_report_unauthorized` call itself (deletes the item): p50 %s, p99 %s" % (
                fmt_ms(pct(call, 50)), fmt_ms(pct(call, 99))),
            "—", "exactly once; p50/p99 reported", verdict, "%d rounds × %d thread%s" % (len(data), threads, "s" if threads > 1 else ""))


def fig_rss(t, a, n, n_raw):
    label = "RSS drift over %s restore cycles in one process" % format(n, ",")
    try:
        # Both at once (the figure is memory, not time): the raw side in its own binary that does
        # not load libportal-keyring.
        progs = {"portal": os.path.join(a.bin, "rss_cycles"), "raw": os.path.join(a.bin, "rss_cycles_raw")}
        counts = {"portal": n, "raw": n_raw}
        procs = {side: popen([progs[side], side, str(counts[side])], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
                 for side in ("portal", "raw")}
        out = {side: p.communicate() for side, p in procs.items()}
        for side, p in procs.items():
            if p.returncode != 0:
                raise ProgramFailed("rss_cycles %s: exit status %d\n%s" % (side, p.returncode, out[side][1].strip()))
        data = {side: rows(out[side][0], 3) for side in procs}
    except ProgramFailed as e:
        return t.failed(label, "≤ 1 MiB", str(e))

    def drift(samples):
        base = samples[0][1]
        return (samples[-1][1] - base) / 1024, (max(s[1] for s in samples) - base) / 1024, base / 1024

    o_end, o_max, o_base = drift(data["portal"])
    r_end, r_max, r_base = drift(data["raw"])
    per_cycle = (data["portal"][-1][1] - data["portal"][0][1]) * 1024 / n
    raw_per_cycle = (data["raw"][-1][1] - data["raw"][0][1]) * 1024 / n_raw
    t.add(label, "**%+.1f MiB** (from %.1f MiB after warm-up; %+.0f bytes/cycle)" % (o_end, o_base, per_cycle),
          "raw libsecret lookups (`secret_password_lookup_nonpageable_sync`), alongside: %+.1f MiB over %s "
          "(from %.1f MiB; %+.0f bytes/lookup, ≈ %+.0f MiB per %s)" % (
              r_end, format(n_raw, ","), r_base, raw_per_cycle, raw_per_cycle * n / 1048576, format(n, ",")),
          "—", "≤ 1 MiB", "met" if o_end <= 1 else "MISSED by %.1f MiB" % (o_end - 1), n)
    t.notes.append("RSS drift samples (cycles: MiB) portal-keyring: %s; raw libsecret: %s." % (
        ", ".join("%d: %.1f" % (s[0], s[1] / 1024) for s in data["portal"][::5] + [data["portal"][-1]]),
        ", ".join("%d: %.1f" % (s[0], s[1] / 1024) for s in data["raw"][::5] + [data["raw"][-1]])))


# ------------------------------------------------------------------------------------- main


def loadavg():
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def environment(a):
    def sh(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, shell=True).stdout.strip()
        except OSError:
            return "?"

    pkgs = sh("dpkg-query -W -f='${Package} ${Version}, ' libsecret-1-0 libglib2.0-0 gnome-keyring libcurl4 2>/dev/null")
    static = ("Swift runtime linked in (-static-stdlib)" if sh("ldd '%s' | grep -c libswiftCore" % a.lib) == "0"
              else "Swift runtime loaded from the toolchain, NOT the shipped -static-stdlib build")
    return [
        "Machine: %s, %s cores, kernel %s; %s" % (platform.machine(), os.cpu_count(), platform.release(),
                                                   pkgs.rstrip(", ")),
        "Library: %s (%.1f MB, %s); commit %s%s." % (
            a.built_from or "`%s`, `%s`" % (os.path.relpath(a.lib, ROOT), os.path.relpath(a.cli, ROOT)),
            os.path.getsize(os.path.realpath(a.lib)) / 1e6, static,
            sh("git -C '%s' rev-parse --short HEAD" % ROOT) or "?",
            " with uncommitted changes in Sources/ or Include/" if sh(
                "git -C '%s' status --porcelain -- Sources Include Package.swift" % ROOT) else ""),
        "Provider: gnome-keyring-daemon on a private dbus-daemon (`scripts/with-keyring.sh`), login keyring unlocked.",
    ]


def main():
    import gi_figures  # here, not at the top: it imports this file as the module "bench"

    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--python", default="")
    ap.add_argument("--floor", default="", help="the Swift-runtime floor library (bench/build-floor.sh)")
    ap.add_argument("--gi", default="", help="the GNOME API's build directory (library and typelib)")
    ap.add_argument("--only", default="", help="run only the steps whose names contain one of these words")
    ap.add_argument("--built-from", default="", help="where the measured library and CLI were copied from")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    if not os.environ.get("PORTAL_TEST_KEYRING_DIR"):
        sys.exit("bench.py: run it through bench/run.sh (it needs the private keyring of scripts/with-keyring.sh)")
    os.environ["PORTAL_KEYRING_LIBRARY"] = a.lib
    c = {k: v[1] if a.smoke else v[0] for k, v in COUNTS.items()}
    t = Table(smoke=a.smoke)
    load_before = loadavg()
    started = time.monotonic()
    steps = [
        ("warm restore", lambda: fig_warm(t, a, "restore", c["warm_restore"])),
        ("warm persist", lambda: fig_warm(t, a, "persist", c["warm_persist"])),
        ("cold restore (C example)", lambda: fig_cold_c(t, a, c["cold_c"])),
        ("cold restore (portal-session)", lambda: fig_cold_cli(t, a, c["cold_cli"])),
        ("Python", lambda: fig_python(t, a, c["py_warm"], c["py_cold"])),
        ("load cost", lambda: fig_load(t, a, c["load"])),
        ("size", lambda: fig_size(t, a)),
        ("invalidation", lambda: fig_invalidation(t, a, c["inval_rounds"], c["inval_single"])),
        ("RSS drift", lambda: fig_rss(t, a, c["rss_cycles"], c["rss_cycles_raw"])),
        ("async restore", lambda: fig_async(t, a, c["async_restore"], c["async_prompt_ms"])),
        ("watch", lambda: fig_watch(t, a, c["watch_rounds"], c["watch_idle_s"])),
        ("Flatpak sandbox", lambda: fig_sandbox(t, a, c["sandbox_cold"], c["sandbox_warm"])),
        ("GNOME API restore (PyGObject)", lambda: gi_figures.fig_gi_restore(t, a, "python", c["gi_python"])),
        ("GNOME API restore (GJS)", lambda: gi_figures.fig_gi_restore(t, a, "gjs", c["gi_gjs"])),
        ("GNOME API async restore", lambda: gi_figures.fig_gi_async(t, a, c["gi_async"])),
    ]
    if a.only:
        words = [w for w in a.only.split(",") if w]
        steps = [s for s in steps if any(w.lower() in s[0].lower() for w in words)]
    for name, step in steps:
        t0 = time.monotonic()
        sys.stderr.write("bench: %s …\n" % name)
        sys.stderr.flush()
        step()
        sys.stderr.write("bench: %s done in %.1f s\n" % (name, time.monotonic() - t0))
    elapsed = time.monotonic() - started
    t.notes.append("Load average (1/5/15 min) at start %s, at end %s on this shared %d-core machine: other work "
                   "widens the min–max and p5–p95 ranges; the alternation spreads it over both sides." % (
                       load_before, loadavg(), os.cpu_count()))

    doc = []
    doc.append("# portal-keyring benchmarks%s" % (" (smoke run: a few iterations, figures not meaningful)" if a.smoke else ""))
    doc.append("")
    doc.append("Run %s with `%s` in %.0f s. Every ratio compares two sides measured in the same run, "
               "alternating (A B, B A, …); min/max are single samples, the ratio is of the medians, "
               "its range is the 5th–95th percentile of the per-pair ratios, and the ratio of the minimums "
               "(each side's fastest run) is the figure least disturbed by other load on the machine." % (
                   datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                   "bench/run.sh --smoke" if a.smoke else "make bench (bench/run.sh)", elapsed))
    doc.append("")
    doc.append(t.markdown())
    doc.append("")
    for line in environment(a) + t.notes:
        doc.append("- " + line)
    if t.failures:
        doc.append("")
        doc.append("## Failures")
        for f in t.failures:
            doc.append("")
            doc.append("```")
            doc.append(f)
            doc.append("```")
    text = "\n".join(doc) + "\n"
    sys.stdout.write(text)
    if a.out:
        # The history (each step's figures) is kept: everything from HISTORY_HEADING on
        # in the file being replaced is appended after the new table.
        history = ""
        try:
            with open(a.out, encoding="utf-8") as f:
                old = f.read()
            if HISTORY_HEADING in old:
                history = "\n" + old[old.index(HISTORY_HEADING):]
        except OSError:
            pass
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text + history)
    sys.exit(1 if t.failures else 0)


if __name__ == "__main__":
    main()
