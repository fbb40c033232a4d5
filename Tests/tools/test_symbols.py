#!/usr/bin/env python3
"""Tests/tools/test_symbols.py — debian/symbols.py check-built (the package build's last word on
the ABI) fails when a packaged library lost a symbol its symbols file lists, or exports one it
does not list (seconds, no package build; run by scripts/check-sources.sh).

Each test copies what symbols.py reads (debian/symbols.py and the symbols files, the ABI baseline,
the public headers, build-support/header-api.sh) into a temporary tree, builds each package's
library there as a small C library exporting exactly the listed functions, and runs the copy's
`check-built`: it passes on the exact libraries; with one symbol left out, or one added, it
fails and names the symbol.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def symbols_files():
    return sorted(os.path.join("debian", f) for f in os.listdir(os.path.join(ROOT, "debian"))
                  if f.endswith(".symbols"))


class CheckBuiltTests(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.tree = self.dir.name
        for folder in ("abi", "Include"):
            shutil.copytree(os.path.join(ROOT, folder), os.path.join(self.tree, folder))
        for path in ["debian/symbols.py", "build-support/header-api.sh"] + symbols_files():
            os.makedirs(os.path.join(self.tree, os.path.dirname(path)), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, path), os.path.join(self.tree, path))

    def tearDown(self):
        self.dir.cleanup()

    def build_packages(self, drop=None, add=None):
        """Each symbols file's library in debian/<package>/usr/lib/, exporting its listed names
        (less `drop`, plus `add`)."""
        for path in symbols_files():
            with open(os.path.join(self.tree, path), encoding="utf-8") as handle:
                lines = handle.read().splitlines()
            soname, package = lines[0].split()[:2]
            names = [m.group(1) for line in lines for m in [re.match(r" (\S+)@Base ", line)] if m]
            names = [n for n in names if n != drop] + ([add] if add and "gobject" not in soname else [])
            libdir = os.path.join(self.tree, "debian", package, "usr/lib")
            os.makedirs(libdir)
            source = os.path.join(self.tree, package + ".c")
            with open(source, "w", encoding="utf-8") as handle:
                handle.writelines(f"void {name}(void) {{}}\n" for name in names)
            subprocess.run(["cc", "-shared", "-fPIC", "-o", os.path.join(libdir, soname + ".1.0"),
                            "-Wl,-soname," + soname, source], check=True)
            os.symlink(soname + ".1.0", os.path.join(libdir, soname))

    def check_built(self):
        return subprocess.run([sys.executable, os.path.join(self.tree, "debian/symbols.py"), "check-built"],
                              capture_output=True, text=True)

    def test_exact_libraries_pass(self):
        self.build_packages()
        result = self.check_built()
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("exports exactly", result.stdout)

    def test_lost_symbol_fails(self):
        self.build_packages(drop="portal_auth_free")
        result = self.check_built()
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("no longer exports portal_auth_free", result.stderr)

    def test_unlisted_symbol_fails(self):
        self.build_packages(add="portal_auth_extra_planted")
        result = self.check_built()
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("exports portal_auth_extra_planted", result.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=1)
