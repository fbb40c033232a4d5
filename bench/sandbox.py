#!/usr/bin/env python3
"""bench/sandbox.py — the Flatpak sandbox's samples for bench/bench.py.

    scripts/with-flatpak-sandbox.sh --host python3 bench/sandbox.py --bin DIR --cli CLI --cold N --warm N

Runs on the host side of the sandbox harness; every program runs inside a sandbox instance
($PORTAL_TEST_IN_SANDBOX), where the keyring is the portal-keyed file keyring for us and
libsecret's file backend for libsecret. Prints one JSON object on stdout:

    cold        [[ours_ns, secret_tool_ns, ours_maxrss_kib, secret_tool_maxrss_kib], ...]:
                `portal-session restore` vs `secret-tool lookup`, whole processes alternating in one
                sandbox instance (bench/spawnbench.c), each asking the portal for the app's secret
    cold_hung   {"ours": n, "libsecret": n}: runs killed after 3 s (their pairs left out)
    warm        [[ours_ns, libsecret_ns], ...]: bench/warm.c's restore in one sandboxed process
    warm_tries  how many warm.c runs it took (one hung at libsecret's first portal call is retried)

or {"error": "..."} with exit status 1. bench/bench.py turns them into its table's rows.
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import END_USER, REDIRECT, TOKEN, ProgramFailed, rows  # noqa: E402

ENV_ID = "bench-sandbox"
RAW_ENV_ID = "bench-sandbox-raw"
WARM_LIMIT_S = 15
HANG_MS = 3000  # libsecret 0.20.5 hangs about 1 lookup in 15-25 in the sandbox (Tests/flatpak/run.sh)


def sandboxed(cmd, stdin=None, timeout=120, tries=1):
    """Runs cmd in a new sandbox instance; returns stdout. A run past `timeout` seconds is killed
    and tried again up to `tries` times; returns (stdout, runs)."""
    inside = os.environ["PORTAL_TEST_IN_SANDBOX"]
    for attempt in range(1, tries + 1):
        try:
            p = subprocess.run([inside] + cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            if attempt == tries:
                raise ProgramFailed("%s: no answer after %d s (%d tries)" % (" ".join(cmd), timeout, tries)) from None
            continue
        if p.returncode != 0:
            raise ProgramFailed("%s: exit status %d in the sandbox\n%s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
        return p.stdout, attempt
    raise AssertionError("unreachable")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--cold", type=int, required=True)
    ap.add_argument("--warm", type=int, required=True)
    a = ap.parse_args()
    try:
        cli = [a.cli, "--env", ENV_ID, "--redirect-url", REDIRECT]
        sandboxed(cli + ["persist", "--end-user-id", END_USER], stdin=TOKEN + "\n")
        sandboxed([os.path.join(a.bin, "raw_secret"), "store", RAW_ENV_ID], timeout=HANG_MS / 1000, tries=5)
        out, _ = sandboxed([os.path.join(a.bin, "spawnbench"), "--timeout-ms", str(HANG_MS), str(a.cold), "--"] +
                           cli + ["restore", "--", "secret-tool", "lookup", "auth_environment_id", RAW_ENV_ID],
                           timeout=60 + a.cold * 2 * HANG_MS / 1000)
        lines = out.splitlines()
        cold = rows("\n".join(l for l in lines if not l.startswith("hung ")), 4)
        hung = {"ours": lines.count("hung a"), "libsecret": lines.count("hung b")}
        # A whole warm run takes well under a second even in the full benchmark; a run that has not
        # ended after WARM_LIMIT_S hung at libsecret's first portal call and is tried again.
        out, tries = sandboxed([os.path.join(a.bin, "warm"), "restore", str(a.warm)], timeout=WARM_LIMIT_S, tries=3)
        warm = rows(out, 2)
        sandboxed(cli + ["clear"])
    except ProgramFailed as e:
        print(json.dumps({"error": str(e)}))
        sys.exit(1)
    print(json.dumps({"cold": cold, "cold_hung": hung, "warm": warm, "warm_tries": tries}))


if __name__ == "__main__":
    main()
