#!/usr/bin/env python3
"""check-layers.py — the Swift core's one direction of dependency (docs/architecture.md#the-layer-rule).

Usage: check-layers.py [CORE]   (CORE: Sources/PortalKeyringCore by default)

Each folder of the core sits in a layer; a file may name the types of its own layer and of the
layers below it, never of one above. The backends (Storage/SecretService, Storage/FileKeyring,
Storage/Flatpak) share a layer but do not name each other's types; Flatpak composes the other two
and may name theirs. A type belongs to the folder of the file that declares it at the top level
(`class`, `struct`, `enum`, `protocol`, `actor`, `typealias`); a file names what its code says,
comments and string literals left out (string interpolations are code). Prints each offence as
`file:line: names Type (Folder, why)` and exits 1 when there is one.
"""
import os
import re
import sys

# Top layer first; "" is the core's root (a few files at most: check-sources.sh, rule 8), on top.
LAYERS = [
    ["", "Auth", "SignIn", "Session"],
    ["Storage", "Storage/SecretService", "Storage/FileKeyring", "Storage/Flatpak"],
    ["DBus", "HTTP"],
    ["Values", "Memory", "Runtime", "JSON"],
]
BACKENDS = {"Storage/SecretService", "Storage/FileKeyring", "Storage/Flatpak"}
# The one backend that composes its siblings.
MAY_NAME = {"Storage/Flatpak": {"Storage/SecretService", "Storage/FileKeyring"}}

DECLARATION = re.compile(
    r"^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|private|fileprivate|final|indirect|nonisolated)\s+)*"
    r"(?:class|struct|enum|protocol|actor|typealias)\s+([A-Za-z_]\w*)")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
STRING_START = re.compile(r'(#*)("""|")')


def folder_of(core, path):
    """The listed folder holding `path` (the deepest that matches), or None."""
    relative = os.path.relpath(os.path.dirname(path), core).replace(os.sep, "/")
    if relative == ".":
        return ""
    best = None
    for layer in LAYERS:
        for folder in layer:
            if folder and (relative == folder or relative.startswith(folder + "/")):
                if best is None or len(folder) > len(best):
                    best = folder
    return best


def rank_of(folder):
    return next(index for index, layer in enumerate(LAYERS) if folder in layer)


def code_only(text):
    """`text` with comments and string literals blanked (line ends kept, so line numbers hold);
    the code inside string interpolations `\\( … )` is kept."""
    out = []
    i, n = 0, len(text)
    # Each entry: the paren depth of an interpolation being read, to return into its string.
    interpolations = []
    string = None  # (closing delimiter, raw hashes) while inside a string literal

    def blank(chunk):
        out.append("".join(c if c == "\n" else " " for c in chunk))

    while i < n:
        if string is not None:
            closing, hashes = string
            if text.startswith(closing + "#" * hashes, i):
                blank(closing + "#" * hashes)
                i += len(closing) + hashes
                string = None
                continue
            if text[i] == "\\" and text.startswith("#" * hashes + "(", i + 1):
                blank(text[i:i + 2 + hashes])
                i += 2 + hashes
                interpolations.append((0, string))
                string = None
                continue
            if text[i] == "\\" and hashes == 0:
                blank(text[i:i + 2])
                i += 2
                continue
            blank(text[i])
            i += 1
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(text[i:end])
            i = end
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(text[i:j])
            i = j
            continue
        match = STRING_START.match(text, i)
        if match:
            blank(match.group(0))
            i += len(match.group(0))
            string = (match.group(2), len(match.group(1)))
            continue
        if interpolations:
            depth, outer = interpolations[-1]
            if text[i] == "(":
                interpolations[-1] = (depth + 1, outer)
            elif text[i] == ")":
                if depth == 0:
                    interpolations.pop()
                    blank(")")
                    i += 1
                    string = outer
                    continue
                interpolations[-1] = (depth - 1, outer)
        out.append(text[i])
        i += 1
    return "".join(out)


def main():
    core = sys.argv[1] if len(sys.argv) > 1 else "Sources/PortalKeyringCore"
    files = sorted(os.path.join(root, name) for root, _, names in os.walk(core)
                   for name in names if name.endswith(".swift"))
    sources = {}
    declared = {}  # type name -> the folders that declare it at the top level
    offences = []
    for path in files:
        with open(path, encoding="utf-8") as handle:
            sources[path] = code_only(handle.read())
        folder = folder_of(core, path)
        if folder is None:
            offences.append(f"{path}:1: lies in no folder of the layer map (docs/architecture.md)")
            continue
        for line in sources[path].splitlines():
            found = DECLARATION.match(line)
            if found:
                declared.setdefault(found.group(1), set()).add(folder)
    for path in files:
        folder = folder_of(core, path)
        if folder is None:
            continue
        rank = rank_of(folder)
        for number, line in enumerate(sources[path].splitlines(), 1):
            for word in IDENTIFIER.finditer(line):
                if word.start() > 0 and line[word.start() - 1] == ".":
                    continue  # a member (`x.Name`), not a type named here
                for owner in sorted(declared.get(word.group(0), ())):
                    if owner == folder:
                        continue
                    owner_rank = rank_of(owner)
                    if owner_rank < rank:
                        why = "a layer above"
                    elif folder in BACKENDS and owner in BACKENDS and owner not in MAY_NAME.get(folder, ()):
                        why = "a sibling backend"
                    else:
                        continue
                    offences.append(f"{path}:{number}: names {word.group(0)} ({owner or 'the root'}, {why})")
    for offence in offences:
        print(offence)
    return 1 if offences else 0


if __name__ == "__main__":
    sys.exit(main())
