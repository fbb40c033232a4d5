#!/usr/bin/env python3
"""Tests/mutants/mutants.py — the catalogue reader behind Tests/mutants/run.sh.

    mutants.py list CATALOGUE_DIR                 one line per mutant: name<TAB>file<TAB>promise
    mutants.py show CATALOGUE_DIR NAME [TREE]     the mutant's fields as shell assignments (m_file:
                                                  where it applies in TREE, when given)
    mutants.py apply CATALOGUE_DIR NAME TREE      patch TREE/<file>; exit 3 = STALE (search text
                                                  not found exactly once), with the reason on stderr
    mutants.py check CATALOGUE_DIR TREE           every mutant still applies to TREE (each hunk's search
                                                  text found exactly once, in order; no build, seconds):
                                                  prints each STALE one with the reason, exit 1 if any;
                                                  also fails when CATALOGUE_DIR/README.md states
                                                  another count than the catalogue's (see count)
    mutants.py count CATALOGUE_DIR [--write]      how many mutants the catalogue holds; --write puts
                                                  that number into README.md's one sentence that
                                                  states it ("The catalogue holds N mutants")
    mutants.py select CATALOGUE_DIR TREE SLICES [BUDGET]
                                                  the mutants CI runs (`run.sh --changed`): every mutant
                                                  whose patched file, guarding suites' files or own
                                                  .mutant file changed since the commit recorded in
                                                  CATALOGUE_DIR/green (the last full green run), and
                                                  the rotating slice (HEAD's commit count mod SLICES)
                                                  of the rest, cut (in name order) so that at most
                                                  BUDGET are selected when BUDGET is given; the
                                                  change's own mutants are never cut; one name per
                                                  line, the reasons on stderr
    mutants.py sync SOURCE TREE                   make TREE a copy of SOURCE's working tree (tracked
                                                  and untracked-but-not-ignored files; a file whose
                                                  bytes differ is copied with a fresh mtime, so that
                                                  TREE's incremental build sees it; TREE/.build and
                                                  TREE/build are left alone)
    mutants.py restore SOURCE TREE FILE           put SOURCE/FILE back in TREE after a mutant, with
                                                  a fresh mtime (as sync)

A mutant file (NAME.mutant, anywhere under the catalogue directory) is a header of `key: value`
lines, then one or more hunks:

    name: exactly-once-guard              (defaults to the file name without .mutant)
    promise: what the code promises, in one line
    file: Sources/PortalKeyringCore/Session/SessionInvalidation.swift
    within: func deliver(                 (optional: the enclosing declaration; see below)
    suite: swift ExactlyOnceGuardTests    (one or more; see run.sh for the kinds)
    timeout: 120                          (seconds per suite; optional)
    --- search
    exact text, any number of lines
    --- replace
    its replacement (may be empty)
    --- end

Lines starting with `#` in the header are comments. Each search text must occur exactly once
in the file (after the previous hunks were applied); otherwise the mutant is STALE.

`within:` anchors the hunks to their enclosing declaration: text found on exactly one line (a
function's signature, say). Each search text must then occur exactly once inside that
declaration (from the anchor's line to the next line indented no deeper), whatever the rest of
the file holds; and when the anchor has left `file:` (the function moved), the mutant follows it
to the one file under the same top folder, of the same kind, that holds it (`check` names the
new place so that `file:` can be updated).
"""
import filecmp
import os
import re
import shlex
import shutil
import subprocess
import sys

KEYS = ("name", "promise", "file", "within", "suite", "timeout")


def parse(path):
    fields = {"name": os.path.basename(path)[: -len(".mutant")], "suite": [], "hunks": [], "path": path}
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines) and not lines[i].startswith("--- "):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep or key not in KEYS:
            raise SystemExit(f"{path}: unknown header line: {line!r}")
        if key == "suite":
            fields["suite"].append(value.strip())
        else:
            fields[key] = value.strip()
    section, search, replace = None, [], []
    for line in lines[i:]:
        if line in ("--- search", "--- replace", "--- end"):
            if line == "--- search":
                if section == "replace":
                    raise SystemExit(f"{path}: '--- end' missing before '--- search'")
                section, search, replace = "search", [], []
            elif line == "--- replace":
                section = "replace"
            else:
                if section != "replace":
                    raise SystemExit(f"{path}: '--- end' without '--- search' and '--- replace'")
                fields["hunks"].append(("\n".join(search) + "\n", "\n".join(replace) + "\n" if replace else ""))
                section = None
            continue
        if section == "search":
            search.append(line)
        elif section == "replace":
            replace.append(line)
    for key in ("promise", "file"):
        if not fields.get(key):
            raise SystemExit(f"{path}: no '{key}:' line")
    if not fields["suite"]:
        raise SystemExit(f"{path}: no 'suite:' line")
    if not fields["hunks"]:
        raise SystemExit(f"{path}: no '--- search' / '--- replace' / '--- end' hunk")
    return fields


