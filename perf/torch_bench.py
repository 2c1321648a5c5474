"""Busbw of torch.distributed collectives on tacl against gloo (see
torch_bench.sh, which runs this).

torch_bench.py --worker [--sizes 1M,...] [--iters N] [--warmup N]
                [--backends tacl,gloo]
    Under torchrun: for each size and collective (all_gather_into_tensor,
    reduce_scatter_tensor, all_reduce; float32), time it on the tacl
    default group and on a gloo group over the same ranks, alternating,
    and print one line per measurement:
        TORCH <coll> <backend> <size_bytes> <time_us>
    Size as nccl-tests counts it: the gathered (all-gather) or reduced
    (reduce-scatter) buffer, the whole buffer for all-reduce.
    --backends tacl times tacl alone (the overhead table needs no gloo).

    Timing is the C perf binaries' (perf/tacl_harness.c, after
    nccl-tests): the buffers are allocated and filled once per
    measurement and reused by every call; --warmup calls (their -w), a
    barrier, then a loop of --iters calls (their -n), each a synchronous
    torch call that returns once the operation is complete; the time is
    the loop's mean per call, and the slowest rank's time is reported
    (their -a 3).  all_gather_into_tensor and reduce_scatter_tensor are
    out of place, all_reduce in place, so the report sets them against
    the C binaries' out-of-place and in-place columns respectively.

torch_bench.py --report DIR
    Reads the worker outputs (torch.*) and the C perf binaries' outputs
    (c.<coll>.*) torch_bench.sh left in DIR, keeps the median time of
    each measurement over the launches, and prints two tables: tacl
    against gloo through torch (busbw and ratio), and the binding's
    overhead (the C perf binary against torch on tacl, 16 MB and up).
"""
import argparse
import glob
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import busbw, parse_text  # noqa: E402

COLLS = ["all_gather", "reduce_scatter", "all_reduce"]
TORCH_NAME = {"all_gather": "all_gather_into_tensor",
              "reduce_scatter": "reduce_scatter_tensor",
              "all_reduce": "all_reduce"}


