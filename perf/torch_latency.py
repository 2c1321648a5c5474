"""Small all-reduce latency through torch.distributed: tacl against gloo,
in one launch (see torch_latency.sh, which runs this beside the C perf
binary).

torchrun --nproc-per-node N perf/torch_latency.py [--sizes 8,4096]
         [--iters 3000] [--warmup 300] [--reps 5]

For each size (bytes, float32) and each of --reps rounds, both backends
in turn time the same loop: --warmup calls, a barrier, then --iters
calls of dist.all_reduce(t) with async_op=False (torch's default: each
returns once the operation is complete), in place on one tensor made
once.  The time of a round is the loop's mean per call on the slowest
rank; one line per size and backend gives the median over the rounds:
    LATENCY <backend> <size_bytes> <time_us>
A third group, torch's "fake" backend (its test backend: every call
returns at once, nothing moves), times the same loop too: torch's own
cost per call, a floor no backend goes under.
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

import tacl_torch  # noqa: F401


def loop(t, group, iters, warmup, gloo):
    for _ in range(warmup):
        dist.all_reduce(t, group=group)
    dist.barrier(group=gloo)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t, group=group)
    per_call = torch.tensor([(time.perf_counter() - start) / iters],
                            dtype=torch.float64)
    dist.all_reduce(per_call, op=dist.ReduceOp.MAX, group=gloo)
    return per_call.item() * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="8,4096")
    ap.add_argument("--iters", type=int, default=3000)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    dist.init_process_group("tacl")
    gloo = dist.new_group(backend="gloo")
    groups = {"tacl": None, "gloo": gloo}
    try:
        import torch.testing._internal.distributed.fake_pg  # noqa: F401
        groups["floor"] = dist.new_group(backend="fake")
    except (ImportError, ValueError, RuntimeError):
        pass
    for size in (int(s) for s in a.sizes.split(",")):
        # Zeros: sums stay finite however many calls.
        t = torch.zeros(max(size // 4, 1), dtype=torch.float32)
        times = {name: [] for name in groups}
        for _ in range(a.reps):
            for name, group in groups.items():
                times[name].append(loop(t, group, a.iters, a.warmup, gloo))
        if dist.get_rank() == 0:
            for name in groups:
                print(f"LATENCY {name} {size} "
                      f"{statistics.median(times[name]):.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
