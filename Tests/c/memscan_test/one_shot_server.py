#!/usr/bin/env python3
"""One-shot loopback HTTP server for memscan_test: a response body with a NUL byte.

    python3 one_shot_server.py PORT_FILE   < token-line

Binds 127.0.0.1 on a free port, writes the port to PORT_FILE, reads one line (the token) from
stdin, answers exactly one request with 200 and the body b"ok\\0" + token, then exits (at most
30 s). The token never passes through the test process's stdio buffers in clear (it writes it
unbuffered to this process's stdin).
"""
import socket
import sys

listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
listener.settimeout(30)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(listener.getsockname()[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
token = sys.stdin.readline().strip().encode()
conn, _ = listener.accept()
conn.settimeout(30)
request = b""
while b"\r\n\r\n" not in request:
    chunk = conn.recv(65536)
    if not chunk:
        break
    request += chunk
body = b"ok\0" + token
conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n"
             b"Connection: close\r\n\r\n" % len(body) + body)
conn.close()
