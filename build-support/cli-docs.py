#!/usr/bin/env python3
"""cli-docs.py PORTAL_SESSION OUTDIR — portal-session's man page and bash completion, from its help.

Runs the built command (`--help`, `--version`, `help COMMAND` for every command `--help` lists)
and writes OUTDIR/portal-session.1 (NAME, SYNOPSIS, DESCRIPTION, COMMANDS with each command's
own help, OPTIONS, ENVIRONMENT, EXIT STATUS) and OUTDIR/portal-session.bash (commands, global
options, and each command's options from its usage lines). The help text
(Sources/portal-session/Help.swift) is the only source, so the page and the completion cannot
drift from the command. Fails when a section it expects is missing from the help.
"""
import os
import re
import subprocess
import sys


def run(*args):
    return subprocess.run([BIN, *args], check=True, capture_output=True, text=True).stdout


def esc(text):
    """Roff-escape a line of help text."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return ("\\&" + text) if text[:1] in (".", "'") else text


def section(text, title):
    """The indented lines after 'title:' up to the next blank line."""
    m = re.search(r"^" + re.escape(title) + r":\n((?:  .*\n?)+)", text, re.M)
    if not m:
        sys.exit(f"cli-docs.py: no '{title}:' section in portal-session --help")
    return m.group(1).rstrip("\n").splitlines()


def entries(lines):
    """Two-column help lines -> [(term, description)]; continuation lines join the previous entry."""
    out = []
    for line in lines:
        m = re.match(r"  (\S.*?)(?:\s{2,}(\S.*))?$", line)
        if m and not line.startswith("   "):
            term, description = m.group(1), m.group(2) or ""
            split = re.match(r"(.*\])\s+([a-z][^\[]*)$", term) if not description else None
            out.append(list(split.groups()) if split else [term, description])
        elif out:
            stripped = line.strip()
            if out[-1][1] or not stripped.startswith("["):
                out[-1][1] = (out[-1][1] + " " + stripped).strip()
            else:
                out[-1][0] += " " + stripped
    return out


def main():
    global BIN
    if len(sys.argv) != 3:
        sys.exit("usage: cli-docs.py PORTAL_SESSION OUTDIR")
    BIN, outdir = sys.argv[1], sys.argv[2]
    helptext = run("--help")
    version = run("--version").split()[-1]
    usage, rest = helptext.split("\n\n", 1)
    summary = rest.split("\n", 1)[0].strip()
    commands = entries(section(helptext, "commands"))
    options = entries(section(helptext, "options (or environment variables)"))
    m = re.search(r"^exit status: (.*?)\n(?=\S+ [a-z]+ never|\Z)", helptext, re.M | re.S)
    if not m:
        sys.exit("cli-docs.py: no 'exit status:' paragraph in portal-session --help")
    exit_text = " ".join(m.group(1).split())
    notes = [p for p in rest.split("\n\n")[1:] if not re.match(r"(commands|options|exit status)\b", p)]
    tail = helptext[m.end():].strip()

    names = []
    for term, _ in commands:
        for part in term.split(" | "):
            name = part.split()[0]
            if name != "help":
                names.append(name)
    command_help = {name: run("help", name) for name in names}

    man = [f'.TH PORTAL\\-SESSION 1 "" "portal\\-session {version}" "User Commands"',
           ".SH NAME", f"portal\\-session \\- {esc(summary)}", ".SH SYNOPSIS", ".nf"]
    man += [esc(line.replace("usage: ", "", 1).strip()) for line in usage.splitlines()]
    man += [".fi", ".SH DESCRIPTION", esc(summary)]
    for paragraph in notes + ([tail] if tail else []):
        man += [".PP", esc(" ".join(paragraph.split()))]
    man += [".SH COMMANDS"]
    for term, description in commands:
        man += [".TP", f"\\fB{esc(term)}\\fR", esc(description)]
    # Commands that share one help (login-with-google and login-with-apple) share one section.
    shared = {}
    for name in names:
        shared.setdefault(command_help[name], []).append(name)
    for text, same in shared.items():
        lines = text.rstrip("\n").splitlines()
        man += [f".SS {esc(', '.join(same))}", ".nf"]
        body = 0
        for i, line in enumerate(lines):
            if i > 0 and not line.startswith(" "):
                body = i
                break
            man.append(esc(line.replace("usage: ", "", 1).strip()))
        man += [".fi", esc(" ".join(" ".join(lines[body:]).split()))]
    man += [".SH OPTIONS"]
    environment = []
    for term, description in options:
        man += [".TP", f"\\fB{esc(term)}\\fR", esc(description)]
        for var in re.findall(r"\b(PORTAL_[A-Z_]+)\b", description):
            environment.append((var, term.split()[0]))
    man += [".SH ENVIRONMENT"]
    for var, option in environment:
        man += [".TP", f"\\fB{var}\\fR", f"The default of \\fB{esc(option)}\\fR (the option overrides it)."]
    others = sorted(set(re.findall(r"\$(XDG_[A-Z_]+|FLATPAK_ID)", "\n".join(command_help.values()))))
    for var in others:
        users = [n for n, t in command_help.items() if "$" + var in t]
        man += [".TP", f"\\fB{var}\\fR", f"Where the pending sign\\-in is recorded (see \\fB{esc(users[0])}\\fR)."]
    man += [".SH EXIT STATUS"]
    for code, meaning in re.findall(r"(\d+) (.*?)(?:, (?=\d+ )|\.?$)", exit_text):
        man += [".TP", f"\\fB{code}\\fR", esc(meaning)]
    man += [".SH SEE ALSO", "\\fBsecret\\-tool\\fR(1), \\fBgnome\\-keyring\\-daemon\\fR(1)"]

    flag = r"(?<![\w-])(--?[a-z][\w-]*)"
    global_opts = sorted({o for term, _ in options for o in re.findall(flag, term)})
    # Every command takes the options of the general usage line (the one with COMMAND) and -h;
    # the other global options only where its own usage names them (restore refuses --from-email).
    every = set(re.findall(flag, usage[:usage.index("COMMAND")])) | {"-h", "--help"}

    def usage_lines(text):
        lines = text.splitlines()
        return "\n".join([lines[0]] + [l for l in lines[1:] if l.startswith(" ")])

    per_command = {name: sorted(set(re.findall(flag, usage_lines(command_help[name]))) | every) for name in names}
    # Options that take a value ("--env ID", "--account-abstracted true|false"): nothing to offer
    # after them but their values, when the help lists them.
    values = {}
    for text in [helptext] + list(command_help.values()):
        for option, value in re.findall(r"(?<![\w-])(--[a-z][\w-]*)[ =](true\|false|[A-Z][A-Z_]*)\b", text):
            values[option] = value.replace("|", " ") if "|" in value else ""
    known = set(global_opts).union(*per_command.values())
    values = {o: v for o, v in values.items() if o in known}
    value_cases = []
    for value in sorted(set(values.values())):
        takers = "|".join(sorted(o for o, v in values.items() if v == value))
        reply = f"COMPREPLY=($(compgen -W '{value}' -- \"$cur\"))" if value else "COMPREPLY=()"
        value_cases.append(f"        {takers}) {reply}; return ;;")
    bash = ["# portal-session completion, generated by build-support/cli-docs.py from portal-session --help.",
            "_portal_session() {",
            "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} word command=",
            "    case $prev in"] + value_cases + ["    esac",
            "    for word in \"${COMP_WORDS[@]:1:COMP_CWORD-1}\"; do",
            "        case $word in",
            f"            {'|'.join(names + ['help'])}) command=$word ;;",
            "        esac",
            "    done",
            f"    local opts='{' '.join(global_opts)}'",
            "    case $command in"]
    for name in names:
        bash.append(f"        {name}) opts='{' '.join(per_command[name])}' ;;")
    bash += [f"        help) COMPREPLY=($(compgen -W '{' '.join(names)}' -- \"$cur\")); return ;;",
             f"        '') [[ $cur == -* ]] || {{ COMPREPLY=($(compgen -W '{' '.join(names + ['help'])}' -- \"$cur\")); return; }} ;;",
             "    esac",
             "    COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))",
             "}",
             "complete -F _portal_session portal-session"]
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "portal-session.1"), "w", encoding="utf-8") as f:
        f.write("\n".join(man) + "\n")
    with open(os.path.join(outdir, "portal-session.bash"), "w", encoding="utf-8") as f:
        f.write("\n".join(bash) + "\n")
    print(f"cli-docs.py: {len(names)} commands, {len(options)} options, {len(environment) + len(others)} "
          f"environment variables -> {outdir}/portal-session.1, portal-session.bash")


if __name__ == "__main__":
    main()