def catalogue(directory):
    mutants = []
    for root, _, files in sorted(os.walk(directory)):
        for name in sorted(files):
            if name.endswith(".mutant"):
                mutants.append(parse(os.path.join(root, name)))
    names = [m["name"] for m in mutants]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise SystemExit(f"duplicate mutant names: {', '.join(sorted(duplicates))}")
    return mutants


def find(directory, name):
    for mutant in catalogue(directory):
        if mutant["name"] == name:
            return mutant
    raise SystemExit(f"no mutant named {name!r} (see --list)")


def read(tree, rel):
    try:
        with open(os.path.join(tree, rel), encoding="utf-8") as f:
            return f.read()
    except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError):
        return None


def anchor_lines(text, within):
    """The indexes of the lines of TEXT that hold WITHIN (an enclosing declaration's text)."""
    return [i for i, line in enumerate(text.split("\n")) if within in line]


def located(mutant, tree):
    """(file, None): where the mutant applies in TREE — its `file:`, or, for a mutant with a
    `within:` anchor that is no longer there, the one file under the same top folder, of the same
    kind, that holds the anchor exactly once (the code moved: the mutant follows it). (None,
    reason) when there is no such file."""
    rel = mutant["file"]
    within = mutant.get("within")
    text = read(tree, rel)
    if not within:
        return (rel, None) if text is not None else (None, f"{rel} does not exist")
    if text is not None and len(anchor_lines(text, within)) == 1:
        return rel, None
    top = rel.split("/")[0]
    extension = os.path.splitext(rel)[1]
    homes = []
    for root, dirs, names in os.walk(os.path.join(tree, top)):
        dirs[:] = sorted(d for d in dirs if d not in (".build", "build", ".git"))
        for name in sorted(names):
            if name.endswith(extension):
                candidate = os.path.relpath(os.path.join(root, name), tree)
                other = read(tree, candidate)
                if other is not None and len(anchor_lines(other, within)) == 1:
                    homes.append(candidate)
    if len(homes) == 1:
        return homes[0], None
    return None, (f"'within: {within}' found in {len(homes)} files under {top}/ and not once in {rel}"
                  + (f" ({', '.join(homes)})" if homes else ""))


def region(text, within):
    """(start, end) offsets of the declaration at the line holding WITHIN: from that line to the
    next non-blank line indented no deeper than it (its closing brace, or the next declaration)."""
    lines = text.split("\n")
    first = anchor_lines(text, within)[0]
    depth = len(lines[first]) - len(lines[first].lstrip())
    last = len(lines)
    for i in range(first + 1, len(lines)):
        line = lines[i]
        if line.strip() and len(line) - len(line.lstrip()) <= depth:
            last = i
            break
    start = sum(len(l) + 1 for l in lines[:first])
    end = sum(len(l) + 1 for l in lines[:last])
    return start, min(end, len(text))


def patched(mutant, tree):
    """(text, None): the mutant's file in TREE with every hunk applied; (None, reason) when it is
    STALE. With a `within:` anchor, each search text must occur exactly once inside the anchored
    declaration (elsewhere in the file it may occur any number of times)."""
    rel, reason = located(mutant, tree)
    if rel is None:
        return None, reason
    text = read(tree, rel)
    within = mutant.get("within")
    for number, (search, replace) in enumerate(mutant["hunks"], 1):
        start, end = region(text, within) if within else (0, len(text))
        part = text[start:end]
        found = part.count(search)
        if found != 1:
            place = f"the declaration holding '{within}' in {rel}" if within else rel
            return None, f"hunk {number}: search text found {found} times in {place} (expected once)"
        text = text[:start] + part.replace(search, replace) + text[end:]
    return text, None


def apply(mutant, tree):
    text, reason = patched(mutant, tree)
    if text is None:
        print(reason, file=sys.stderr)
        return 3
    with open(os.path.join(tree, located(mutant, tree)[0]), "w", encoding="utf-8") as f:
        f.write(text)
    return 0


