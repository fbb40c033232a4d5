"""py_restore.py — restore from Python: the portal_keyring ctypes module vs PyPI's keyring.

    python py_restore.py setup               store the session on both sides
    python py_restore.py warm N              in one process, alternating call by call (order
                                             flipped every pair); prints "ours_ns theirs_ns"
    python py_restore.py cold-ours           one process: import portal_keyring, one restore
    python py_restore.py cold-theirs         one process: import keyring, one get_password
    python py_restore.py info                the versions and the keyring backend in use

Ours: portal_keyring.PortalAuth(...).restore_session() plus reading the token (wiped after).
Theirs: keyring.get_password(service, user) with the SecretService backend (SecretStorage +
jeepney), reading a password that holds the same session document. Both against the same
private Secret Service. Exit 2 if a restore finds nothing.
"""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

ENV = "bench-python-portal"
REDIRECT = "bench-app://portal/redirect"
SERVICE, USER = "bench-python-keyring", "bench-user"


def _common():
    """The token and document from bench_common.h (one source for C and Python)."""
    values = {}
    with open(os.path.join(HERE, "bench_common.h"), encoding="utf-8") as f:
        for line in f:
            parts = line.split(None, 2)
            if len(parts) == 3 and parts[0] == "#define" and parts[1] in ("BENCH_TOKEN", "BENCH_END_USER_ID"):
                values[parts[1]] = parts[2].strip().strip('"')
    token, user = values["BENCH_TOKEN"], values["BENCH_END_USER_ID"]
    document = '{"clientSessionToken":"%s","endUserId":"%s","v":1}' % (token, user)
    return token, user, document


def _theirs():
    import keyring
    from keyring.backends import SecretService

    keyring.set_keyring(SecretService.Keyring())
    return keyring


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "cold-ours":
        import portal_keyring as pk

        with pk.PortalAuth(ENV, REDIRECT) as auth:
            session = auth.restore_session()
            if session is None:
                return 2
            with session, session.token() as token:
                return 0 if len(token) else 2
    if cmd == "cold-theirs":
        keyring = _theirs()
        return 0 if keyring.get_password(SERVICE, USER) else 2
    if cmd == "info":
        import importlib.metadata as md
        import portal_keyring as pk

        keyring = _theirs()
        print("portal_keyring library %s (%s)" % (pk.library_version(), pk.library_path))
        print("keyring %s (%s), SecretStorage %s, jeepney %s, Python %s" % (
            md.version("keyring"), type(keyring.get_keyring()).__module__ + "." + type(keyring.get_keyring()).__name__,
            md.version("SecretStorage"), md.version("jeepney"), sys.version.split()[0]))
        return 0
    if cmd == "setup":
        import portal_keyring as pk

        token, user, document = _common()
        with pk.PortalAuth(ENV, REDIRECT) as auth:
            auth.persist_session(user, token).close()
        _theirs().set_password(SERVICE, USER, document)
        return 0
    if cmd == "warm":
        import portal_keyring as pk

        n = int(argv[2])
        keyring = _theirs()
        auth = pk.PortalAuth(ENV, REDIRECT)

        def ours():
            session = auth.restore_session()
            if session is None:
                raise SystemExit("py_restore: portal_keyring restored nothing")
            with session, session.token() as token:
                if not token:
                    raise SystemExit("py_restore: empty token")

        def theirs():
            if not keyring.get_password(SERVICE, USER):
                raise SystemExit("py_restore: keyring.get_password returned nothing")

        for _ in range(5):
            ours()
            theirs()
        clock = time.perf_counter_ns
        rows = []
        for i in range(n):
            if i & 1:
                t0 = clock(); theirs(); t1 = clock(); ours(); t2 = clock()
                rows.append((t2 - t1, t1 - t0))
            else:
                t0 = clock(); ours(); t1 = clock(); theirs(); t2 = clock()
                rows.append((t1 - t0, t2 - t1))
        auth.close()
        sys.stdout.write("".join("%d %d\n" % r for r in rows))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
