#!/usr/bin/env python3
"""keyringctl-sandbox.py — keyringctl's item commands inside a Flatpak sandbox.

Inside the sandbox the host's Secret Service is out of reach (that is the point of it), so
keyringctl (Tests/tools/keyringctl.c, which speaks the Secret Service's D-Bus API) cannot work.
There the tests' keyring is the file keyring keyed by the Secret portal, and libsecret's own
file backend reads and writes it: this stand-in runs libsecret's `secret-tool` for keyringctl's
item commands, with keyringctl's arguments, output and exit codes, so that the suites and C tests
pass PORTAL_TEST_KEYRINGCTL=Tests/tools/keyringctl-sandbox.py and plant and inspect items the same
way on every provider (Tests/flatpak/*.sh).

    store --schema NAME [--content-type T] [--label L] [--replace] K=V...   (the secret on stdin)
    count [--schema NAME] K=V...        number of matching items
    get [--schema NAME] K=V...          the single match's secret; 1 if none, 2 if several
    attrs [--schema NAME] K=V...        one line per match: sorted k=v pairs (bytes <= 0x20, 0x7f
                                        and '\\' as \\xHH), lines sorted; 1 if none
    delete-all [--schema NAME] K=V...   deletes the matches, prints how many

Differences, from libsecret's file backend: a store replaces an item with exactly the same
attributes (keyringctl without --replace adds a second one); no content type is kept. Commands
that act on the host's keyring (lock, unlock, is-locked, settle, stuck-prompter, unlock-prompt,
content-type) exit 3 naming the sandbox: the tests do those from outside (Tests/flatpak/run.sh).
libsecret 0.20.5 now and then waits forever for a portal answer it subscribed to too late:
a secret-tool run is stopped and tried again, five times at most, the n-th run after 4n s (a
loaded machine, where a run takes seconds, gets more time each try; three 4-second tries once
failed a run at load average 9); a store that fails is tried again the same way.
"""
import subprocess
import sys

TRIES, SECONDS = 5, 4  # the n-th try may take n * SECONDS
HOST_ONLY = {"lock", "unlock", "is-locked", "settle", "stuck-prompter", "unlock-prompt", "content-type"}


# secret-tool reads at most 8192 bytes of a secret from stdin (libsecret 0.20.5: a longer one is
# cut there, "password is too long", exit 0); a longer secret is stored through libsecret's own
# API instead, in a child Python (bounded and tried again like secret-tool).
STDIN_LIMIT = 8192
STORE_LONG = """
import sys, gi
gi.require_version("Secret", "1")
from gi.repository import Secret
label, pairs = sys.argv[1], sys.argv[2:]
attributes = dict(zip(pairs[0::2], pairs[1::2]))
Secret.password_store_sync(None, attributes, Secret.COLLECTION_DEFAULT, label, sys.stdin.read(), None)
"""


def secret_tool(args, stdin=b"", merged=False):
    """Runs secret-tool. MERGED: stderr into stdout, in the order written (secret-tool's search
    writes an item's attributes on stderr, the rest of it on stdout: both line-buffered here)."""
    if args[0] == "store" and len(stdin) > STDIN_LIMIT:
        return bounded([sys.executable, "-c", STORE_LONG, *args[2:]], stdin, merged, "store")
    command = ["stdbuf", "-oL", "-eL", "secret-tool", *args] if merged else ["secret-tool", *args]
    return bounded(command, stdin, merged, args[0])


def bounded(command, stdin, merged, what):
    """Runs COMMAND, stopped and tried again when it hangs (see the module's text)."""
    for n in range(1, TRIES + 1):
        try:
            if merged:
                return subprocess.run(command, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      timeout=n * SECONDS)
            return subprocess.run(command, input=stdin, capture_output=True, timeout=n * SECONDS)
        except subprocess.TimeoutExpired:
            continue
    sys.exit(f"keyringctl-sandbox: secret-tool {what} hung {TRIES} times ({SECONDS} s, then {SECONDS} s more each try)")


