"""gi_restore.py — restore from PyGObject: the GNOME API (gi.repository.PortalKeyring) vs libsecret's
own introspected API (gi.repository.Secret, gir1.2-secret-1), in one process.

    GI_TYPELIB_PATH=… LD_LIBRARY_PATH=… python3 bench/gi_restore.py N

Ours: Auth.restore_session_sync(None) and Session.copy_token(). Theirs:
Secret.password_lookup_sync(schema, {"auth_environment_id": …}, None), the lowest-level lookup
libsecret offers a Python app, reading a password that holds a session document of the same shape
and size. Each side stores its own item first (the same schema and document; bench/gi_figures.py
passes bench_common.h's values in BENCH_* environment variables), then 50 warm-up calls each, then N
pairs alternating call by call, the order flipped every pair; prints "ours_ns theirs_ns" per pair.
Clears both items at the end. Exits non-zero if a call finds nothing.
"""

import os
import sys
import time

import gi

gi.require_version("PortalKeyring", "1")
gi.require_version("Secret", "1")
from gi.repository import PortalKeyring, Secret  # noqa: E402

OURS, THEIRS = "bench-gi-python-portal", "bench-gi-python-raw"


def main(n):
    e = os.environ
    schema = Secret.Schema.new(e["BENCH_SCHEMA_NAME"], Secret.SchemaFlags.NONE, {
        name: Secret.SchemaAttributeType.STRING for name in ("auth_environment_id", "session_generation", "persisted_at")})
    theirs_attrs = {"auth_environment_id": THEIRS}
    Secret.password_clear_sync(schema, theirs_attrs, None)
    Secret.password_store_sync(schema, dict(theirs_attrs, session_generation="0" * 32, persisted_at="1700000000000000"),
                               Secret.COLLECTION_DEFAULT, "Portal session (bench baseline)", e["BENCH_DOCUMENT"], None)
    auth = PortalKeyring.Auth.new(OURS, e["BENCH_REDIRECT_URL"], None)
    auth.clear_persisted_session_sync(None)
    auth.persist_session_sync(e["BENCH_END_USER_ID"], e["BENCH_TOKEN"], None)

    def ours():
        session = auth.restore_session_sync(None)
        if session is None or not session.copy_token():
            sys.exit("gi_restore.py: restore_session_sync found nothing")

    def theirs():
        if not Secret.password_lookup_sync(schema, theirs_attrs, None):
            sys.exit("gi_restore.py: Secret.password_lookup_sync found nothing")

    for _ in range(50):
        ours()
        theirs()
    clock = time.perf_counter_ns
    pairs = []
    for i in range(n):
        if i & 1:
            t0 = clock(); theirs(); t1 = clock(); ours(); t2 = clock()
            pairs.append((t2 - t1, t1 - t0))
        else:
            t0 = clock(); ours(); t1 = clock(); theirs(); t2 = clock()
            pairs.append((t1 - t0, t2 - t1))
    auth.clear_persisted_session_sync(None)
    Secret.password_clear_sync(schema, theirs_attrs, None)
    sys.stdout.write("".join("%d %d\n" % p for p in pairs))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(int(sys.argv[1]))
