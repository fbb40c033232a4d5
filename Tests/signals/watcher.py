"""A Python app's session watch, printing what it hears (Tests/signals/run.sh).

    python3 watcher.py AUTH_ENVIRONMENT_ID

Prints "watching" once ``auth.watch()`` is live, then one line per change ("signed_in EU",
"signed_out", ...), flushed. SIGTERM ends it with exit 0."""
import signal
import sys
import threading

import portal_keyring as pk

done = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: done.set())
with pk.PortalAuth(sys.argv[1], "myapp://portal/redirect") as auth:
    with auth.watch(lambda change: print(" ".join(filter(None, (change.kind, change.end_user_id))), flush=True)):
        print("watching", flush=True)
        while not done.wait(0.1):
            pass
