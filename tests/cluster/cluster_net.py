#!/usr/bin/python3
"""TCP checks run as the ranks of a tacl-cluster job.

Rank 0 listens on the TACL_ROOT_ADDR port; every other rank connects to
the address in TACL_ROOT_ADDR, so traffic crosses the emulated switch.

  cluster_net.py ping          each rank > 0 sends its identity, rank 0
                               answers; rank 0 prints the peers it saw.
  cluster_net.py rate SECONDS  rank 1 streams to rank 0 for SECONDS;
                               rank 0 prints "rate_gbit=<measured>".
Every wait is bounded; a failure exits non-zero with a message.
"""

import os
import socket
import sys
import time

CONNECT_TRIES = 100
IO_TIMEOUT_S = 20.0
CHUNK = 1 << 20


def env_int(name):
    return int(os.environ[name])


def say(line):
    """Write one whole line at once, so ranks sharing stdout never mix."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def root_addr():
    host, port = os.environ["TACL_ROOT_ADDR"].rsplit(":", 1)
    return host, int(port)


def listen(port, backlog):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(backlog)
    srv.settimeout(IO_TIMEOUT_S)
    return srv


def connect(addr):
    for _ in range(CONNECT_TRIES):
        try:
            s = socket.create_connection(addr, timeout=IO_TIMEOUT_S)
            return s
        except OSError:
            time.sleep(0.05)
    sys.exit("rank %s: cannot connect to %s:%d" %
             (os.environ["TACL_RANK"], addr[0], addr[1]))


def recv_line(sock):
    data = b""
    while not data.endswith(b"\n"):
        part = sock.recv(256)
        if not part:
            break
        data += part
    return data.decode().strip()


def ping():
    rank, nranks = env_int("TACL_RANK"), env_int("TACL_NRANKS")
    me = "%d@%s" % (rank, socket.gethostname())
    if rank == 0:
        srv = listen(root_addr()[1], nranks)
        seen = []
        for _ in range(nranks - 1):
            conn, peer = srv.accept()
            conn.settimeout(IO_TIMEOUT_S)
            seen.append("%s/%s" % (recv_line(conn), peer[0]))
            conn.sendall(("ack " + me + "\n").encode())
            conn.close()
        say("peers " + " ".join(sorted(seen)))
        return
    sock = connect(root_addr())
    sock.sendall((me + "\n").encode())
    say("got " + recv_line(sock))


def rate(seconds):
    rank = env_int("TACL_RANK")
    if rank == 0:
        srv = listen(root_addr()[1], 1)
        conn, _ = srv.accept()
        conn.settimeout(IO_TIMEOUT_S)
        total = 0
        start = end = None
        while True:
            n = len(conn.recv(CHUNK))
            if n == 0:
                break
            end = time.monotonic()
            if start is None:
                start = end
            else:
                total += n
        if start is None or end <= start:
            sys.exit("rank 0: no data received")
        say("rate_gbit=%.4f bytes=%d seconds=%.3f" %
            (total * 8 / (end - start) / 1e9, total, end - start))
    elif rank == 1:
        sock = connect(root_addr())
        buf = b"\0" * CHUNK
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            sock.sendall(buf)
        sock.close()


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "ping":
        ping()
    elif len(sys.argv) == 3 and sys.argv[1] == "rate":
        rate(float(sys.argv[2]))
    else:
        sys.exit("usage: cluster_net.py ping | rate SECONDS")


if __name__ == "__main__":
    main()
