#!/usr/bin/env python3
"""Tests/tools/test_check_links.py — scripts/check-links.py (rule 9 of scripts/check-sources.sh)
on a throw-away tree (seconds, no build; run by scripts/check-sources.sh):

- a tree whose links and citations all resolve passes, silently;
- a planted dead anchor fails the check and is named — in a source comment's citation, in a
  Markdown link to another page and in a link to a heading of the same page;
- so does a link to a file that does not exist;
- anchors are GitHub's: punctuation and code marks dropped, repeats numbered;
- links inside code blocks and to other sites are not the tree's and are left alone;
- a code block that is never closed (another opens, or the page ends) fails, named by its line.
"""
import os
import subprocess
import sys
import tempfile
import unittest

# The fixtures write ".MD" where the planted tree has ".md": this file is in the tree the real
# check reads, and its fixtures' dead links are meant to be dead.

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "check-links.py")

GUIDE = """# The guide

## First steps

## `portal-session` status: what it shows

## Locked ≠ absent

## Notes

## Notes

```sh
see [nothing](missing.MD#here)   # a code block: not a link
```
"""

README = """# Project

Read [the guide](docs/guide.MD), [its first steps](docs/guide.MD#first-steps) and
[the status](docs/guide.MD#portal-session-status-what-it-shows); [below](#more).
Elsewhere: [a site](https://example.com/x.MD#anything).

## More
"""

SOURCE = """/// The status (docs/guide.MD#portal-session-status-what-it-shows; docs/guide.MD#locked--absent).
/// Both notes: docs/guide.MD#notes, docs/guide.MD#notes-1.
func status() {}
"""


class CheckLinks(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        self.write("docs/guide.MD", GUIDE)
        self.write("README.MD", README)
        self.write("Sources/Status.swift", SOURCE)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, path, text):
        path, text = path.replace(".MD", ".md"), text.replace(".MD", ".md")
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)

    def append(self, path, text):
        path, text = path.replace(".MD", ".md"), text.replace(".MD", ".md")
        with open(os.path.join(self.root, path), "a", encoding="utf-8") as f:
            f.write(text)

    def check(self):
        run = subprocess.run([sys.executable, CHECKER, self.root], capture_output=True, text=True, timeout=60)
        return run.returncode, run.stdout + run.stderr

    def assert_dead(self, where, target):
        code, out = self.check()
        self.assertNotEqual(code, 0, f"the dead link {target} passed:\n{out}")
        self.assertIn(f"{where}: {target}".replace(".MD", ".md"), out)

    def test_live_tree_passes(self):
        self.assertEqual(self.check(), (0, ""))

    def test_dead_anchor_in_a_source_comment(self):
        self.append("Sources/Status.swift", "/// Gone: docs/guide.MD#last-steps.\n")
        self.assert_dead("Sources/Status.swift:4", "docs/guide.MD#last-steps")

    def test_dead_anchor_in_a_markdown_link(self):
        self.append("README.MD", "See [the end](docs/guide.MD#the-end).\n")
        self.assert_dead("README.MD:8", "docs/guide.MD#the-end")

    def test_dead_anchor_in_the_same_page(self):
        self.append("README.MD", "Back [up](#less).\n")
        self.assert_dead("README.MD:8", "#less")

    def test_dead_file(self):
        self.append("README.MD", "[Gone](docs/gone.MD).\n")
        self.assert_dead("README.MD:8", "docs/gone.MD")

    def test_dead_file_in_a_citation(self):
        self.append("Sources/Status.swift", "// docs/gone.MD#first-steps\n")
        self.assert_dead("Sources/Status.swift:4", "docs/gone.MD#first-steps")

    def test_relative_link_from_a_page_in_a_folder(self):
        self.write("docs/other.MD", "[Back](../README.MD#more), [guide](guide.MD#notes-1)\n")
        self.assertEqual(self.check(), (0, ""))
        self.append("docs/other.MD", "[Wrong folder](docs/guide.MD)\n")
        self.assert_dead("docs/other.MD:2", "docs/guide.MD")

    def test_code_block_never_closed(self):
        # The block is left open, the next one opens (a fence with a language only opens one):
        # the heading between them would render as code.
        self.append("README.MD", "```c\nint x;\n## Later\n```sh\nls\n```\n")
        self.assert_dead("README.MD:8", "```")
        self.write("docs/last.MD", "# Last\n\n```\nnever closed\n")
        self.assert_dead("docs/last.MD:3", "```")


if __name__ == "__main__":
    unittest.main()
