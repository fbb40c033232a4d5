#!/usr/bin/env python3
"""Tests/tools/test_stress.py — how many runs scripts/stress.sh starts for a run count and a time
budget (--until), decided without running the suites (PORTAL_STRESS_DRY_RUN=1; seconds; run by
scripts/check-sources.sh).

The case that broke: .ci/run gives the step 3 minutes, the first run's estimate was 3 minutes too,
and a clock tick between the two made the step start nothing and still pass.
"""
import os
import re
import subprocess
import time
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def started(*args, budget=None):
    """The run numbers stress.sh started, and its last line."""
    argv = [os.path.join(ROOT, "scripts/stress.sh"), *args]
    if budget is not None:
        argv += ["--until", str(int(time.time()) + budget)]
    env = dict(os.environ, PORTAL_STRESS_DRY_RUN="1")
    env.pop("PORTAL_STRESS_RUNS", None)
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise AssertionError(f"stress.sh exited {result.returncode}: {result.stderr}")
    runs = [int(m.group(1)) for m in re.finditer(r"^=== stress run (\d+)/", result.stdout, re.M)]
    return runs, result.stdout.strip().splitlines()[-1]


class StressBudgetTests(unittest.TestCase):
    def test_the_first_run_starts_within_ci_budget(self):
        # .ci/run's own arguments; the budget already a second spent.
        runs, last = started("5", budget=3 * 60 - 1)
        self.assertEqual(runs, [1], last)
        self.assertEqual(last, "stress: 1 of 5 runs passed")

    def test_the_first_run_starts_with_the_budget_spent(self):
        runs, _ = started("5", budget=-10)
        self.assertEqual(runs, [1])

    def test_later_runs_start_while_they_fit(self):
        runs, last = started("3", budget=3600)
        self.assertEqual(runs, [1, 2, 3], last)

    def test_no_budget_runs_every_run(self):
        runs, _ = started("4")
        self.assertEqual(runs, [1, 2, 3, 4])

    def test_zero_runs_start_nothing(self):
        runs, last = started("0", budget=3600)
        self.assertEqual(runs, [])
        self.assertEqual(last, "stress: 0 of 0 runs passed")


if __name__ == "__main__":
    unittest.main()
