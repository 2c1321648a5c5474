#!/usr/bin/env python3
"""Predicts docs/bench/bench_hier.csv's emulated-cluster runs with tacl-sim.

usage: docs/sim/compare_bench.py BUILD_DIR > table.md
       docs/sim/compare_bench.py --calibrate

Every forced algorithm of every layout (nodes x ranks per node) and
collective in the CSV is simulated on topologies/emulated-1gbit.topo in
host memory, out of place, at the CSV's sizes; the table gives measured
and predicted milliseconds and the prediction's error.

--calibrate prints what the CSV says for the topology's two measured
figures: the link rate of the 2x1 ring calibration (the CSV's
link_rate_Bps) and host_bw, the bytes the 4x2 flat ring moved over its
four node uplinks in total per second at 128 MB and up (all-gather,
reduce-scatter, all-reduce; each uplink carries 7/8 of the buffer, twice
that for all-reduce), whose median is the topology's host_bw.
"""
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile


def calibrate(rows):
    rates = {r["link_rate_Bps"] for r in rows}
    print("link rate (2x1 ring): " + ", ".join(
        "%.4f Gbit/s" % (float(x) * 8 / 1e9) for x in sorted(rates)))
    totals = []
    for r in rows:
        size = int(r["size_bytes"])
        if r["layout"] != "4x2" or r["algorithm"] != "ring" or \
                size < 128 << 20:
            continue
        per_uplink = 7 / 8 * size * (2 if r["collective"] == "all_reduce"
                                     else 1)
        gbs = 4 * per_uplink / (float(r["time_us"]) * 1e-6) / 1e9
        totals.append(gbs)
        print("4x2 ring %s %d MB: %.3f GB/s over the four uplinks" %
              (r["collective"], size >> 20, gbs))
    if totals:
        print("host_bw (median): %.3f GB/s" % statistics.median(totals))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.join(here, "..", "..")
    rows = list(csv.DictReader(open(os.path.join(root, "docs", "bench",
                                                 "bench_hier.csv"))))
    if sys.argv[1:] == ["--calibrate"]:
        calibrate(rows)
        return
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    tool = os.path.join(sys.argv[1], "tools", "tacl-sim")
    if not os.access(tool, os.X_OK):
        sys.exit("compare_bench.py: %s is not an executable tacl-sim "
                 "(build first)" % tool)
    topo = os.path.join(root, "topologies", "emulated-1gbit.topo")
    groups = {}
    for r in rows:
        if r["algorithm"] == "auto":
            continue
        key = (r["layout"], r["collective"], r["algorithm"])
        groups.setdefault(key, []).append(r)
    print("| layout | collective | algorithm | size MB | measured ms "
          "| predicted ms | error |")
    print("|---|---|---|---:|---:|---:|---:|")
    worst = 0.0
    for (layout, coll, algo), rs in sorted(groups.items()):
        nodes, rpn = layout.split("x")
        sizes = sorted(int(r["size_bytes"]) for r in rs)
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            subprocess.run([tool, "--topo", topo, "--nodes", nodes,
                            "--ranks-per-node", rpn, "--coll", coll,
                            "--mem", "host", "-A", algo, "-b",
                            str(sizes[0]), "-e", str(sizes[-1]), "-f", "2",
                            "-J", f.name], check=True,
                           capture_output=True)
            pred = {e["size"]: e["out_of_place"]["time_us"]
                    for e in json.load(open(f.name))["results"]}
        for r in sorted(rs, key=lambda r: int(r["size_bytes"])):
            size = int(r["size_bytes"])
            meas = float(r["time_us"])
            p = pred[size]
            err = p / meas - 1
            worst = max(worst, abs(err))
            print(f"| {layout} | {coll} | {algo} | {size >> 20} | "
                  f"{meas / 1e3:.1f} | {p / 1e3:.1f} | {err * 100:+.1f}% |")
    print(f"\nLargest error: {worst * 100:.1f}%")


if __name__ == "__main__":
    main()
