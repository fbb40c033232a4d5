"""Where the package finds libportal-keyring.so: $PORTAL_KEYRING_LIBRARY, then the library in the
package's own prefix, then the system soname; a failure lists every attempt with the loader's
message. Each case imports the package in a fresh process laid out like a real installation
(a copy of python/portal_keyring under PREFIX/lib/python3.X/site-packages) and reads
/proc/self/maps to see which file was really mapped."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Dict, Optional

import pytest

from conftest import REPO

PROBE = (
    "import sys\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "try:\n"
    "    import portal_keyring as pk\n"
    "except OSError as e:\n"
    "    print('ERROR', type(e).__name__); print(e); sys.exit(3)\n"
    "maps = open('/proc/self/maps').read()\n"
    "print(pk.library_path)\n"
    "print(sorted({l.split()[-1] for l in maps.splitlines() if 'libportal-keyring' in l}))\n"
)


def built_library() -> str:
    path = os.environ.get("PORTAL_KEYRING_LIBRARY") or os.path.join(REPO, ".build", "debug", "libportal-keyring.so")
    assert os.path.isfile(path), path
    return os.path.realpath(path)


def make_prefix(root: str, with_library: bool) -> str:
    """PREFIX/lib/python3.X/site-packages/portal_keyring (a copy) and, optionally, the library as
    PREFIX/lib/libportal-keyring.so.0.1.0 with its soname link. Returns the site-packages dir."""
    site = os.path.join(root, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")
    shutil.copytree(os.path.join(REPO, "python", "portal_keyring"), os.path.join(site, "portal_keyring"))
    if with_library:
        shutil.copy(built_library(), os.path.join(root, "lib", "libportal-keyring.so.0.1.0"))
        os.symlink("libportal-keyring.so.0.1.0", os.path.join(root, "lib", "libportal-keyring.so.0"))
    return site


def probe(site: str, library: Optional[str] = None) -> "subprocess.CompletedProcess[str]":
    env: Dict[str, str] = {k: v for k, v in os.environ.items()
                           if k not in ("PORTAL_KEYRING_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH")}
    if library is not None:
        env["PORTAL_KEYRING_LIBRARY"] = library
    return subprocess.run([sys.executable, "-c", PROBE, site], env=env, capture_output=True, text=True, timeout=60)


def test_the_library_in_the_packages_prefix_is_found_without_any_variable(tmp_path: "os.PathLike[str]") -> None:
    root = os.path.join(str(tmp_path), "prefix")
    site = make_prefix(root, with_library=True)
    result = probe(site)
    assert result.returncode == 0, result.stdout + result.stderr
    path, mapped = result.stdout.splitlines()
    assert path == os.path.join(root, "lib", "libportal-keyring.so.0")
    assert mapped == repr([os.path.join(root, "lib", "libportal-keyring.so.0.1.0")])


def test_portal_keyring_library_comes_first(tmp_path: "os.PathLike[str]") -> None:
    root = os.path.join(str(tmp_path), "prefix")
    site = make_prefix(root, with_library=True)
    other = os.path.join(str(tmp_path), "elsewhere", "libportal-keyring.so")
    os.makedirs(os.path.dirname(other))
    shutil.copy(built_library(), other)
    result = probe(site, library=other)
    assert result.returncode == 0, result.stdout + result.stderr
    path, mapped = result.stdout.splitlines()
    assert path == other and mapped == repr([other])


def test_an_explicit_library_that_fails_is_not_second_guessed(tmp_path: "os.PathLike[str]") -> None:
    root = os.path.join(str(tmp_path), "prefix")
    site = make_prefix(root, with_library=True)  # would load, but was not asked for
    missing = os.path.join(str(tmp_path), "nope", "libportal-keyring.so")
    result = probe(site, library=missing)
    assert result.returncode == 3, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "ERROR LibraryNotFound"
    attempts = [line.strip() for line in lines if line.startswith("  ")]
    assert attempts == [f"{missing}: no such file"]


def test_nothing_loads_every_attempt_is_listed_with_the_loaders_message(tmp_path: "os.PathLike[str]") -> None:
    if subprocess.run(["sh", "-c", "ldconfig -p | grep -q 'libportal-keyring.so.0 '"]).returncode == 0:
        pytest.fail("libportal-keyring.so.0 is installed system-wide: this test needs a machine without it")
    root = os.path.join(str(tmp_path), "prefix")
    site = make_prefix(root, with_library=False)
    # A file the loader refuses: its message must be reported, not replaced.
    os.makedirs(os.path.join(root, "lib64"))
    with open(os.path.join(root, "lib64", "libportal-keyring.so.0"), "w") as f:
        f.write("not an ELF file\n")
    result = probe(site)
    assert result.returncode == 3, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "ERROR LibraryNotFound"
    attempts = [line.strip() for line in lines if line.startswith("  ")]
    lib, lib64 = os.path.join(root, "lib"), os.path.join(root, "lib64")
    expected_order = [
        f"{lib}/libportal-keyring.so.0", f"{lib}/libportal-keyring.so",
        f"{lib64}/libportal-keyring.so.0", f"{lib64}/libportal-keyring.so",
    ]
    assert [a.split(": ", 1)[0] for a in attempts[:4]] == expected_order
    assert attempts[0].endswith(": no such file")
    assert "invalid ELF header" in attempts[2] or "file too short" in attempts[2], attempts[2]
    assert attempts[-1].startswith("libportal-keyring.so.0: ")
    assert "cannot open shared object file" in attempts[-1], attempts[-1]
    assert "PORTAL_KEYRING_LIBRARY" in result.stdout  # says how to fix it


def test_candidate_order(pk: object) -> None:
    from portal_keyring import _library

    installed = "/p/lib/python3/dist-packages/portal_keyring"
    assert _library.prefix_of(installed) == "/p"
    assert _library.prefix_of("/home/dev/src/portal-keyring/python/portal_keyring") is None
    order = _library.candidates({}, installed)
    assert order[:4] == ["/p/lib/libportal-keyring.so.0", "/p/lib/libportal-keyring.so",
                         "/p/lib64/libportal-keyring.so.0", "/p/lib64/libportal-keyring.so"]
    assert order[-1] == "libportal-keyring.so.0" and order.count("libportal-keyring.so.0") == 1
    assert _library.candidates({"PORTAL_KEYRING_LIBRARY": "/x.so"}, installed) == ["/x.so"]
    # A source checkout: only the soname (set PORTAL_KEYRING_LIBRARY to use a build tree's library).
    assert _library.candidates({}, "/home/dev/src/portal-keyring/python/portal_keyring") == ["libportal-keyring.so.0"]