# The README states the catalogue's size once, in this sentence; `count --write` keeps it true
# and `check` fails when it is not.
COUNT_SENTENCE = re.compile(r"The catalogue holds (\d+) mutants")


def readme_count(directory, mutants, write=False):
    """None when CATALOGUE_DIR/README.md states the catalogue's count (or has no README), else
    the reason it does not. With WRITE, the sentence is corrected instead."""
    readme = os.path.join(directory, "README.md")
    if not os.path.exists(readme):
        return None
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    stated = COUNT_SENTENCE.findall(text)
    if len(stated) != 1:
        return f"{readme}: states the count {len(stated)} times, expected once (\"The catalogue holds N mutants\")"
    if int(stated[0]) == len(mutants):
        return None
    if write:
        with open(readme, "w", encoding="utf-8") as f:
            f.write(COUNT_SENTENCE.sub(f"The catalogue holds {len(mutants)} mutants", text))
        return None
    return (f"{readme}: says {stated[0]} mutants, the catalogue holds {len(mutants)} "
            f"(mutants.py count {directory} --write)")


def check(directory, tree):
    stale = 0
    mutants = catalogue(directory)
    for mutant in mutants:
        text, reason = patched(mutant, tree)
        if text is None:
            stale += 1
            print(f"STALE {mutant['name']} ({os.path.relpath(mutant['path'], tree)}): {reason}")
        elif located(mutant, tree)[0] != mutant["file"]:
            print(f"moved {mutant['name']}: its code is now in {located(mutant, tree)[0]} "
                  f"(followed by its 'within:' anchor; update 'file:')")
    print(f"mutants: {len(mutants) - stale} of {len(mutants)} apply" + (f", {stale} STALE" if stale else ""))
    wrong = readme_count(directory, mutants)
    if wrong:
        print(wrong)
    return 1 if stale or wrong else 0


# Files every suite depends on: a change to one of them can change any suite's verdict.
HARNESS = ("scripts/with-keyring.sh", "scripts/with-portal-api.sh", "scripts/keyring-providers.sh",
           "scripts/run-suite.sh", "Tests/lib/",
           "scripts/keyring-restart.sh", "Tests/portal-api/", "Package.swift")
# The C header belongs to every suite that goes through the C ABI (C programs, the bindings, the
# CLI and install scripts, the fault programs), not to the Swift tests: their target does not
# depend on the header's module (Package.swift), so a header change cannot change their verdict.
C_ABI = "Include/"


def suite_files(suite, tree):
    """The files (or folder prefixes ending in /) whose change may change what SUITE reports."""
    kind, _, arg = suite.partition(" ")
    if kind not in ("swift", "swift-on"):
        return [C_ABI] + suite_files_of_kind(kind, arg, tree)
    return suite_files_of_kind(kind, arg, tree)


def suite_files_of_kind(kind, arg, tree):
    if kind in ("swift", "swift-on"):
        name = arg.split(" ", 1)[1] if kind == "swift-on" else arg
        first = name.split("/")[0].split(".")[0]
        folder = os.path.join(tree, "Tests/PortalKeyringTests")
        found = []
        for root, dirs, names in sorted(os.walk(folder)):
            dirs.sort()
            if os.path.relpath(root, folder).split(os.sep)[0] == "Support":
                continue
            for entry in sorted(names):
                with open(os.path.join(root, entry), encoding="utf-8", errors="replace") as f:
                    if first and first in f.read():
                        found.append(os.path.relpath(os.path.join(root, entry), tree))
        # The test support files (fakes, stores, helpers) are shared by every suite.
        return (found or ["Tests/PortalKeyringTests/"]) + ["Tests/PortalKeyringTests/Support/"]
    if kind in ("c", "c-on"):
        program = arg.split(" ")[-1]
        # Tests/c/PROGRAM.c, or the folder of a program of several files (Tests/c/build.sh).
        return [f"Tests/c/{program}.c", f"Tests/c/{program}/", "Tests/c/check.h", "Tests/c/main_loop.h",
                "Tests/c/build.sh", "Tests/providers/provider_test.h", "Tests/c/run.sh"]
    if kind == "provider":
        return ["Tests/providers/"]
    if kind == "pytest":
        node = arg.split("::")[0]
        return [f"Tests/python/{node}", "Tests/python/conftest.py", "python/"]
    if kind == "script":
        # The sandbox's harness, and keyringctl's stand-in there (Tests/flatpak/*.sh pass it).
        sandbox = ["scripts/with-flatpak-sandbox.sh", "Tests/tools/keyringctl-sandbox.py"] if arg.startswith("Tests/flatpak/") else []
        return [arg, os.path.dirname(arg) + "/"] + sandbox
    if kind == "fault":
        return ["Tests/fault/"]
    return [""]  # unknown kind: every change counts


