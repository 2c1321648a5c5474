#!/usr/bin/env python3
"""Writes docs/sim/README.md's tables by running tacl-sim.

usage: docs/sim/make_tables.py BUILD_DIR [NODES...] > tables.md
       (TOPOS="p5.48xlarge" for one description only)

For each of the p4d and p5 descriptions and each node count, the
predicted busbw (GB/s, out of place) of the all-gathers (ring, MiCS,
H-Ring, HO-Ring, qwZ 8-bit) and reduce-scatters (ring, MiCS, qgZ 4-bit)
at 1 MB, 32 MB and 1 GB, then the closed-form tuner's choice against the
simulated best (tacl-sim --tuner).  Every figure is a prediction of the
model in sim/sim.h.
"""
import json
import os
import subprocess
import sys
import tempfile

SIZES = ["-b", "1M", "-e", "1G", "-f", "32"]
CASES = [
    ("all_gather", "ring,mics,hring,horing", None, "ring mics hring horing"),
    ("all_gather", "mics", "8", "qwZ-8"),
    ("reduce_scatter", "ring,mics", None, "ring mics"),
    ("reduce_scatter", "ring", "4", "qgZ-4"),
]


def run(tool, topo, nodes, coll, algos, q, extra=()):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [tool, "--topo", topo, "--nodes", str(nodes), "--coll", coll,
               "-d", "half", "-A", algos, "-J", f.name] + SIZES
        if q:
            cmd += ["-Q", q]
        out = subprocess.run(cmd + list(extra), check=True,
                             capture_output=True, text=True).stdout
        return json.load(open(f.name)), out


def main():
    build = sys.argv[1]
    nodes_list = [int(n) for n in sys.argv[2:]] or [2, 8, 32]
    tool = os.path.join(build, "tools", "tacl-sim")
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    names = os.environ.get("TOPOS", "p4d.24xlarge p5.48xlarge").split()
    for name in names:
        topo = os.path.join(root, "topologies", name + ".topo")
        for nodes in nodes_list:
            print(f"\n### {name}, {nodes} nodes ({nodes * 8} ranks)\n")
            header = None
            rows = {}
            for coll, algos, q, label in CASES:
                data, _ = run(tool, topo, nodes, coll, algos, q)
                labels = label.split()
                per = len(data["results"]) // len(labels)
                for i, r in enumerate(data["results"]):
                    col = f"{coll.split('_')[0][:1].upper()}" \
                          f"{coll.split('_')[1][:1].upper()} " \
                          f"{labels[i // per]}"
                    rows.setdefault(r["size"], {})[col] = \
                        r["out_of_place"]["busbw"]
            cols = list(next(iter(rows.values())).keys())
            print("| size | " + " | ".join(cols) + " |")
            print("|---:|" + "---:|" * len(cols))
            for size in sorted(rows):
                print(f"| {size} | " + " | ".join(
                    f"{rows[size].get(c, 0):.1f}" for c in cols) + " |")
            for coll in ["all_gather", "reduce_scatter"]:
                _, out = run(tool, topo, nodes, coll, "ring", None,
                             ["--tuner"])
                print(f"\n{coll}: closed-form choice against the simulated"
                      " best\n")
                print("| size | model | time (us) | sim best | time (us) "
                      "| model slower by |")
                print("|---:|---|---:|---|---:|---:|")
                on = False
                for line in out.splitlines():
                    if line.startswith("# tuner"):
                        on = True
                        continue
                    if on and not line.startswith("#") and line.strip():
                        f = line.split()
                        print(f"| {f[0]} | {f[1]} | {f[2]} | {f[3]} | "
                              f"{f[4]} | {f[5]}% |")


if __name__ == "__main__":
    main()
