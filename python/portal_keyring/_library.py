"""Finding and loading libportal-keyring.so (the one place that decides which library is used).

Order (the first that loads wins; nothing after an explicit choice is tried):

1. ``$PORTAL_KEYRING_LIBRARY``: a file path (or a name the dynamic loader resolves);
2. the library installed in the same prefix as this package: for a package at
   ``PREFIX/lib/python3.X/site-packages/portal_keyring`` (or ``.../dist-packages``, or
   ``PREFIX/lib/python3/dist-packages``), ``PREFIX/lib``, ``PREFIX/lib64`` and
   ``PREFIX/lib/<multiarch>`` are tried, soname first (``libportal-keyring.so.0``), then the
   development link (``libportal-keyring.so``);
3. the system soname through the dynamic loader (``ld.so.cache``, ``LD_LIBRARY_PATH``).

When none loads, :class:`LibraryNotFound` (an ``OSError``) lists every attempt with the loader's
message for each.
"""

from __future__ import annotations

import ctypes
import os
import sysconfig
from typing import List, Mapping, Optional, Tuple

LIBRARY_NAME = "libportal-keyring.so"
#: The soname of the ABI major version this package was written for.
SONAME = LIBRARY_NAME + ".0"

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class LibraryNotFound(OSError):
    """No candidate loaded. ``attempts`` holds ``(candidate, loader message)`` pairs in order."""

    def __init__(self, attempts: List[Tuple[str, str]]) -> None:
        self.attempts = attempts
        lines = "\n".join(f"  {path}: {message}" for path, message in attempts)
        super().__init__(
            "portal_keyring: cannot load libportal-keyring.so. Install the library into this "
            "package's prefix ('make install PREFIX=...'), install it system-wide, or set "
            f"PORTAL_KEYRING_LIBRARY to the file. Tried, in order:\n{lines}"
        )


def prefix_of(package_dir: str) -> Optional[str]:
    """The installation prefix of a package directory: the parent of the nearest ancestor named
    ``lib`` or ``lib64`` (``PREFIX/lib/python3.X/site-packages/portal_keyring`` -> ``PREFIX``);
    ``None`` when the package does not live under such a directory (a source checkout)."""
    path = os.path.normpath(package_dir)
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return None
        if os.path.basename(path) in ("lib", "lib64"):
            return parent
        path = parent


def prefix_candidates(package_dir: str) -> List[str]:
    """The library files tried for step 2, in order (they need not exist)."""
    prefix = prefix_of(package_dir)
    if prefix is None:
        return []
    dirs = [os.path.join(prefix, "lib"), os.path.join(prefix, "lib64")]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    if isinstance(multiarch, str) and multiarch:
        dirs.append(os.path.join(prefix, "lib", multiarch))
    return [os.path.join(d, name) for d in dirs for name in (SONAME, LIBRARY_NAME)]


def candidates(environ: Mapping[str, str], package_dir: str = _PACKAGE_DIR) -> List[str]:
    """Every candidate in the order they are tried (see the module docstring)."""
    explicit = environ.get("PORTAL_KEYRING_LIBRARY")
    if explicit:
        return [explicit]  # an explicit choice is never second-guessed
    return prefix_candidates(package_dir) + [SONAME]


def load(environ: Mapping[str, str] = os.environ, package_dir: str = _PACKAGE_DIR) -> Tuple[ctypes.CDLL, str]:
    """Loads the first candidate that the dynamic loader accepts.

    :returns: the library and the candidate that loaded (a path, or the soname).
    :raises LibraryNotFound: nothing loaded; a missing prefix file is reported as "no such file"
        without asking the loader.
    """
    attempts: List[Tuple[str, str]] = []
    for path in candidates(environ, package_dir):
        if os.sep in path and not os.path.exists(path):
            attempts.append((path, "no such file"))
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as exc:
            attempts.append((path, str(exc)))
    raise LibraryNotFound(attempts)


lib, library_path = load()


def _strlen_function() -> "ctypes._NamedFuncPointer":
    strlen = ctypes.CDLL(None).strlen
    strlen.restype = ctypes.c_size_t
    strlen.argtypes = [ctypes.POINTER(ctypes.c_char)]
    return strlen


strlen = _strlen_function()
