#!/usr/bin/env python3
"""Predicts docs/bench/bench_hier.csv's emulated-cluster runs with tacl-sim.

usage: docs/sim/compare_bench.py BUILD_DIR > table.md

Every forced algorithm of every layout (nodes x ranks per node) and
collective in the CSV is simulated on topologies/emulated-1gbit.topo in
host memory, out of place, at the CSV's sizes; the table gives measured
and predicted milliseconds and the prediction's error.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile


def main():
    build = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.join(here, "..", "..")
    tool = os.path.join(build, "tools", "tacl-sim")
    topo = os.path.join(root, "topologies", "emulated-1gbit.topo")
    rows = list(csv.DictReader(open(os.path.join(root, "docs", "bench",
                                                 "bench_hier.csv"))))
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
