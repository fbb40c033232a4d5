#!/usr/bin/env python3
"""scripts/check-links.py [ROOT] — no dead links or anchors in the docs or in what cites them
(rule 9 of scripts/check-sources.sh; seconds, no build).

Checked, in the tree at ROOT (default: this checkout):
  - every relative markdown link `[text](target)` in a Markdown file (outside code blocks): the
    file or folder it names exists, relative to the linking file, and a `#anchor` on a Markdown
    file (or alone, for the same file) names one of its headings;
  - every citation `<file>.md#<anchor>` in any text file of the tree (source and test comments,
    mutant promise lines, scripts, Markdown outside code blocks): the file exists, from the root or from the citing
    file's folder, and names that heading.
Anchors are GitHub's: the heading's text lower-cased, punctuation dropped, spaces made '-', and
'-1', '-2', … added to repeats. Prints each dead one as FILE:LINE: TARGET (why) and exits 1.
"""
import os
import re
import sys

# Folders and files that are not the tree's text (build products, scratch copies, VCS data).
SKIP_DIRS = {".git", ".build", "build", "node_modules", "__pycache__", ".swiftpm"}
TEXT_SUFFIXES = (".md", ".swift", ".c", ".h", ".hpp", ".cpp", ".py", ".sh", ".mutant", ".txt",
                 ".toml", ".desktop", ".in", ".modulemap", ".vala", ".gir")
TEXT_NAMES = {"Makefile", "run", "control", "rules", "copyright"}

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"""<a\s+(?:name|id)\s*=\s*["']([^"']+)["']""")
MD_LINK = re.compile(r"\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CITATION = re.compile(r"(?<![\w/.-])((?:\.\.?/)*[\w.-]+(?:/[\w.-]+)*\.md)#([\w-]+)")


def slug(text):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading keeps its text
    text = re.sub(r"<[^>]+>", "", text).lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in "-_ ")
    return text.replace(" ", "-")


def lines_outside_code(text):
    """(line number, line) of a Markdown text, fenced code blocks left out."""
    fenced = False
    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def unclosed_fences(text):
    """Line numbers of code blocks a Markdown text never closes: one opened while another is open
    (a fence with a language, which only opens a block) and one still open at the end. Everything
    after such a block renders as code, its headings and links included."""
    opened = None
    for number, line in enumerate(text.split("\n"), 1):
        if not FENCE.match(line):
            continue
        if opened is None:
            opened = number
        elif re.match(r"^\s*(```|~~~)\s*\S", line):
            yield opened
            opened = number
        else:
            opened = None
    if opened is not None:
        yield opened


_anchors = {}


def anchors(path):
    """The anchors a Markdown file's headings (and explicit <a name>/<a id>) give."""
    if path not in _anchors:
        found, seen = set(), {}
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for _, line in lines_outside_code(text):
            found.update(HTML_ANCHOR.findall(line))
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        _anchors[path] = found
    return _anchors[path]


def text_files(root):
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("mut-"))
        for name in sorted(files):
            if name.endswith(TEXT_SUFFIXES) or name in TEXT_NAMES:
                yield os.path.join(folder, name)


def check_target(root, source, target, anchor, bases):
    """Why `target#anchor`, cited from `source`, is dead (None when it is alive). The target is
    looked up from each folder of `bases` in turn."""
    if not target:
        path = source
    else:
        path = next((p for p in (os.path.normpath(os.path.join(b, target)) for b in bases)
                     if os.path.exists(p)), None)
        if path is None:
            return "no such file"
        if not os.path.realpath(path).startswith(os.path.realpath(root)):
            return "outside the tree"
    if anchor is None or not path.endswith(".md") or os.path.isdir(path):
        return None
    if anchor not in anchors(path):
        return f"no heading with anchor #{anchor} in {os.path.relpath(path, root)}"
    return None


def dead_links(root):
    """(file, line, target, why) of every dead link or citation under root."""
    root = os.path.abspath(root)
    dead = []
    for path in text_files(root):
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        here = os.path.dirname(path)
        checked = set()
        if path.endswith(".md"):
            for number in unclosed_fences(text):
                dead.append((path, number, "```", "a code block opened here is never closed"))
            for number, line in lines_outside_code(text):
                for target in MD_LINK.findall(line):
                    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                        continue  # https:, mailto: and the like
                    file_part, _, anchor = target.partition("#")
                    why = check_target(root, path, file_part, anchor if "#" in target else None, [here])
                    checked.add((number, target))
                    if why:
                        dead.append((path, number, target, why))
        lines = lines_outside_code(text) if path.endswith(".md") else enumerate(text.split("\n"), 1)
        for number, line in lines:
            for file_part, anchor in CITATION.findall(line):
                target = f"{file_part}#{anchor}"
                if (number, target) in checked or re.search(r"https?://\S*" + re.escape(target), line):
                    continue
                checked.add((number, target))
                why = check_target(root, path, file_part, anchor, [root, here])
                if why:
                    dead.append((path, number, target, why))
    return dead


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    dead = dead_links(root)
    for path, number, target, why in dead:
        print(f"{os.path.relpath(path, os.path.abspath(root))}:{number}: {target} ({why})")
    return 1 if dead else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