def parse_size(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper()
    return int(t[:-1]) * mult[t[-1]] if t[-1] in mult else int(t)


def size_name(n):
    for unit, m in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= m and n % m == 0:
            return f"{n // m}{unit}"
    return str(n)


def worker(args):
    import torch
    import torch.distributed as dist

    import tacl_torch  # noqa: F401

    dist.init_process_group("tacl")
    rank, n = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    backends = args.backends.split(",")

    def timed(coll, size, group):
        count = size // 4
        if coll == "all_gather":
            inp, out = torch.ones(count // n), torch.zeros(count)
            call = lambda: dist.all_gather_into_tensor(  # noqa: E731
                out, inp, group=group)
        elif coll == "reduce_scatter":
            inp, out = torch.ones(count), torch.zeros(count // n)
            call = lambda: dist.reduce_scatter_tensor(  # noqa: E731
                out, inp, group=group)
        else:
            buf = torch.ones(count)
            call = lambda: dist.all_reduce(buf, group=group)  # noqa: E731
        for _ in range(args.warmup):
            call()
        dist.barrier(group=group)
        t0 = time.perf_counter()
        for _ in range(args.iters):
            call()
        t = torch.tensor([(time.perf_counter() - t0) / args.iters * 1e6],
                         dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
        return t.item()

    for size in sizes:
        for coll in COLLS:
            for backend, group in (("tacl", None), ("gloo", gloo)):
                if backend not in backends:
                    continue
                t = timed(coll, size, group)
                if rank == 0:
                    print(f"TORCH {coll} {backend} {size} {t:.1f}",
                          flush=True)
    dist.destroy_process_group()


def report(d):
    nranks = None
    torch_t = {}  # (coll, backend, size) -> [time_us, ...]
    torch_l = {}  # (coll, size) -> {launch: tacl's time_us}
    for path in sorted(glob.glob(os.path.join(d, "torch.*"))):
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) == 5 and p[0] == "TORCH":
                    torch_t.setdefault((p[1], p[2], int(p[3])), []).append(
                        float(p[4]))
                    if p[2] == "tacl":
                        torch_l.setdefault((p[1], int(p[3])), {})[
                            _launch_of(path)] = float(p[4])
            nranks = nranks or _ranks_of(path)
    # (coll, size) -> [time_us, ...]: out of place, but in place for
    # all_reduce, as torch's calls are.
    c_t = {}
    c_l = {}  # (coll, size) -> {launch: time_us}
    for path in sorted(glob.glob(os.path.join(d, "c.*"))):
        with open(path) as f:
            run = parse_text(f.read())
        nranks = run["nranks"]
        for row in run["results"]:
            place = "in_place" if run["collective"] == "all_reduce" \
                else "out_of_place"
            key = (run["collective"], row["size"])
            c_t.setdefault(key, []).append(row[place]["time_us"])
            c_l.setdefault(key, {})[_launch_of(path)] = \
                row[place]["time_us"]
    if not torch_t:
        sys.exit("torch_bench: no torch measurements in " + d)
    n = nranks or 4
    med = lambda v: statistics.median(v)  # noqa: E731
    launches = max(len(v) for v in torch_t.values())
    sizes = sorted({k[2] for k in torch_t})
    if any(k[1] == "gloo" for k in torch_t):
        print(f"# torch.distributed on {n} ranks, float32, median of "
              f"{launches} launches; busbw in GB/s (nccl-tests' factors)")
        print(f"{'collective':24s} {'size':>6s} {'tacl':>8s} {'gloo':>8s} "
              f"{'ratio':>6s}")
    for coll in COLLS:
        for size in sizes:
            a, b = torch_t.get((coll, "tacl", size)), torch_t.get(
                (coll, "gloo", size))
            if not a or not b:
                continue
            ba, bb = busbw(coll, n, size, med(a)), busbw(coll, n, size,
                                                         med(b))
            print(f"{TORCH_NAME[coll]:24s} {size_name(size):>6s} {ba:8.2f} "
                  f"{bb:8.2f} {ba / bb if bb else 0:6.2f}")
    if not c_t:
        return
    print()
    print(f"# the binding's overhead: the same collective from the C perf "
          f"binary and through torch on tacl, {n} ranks, median times;")
    print("# torch/C: the ratio of the medians' busbw; paired: the median "
          "over launches of each launch's ratio (C and torch run back to "
          "back in a launch)")
    print(f"{'collective':24s} {'size':>6s} {'C us':>10s} {'torch us':>10s} "
          f"{'C busbw':>8s} {'torch':>8s} {'torch/C':>7s} {'paired':>7s}")
    for coll in COLLS:
        for size in sizes:
            c, t = c_t.get((coll, size)), torch_t.get((coll, "tacl", size))
            if not c or not t:
                continue
            bc, bt = busbw(coll, n, size, med(c)), busbw(coll, n, size,
                                                         med(t))
            cl, tl = c_l.get((coll, size), {}), torch_l.get((coll, size), {})
            pairs = [cl[k] / tl[k] for k in cl if k in tl and tl[k] > 0]
            paired = f"{med(pairs):7.2f}" if pairs else f"{'-':>7s}"
            print(f"{TORCH_NAME[coll]:24s} {size_name(size):>6s} "
                  f"{med(c):10.1f} {med(t):10.1f} {bc:8.2f} {bt:8.2f} "
                  f"{bt / bc if bc else 0:7.2f} {paired}")


def _launch_of(path):
    """The launch a file belongs to: its name's last part (c.<coll>.<launch>,
    torch.<ranks>.<launch>)."""
    return os.path.basename(path).rsplit(".", 1)[-1]


def _ranks_of(path):
    base = os.path.basename(path)  # torch.<ranks>.<launch>
    parts = base.split(".")
    return int(parts[1]) if len(parts) > 2 and parts[1].isdigit() else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--report")
    ap.add_argument("--sizes", default="1M,2M,4M,8M,16M,32M,64M,128M")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--backends", default="tacl,gloo")
    args = ap.parse_args()
    if args.worker:
        worker(args)
    elif args.report:
        report(args.report)
    else:
        ap.error("--worker (under torchrun) or --report DIR")


if __name__ == "__main__":
    main()
