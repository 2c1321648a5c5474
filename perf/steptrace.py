#!/usr/bin/env python3
"""Summarise step timelines: TACL_STEP_TRACE files of a real run, or the
file tacl-sim --trace writes for its prediction (same format: one line
"op rank step kind peer bytes ready_us start_us done_us" per step).

For every operation that moves at least --min-bytes (all ranks' sends
together; smaller ones, such as the perf binaries' own synchronisation,
only mark time), it prints:

  time    from the end of the operation before it (over all ranks: the
          last step to finish) to its own end, or from its first step's
          start for the first one: what a back-to-back loop sees per call
          (tacl-sim's operations, whose file starts with a "#" line, are
          independent: each from its own start)
  net     from that start to the last inter-node step's end
  tail    from there to the operation's end (steps inside the nodes)
  pause   the longest interval inside it in which no inter-node step of
          any rank ended: a stalled network rather than a slow one (at
          least one message's time, the first one's)

and, per operation size, the median and the fastest time.  Steps are
inter-node when their peer is on another node, nodes being --rpn
consecutive ranks.  Times of a real run are on the machine's monotonic
clock, so every rank's file lines up.

usage: steptrace.py [--rpn G] [--min-bytes B] FILE|PREFIX...
  (a PREFIX reads PREFIX.0, PREFIX.1, ... as TACL_STEP_TRACE writes them)
"""

import argparse
import glob
import os
import statistics
import sys


def read(paths):
    """Lines of every file, grouped: {op: [(rank, kind, peer, bytes,
    ready, start, done)]}, and whether the operations are independent
    (tacl-sim's file, which has a header line)."""
    ops = {}
    independent = False
    for path in paths:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if line.startswith("#"):
                    independent = True
                    continue
                if not line.strip():
                    continue
                w = line.split()
                if len(w) != 9:
                    sys.exit(f"steptrace.py: {path}:{n}: not a step line")
                try:
                    row = (int(w[1]), w[3], int(w[4]), int(w[5]),
                           float(w[6]), float(w[7]), float(w[8]))
                    ops.setdefault(int(w[0]), []).append(row)
                except ValueError:
                    sys.exit(f"steptrace.py: {path}:{n}: bad number")
    return ops, independent


def files_of(args):
    out = []
    for a in args:
        if os.path.isfile(a):
            out.append(a)
            continue
        found = sorted(p for p in glob.glob(glob.escape(a) + ".*")
                       if p[len(a) + 1:].isdigit())
        if not found:
            sys.exit(f"steptrace.py: no file {a} nor {a}.<rank>")
        out += found
    return out


def summarise(ops, rpn, min_bytes, independent):
    """One dict per large operation, in order."""
    rows = []
    prev_end = None
    for op in sorted(ops):
        steps = ops[op]
        end = max(s[6] for s in steps)
        sent = sum(s[3] for s in steps if s[1] == "send")
        if sent >= min_bytes:
            begin = prev_end
            if begin is None or independent:
                begin = min(s[4] for s in steps)
            net = sorted(s[6] for s in steps
                         if s[2] >= 0 and s[2] // rpn != s[0] // rpn)
            last_net = net[-1] if net else begin
            marks = [begin] + [t for t in net if t >= begin] + [last_net]
            pause = max(b - a for a, b in zip(marks, marks[1:]))
            rows.append({"op": op, "bytes": sent, "time": end - begin,
                         "net": last_net - begin, "tail": end - last_net,
                         "pause": pause})
        prev_end = end
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rpn", type=int, default=1,
                    help="ranks per node (default 1)")
    ap.add_argument("--min-bytes", type=float, default=1 << 20,
                    help="smallest operation shown, bytes sent by all "
                    "ranks together (default 1 MiB)")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    if a.rpn < 1:
        ap.error("--rpn must be at least 1")
    ops, independent = read(files_of(a.files))
    rows = summarise(ops, a.rpn, a.min_bytes, independent)
    if not rows:
        print("no operation moved --min-bytes")
        return 1
    print(f"{'op':>4} {'sent MB':>9} {'time ms':>9} {'net ms':>8} "
          f"{'tail ms':>8} {'pause ms':>9}")
    for r in rows:
        print(f"{r['op']:>4} {r['bytes'] / 2**20:>9.1f} "
              f"{r['time'] / 1e3:>9.1f} {r['net'] / 1e3:>8.1f} "
              f"{r['tail'] / 1e3:>8.1f} {r['pause'] / 1e3:>9.1f}")
    for size in sorted({r["bytes"] for r in rows}):
        t = [r["time"] / 1e3 for r in rows if r["bytes"] == size]
        print(f"# {size / 2**20:.1f} MB sent: {len(t)} operations, "
              f"median {statistics.median(t):.1f} ms, fastest "
              f"{min(t):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
