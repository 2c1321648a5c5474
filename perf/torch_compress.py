#!/usr/bin/env python3
"""DDP training with gradient-compression hooks on the tacl backend.

One launch (--worker, under torchrun or tacl-cluster's launcher) trains
the same small model (tests/torch/test_compress.py's MLP, 16 -> WIDTH ->
WIDTH -> 1, on a fixed random teacher's targets) for STEPS steps once per
hook, every run from the same initial weights and data:

    none          DDP's own all-reduce (on tacl)
    tacl-fp16     tacl_torch.compression_hook, codec fp16 (with its
                  residual, CompressionState's default)
    tacl-topk1    tacl_torch.compression_hook, topk 1% with error feedback
    tacl-topk1-plan  the same codec on tacl-plan's groups and choices
                  (CompressionState plan="fusion"): rank 0 profiles the
                  bare model (tacl_torch.profile_model), every rank times
                  the all-reduce, the all-gather and the compressed call
                  at two sizes (the slowest rank's medians), and the
                  planner gets those lines as the replay harness fits
                  them (perf/replay_cost.c); its table is printed
    torch-fp16    torch's fp16_compress_hook
    torch-psgd    torch's powerSGD_hook (rank 1, PowerSGD from step
                  min(10, STEPS / 2), error feedback on; before it the
                  plain all-reduce)

    torch-bpsgd-fix  torch's batched_powerSGD_hook with the same state,
                  its _orthogonalize taking a 2-D Q as a batch of one:
                  torch 2.15's own fails on its first PowerSGD step
                  (_orthogonalize asserts a batch of matrices and is
                  handed one 2-D Q, on every backend;
                  tests/torch/test_callbacks.py patches it alike)

and, asked for by name only, tacl-fp16-noef (fp16 without the residual,
as torch's fp16_compress_hook keeps none) and torch-bpsgd: torch's
batched hook unpatched.  Every hook runs on the tacl backend.

and rank 0 prints one line a run,

    RUN hook seconds_of_timed_steps timed_steps samples loss_at_last_step

(the timed steps are all but the first WARMUP; samples is what the timed
steps processed over all ranks; the loss the ranks' mean of the last
step).  --report DIR [--hooks LIST] reads every launch's output in DIR
(files compress.*) and prints the table, a row per hook of LIST (a hook
with no finished run says so) and per other hook found: hook, samples/s (median over launches), ratio to "none", loss at
the last step (median).
"""
import argparse
import glob
import os
import statistics
import sys
import time

HOOKS = ["none", "tacl-fp16", "tacl-topk1", "tacl-topk1-plan", "torch-fp16",
         "torch-psgd", "torch-bpsgd-fix"]
