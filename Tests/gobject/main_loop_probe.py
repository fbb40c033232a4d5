#!/usr/bin/python3
"""main_loop_probe.py — how long a GApplication's main loop keeps a D-Bus caller waiting.

    main_loop_probe.py APP_ID OUT_FILE

Calls org.gtk.Actions.List on APP_ID (GApplication answers it on its main context, so the answer
waits for whatever runs there) every 10 ms until SIGTERM, then writes the largest round trip in
milliseconds to OUT_FILE. Calls before the app owns its name are not counted.
"""
import signal
import sys
import time

from gi.repository import Gio, GLib

app_id, out = sys.argv[1], sys.argv[2]
bus = Gio.bus_get_sync(Gio.BusType.SESSION)
path = "/" + app_id.replace(".", "/")
worst = 0.0


def stop(*_):
    with open(out, "w") as f:
        f.write(f"{worst:.1f}\n")
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
while True:
    start = time.monotonic()
    try:
        bus.call_sync(app_id, path, "org.gtk.Actions", "List", None, None, Gio.DBusCallFlags.NONE, 10000, None)
        worst = max(worst, (time.monotonic() - start) * 1000)
    except GLib.Error:
        pass
    time.sleep(0.01)
