"""python-dir.py PREFIX — the directory under PREFIX where this Python finds pure modules.

Prefers a directory of this interpreter's sys.path that lies directly under PREFIX/lib
(Debian: /usr/local/lib/python3.X/dist-packages for /usr/local, /usr/lib/python3/dist-packages
for /usr); otherwise the interpreter's posix_prefix purelib for PREFIX (for a staging or
temporary prefix: PREFIX/lib/python3.X/site-packages, then reached through PYTHONPATH).
"""
import os
import sys
import sysconfig

if len(sys.argv) != 2 or not sys.argv[1].startswith("/"):
    sys.exit("usage: python-dir.py ABSOLUTE_PREFIX")
prefix = os.path.normpath(sys.argv[1])
for entry in sys.path:
    if not entry:
        continue
    rel = os.path.relpath(os.path.normpath(entry), prefix)
    if rel.startswith("lib" + os.sep) and os.path.basename(entry) in ("site-packages", "dist-packages"):
        print(os.path.normpath(entry))
        sys.exit(0)
print(sysconfig.get_path("purelib", "posix_prefix", {"base": prefix, "platbase": prefix}))
