#!/usr/bin/env python3
"""Tests/tools/test_check_layers.py — scripts/check-sources.sh's rules 8 (files at a root) and 10
(the core's layer rule, scripts/check-layers.py) fail on what they forbid (seconds, no build; run
by check-sources.sh itself).

Each test copies the sources, the Swift tests and scripts/ into a temporary directory, plants
files there, and runs the copy's check-sources.sh (with PORTAL_CHECK_NESTED=1: no link check, no
catalogue, no self-tests). The unplanted copy passes; each plant fails with the offence named:

- a Values/ file that names `PortalAuth` (Auth, a layer above), once in code and once each in a
  comment, a string and a raw string (those do not count);
- a FileKeyring/ file that names `SecretServiceStorage` (a sibling backend); the same from
  Flatpak/ passes (the composite may name the backends it composes);
- six Swift files at the core's root, and six at the tests' root (rule 8: at most five).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CORE = "Sources/PortalKeyringCore"


class CheckSourcesPlantTests(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.tree = self.dir.name
        for folder in ("Sources", "Tests/PortalKeyringTests", "scripts"):
            shutil.copytree(os.path.join(ROOT, folder), os.path.join(self.tree, folder))

    def tearDown(self):
        self.dir.cleanup()

    def plant(self, path, text):
        full = os.path.join(self.tree, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as handle:
            handle.write(text)

    @staticmethod
    def environment():
        """The caller's environment, nested, with rule 8's default limit (5)."""
        environment = dict(os.environ, PORTAL_CHECK_NESTED="1")
        environment.pop("PORTAL_CHECK_ROOT_LIMIT", None)
        return environment

    def check(self):
        result = subprocess.run(["bash", "scripts/check-sources.sh"], cwd=self.tree, capture_output=True, text=True,
                                env=self.environment(), timeout=120)
        return result.returncode, result.stdout + result.stderr

    def test_the_copy_passes_unplanted(self):
        status, output = self.check()
        self.assertEqual(status, 0, output)
        self.assertIn("check-sources: the core's files name no type of a layer above", output)

    def test_a_type_of_a_layer_above_fails(self):
        self.plant(f"{CORE}/Values/Planted.swift",
                   "// PortalAuth in a comment is not a use\n"
                   "let plantedText = \"PortalAuth\" + #\"PortalAuth\"#\n"
                   "func planted(_ auth: PortalAuth) {}\n")
        status, output = self.check()
        self.assertEqual(status, 1, output)
        self.assertIn(f"{CORE}/Values/Planted.swift:3: names PortalAuth (Auth, a layer above)", output)
        self.assertNotIn("Planted.swift:1:", output)
        self.assertNotIn("Planted.swift:2:", output)

    def test_storage_naming_a_caller_fails(self):
        self.plant(f"{CORE}/Storage/Planted.swift", "func planted() -> SessionChange? { nil }\n")
        status, output = self.check()
        self.assertEqual(status, 1, output)
        self.assertIn(f"{CORE}/Storage/Planted.swift:1: names SessionChange (Session, a layer above)", output)

    def test_a_sibling_backend_fails_but_the_composite_may_name_it(self):
        self.plant(f"{CORE}/Storage/FileKeyring/Planted.swift", "func planted(_ s: SecretServiceStorage) {}\n")
        status, output = self.check()
        self.assertEqual(status, 1, output)
        self.assertIn("names SecretServiceStorage (Storage/SecretService, a sibling backend)", output)
        os.remove(os.path.join(self.tree, CORE, "Storage/FileKeyring/Planted.swift"))
        self.plant(f"{CORE}/Storage/Flatpak/Planted.swift", "func planted(_ s: SecretServiceStorage) {}\n")
        status, output = self.check()
        self.assertEqual(status, 0, output)

    def test_six_files_at_a_root_fail(self):
        for root in (CORE, "Tests/PortalKeyringTests"):
            with self.subTest(root=root):
                for index in range(6):
                    self.plant(f"{root}/Planted{index}.swift", f"func planted{index}() {{}}\n")
                status, output = self.check()
                self.assertEqual(status, 1, output)
                self.assertIn(f"6 Swift files at the root of {root} (at most 5", output)
                for index in range(6):
                    os.remove(os.path.join(self.tree, root, f"Planted{index}.swift"))


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=1).result
    sys.exit(0 if result.wasSuccessful() else 1)
