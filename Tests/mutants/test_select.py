#!/usr/bin/env python3
"""Tests/mutants/test_select.py — what `mutants.py select` (CI's `run.sh --changed`) picks, on a
throw-away git repository (seconds, no build; run by scripts/check-sources.sh):

- nothing changed since the green commit: only the rotating slice;
- the mutated file, a guarding suite's file or a shared harness file changed: the mutants it
  guards, whatever the slice;
- the C header changed: the mutants with a suite that goes through the C ABI, not those guarded
  by Swift tests alone (their target does not depend on the header's module);
- a budget cuts the slice (in name order), then the mutants of a changed suite, never those of
  the changed code itself;
- the order to run them in: edited mutants, the changed code's, a changed suite's, the slice;
- no green commit recorded, or one this clone does not have: everything;
- `sync` and `restore` give a changed file a fresh mtime (never the source's) and leave an
  unchanged one alone;
- a `within:` anchor confines a hunk to its enclosing declaration and follows it to another file;
- `check` fails when the catalogue's README states another count than the catalogue's, or states
  it more than once; `count --write` corrects it; the real README states the real count.
"""
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
MUTANTS = os.path.join(HERE, "mutants.py")

MUTANT = """promise: test fixture
file: {file}
suite: {suite}
--- search
old
--- replace
new
--- end
"""


class SelectTests(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.tree = self.dir.name
        self.git("init", "-q")
        self.git("config", "user.email", "t@example.invalid")
        self.git("config", "user.name", "t")
        for path in ("Sources/A.swift", "Sources/B.swift", "Include/portal_keyring.h", "Tests/c/b_test.c",
                     "Tests/PortalKeyringTests/ATests.swift", "Tests/PortalKeyringTests/Support/InMemoryStorage.swift",
                     "scripts/with-keyring.sh", "README.md"):
            self.write(path, "old\n")
        # a-swift: guarded by a Swift suite only; b-c: by a C program.
        self.write("cat/a-swift.mutant", MUTANT.format(file="Sources/A.swift", suite="swift ATests"))
        self.write("cat/b-c.mutant", MUTANT.format(file="Sources/B.swift", suite="c b_test"))
        self.commit()
        self.write("cat/green", self.git("rev-parse", "HEAD").strip() + "\n")
        self.commit()

    def tearDown(self):
        self.dir.cleanup()

    def git(self, *args):
        return subprocess.run(["git", "-C", self.tree, *args], check=True, capture_output=True, text=True).stdout

    def write(self, path, text):
        full = os.path.join(self.tree, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "a" if os.path.exists(full) else "w", encoding="utf-8") as f:
            f.write(text)

    def commit(self):
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "x")

    def select(self, slices, budget=None):
        extra = [] if budget is None else [str(budget)]
        out = subprocess.run([sys.executable, MUTANTS, "select", os.path.join(self.tree, "cat"), self.tree, str(slices)]
                             + extra, check=True, capture_output=True, text=True)
        return set(out.stdout.split())

    def in_slice(self, slices):
        """The mutant of the rotating slice: the one at HEAD's commit count mod SLICES, by name."""
        count = int(self.git("rev-list", "--count", "HEAD"))
        return {name for index, name in enumerate(["a-swift", "b-c"]) if index == count % slices}

    def selected(self):
        """What the change selects: the selection less the rotating slice."""
        return self.select(1000) - self.in_slice(1000)

    def test_nothing_changed_selects_only_the_slice(self):
        self.write("README.md", "more\n")
        self.commit()
        self.assertEqual(self.selected(), set())
        self.assertEqual(self.select(2), self.in_slice(2))
        self.assertEqual(len(self.select(2)), 1)
        self.write("README.md", "more\n")
        self.commit()
        self.assertEqual(len(self.select(2)), 1, "the slice rotates with each commit")
        self.assertEqual(self.select(2), self.in_slice(2))

    def test_a_mutated_file_or_a_suite_file_selects_its_mutants(self):
        self.write("Sources/A.swift", "more\n")
        self.assertEqual(self.selected(), {"a-swift"})
        self.git("checkout", "-q", "--", ".")
        self.write("Tests/c/b_test.c", "more\n")
        self.assertEqual(self.selected(), {"b-c"})

    def test_a_c_programs_folder_and_the_c_test_header_select_its_mutants(self):
        self.write("Tests/c/b_test/part.c", "new\n")
        self.assertEqual(self.selected(), {"b-c"}, "a file of the program of several files (Tests/c/build.sh)")
        os.remove(os.path.join(self.tree, "Tests/c/b_test/part.c"))
        self.write("Tests/c/check.h", "new\n")
        self.assertEqual(self.selected(), {"b-c"}, "the checks of every C test program")

    def test_the_harness_selects_every_mutant(self):
        self.write("scripts/with-keyring.sh", "more\n")
        self.assertEqual(self.selected(), {"a-swift", "b-c"})

    def test_the_c_header_selects_the_mutants_of_c_abi_suites_only(self):
        self.write("Include/portal_keyring.h", "more\n")
        self.assertEqual(self.selected(), {"b-c"})

    def test_the_budget_cuts_the_slice_never_the_change(self):
        # One slice: both mutants are in it unless a change selects them.
        self.assertEqual(self.select(1), {"a-swift", "b-c"})
        self.assertEqual(self.select(1, budget=1), {"a-swift"}, "the slice is cut in name order")
        self.write("Sources/B.swift", "more\n")
        self.assertEqual(self.select(1, budget=1), {"b-c"}, "the change's mutant comes first")
        self.assertEqual(self.select(1, budget=0), {"b-c"}, "the change's mutants are never cut")
        self.assertEqual(self.select(1, budget=2), {"a-swift", "b-c"})

    def test_the_budget_cuts_a_changed_suites_mutants_before_the_changed_codes(self):
        self.write("Tests/c/b_test.c", "more\n")
        self.assertEqual(self.select(1000, budget=0), set(), "only a suite changed: cut by the budget")
        self.assertEqual(self.select(1000, budget=1) - self.in_slice(1000), {"b-c"}, "it comes before the slice")
        self.write("Sources/A.swift", "more\n")
        self.assertEqual(self.select(1000, budget=0), {"a-swift"}, "the changed code's mutant is never cut")

    def order(self, slices, budget=None):
        extra = [] if budget is None else [str(budget)]
        out = subprocess.run([sys.executable, MUTANTS, "select", os.path.join(self.tree, "cat"), self.tree, str(slices)]
                             + extra, check=True, capture_output=True, text=True)
        return out.stdout.split()

    def test_edited_mutants_run_first_then_the_changed_code_then_a_changed_suite(self):
        self.write("Tests/PortalKeyringTests/ATests.swift", "more\n")
        self.write("Sources/B.swift", "more\n")
        self.assertEqual(self.order(1000), ["b-c", "a-swift"], "the changed code's before a changed suite's")
        self.write("cat/a-swift.mutant", "# edited\n")
        self.assertEqual(self.order(1000), ["a-swift", "b-c"], "an edited mutant first")

    def test_an_unknown_green_commit_selects_every_mutant(self):
        with open(os.path.join(self.tree, "cat/green"), "w", encoding="utf-8") as f:
            f.write("0" * 40 + "\n")
        self.assertEqual(self.selected(), {"a-swift", "b-c"})


