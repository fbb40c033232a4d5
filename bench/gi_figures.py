"""gi_figures.py — bench.py's figures of the GNOME API (libportal-keyring-gobject-1, PortalKeyring-1),
built by bench/run.sh against the measured library into build/bench/gobject (bench.py --gi DIR).

  restore from PyGObject   bench/gi_restore.py vs Secret.password_lookup_sync, same process (≤ 1.05×)
  restore from GJS         bench/gi_restore.js (gjs -m), the same in JavaScript (≤ 1.05×)
  async restore            bench/gi_async.c: the GNOME API's _async + _finish vs the C ABI's async
                           restore on one GMainLoop (≤ 1.10×)

The async figure is a C program, not a binding: both sides are then in one language and one
process, so the ratio is the layer's own cost (GTask, the session object, GError); what a binding
adds is in the two rows before it, against libsecret's introspected API in the same language.
"""

import json
import os
import re
import shutil
import statistics
import subprocess

from bench import HERE, ProgramFailed, at_most_verdict, ratio_cell, rows, run, spread

GI_PYTHON = "/usr/bin/python3"  # Debian's, the one python3-gi is for (the tests use it too)


def common_env():
    """bench_common.h's #defines, string concatenation resolved, as BENCH_* variables."""
    with open(os.path.join(HERE, "bench_common.h"), encoding="utf-8") as f:
        text = f.read().replace("\\\n", " ")
    values = {}
    for name, body in re.findall(r"^#define (BENCH_\w+) (\".*)$", text, re.M):
        parts = re.findall(r'"((?:[^"\\]|\\.)*)"|\b(BENCH_\w+)\b', body)
        values[name] = "".join(json.loads('"%s"' % s) if s or not ref else values[ref] for s, ref in parts)
    return values


def gi_env(a):
    env = dict(os.environ, **common_env())
    env["GI_TYPELIB_PATH"] = a.gi + (":" + env["GI_TYPELIB_PATH"] if env.get("GI_TYPELIB_PATH") else "")
    env["LD_LIBRARY_PATH"] = ":".join(p for p in (a.gi, os.path.dirname(a.lib), env.get("LD_LIBRARY_PATH")) if p)
    return env


def fig_gi_restore(t, a, lang, n):
    """Restore through the GNOME API from a binding vs libsecret's lookup from the same binding."""
    label = "restore through the GNOME API from %s, in one process" % {"python": "PyGObject", "gjs": "GJS"}[lang]
    base = "`Secret.password_lookup_sync` (libsecret, %s)" % {"python": "PyGObject", "gjs": "GJS"}[lang]
    cmd = {"python": [GI_PYTHON, os.path.join(HERE, "gi_restore.py"), str(n)],
           "gjs": ["gjs", "-m", os.path.join(HERE, "gi_restore.js"), str(n)]}[lang]
    if not a.gi:
        return t.failed(label, "≤ 1.05×", "the GNOME API was not built (see the bench/run.sh output)")
    probe = {"python": [GI_PYTHON, "-c", "import gi"], "gjs": ["gjs", "-c", ""]}[lang]
    if not shutil.which(cmd[0]) or subprocess.run(probe, capture_output=True).returncode != 0:
        return t.not_run(label, "≤ 1.05×", "`%s` failed (Debian: %s)" % (
            " ".join(probe), {"python": "python3-gi", "gjs": "gjs"}[lang]))
    try:
        data = rows(run(cmd, env=gi_env(a)), 2)
    except ProgramFailed as e:
        return t.failed(label, "≤ 1.05×", str(e))
    ours, theirs = [r[0] for r in data], [r[1] for r in data]
    r, cell = ratio_cell(ours, theirs)
    t.add(label, spread(ours), "%s: %s" % (base, spread(theirs)), cell, "≤ 1.05×",
          at_most_verdict(r, 1.05, statistics.median(theirs), statistics.median(ours)), n)


def fig_gi_async(t, a, n):
    label = "async restore on a GMainLoop through the GNOME API (C, `_async` + `_finish`), completion included"
    if not a.gi:
        return t.failed(label, "≤ 1.10×", "the GNOME API was not built (see the bench/run.sh output)")
    try:
        data = rows(run([os.path.join(a.bin, "gi_async"), str(n)]), 2)
    except ProgramFailed as e:
        return t.failed(label, "≤ 1.10×", str(e))
    ours, c_abi = [r[0] for r in data], [r[1] for r in data]
    r, cell = ratio_cell(ours, c_abi)
    t.add(label, spread(ours), "`portal_auth_restore_session_async` (C ABI), same loop: %s" % spread(c_abi), cell,
          "≤ 1.10×", at_most_verdict(r, 1.10, statistics.median(c_abi), statistics.median(ours)), n)
