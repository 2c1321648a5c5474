#!/usr/bin/env python3
"""A storage node for the emulated cluster: files put and got over TCP.

Checkpoints of large training jobs go to a remote persistent store (the
thesis' section 6.2.1: S3 or a file system behind a link far slower than
the training network).  tools/tacl-cluster --storage-rate puts a
namespace behind such a link; this program is what runs there (serve) and
what the ranks use to reach it (put, get), so a file checkpoint's upload
and download are timed over the shaped link, not assumed from its rate.

Protocol, one request a connection: "PUT name size\\n" then size bytes,
answered "OK\\n" once the file is written and synced; "GET name\\n",
answered "SIZE n\\n" then n bytes, or "ERR why\\n"; "GET name offset
length\\n" asks for length bytes from offset only (a ranged read, as
object stores serve them), which must lie inside the file.  Names are
one path component of letters, digits, '.', '_' and '-'.

Usage:
  storage_node.py serve DIR PORT
  storage_node.py put HOST:PORT FILE NAME   (prints: put NAME BYTES SECONDS)
  storage_node.py get HOST:PORT NAME FILE [OFFSET LENGTH]
                                            (prints: get NAME BYTES SECONDS)
Exit status 0, or 1 with a message naming what failed.
"""
import os
import re
import socket
import socketserver
import sys
import time

CHUNK = 1 << 20
NAME = re.compile(r"^[A-Za-z0-9._-]{1,200}$")
TIMEOUT_S = 600


def read_line(f):
    line = f.readline(512)
    if not line.endswith(b"\n"):
        raise ValueError("request line cut short")
    return line.decode().split()


def copy(src, dst, size):
    """Copy exactly size bytes from file object src to dst."""
    left = size
    while left > 0:
        buf = src.read(min(CHUNK, left))
        if not buf:
            raise ValueError(f"stream ended with {left} of {size} bytes "
                             "missing")
        dst.write(buf)
        left -= len(buf)


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        self.request.settimeout(TIMEOUT_S)
        try:
            words = read_line(self.rfile)
            if len(words) < 2 or not NAME.match(words[1]):
                raise ValueError(f"bad request {words!r}")
            path = os.path.join(self.server.root, words[1])
            if words[0] == "PUT" and len(words) == 3:
                self.put(path, int(words[2]))
            elif words[0] == "GET" and len(words) in (2, 4):
                self.get(path, *(int(w) for w in words[2:]))
            else:
                raise ValueError(f"bad request {words!r}")
        except (ValueError, OSError) as e:
            try:
                self.wfile.write(f"ERR {e}\n".encode())
            except OSError:
                pass

    def put(self, path, size):
        tmp = f"{path}.part"
        with open(tmp, "wb") as f:
            copy(self.rfile, f, size)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self.wfile.write(b"OK\n")

    def get(self, path, offset=0, length=None):
        size = os.path.getsize(path)
        if length is None:
            length = size
        if offset < 0 or length < 0 or offset + length > size:
            raise ValueError(f"range {offset}+{length} is outside the "
                             f"file's {size} bytes")
        self.wfile.write(f"SIZE {length}\n".encode())
        with open(path, "rb") as f:
            f.seek(offset)
            copy(f, self.wfile, length)


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def serve(root, port):
    with Server(("0.0.0.0", port), Handler) as srv:
        srv.root = root
        srv.serve_forever()


def connect(addr):
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        sys.exit(f"storage_node: address {addr!r} is not HOST:PORT")
    deadline = time.monotonic() + 30
    while True:
        try:
            return socket.create_connection((host, int(port)),
                                            timeout=TIMEOUT_S)
        except OSError as e:
            # The server may still be starting in its namespace.
            if time.monotonic() > deadline:
                sys.exit(f"storage_node: cannot reach {addr}: {e}")
            time.sleep(0.2)


def answer(f, what):
    words = read_line(f)
    if not words or words[0] == "ERR":
        sys.exit(f"storage_node: {what}: {' '.join(words[1:])}")
    return words


def put(addr, local, name):
    size = os.path.getsize(local)
    t0 = time.monotonic()
    with connect(addr) as s, s.makefile("rwb") as f, open(local, "rb") as src:
        f.write(f"PUT {name} {size}\n".encode())
        copy(src, f, size)
        f.flush()
        answer(f, f"put {name}")
    print(f"put {name} {size} {time.monotonic() - t0:.3f}")


def fetch(addr, name, dst, offset=None, length=None):
    """Copy the file name (or length bytes of it from offset) into the
    open file dst at its position; the bytes copied."""
    ask = f"GET {name}" if offset is None else f"GET {name} {offset} {length}"
    with connect(addr) as s, s.makefile("rwb") as f:
        f.write(f"{ask}\n".encode())
        f.flush()
        size = int(answer(f, f"get {name}")[1])
        copy(f, dst, size)
    return size


def get(addr, name, local, offset=None, length=None):
    t0 = time.monotonic()
    try:
        with open(local, "wb") as dst:
            size = fetch(addr, name, dst, offset, length)
    except SystemExit:
        os.unlink(local)  # no partial file where a refusal was answered
        raise
    print(f"get {name} {size} {time.monotonic() - t0:.3f}")


def main(argv):
    if len(argv) == 4 and argv[1] == "serve":
        serve(argv[2], int(argv[3]))
    elif len(argv) == 5 and argv[1] == "put":
        put(argv[2], argv[3], argv[4])
    elif len(argv) in (5, 7) and argv[1] == "get":
        if not all(w.isdigit() for w in argv[5:]):
            sys.exit("storage_node: OFFSET and LENGTH are byte counts")
        get(argv[2], argv[3], argv[4], *(int(w) for w in argv[5:]))
    else:
        sys.exit(__doc__.split("Usage:")[1].split("Exit")[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