class CopyTests(unittest.TestCase):
    """`sync` and `restore` (run.sh's copy of the tree, and each mutated file put back): a file
    whose bytes changed is newer than any build made before, whatever the source's mtime; an
    unchanged one is left alone (no rebuild)."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.source = os.path.join(self.dir.name, "source")
        self.tree = os.path.join(self.dir.name, "tree")
        subprocess.run(["git", "init", "-q", self.source], check=True)
        self.put(self.source, "Sources/C/include/c.h", "#define OPTION\n")
        self.put(self.source, "Sources/A.swift", "old\n")
        # The sources' mtimes are old: a fresh build in the copy is newer than them.
        for rel in ("Sources/C/include/c.h", "Sources/A.swift"):
            os.utime(os.path.join(self.source, rel), (1_000_000_000, 1_000_000_000))
        self.mutants("sync", self.source, self.tree)

    def tearDown(self):
        self.dir.cleanup()

    @staticmethod
    def put(root, rel, text):
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
            f.write(text)

    @staticmethod
    def mutants(*args):
        subprocess.run([sys.executable, MUTANTS, *args], check=True, capture_output=True)

    def mtime(self, rel):
        return os.stat(os.path.join(self.tree, rel)).st_mtime

    def test_a_restored_header_is_newer_than_the_mutants_build(self):
        self.put(self.tree, "Sources/C/include/c.h", "\n")  # the mutant, written 10 s ago
        written = int(time.time()) - 10
        os.utime(os.path.join(self.tree, "Sources/C/include/c.h"), (written, written))
        self.mutants("restore", self.source, self.tree, "Sources/C/include/c.h")
        with open(os.path.join(self.tree, "Sources/C/include/c.h"), encoding="utf-8") as f:
            self.assertEqual(f.read(), "#define OPTION\n")
        self.assertGreater(self.mtime("Sources/C/include/c.h"), written,
                           "put back with its old mtime: the Swift code built for the mutant stays")

    def test_sync_gives_a_changed_file_a_fresh_mtime_and_leaves_the_rest(self):
        untouched = self.mtime("Sources/A.swift")
        self.put(self.tree, "Sources/C/include/c.h", "\n")  # a mutant left by a killed run
        os.utime(os.path.join(self.tree, "Sources/C/include/c.h"), (2_000_000_000, 2_000_000_000))
        self.mutants("sync", self.source, self.tree)
        self.assertGreater(self.mtime("Sources/C/include/c.h"), 1_000_000_000)
        self.assertNotEqual(self.mtime("Sources/C/include/c.h"), 2_000_000_000)
        with open(os.path.join(self.tree, "Sources/C/include/c.h"), encoding="utf-8") as f:
            self.assertEqual(f.read(), "#define OPTION\n")
        self.assertEqual(self.mtime("Sources/A.swift"), untouched, "an unchanged file was copied again")


class AnchorTests(unittest.TestCase):
    """A `within:` anchor: the hunk is looked for inside its enclosing declaration only, and
    follows that declaration when it moves to another file."""

    SOURCE = ("struct S {\n    func a() {\n        x = 1\n    }\n\n    func b() {\n        x = 1\n    }\n}\n")

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.tree = self.dir.name
        CopyTests.put(self.tree, "Sources/A.swift", self.SOURCE)
        CopyTests.put(self.tree, "cat/in-b.mutant", "promise: fixture\nfile: Sources/A.swift\nwithin: func b(\n"
                      "suite: swift BTests\n--- search\n        x = 1\n--- replace\n        x = 2\n--- end\n")

    def tearDown(self):
        self.dir.cleanup()

    def run_tool(self, *args):
        return subprocess.run([sys.executable, MUTANTS, *args], capture_output=True, text=True)

    def test_the_hunk_applies_inside_its_declaration_only(self):
        self.assertEqual(self.run_tool("apply", os.path.join(self.tree, "cat"), "in-b", self.tree).returncode, 0)
        with open(os.path.join(self.tree, "Sources/A.swift"), encoding="utf-8") as f:
            self.assertEqual(f.read(), self.SOURCE.replace("b() {\n        x = 1", "b() {\n        x = 2"))

    def test_a_moved_declaration_is_followed_and_named(self):
        CopyTests.put(self.tree, "Sources/A.swift", self.SOURCE.replace("func b()", "func c()"))
        CopyTests.put(self.tree, "Sources/Folder/B.swift", "extension S {\n    func b() {\n        x = 1\n    }\n}\n")
        check = self.run_tool("check", os.path.join(self.tree, "cat"), self.tree)
        self.assertEqual(check.returncode, 0, check.stdout)
        self.assertIn("now in Sources/Folder/B.swift", check.stdout)
        show = self.run_tool("show", os.path.join(self.tree, "cat"), "in-b", self.tree)
        self.assertIn("m_file=Sources/Folder/B.swift", show.stdout)
        self.assertEqual(self.run_tool("apply", os.path.join(self.tree, "cat"), "in-b", self.tree).returncode, 0)
        with open(os.path.join(self.tree, "Sources/Folder/B.swift"), encoding="utf-8") as f:
            self.assertIn("x = 2", f.read())

    def test_an_anchor_in_two_files_is_stale(self):
        CopyTests.put(self.tree, "Sources/A.swift", self.SOURCE.replace("func b()", "func c()"))
        for name in ("B", "C"):
            CopyTests.put(self.tree, f"Sources/{name}.swift", "extension S {\n    func b() {\n        x = 1\n    }\n}\n")
        check = self.run_tool("check", os.path.join(self.tree, "cat"), self.tree)
        self.assertEqual(check.returncode, 1)
        self.assertIn("STALE in-b", check.stdout)


class CountTests(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.catalogue = self.dir.name
        for name in ("a", "b"):
            with open(os.path.join(self.catalogue, name + ".mutant"), "w", encoding="utf-8") as f:
                f.write(MUTANT.format(file="f.txt", suite="swift A"))
        with open(os.path.join(self.catalogue, "f.txt"), "w", encoding="utf-8") as f:
            f.write("old\n")

    def tearDown(self):
        self.dir.cleanup()

    def readme(self, text=None):
        path = os.path.join(self.catalogue, "README.md")
        if text is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        with open(path, encoding="utf-8") as f:
            return f.read()

    def check(self):
        return subprocess.run([sys.executable, MUTANTS, "check", self.catalogue, self.catalogue],
                              capture_output=True, text=True)

    def test_a_wrong_count_fails_check_and_count_write_corrects_it(self):
        self.readme("# C\n\nThe catalogue holds 3 mutants (here).\n")
        result = self.check()
        self.assertEqual(result.returncode, 1)
        self.assertIn("says 3 mutants, the catalogue holds 2", result.stdout)
        counted = subprocess.run([sys.executable, MUTANTS, "count", self.catalogue, "--write"],
                                 capture_output=True, text=True, check=True)
        self.assertEqual(counted.stdout.strip(), "2")
        self.assertEqual(self.readme(), "# C\n\nThe catalogue holds 2 mutants (here).\n")
        self.assertEqual(self.check().returncode, 0)

    def test_a_count_stated_twice_or_never_fails_check(self):
        self.readme("The catalogue holds 2 mutants. The catalogue holds 2 mutants.\n")
        self.assertEqual(self.check().returncode, 1)
        self.readme("No count here.\n")
        self.assertEqual(self.check().returncode, 1)

    def test_the_real_readme_states_the_real_count(self):
        counted = subprocess.run([sys.executable, MUTANTS, "count", HERE], capture_output=True, text=True, check=True)
        self.assertIn(f"The catalogue holds {counted.stdout.strip()} mutants", self.readme_of(HERE))

    @staticmethod
    def readme_of(directory):
        with open(os.path.join(directory, "README.md"), encoding="utf-8") as f:
            return f.read()


if __name__ == "__main__":
    unittest.main()
