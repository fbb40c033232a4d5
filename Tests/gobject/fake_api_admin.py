#!/usr/bin/python3
"""fake_api_admin.py — one call to the admin routes of the loopback fake Portal API
($PORTAL_TEST_API_URL, started by scripts/with-portal-api.sh), for the language tests of the GNOME
API: gjs_test.js and vala_test.vala run it (they have no HTTP client here), pygobject_test.py
imports admin(). Tests/c/fake_api.h is the C programs' counterpart.

    fake_api_admin.py METHOD PATH [JSON]           prints the answer's data.token ("" when none)
    fake_api_admin.py --data METHOD PATH [JSON]    prints the answer's data as JSON
"""
import json
import os
import sys
import urllib.request


def admin(method, path, body=None):
    """The decoded answer of METHOD PATH with the JSON text body (None: no body)."""
    request = urllib.request.Request(os.environ["PORTAL_TEST_API_URL"] + path, method=method,
                                     data=body.encode() if body else None,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as answer:
        return json.load(answer)


if __name__ == "__main__":
    whole = sys.argv[1:2] == ["--data"]
    args = sys.argv[2:] if whole else sys.argv[1:]
    data = admin(args[0], args[1], args[2] if len(args) > 2 else None).get("data")
    if whole:
        print(json.dumps(data))
    else:
        print(data.get("token", "") if isinstance(data, dict) else "")
