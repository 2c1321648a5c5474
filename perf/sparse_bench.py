"""The sparse all-reduce on tacl against the dense all-reduce and gloo's
sparse all_reduce, in one job (see sparse_bench.sh, which runs this).

sparse_bench.py --worker --trace BIN [--rows N] [--row-len L]
                [--densities 0.001,0.01,0.1] [--iters N]
    Under torchrun (or tacl-cluster with torchrun's variables): for each
    density, every rank takes its rows of the trace (perf/sparse_trace,
    the generator tests and tacl-sim use), values of L float32 each, and
    times, alternating, an all_reduce of the sparse tensor on the tacl
    group with each tacl scheme (TACL_TORCH_SPARSE), the dense
    all_reduce of the densified tensor on the tacl group, and gloo's
    sparse all_reduce on a gloo group over the same ranks.  Every result
    is checked against gloo's.  Prints, from rank 0, one line per call:
        SPARSE <density> <variant> <time_us> <union_rows> <mean_nnz>
    with the slowest rank's time.

sparse_bench.py --report DIR
    Reads the worker outputs (sparse.*) in DIR and prints, per density,
    the median time of each variant, its speed-up against the dense
    all-reduce and against gloo, and the trace's densification ratio
    (union rows over a rank's rows) beside n / (1 + densification).
"""
import argparse
import glob
import os
import statistics
import subprocess
import sys
import time

VARIANTS = ["zen", "zen_hier", "dense_zen", "agsparse", "auto", "dense",
            "gloo"]


def worker(args):
    import torch
    import torch.distributed as dist

    import tacl_torch  # noqa: F401

    dist.init_process_group("tacl")
    rank, n = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    tmp = os.environ.get("TMPDIR", "/tmp")
    for density in [float(d) for d in args.densities.split(",")]:
        path = os.path.join(tmp, f"sparse_trace.{os.getpid()}.{rank}")
        subprocess.run([args.trace, "--rows", str(args.rows), "--density",
                        str(density), "--rank", str(rank), "--out", path],
                       check=True, stdout=subprocess.DEVNULL)
        idx = torch.from_file(path, size=os.path.getsize(path) // 8,
                              dtype=torch.int64)
        os.unlink(path)
        gen = torch.Generator().manual_seed(1000 + rank)
        vals = torch.randn(idx.numel(), args.row_len, generator=gen)
        base = torch.sparse_coo_tensor(idx[None], vals,
                                       (args.rows, args.row_len),
                                       check_invariants=True).coalesce()
        mean_nnz = idx.numel()
        ref = None
        for it in range(args.iters + 1):
            order = VARIANTS if it % 2 == 0 else VARIANTS[::-1]
            for v in order:
                if v == "dense":
                    x = base.to_dense()
                else:
                    x = base.clone()
                    os.environ["TACL_TORCH_SPARSE"] = v
                group = gloo if v == "gloo" else None
                dist.barrier(group=gloo)
                t0 = time.perf_counter()
                dist.all_reduce(x, group=group)
                dt = time.perf_counter() - t0
                slow = torch.tensor([dt])
                dist.all_reduce(slow, op=dist.ReduceOp.MAX, group=gloo)
                if v == "gloo" and ref is None:
                    ref = x.to_dense()
                    union = x._nnz()
                if ref is not None and it == args.iters:
                    got = x if v == "dense" else x.to_dense()
                    if not torch.allclose(got, ref, rtol=1e-4, atol=1e-3):
                        raise SystemExit(f"rank {rank}: {v} at {density} "
                                         "differs from gloo's sum")
                if it > 0 and rank == 0:
                    print(f"SPARSE {density} {v} {slow.item() * 1e6:.0f} "
                          f"{union} {mean_nnz}", flush=True)
        del ref
    dist.destroy_process_group()


def report(args):
    times, union, nnz = {}, {}, {}
    files = glob.glob(os.path.join(args.report, "sparse.*"))
    n = None
    for path in files:
        for line in open(path):
            f = line.split()
            if f and f[0] == "WORLD":
                n = int(f[1])
            if len(f) != 6 or f[0] != "SPARSE":
                continue
            d = float(f[1])
            times.setdefault((d, f[2]), []).append(float(f[3]))
            union[d], nnz[d] = int(f[4]), int(f[5])
    if not times:
        sys.exit("sparse_bench: no measurements in " + args.report)
    print(f"# sparse all-reduce, {len(files)} launches, median time (ms); "
          f"speed-up of each variant against dense and against gloo")
    print("| density | densification | n/(1+d) | variant | time (ms) "
          "| x dense | x gloo |")
    print("| ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    for d in sorted(union):
        gamma = union[d] / nnz[d]
        med = {v: statistics.median(times[(d, v)]) for v in VARIANTS
               if (d, v) in times}
        for v in VARIANTS:
            if v not in med:
                continue
            ratio = f"{n / (1 + gamma):.2f}" if n else ""
            print(f"| {d:g} | {gamma:.2f} | {ratio} | {v} | "
                  f"{med[v] / 1e3:.1f} | {med['dense'] / med[v]:.2f} | "
                  f"{med['gloo'] / med[v]:.2f} |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true")
    p.add_argument("--report")
    p.add_argument("--trace")
    p.add_argument("--rows", type=int, default=1 << 20)
    p.add_argument("--row-len", type=int, default=64)
    p.add_argument("--densities", default="0.001,0.01,0.1")
    p.add_argument("--iters", type=int, default=3)
    args = p.parse_args()
    if args.worker:
        worker(args)
    elif args.report:
        report(args)
    else:
        p.error("--worker or --report")


if __name__ == "__main__":
    main()
