"""compare.py — bench/compare.sh's measurements (run it through compare.sh: it needs the private
keyring of scripts/with-keyring.sh). Prints one markdown table row per library."""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (TOKEN, END_USER, REDIRECT, run, rows)


def spawn(cmd, env=None):
    """Wall time (ns) of one whole process (and wait4's ru_maxrss, which is not used: after a
    fork from Python it carries the parent's RSS); raises on a non-zero exit."""
    t0 = time.perf_counter_ns()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    t1 = time.perf_counter_ns()
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if p.returncode != 0:
        raise bench.ProgramFailed("%s: exit %d %s" % (" ".join(cmd), p.returncode, err))
    return t1 - t0, usage.ru_maxrss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--floor", required=True)
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("libs", nargs="+")
    a = ap.parse_args()
    if not os.environ.get("PORTAL_TEST_KEYRING_DIR"):
        sys.exit("compare.py: run it through bench/compare.sh")
    libs = [tuple(s.split("=", 1)) for s in a.libs]
    probe, raw = os.path.join(a.bin, "loadprobe"), os.path.join(a.bin, "raw_secret")
    example = os.path.join(a.bin, "restore_on_launch")
    bench.run([raw, "store", "cmp-raw"])
    bench.run([a.cli, "--env", "cmp-portal", "--redirect-url", bench.REDIRECT, "clear"])
    env0 = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(libs[0][1]))
    bench.run([example, "cmp-portal"], ok=(0, 1), env=env0)  # first launch: clears, sets its flag
    bench.persist_cli(argparse.Namespace(cli=a.cli), "cmp-portal")
    sides = [("raw", [probe, "raw", "cmp-raw"], [raw, "lookup", "cmp-raw"], None),
             ("floor", [probe, "floor", a.floor, "cmp-raw"], None, None)]
    for name, lib in libs:
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(lib))
        sides.append((name, [probe, "portal", lib, "cmp-portal"], [example, "cmp-portal"], env))
    load = {s[0]: [] for s in sides}
    cold = {s[0]: [] for s in sides if s[2]}
    for _ in range(2):
        for name, lcmd, ccmd, env in sides:
            bench.run(lcmd)
            if ccmd:
                spawn(ccmd, env)
    for i in range(a.rounds):
        order = sides[i % len(sides):] + sides[:i % len(sides)]
        for name, lcmd, ccmd, env in order:
            load[name].append(bench.rows(bench.run(lcmd), 3)[0])
            if ccmd:
                cold[name].append(spawn(ccmd, env))
    med = statistics.median
    r_t = med(x[0] + x[1] for x in load["raw"])
    r_m = med(x[2] for x in load["raw"])
    r_c = med(x[0] for x in cold["raw"])
    print("| build | stripped size | relocation tables | dlopen | first call | dlopen + first call, extra over raw "
          "(of the minimums) | peak RSS extra over raw | cold C restore / raw C program (of the minimums) |")
    print("|---|---|---|---|---|---|---|---|")
    r_min = min(x[0] + x[1] for x in load["raw"])
    rc_min = min(x[0] for x in cold["raw"])
    for name, lcmd, ccmd, env in sides[1:]:
        lib = lcmd[2]
        size = os.path.getsize(os.path.realpath(lib))
        secs = subprocess.run(["readelf", "-SW", lib], capture_output=True, text=True).stdout
        rel = []
        for line in secs.splitlines():
            for sec in (".rela.dyn", ".relr.dyn"):
                if " %s " % sec in line:
                    rel.append("%s %d KiB" % (sec, int(line.split(sec, 1)[1].split()[3], 16) // 1024))
        tot = [x[0] + x[1] for x in load[name]]
        t = med(tot) - r_t
        m = med(x[2] for x in load[name]) - r_m
        c = "%.3f× (%.3f×)" % (med(x[0] for x in cold[name]) / r_c, min(x[0] for x in cold[name]) / rc_min) \
            if name in cold else "—"
        print("| %s | %.2f MB | %s | %.2f ms | %.2f ms | %+.2f ms (%+.2f ms) | %+.2f MiB | %s |" % (
            name, size / 1e6, ", ".join(rel), med(x[0] for x in load[name]) / 1e6, med(x[1] for x in load[name]) / 1e6,
            t / 1e6, (min(tot) - r_min) / 1e6, m / 1024, c))
    print()
    print("The floor's row is raw's lookup plus the floor library loaded and called once. "
          "Raw libsecret: dlopen + first lookup %.2f ms, peak RSS %.1f MiB; raw C program %.2f ms. %d rounds, "
          "order rotated each round; load average %s." % (
              r_t / 1e6, r_m / 1024, r_c / 1e6, a.rounds, " ".join(open("/proc/loadavg").read().split()[:3])))


if __name__ == "__main__":
    main()