OPTIONAL = ["torch-bpsgd", "tacl-fp16-noef"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", action="store_true")
    p.add_argument("--report", metavar="DIR")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--hooks", default=",".join(HOOKS))
    p.add_argument("--plan-tool", default="tacl-plan",
                   help="tacl-plan's path (for tacl-topk1-plan)")
    return p.parse_args()


def make_model(torch, width):
    torch.manual_seed(1234)
    return torch.nn.Sequential(
        torch.nn.Linear(16, width), torch.nn.Tanh(),
        torch.nn.Linear(width, width), torch.nn.Tanh(),
        torch.nn.Linear(width, 1))


def batch(torch, step, rank, size):
    w = torch.randn(16, 1, generator=torch.Generator().manual_seed(99)) / 4
    g = torch.Generator().manual_seed(100003 * step + rank)
    x = torch.randn(size, 16, generator=g)
    return x, torch.tanh(x @ w)


def slowest_median(torch, fn, reps=5):
    """fn's median seconds over reps calls after one, the slowest rank's."""
    import torch.distributed as dist

    fn()
    times = []
    for _ in range(reps):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    t = torch.tensor([statistics.median(times)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def line_through(torch, make_fn, sizes=(16384, 1 << 20)):
    """(fixed seconds, seconds per byte) through the timings of
    make_fn(count)() at two counts of float32 values."""
    x = [4.0 * n for n in sizes]
    y = [slowest_median(torch, make_fn(n)) for n in sizes]
    b = max(0.0, (y[1] - y[0]) / (x[1] - x[0]))
    return max(0.0, y[0] - b * x[0]), b


def planned_groups(torch, args, density=0.01):
    """tacl-plan's (option, parameter names) groups for the model on this
    job, with the topk codec at density: see the module's docstring."""
    import subprocess
    import tempfile

    import torch.distributed as dist
    import tacl_torch

    rank, world = dist.get_rank(), dist.get_world_size()
    bare = make_model(torch, args.width)
    opt = torch.optim.SGD(bare.parameters(), lr=0.0)
    x, y = batch(torch, 0, rank, args.batch)

    def after():
        opt.step()
        opt.zero_grad()
    prof = tacl_torch.profile_model(
        bare, lambda: torch.nn.functional.mse_loss(bare(x), y), steps=5,
        after=after)

    def all_reduce(n):
        t = torch.ones(n)
        return lambda: dist.all_reduce(t)

    def all_gather(n):
        t, out = torch.ones(n), torch.empty(n * world)
        return lambda: dist.all_gather_into_tensor(out, t)

    def call(n):
        t, err = torch.randn(n), torch.zeros(n)
        return lambda: tacl_torch.compressed_all_reduce(
            t, codec="topk", density=density, error_feedback=err)
    a_ar, b_ar = line_through(torch, all_reduce)
    a_ag, b_ag = line_through(torch, all_gather)
    call_a, call_b = line_through(torch, call)
    alpha, ratio = min(a_ar, a_ag), 2 * density
    # The call encodes on the backend's thread: the planner sees it as
    # decode terms that make its price equal the timed call.
    dec_a = max(0.0, (call_a - alpha) / world)
    dec_b = max(0.0, (call_b - b_ag * ratio) / world)
    got = [None]
    if rank == 0:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "model.profile")
            prof.write(path)
            with open(path, "a") as f:
                f.write(f"comm {world} {alpha:.6g} {b_ar:.6g} {b_ag:.6g}\n"
                        f"codec topk 0 0 {dec_a:.6g} {dec_b:.6g} "
                        f"{ratio:.6g} 0\n")
            out = subprocess.run([args.plan_tool, path], capture_output=True,
                                 text=True, timeout=120, check=True)
            with open(os.path.join(d, "plan"), "w") as f:
                f.write(out.stdout)
            got[0] = tacl_torch.read_plan(os.path.join(d, "plan"), prof)
            with open(path) as f:
                print("PLAN profile:\n" + f.read() + "PLAN tacl-plan:\n"
                      + out.stdout, file=sys.stderr, flush=True)
    dist.broadcast_object_list(got, src=0)
    return got[0]


def register(torch, model, hook, steps, args):
    import tacl_torch
    from torch.distributed.algorithms.ddp_comm_hooks import (
        default_hooks, powerSGD_hook)

    if hook in ("tacl-fp16", "tacl-fp16-noef"):
        model.register_comm_hook(
            tacl_torch.CompressionState(codec="fp16",
                                        error_feedback=hook == "tacl-fp16"),
            tacl_torch.compression_hook)
    elif hook == "tacl-topk1":
        model.register_comm_hook(
            tacl_torch.CompressionState(codec="topk", density=0.01),
            tacl_torch.compression_hook)
    elif hook == "tacl-topk1-plan":
        model.register_comm_hook(
            tacl_torch.CompressionState(
                codec="topk", density=0.01, plan="fusion",
                groups=planned_groups(torch, args), model=model.module),
            tacl_torch.compression_hook)
    elif hook == "torch-fp16":
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif hook in ("torch-psgd", "torch-bpsgd", "torch-bpsgd-fix"):
        state = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=1,
            start_powerSGD_iter=min(10, max(2, steps // 2)))
        if hook == "torch-bpsgd-fix":
            batch_of_one(powerSGD_hook)
        model.register_comm_hook(
            state, powerSGD_hook.powerSGD_hook if hook == "torch-psgd"
            else powerSGD_hook.batched_powerSGD_hook)
    elif hook != "none":
        raise ValueError(f"unknown hook {hook!r} (one of "
                         f"{HOOKS + OPTIONAL})")


def batch_of_one(psgd):
    """Make psgd._orthogonalize take a 2-D Q as a batch of one (once)."""
    original = psgd._orthogonalize
    if getattr(original, "tacl_batch_of_one", False):
        return

    def orthogonalize(m, epsilon=0):
        original(m.unsqueeze(0) if m.dim() == 2 else m, epsilon)

    orthogonalize.tacl_batch_of_one = True
    psgd._orthogonalize = orthogonalize


def run(args, hook):
    import torch
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    model = torch.nn.parallel.DistributedDataParallel(
        make_model(torch, args.width))
    register(torch, model, hook, args.steps, args)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    losses = []
    t0 = None
    for step in range(args.steps):
        if step == args.warmup:
            dist.barrier()
            t0 = time.perf_counter()
        x, y = batch(torch, step, rank, args.batch)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
    dist.barrier()
    seconds = time.perf_counter() - t0
    last = torch.tensor([losses[-1]], dtype=torch.float64)
    dist.all_reduce(last)
    timed = args.steps - args.warmup
    if rank == 0:
        print(f"RUN {hook} {seconds:.6f} {timed} "
              f"{timed * args.batch * world} {last.item() / world:.6g}",
              flush=True)


def worker(args):
    import torch
    import torch.distributed as dist

    import tacl_torch  # noqa: F401  (registers the backend)

    if args.steps <= args.warmup:
        sys.exit(f"--steps {args.steps} must exceed --warmup {args.warmup}")
    torch.set_num_threads(1)
    dist.init_process_group("tacl")
    for hook in args.hooks.split(","):
        run(args, hook)
    dist.destroy_process_group()


def report(d, hooks):
    runs = {}
    for path in sorted(glob.glob(os.path.join(d, "compress.*"))):
        with open(path) as f:
            for line in f:
                w = line.split()
                if len(w) == 6 and w[0] == "RUN":
                    rate = int(w[4]) / float(w[2])
                    runs.setdefault(w[1], []).append((rate, float(w[5])))
    if "none" not in runs:
        sys.exit(f"no run of hook 'none' in {d}")
    base = statistics.median(r for r, _ in runs["none"])
    print(f"{'hook':<16} {'samples/s':>10} {'vs none':>8} "
          f"{'loss at last step':>18}  launches")
    asked = hooks.split(",")
    for hook in asked + sorted(h for h in runs if h not in asked):
        if hook not in runs:
            print(f"{hook:<16} {'-':>10} {'-':>8} {'-':>18}  0 (no run "
                  "finished: failed or hung, see the log)")
            continue
        rate = statistics.median(r for r, _ in runs[hook])
        loss = statistics.median(v for _, v in runs[hook])
        print(f"{hook:<16} {rate:>10.1f} {rate / base:>7.2f}x "
              f"{loss:>18.6f}  {len(runs[hook])}")


def main():
    args = parse_args()
    if args.report:
        report(args.report, args.hooks)
    elif args.worker:
        worker(args)
    else:
        sys.exit("give --worker (under a launcher) or --report DIR")


if __name__ == "__main__":
    main()
