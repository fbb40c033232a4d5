"""scripts/run-suites.sh on planted tables (run by scripts/check-sources.sh): every job runs, a
failing or overrunning job fails the run without stopping the others, two jobs of one group never
overlap, the longest expected work starts first, and a malformed table is refused."""
import os
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(ROOT, "scripts", "run-suites.sh")


def run(table, *args):
    """Runs run-suites.sh over TABLE's rows; returns (status, output, {job: (seconds, status)},
    the order of the `started:` lines, the folder of the jobs' logs)."""
    d = tempfile.mkdtemp(prefix="run-suites-test.")
    # A command is words without quoting (Tests/suites): a job that needs a shell is a script in d.
    with open(os.path.join(d, "group-job.sh"), "w", encoding="utf-8") as f:
        f.write('echo "start $$" >>"$MARK/g"; sleep 1; echo "end $$" >>"$MARK/g"\n')
    path = os.path.join(d, "suites")
    with open(path, "w", encoding="utf-8") as f:
        f.write(table.replace("{dir}", d))
    env = dict(os.environ, SUITES_TABLE=path, SUITES_STEPS_DIR=os.path.join(d, "steps"), MARK=d)
    p = subprocess.run([RUN] + list(args), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    times = {}
    tsv = os.path.join(d, "steps", "times.tsv")
    if os.path.exists(tsv):
        with open(tsv, encoding="utf-8") as f:
            for line in f:
                name, secs, rc = line.rstrip("\n").split("\t")
                times[name] = (int(secs), int(rc))
    started = [l.split(": ", 1)[1].split(" (")[0] for l in p.stdout.splitlines() if l.startswith("##### started: ")]
    return p.returncode, p.stdout + p.stderr, times, started, d


class RunSuitesTests(unittest.TestCase):
    def test_a_failure_and_an_overrun_fail_the_run_and_every_job_runs(self):
        rc, out, times, _, _ = run(
            "ok    - - 10 1 - true\n"
            "bad   - - 10 1 - false\n"
            "slow  - - 1  1 - sleep 5\n"
            "after - - 10 1 - true\n", "--jobs", "1")
        self.assertEqual(rc, 1, out)
        self.assertEqual({k: v[1] for k, v in times.items()}, {"ok": 0, "bad": 1, "slow": 124, "after": 0}, out)
        self.assertIn("'bad' failed", out)
        self.assertIn("TIMEOUT: 'slow'", out)

    def test_all_passing_is_status_0_and_each_output_is_printed(self):
        rc, out, times, _, _ = run("one - - 10 1 - echo first-output\ntwo - - 10 1 - echo second-output\n")
        self.assertEqual(rc, 0, out)
        self.assertIn("first-output", out)
        self.assertIn("second-output", out)
        self.assertEqual(set(times), {"one", "two"})

    def test_two_jobs_of_one_group_never_overlap(self):
        # Each job of group g records its start and end; with 3 slots they would otherwise overlap.
        job = "sh {dir}/group-job.sh"
        rc, out, _, _, d = run("a - - 10 1 g %s\nb - - 10 1 g %s\nc - - 10 1 g %s\n" % (job, job, job), "--jobs", "3")
        self.assertEqual(rc, 0, out)
        with open(os.path.join(d, "g"), encoding="utf-8") as f:
            events = [l.split()[0] for l in f.read().splitlines()]
        self.assertEqual(events, ["start", "end"] * 3, out)

    def test_the_longest_expected_work_starts_first(self):
        rc, out, _, started, _ = run(
            "short - - 10 1 - true\n"
            "long  - - 10 9 - true\n"
            "chain1 - - 10 3 g true\n"
            "chain2 - - 10 4 g true\n"
            "mid   - - 10 5 - true\n", "--jobs", "1")
        self.assertEqual(rc, 0, out)
        # long 9, then the group's chain (3 + 4 = 7 still to run; its first row), mid 5, the rest of
        # the chain 4, short 1.
        self.assertEqual(started, ["long", "chain1", "mid", "chain2", "short"], out)

    def test_a_malformed_row_is_refused_before_anything_runs(self):
        rc, out, times, _, _ = run("fine - - 10 1 - true\nbroken - - ten 1 - true\n")
        self.assertEqual(rc, 2, out)
        self.assertIn(":2:", out)
        self.assertEqual(times, {}, out)


if __name__ == "__main__":
    unittest.main()