def parse(argv):
    """(options, attribute pairs as secret-tool's arguments) from keyringctl's arguments."""
    options, pairs, i = {}, [], 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("--schema", "--content-type", "--label"):
            if i + 1 == len(argv):
                sys.exit(f"keyringctl-sandbox: {arg} needs a value")
            options[arg] = argv[i + 1]
            i += 2
            continue
        if arg == "--replace":
            options[arg] = True
        elif "=" in arg:
            key, _, value = arg.partition("=")
            pairs += [key, value]
        else:
            sys.exit(f"keyringctl-sandbox: not K=V: {arg!r}")
        i += 1
    if "--schema" in options:
        pairs = ["xdg:schema", options["--schema"]] + pairs
    return options, pairs


def items(pairs):
    """The matching items' attributes (xdg:schema included), from `secret-tool search --all`."""
    out = secret_tool(["search", "--all", *pairs], merged=True).stdout.decode("utf-8", "surrogateescape")
    found, current, last = [], None, None
    lines = out.split("\n")
    for line in lines[:-1] if lines[-1] == "" else lines:
        if line.startswith("[") and line.endswith("]"):
            current, last = {}, None
            found.append(current)
        elif current is not None and line.startswith("attribute.") and " = " in line:
            key, _, value = line[len("attribute."):].partition(" = ")
            current[key], last = value, key
        elif current is not None and line.startswith("schema = "):
            current["xdg:schema"], last = line[len("schema = "):], "xdg:schema"
        elif current is not None and last and not any(
                line.startswith(p) for p in ("label = ", "secret = ", "created = ", "modified = ")):
            current[last] += "\n" + line  # a value with a line end (look-alike attributes)
    return found


def escaped(text):
    return "".join(f"\\x{ord(c):02x}" if ord(c) <= 0x20 or ord(c) == 0x7F or c == "\\" else c for c in text)


def main(argv):
    if not argv:
        sys.exit(__doc__)
    command, rest = argv[0], argv[1:]
    if command in HOST_ONLY:
        print(f"keyringctl-sandbox: {command} acts on the host's Secret Service, out of reach in a Flatpak "
              "sandbox (done from outside: Tests/flatpak/run.sh)", file=sys.stderr)
        return 3
    options, pairs = parse(rest)
    if command == "store":
        if "--schema" not in options:
            sys.exit("keyringctl-sandbox: store needs --schema")
        # A store that failed is tried again (it replaces, so a repeat adds nothing): once in a
        # few hundred under load, secret-tool store exits 1 at once. Its message is kept.
        secret, label = sys.stdin.buffer.read(), options.get("--label", "keyringctl-sandbox")
        for _ in range(TRIES):
            done = secret_tool(["store", "--label", label, *pairs], secret)
            sys.stderr.buffer.write(done.stderr)
            if done.returncode == 0:
                break
            print(f"keyringctl-sandbox: secret-tool store exited {done.returncode}; trying again", file=sys.stderr)
        if done.returncode == 0:
            print("(file keyring item)")
        return done.returncode
    if command == "count":
        print(len(items(pairs)))
        return 0
    if command == "get":
        found = len(items(pairs))
        if found != 1:
            return 1 if found == 0 else 2
        done = secret_tool(["lookup", *pairs])
        sys.stdout.buffer.write(done.stdout)
        return done.returncode
    if command == "attrs":
        lines = sorted(" ".join(f"{escaped(k)}={escaped(v)}" for k, v in sorted(item.items())) for item in items(pairs))
        for line in lines:
            print(line)
        return 0 if lines else 1
    if command == "delete-all":
        found = len(items(pairs))
        if found:
            secret_tool(["clear", *pairs])
        print(found)
        return 0
    sys.exit(f"keyringctl-sandbox: unknown command {command!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
