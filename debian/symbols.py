#!/usr/bin/env python3
"""symbols.py generate|check|check-built — the packages' symbols files from the project's ABI sources.

  debian/libportal-keyring0.symbols             from abi/portal-keyring.abi, the committed ABI
                                                baseline (make abi-baseline; docs/ABI.md)
  debian/libportal-keyring-gobject-1-0.symbols  from the public headers Include/portal-keyring-gobject/
                                                (every portal_keyring_* function they declare, and
                                                the get_type() of each G_DECLARE_*_TYPE)

A symbol already in a symbols file keeps the version it has there (the version that introduced
it); a new one gets the header's version (Include/portal_keyring.h PORTAL_KEYRING_VERSION_*).
The package name and soname come from the baseline's soname. `generate` writes the files;
`check` (run by debian/rules before the build) fails when a committed file differs from what
`generate` would write, so the baseline and the symbols file cannot disagree. dpkg-gensymbols
-c4 (debian/rules) then fails the build when the built library exports anything else or lacks
a symbol, but only for a symbol older than the package version: dpkg treats a symbol introduced
by the version being built as never released, so it does not fail when that one disappears
(Dpkg::Shlibs::Symbol::mark_not_found_in_library). `check-built` (debian/rules, after
dh_makeshlibs) closes that gap: the libraries in debian/<package>/ must export exactly the
symbols their symbols file lists, whatever the versions.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEBIAN = os.path.join(ROOT, "debian")


def header_version():
    out = subprocess.run([os.path.join(ROOT, "build-support/header-api.sh"), "version",
                          os.path.join(ROOT, "Include/portal_keyring.h")],
                         check=True, capture_output=True, text=True).stdout.split()
    return ".".join(out[:3])


def baseline():
    """(soname, sorted function names) of the abidw baseline."""
    text = open(os.path.join(ROOT, "abi/portal-keyring.abi"), encoding="utf-8").read()
    soname = re.search(r"<abi-corpus [^>]*soname='([^']+)'", text).group(1)
    names = set()
    for block in re.findall(r"<elf-(?:function|variable)-symbols>(.*?)</elf-(?:function|variable)-symbols>",
                            text, re.S):
        names.update(re.findall(r"<elf-symbol name='([^']+)'", block))
    return soname, sorted(names)


def gobject_names():
    directory = os.path.join(ROOT, "Include/portal-keyring-gobject")
    names = set()
    for entry in sorted(os.listdir(directory)):
        if not entry.endswith(".h"):
            continue
        text = open(os.path.join(directory, entry), encoding="utf-8").read()
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        names.update(m + "_get_type" for m in re.findall(r"G_DECLARE_\w+_TYPE\s*\(\s*\w+\s*,\s*(\w+)", text))
        names.update(re.findall(r"\b(portal_keyring_\w+)\s*\(", text))
    return sorted(names)


def package_of(soname):
    """Debian's name for a library package: libfoo.so.0 -> libfoo0, libfoo-1.so.0 -> libfoo-1-0."""
    name, major = re.fullmatch(r"(.+)\.so\.(\d+)", soname).groups()
    return name + ("-" if name[-1].isdigit() else "") + major


def existing_versions(path):
    versions = {}
    if os.path.exists(path):
        for line in open(path, encoding="utf-8"):
            m = re.match(r" (\S+)@Base (\S+)", line)
            if m:
                versions[m.group(1)] = m.group(2)
    return versions


def render(soname, names, path, version):
    old = existing_versions(path)
    lines = [f"{soname} {package_of(soname)} #MINVER#", "* Build-Depends-Package: libportal-keyring-dev"]
    lines += [f" {name}@Base {old.get(name, version)}" for name in names]
    return "\n".join(lines) + "\n"


def files():
    version = header_version()
    soname, names = baseline()
    gsoname = "libportal-keyring-gobject-1.so.0"
    result = {}
    for so, syms in ((soname, names), (gsoname, gobject_names())):
        path = os.path.join(DEBIAN, package_of(so) + ".symbols")
        result[path] = render(so, syms, path, version)
    return result


def check_built(paths):
    """Each symbols file against the library its package holds: exactly the same symbols."""
    bad = 0
    for path in paths:
        lines = open(path, encoding="utf-8").read().splitlines()
        soname, package = lines[0].split()[:2]
        listed = {m.group(1) for line in lines for m in [re.match(r" (\S+)@Base ", line)] if m}
        libdir = os.path.join(DEBIAN, package)
        libs = [os.path.join(d, f) for d, _, fs in os.walk(libdir) for f in fs
                if f.startswith(soname) and not os.path.islink(os.path.join(d, f))]
        if len(libs) != 1:
            print(f"debian/symbols.py: no single {soname} in {os.path.relpath(libdir, ROOT)}: {libs}", file=sys.stderr)
            bad += 1
            continue
        out = subprocess.run(["nm", "-D", "--defined-only", libs[0]], check=True, capture_output=True,
                             text=True).stdout
        exported = {f[2] for f in (line.split() for line in out.splitlines()) if len(f) == 3 and f[1] in "TDBRVWi"}
        missing, extra = sorted(listed - exported), sorted(exported - listed)
        for name in missing:
            print(f"debian/symbols.py: {soname} no longer exports {name} (listed in {os.path.basename(path)})",
                  file=sys.stderr)
        for name in extra:
            print(f"debian/symbols.py: {soname} exports {name}, which {os.path.basename(path)} does not list",
                  file=sys.stderr)
        bad += bool(missing or extra)
        if not (missing or extra):
            print(f"debian/symbols.py: {soname} exports exactly the {len(listed)} symbols of {os.path.basename(path)}")
    sys.exit(1 if bad else 0)


def main():
    mode = sys.argv[1] if len(sys.argv) == 2 else ""
    if mode == "check-built":
        check_built(sorted(files()))
    if mode not in ("generate", "check"):
        sys.exit("usage: debian/symbols.py generate|check|check-built")
    stale = 0
    for path, text in files().items():
        current = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if mode == "generate":
            if current != text:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
                print(f"wrote {os.path.relpath(path, ROOT)} ({text.count('@Base')} symbols)")
        elif current != text:
            stale += 1
            print(f"debian/symbols.py: {os.path.relpath(path, ROOT)} disagrees with the ABI sources "
                  "(abi/portal-keyring.abi, Include/portal-keyring-gobject/*.h): run debian/symbols.py "
                  "generate and commit the result", file=sys.stderr)
    sys.exit(1 if stale else 0)


if __name__ == "__main__":
    main()
