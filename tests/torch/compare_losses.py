#!/usr/bin/env python3
"""Compare the per-step losses two training runs printed, side by side.

Each input is the output of a run of ds_zero3.py or fsdp2_hsdp.py (rank 0
prints "step S loss MEAN hex HEX ranks ..."; other lines are ignored).
Prints one row per step with both losses and their relative difference,
then "identical" when every step's loss is equal bit for bit, else the
largest relative difference; exits 1 when that is above --rtol, when a run
has no steps, or when the runs have different step counts.

usage: compare_losses.py [--rtol X] [--names A,B] [--title T] RUN_A RUN_B
"""
import argparse
import re
import sys

STEP = re.compile(r"step (\d+) loss \S+ hex (\S+)")


def read_losses(path):
    losses = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = STEP.search(line)
            if m:
                losses[int(m.group(1))] = float.fromhex(m.group(2))
    return [losses[s] for s in sorted(losses)]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rtol", type=float, default=0.0)
    p.add_argument("--names", default="A,B")
    p.add_argument("--title", default="")
    p.add_argument("runs", nargs=2)
    args = p.parse_args()
    names = args.names.split(",")
    a, b = (read_losses(r) for r in args.runs)

    if args.title:
        print(args.title)
    print(f"{'step':>4}  {names[0]:>16}  {names[1]:>16}  {'rel.diff':>9}")
    worst = 0.0
    for s in range(max(len(a), len(b))):
        va = a[s] if s < len(a) else float("nan")
        vb = b[s] if s < len(b) else float("nan")
        rel = abs(va - vb) / max(abs(va), abs(vb), 1e-30)
        worst = max(worst, rel) if rel == rel else float("inf")
        print(f"{s:>4}  {va:>16.9g}  {vb:>16.9g}  {rel:>9.2e}")

    if not a or len(a) != len(b):
        print(f"FAIL: {len(a)} and {len(b)} steps", file=sys.stderr)
        return 1
    if a == b:
        print(f"identical: {len(a)} steps bit for bit")
        return 0
    print(f"not bit-identical: largest relative difference {worst:.2e}")
    if worst <= args.rtol:
        return 0
    print(f"FAIL: {worst:.2e} > rtol {args.rtol:g}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
