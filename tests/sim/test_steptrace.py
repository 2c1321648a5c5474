"""tacl-sim --trace and perf/steptrace.py together: the emulated 4x2
cluster's HO-Ring all-gather at 8 MB, traced; the file has one line per
step of every rank (two simulations: out of place and in place, numbered
0 and 1), the summary's per-operation time is the table's prediction,
the inter-node part ends within the last intra-node hop of the end, and
bad input fails with a message (exit 1 or 2), not a traceback.

usage: test_steptrace.py SOURCE_ROOT BUILD_ROOT
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_pages import check  # noqa: E402  (the same check and message)


def main():
    src, build = sys.argv[1], sys.argv[2]
    sim = os.path.join(build, "tools", "tacl-sim")
    tool = os.path.join(src, "perf", "steptrace.py")
    topo = os.path.join(src, "topologies", "emulated-1gbit.topo")
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "t")
        p = subprocess.run([sim, "--topo", topo, "--nodes", "4",
                            "--ranks-per-node", "2", "-b", "8M", "-e", "8M",
                            "-A", "horing", "--trace", trace],
                           capture_output=True, text=True)
        check(p.returncode == 0, f"tacl-sim failed: {p.stderr}")
        row = [l for l in p.stdout.splitlines()
               if re.match(r"\s+8388608\s", l)]
        check(len(row) == 1, f"no 8 MB row in:\n{p.stdout}")
        predicted_ms = float(row[0].split()[5]) / 1e3
        steps = re.search(r"(\d+) steps", p.stdout)
        check(steps is not None, "no step count in the table")
        with open(trace) as f:
            lines = f.read().splitlines()
        check(lines[0].startswith("# op rank step"), "no header line")
        ops = {}
        for l in lines[1:]:
            w = l.split()
            check(len(w) == 9, f"bad line {l}")
            ops[w[0]] = ops.get(w[0], 0) + 1
        check(ops == {"0": int(steps.group(1)), "1": ops.get("1", -1)},
              f"ops and steps per op: {ops}, table says {steps.group(1)}")
        s = subprocess.run([sys.executable, tool, "--rpn", "2", trace],
                           capture_output=True, text=True)
        check(s.returncode == 0, f"steptrace.py failed: {s.stderr}")
        rows = [l.split() for l in s.stdout.splitlines()
                if re.match(r"\s+\d+\s+\d", l)]
        check(len(rows) == 2, f"two operations expected:\n{s.stdout}")
        for r in rows:
            time_ms, net_ms, tail_ms = float(r[2]), float(r[3]), float(r[4])
            check(abs(time_ms - predicted_ms) <= 0.05 + 1e-3 * predicted_ms,
                  f"time {time_ms} against the prediction {predicted_ms}")
            check(abs(net_ms + tail_ms - time_ms) <= 0.2 and
                  0 <= tail_ms < 0.05 * time_ms,
                  f"net {net_ms} + tail {tail_ms} against {time_ms}")
        # Bad input: a missing file, a malformed line, a bad option.
        bad = os.path.join(tmp, "bad")
        with open(bad, "w") as f:
            f.write("0 0 0 send\n")
        for args, what in (([os.path.join(tmp, "none")], "missing file"),
                           ([bad], "malformed line"),
                           (["--rpn", "0", trace], "--rpn 0")):
            b = subprocess.run([sys.executable, tool] + args,
                               capture_output=True, text=True)
            check(b.returncode in (1, 2) and "Traceback" not in b.stderr
                  and b.stderr.strip() != "",
                  f"{what}: exit {b.returncode}, stderr {b.stderr!r}")
        b = subprocess.run([sim, "--topo", topo, "--trace",
                            os.path.join(tmp, "no", "such", "dir")],
                           capture_output=True, text=True)
        check(b.returncode == 1 and "cannot write" in b.stderr,
              f"tacl-sim --trace to a bad path: {b.returncode} {b.stderr}")
    print("ok: tacl-sim --trace and steptrace.py")


if __name__ == "__main__":
    main()
