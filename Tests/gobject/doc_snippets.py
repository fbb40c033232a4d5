#!/usr/bin/python3
"""doc_snippets.py — the code block of a page (docs/gnome.md, python/README.md) that an HTML
comment marks as runnable, as a file to compile and run: run.sh runs each language's first
example from the page itself, so that what a reader pastes is what the suite ran.

    doc_snippets.py LANG AUTH_ENVIRONMENT_ID OUT [PAGE]

A runnable block is the fenced block right after a `<!-- run: LANG -->` line (LANG: gjs, python,
vala, c). Writes it to OUT with YOUR_AUTH_ENVIRONMENT_ID replaced by AUTH_ENVIRONMENT_ID, the only
change. Exits 1 when the page has no such block, more than one, a block that is never closed, or
a block without the placeholder.
"""
import os
import sys

PLACEHOLDER = "YOUR_AUTH_ENVIRONMENT_ID"


def runnable_blocks(text, lang):
    """The bodies of the fenced blocks marked `<!-- run: LANG -->`, in page order; None for a
    marked block that another fence opens in before it is closed (or the page ends)."""
    lines = text.split("\n")
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != f"<!-- run: {lang} -->":
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            blocks.append(None)
            continue
        body = None
        for j in range(i + 2, len(lines)):
            if lines[j].startswith("```"):
                body = "\n".join(lines[i + 2:j]) + "\n" if lines[j].strip() == "```" else None
                break
        blocks.append(body)
    return blocks


def main(argv):
    if len(argv) not in (4, 5):
        sys.exit(__doc__)
    lang, env_id, out = argv[1:4]
    page = argv[4] if len(argv) == 5 else os.path.join(os.path.dirname(__file__), "..", "..", "docs", "gnome.md")
    with open(page, encoding="utf-8") as f:
        blocks = runnable_blocks(f.read(), lang)
    if len(blocks) != 1:
        sys.exit(f"doc_snippets.py: {page} has {len(blocks)} blocks marked '<!-- run: {lang} -->', wanted 1")
    if blocks[0] is None:
        sys.exit(f"doc_snippets.py: the {lang} block of {page} is not a fenced block closed by a bare ```")
    if PLACEHOLDER not in blocks[0]:
        sys.exit(f"doc_snippets.py: the {lang} block of {page} does not name {PLACEHOLDER}")
    with open(out, "w", encoding="utf-8") as f:
        f.write(blocks[0].replace(PLACEHOLDER, env_id))


if __name__ == "__main__":
    main(sys.argv)