def changed_files(tree, since):
    """Files changed between SINCE and the working tree (committed or not), or None when SINCE is
    not a commit of this clone (then everything counts as changed)."""
    git = ["git", "-C", tree]
    if subprocess.run(git + ["cat-file", "-e", since + "^{commit}"], capture_output=True).returncode != 0:
        return None
    committed = subprocess.run(git + ["diff", "--name-only", since], check=True, capture_output=True, text=True).stdout
    untracked = subprocess.run(git + ["ls-files", "-o", "--exclude-standard"], check=True, capture_output=True, text=True).stdout
    return {line for line in (committed + untracked).splitlines() if line}


def touches(files, wanted):
    return any(f == w or (w.endswith("/") and f.startswith(w)) or w == "" for f in files for w in wanted)


def select(directory, tree, slices, budget=None):
    mutants = catalogue(directory)
    record = os.path.join(directory, "green")
    since = None
    if os.path.exists(record):
        with open(record, encoding="utf-8") as f:
            words = f.read().split()
            since = words[0] if words else None
    changed = changed_files(tree, since) if since else None
    count = subprocess.run(["git", "-C", tree, "rev-list", "--count", "HEAD"], capture_output=True, text=True).stdout.strip()
    turn = int(count) % slices if count.isdigit() else 0
    # Why each is chosen: "changed" — its own .mutant file or the file it mutates changed (the
    # changed code's own guards); "suite" — only a guarding suite's file or the shared harness
    # changed (a test that may have been weakened); "slice" — the rotating share of the rest.
    chosen, why = [], {"changed": 0, "suite": 0, "slice": 0, "no record": 0}
    for index, mutant in enumerate(sorted(mutants, key=lambda m: m["name"])):
        if changed is None:
            reason = "no record"
        else:
            own = [mutant["file"], located(mutant, tree)[0] or mutant["file"], os.path.relpath(mutant["path"], tree)]
            around = list(HARNESS) + [f for s in mutant["suite"] for f in suite_files(s, tree)]
            reason = ("changed" if touches(changed, own) else "suite" if touches(changed, around)
                      else "slice" if index % slices == turn else None)
        if reason:
            chosen.append((mutant["name"], reason))
    # The budget: the changed code's own mutants always run, however many; the rest share what is
    # left, those of a changed suite first, then the slice. Which are cut turns (by one each time
    # the slice comes round), so that the same ones are not cut every time; the cut ones are named
    # and wait for a later run (a suite's, until the next full run re-records the green commit).
    cut = []
    if budget is not None:
        room = max(budget - sum(1 for _, reason in chosen if reason in ("changed", "no record")), 0)
        kept = set()
        for kind in ("suite", "slice"):
            names = [name for name, reason in chosen if reason == kind]
            if names and count.isdigit():
                shift = (int(count) // slices) % len(names)
                names = names[shift:] + names[:shift]
            kept.update(names[:room])
            cut += names[room:]
            room = max(room - len(names), 0)
        chosen = [(name, reason) for name, reason in chosen if reason in ("changed", "no record") or name in kept]
    # Printed in the order to run them, so that a run cut by its time budget (`run.sh
    # --time-budget`) has run what matters most: new or edited mutants (this change's own tests),
    # then those of the changed code, a changed suite, the slice; each group rotated as above.
    rank = {"no record": 0, "changed": 1, "suite": 2, "slice": 3}
    edited = {m["name"] for m in mutants if changed is not None and touches(changed, [os.path.relpath(m["path"], tree)])}
    turned = []
    for group in sorted({(rank[r], n in edited) for n, r in chosen}, key=lambda g: (g[0], not g[1])):
        names = [(n, r) for n, r in chosen if (rank[r], n in edited) == group]
        shift = (int(count) // slices) % len(names) if count.isdigit() else 0
        turned += names[shift:] + names[:shift]
    chosen = turned
    for _, reason in chosen:
        why[reason] += 1
    since_text = since or "none recorded"
    if since and changed is None:
        since_text += " (not in this clone: all)"
    print(f"mutants: {len(chosen)} of {len(mutants)} selected — {why['changed']} guard code changed since the green "
          f"commit {since_text}, {why['suite']} a changed suite or harness file, {why['slice']} are slice "
          f"{turn + 1}/{slices} of the rest"
          + (f", {why['no record']} because there is no usable record" if why["no record"] else "")
          + (f"; {len(cut)} cut to keep within the budget of {budget} (they wait for a later run; "
             f"`make mutants` runs them all): {' '.join(cut)}" if cut else ""),
          file=sys.stderr)
    for name, _ in chosen:
        print(name)
    return 0


def copy_fresh(source, tree, rel):
    """Copies SOURCE/REL over TREE/REL unless the two are already the same bytes; a copy gets the
    current time as its mtime, never the source's. The copy's incremental builds decide by mtime,
    and the Swift driver rebuilds a module for a changed C header only when the header is newer
    than its last build: a header put back with its old mtime after a mutant (cjsmn.h without
    parent links) left Swift code built for the mutant's jsmntok_t beside jsmn.c built for the
    original, and the next suite corrupted the heap. Returns whether it copied."""
    src, dst = os.path.join(source, rel), os.path.join(tree, rel)
    s = os.lstat(src)
    try:
        d = os.lstat(dst)
        if (os.path.islink(src) == os.path.islink(dst) and d.st_mode == s.st_mode
                and (os.readlink(src) == os.readlink(dst) if os.path.islink(src)
                     else d.st_size == s.st_size and filecmp.cmp(src, dst, shallow=False))):
            return False
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.lexists(dst):
        os.remove(dst)
    if os.path.islink(src):
        os.symlink(os.readlink(src), dst)
    else:
        shutil.copyfile(src, dst)
        shutil.copymode(src, dst)
    return True


def sync(source, tree):
    listing = subprocess.run(["git", "-C", source, "ls-files", "-z", "-c", "-o", "--exclude-standard"],
                             check=True, capture_output=True).stdout.decode().split("\0")
    wanted = {p for p in listing if p and os.path.lexists(os.path.join(source, p))}
    wanted = {p for p in wanted if not p.startswith((".build/", "build/"))}
    for rel in sorted(wanted):
        copy_fresh(source, tree, rel)
    # Files that are gone from the source go from the copy too (build outputs excepted).
    for root, dirs, files in os.walk(tree):
        rel_root = os.path.relpath(root, tree)
        if rel_root == ".":
            dirs[:] = [d for d in dirs if d not in (".build", "build", ".git")]
        for name in files:
            rel = os.path.normpath(os.path.join(rel_root, name))
            if rel not in wanted:
                os.remove(os.path.join(root, name))
    return 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "list":
        for m in catalogue(argv[2]):
            print(f"{m['name']}\t{m['file']}\t{m['promise']}\t{' | '.join(m['suite'])}")
        return 0
    if len(argv) in (3, 4) and argv[1] == "count" and argv[3:] in ([], ["--write"]):
        mutants = catalogue(argv[2])
        if argv[3:]:
            wrong = readme_count(argv[2], mutants, write=True)
            if wrong:
                print(wrong, file=sys.stderr)
                return 1
        print(len(mutants))
        return 0
    if len(argv) in (4, 5) and argv[1] == "show":
        m = find(argv[2], argv[3])
        print(f"m_name={shlex.quote(m['name'])}")
        print(f"m_promise={shlex.quote(m['promise'])}")
        print(f"m_file={shlex.quote((located(m, argv[4])[0] if len(argv) == 5 else None) or m['file'])}")
        print(f"m_timeout={shlex.quote(m.get('timeout', ''))}")
        print("m_suites=(" + " ".join(shlex.quote(s) for s in m["suite"]) + ")")
        return 0
    if len(argv) == 5 and argv[1] == "apply":
        return apply(find(argv[2], argv[3]), argv[4])
    if len(argv) in (5, 6) and argv[1] == "select":
        return select(argv[2], argv[3], max(int(argv[4]), 1), int(argv[5]) if len(argv) == 6 else None)
    if len(argv) == 4 and argv[1] == "check":
        return check(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == "sync":
        return sync(argv[2], argv[3])
    if len(argv) == 5 and argv[1] == "restore":
        copy_fresh(argv[2], argv[3], argv[4])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
