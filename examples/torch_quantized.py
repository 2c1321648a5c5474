#!/usr/bin/env python3
"""Train with tacl's quantized all-gather (qwZ) and reduce-scatter (qgZ).

FSDP2 (torch.distributed.fsdp.fully_shard) lets a program replace the
all-gather of parameters and the reduce-scatter of gradients of each
sharded module with its own (set_custom_all_gather and
set_custom_reduce_scatter).  This example plugs tacl_torch's qwZ and qgZ
into those hooks: every rank's parameter shard and every exchanged gradient
slice travel as 8-bit (or 4-bit) integers with one float32 scale per block
of values, the ZeRO++ recipe, instead of float32.

It trains the same small model on the same data twice, first with FSDP2's
own collectives and then with the quantized ones, prints both loss
sequences side by side, and the bytes each rank sent by the parameter and
gradient collectives of each run, as tacl's byte counters of the groups
they ran on measured them (tacl_torch.counters; the per-step all-gather of
the loss shares a group with them and adds a few bytes a step), and the
bytes saved.

    torchrun --nproc-per-node 4 examples/torch_quantized.py
    torchrun --nproc-per-node 4 examples/torch_quantized.py --bits 4

Where torch has no FSDP2 hooks, a manual ZeRO-3 loop does the same: each
layer's parameters are sharded, gathered with qwZ before use and their
gradients reduce-scattered with qgZ (--manual forces it).
"""
import argparse
import math
import sys

import torch
import torch.distributed as dist

import tacl_torch

def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--bits", type=int, default=8, choices=(4, 8))
    p.add_argument("--block", type=int, default=256,
                   help="values per float32 scale")
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--manual", action="store_true",
                   help="the ZeRO-3 loop even if FSDP2 has the hooks")
    p.add_argument("--check", action="store_true",
                   help="exit 1 unless the quantized run learns (last loss "
                   "below half the first), stays within 5%% of the float32 "
                   "loss at every step and sends under 40%% of its bytes")
    return p.parse_args()


class SentBytes:
    """Bytes this rank sent on the tacl communicators of the groups the
    training's collectives ran on, from tacl's counters: each group's
    counters are read when it is first used and again at the end."""

    def __init__(self):
        self.start = {}  # id(group) -> (group, bytes at first use)

    def watch(self, group):
        key = id(group)
        if key not in self.start:
            self.start[key] = (group, tacl_torch.counters(group)["bytes"])

    def sent(self):
        return sum(tacl_torch.counters(g)["bytes"] - b
                   for g, b in self.start.values())


def has_fsdp2_hooks():
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return False
    return (hasattr(FSDPModule, "set_custom_all_gather")
            and hasattr(FSDPModule, "set_custom_reduce_scatter"))


def fsdp2_comms(quantized, bits, block, wire):
    """The AllGather and ReduceScatter objects FSDP2's hooks take: tacl's
    qwZ and qgZ, or the plain collectives (so that both runs count their
    bytes at the same place)."""
    from torch.distributed.fsdp._fully_shard._fsdp_api import (
        AllGather, ReduceScatter)

    class Gather(AllGather):
        def allocate(self, size, *, dtype, device):
            return torch.empty(*size, dtype=dtype, device=device)

        def __call__(self, output_tensor, input_tensor, group,
                     async_op=False):
            wire.watch(group)
            if not quantized:
                return dist.all_gather_into_tensor(
                    output_tensor, input_tensor, group=group,
                    async_op=async_op)
            return tacl_torch.all_gather_quantized(
                output_tensor, input_tensor, group=group, bits=bits,
                block=block, async_op=async_op)

    class Scatter(ReduceScatter):
        def allocate(self, size, *, dtype, device):
            return torch.empty(*size, dtype=dtype, device=device)

        def __call__(self, output_tensor, input_tensor, group, op,
                     async_op=False):
            wire.watch(group)
            if not quantized:
                return dist.reduce_scatter_tensor(
                    output_tensor, input_tensor, op=op, group=group,
                    async_op=async_op)
            return tacl_torch.reduce_scatter_quantized(
                output_tensor, input_tensor, op=op, group=group, bits=bits,
                block=block, async_op=async_op)

    return Gather(), Scatter()


def build_model(width):
    torch.manual_seed(1234)
    return torch.nn.Sequential(
        torch.nn.Linear(32, width), torch.nn.GELU(),
        torch.nn.Linear(width, width), torch.nn.GELU(),
        torch.nn.Linear(width, 8))


def batch(step, rank, args):
    # A fixed random "teacher" makes a learnable regression target.
    teacher = torch.Generator().manual_seed(99)
    w = torch.randn(32, 8, generator=teacher) / math.sqrt(32)
    g = torch.Generator().manual_seed(100003 * step + rank)
    x = torch.randn(args.batch, 32, generator=g)
    return x, torch.tanh(x @ w)


def train_fsdp2(args, quantized, wire):
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.device_mesh import init_device_mesh

    world = dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    model = build_model(args.width)
    sharded = []
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            sharded.append(fully_shard(layer, mesh=mesh))
    sharded.append(fully_shard(model, mesh=mesh))
    for m in sharded:
        gather, scatter = fsdp2_comms(quantized, args.bits, args.block, wire)
        m.set_custom_all_gather(gather)
        m.set_custom_reduce_scatter(scatter)
    return run_steps(model, args, lambda: None)


def shard_of(t, rank, world):
    n = math.ceil(t.numel() / world)
    flat = torch.zeros(n * world, dtype=t.dtype)
    flat[:t.numel()] = t.reshape(-1)
    return flat[rank * n:(rank + 1) * n].clone()


def train_manual(args, quantized, wire):
    """ZeRO-3 by hand: shards live in `shards`; before each step every
    parameter is gathered, after backward every gradient reduce-scattered
    (AVG) into its shard, and Adam updates only the shards."""
    rank, world = dist.get_rank(), dist.get_world_size()
    model = build_model(args.width)
    params = list(model.parameters())
    shards = [torch.nn.Parameter(shard_of(p.detach(), rank, world))
              for p in params]
    opt = torch.optim.Adam(shards, lr=args.lr)

    def gather():
        for p, s in zip(params, shards):
            full = torch.empty(s.numel() * world)
            wire.watch(None)
            if quantized:
                tacl_torch.all_gather_quantized(full, s.detach(),
                                                bits=args.bits,
                                                block=args.block)
            else:
                dist.all_gather_into_tensor(full, s.detach())
            p.data.copy_(full[:p.numel()].view_as(p))

    def scatter():
        for p, s in zip(params, shards):
            flat = torch.zeros(s.numel() * world)
            flat[:p.numel()] = p.grad.reshape(-1)
            out = torch.empty(s.numel())
            wire.watch(None)
            if quantized:
                tacl_torch.reduce_scatter_quantized(
                    out, flat, op=dist.ReduceOp.AVG, bits=args.bits,
                    block=args.block)
            else:
                dist.reduce_scatter_tensor(out, flat, op=dist.ReduceOp.AVG)
            s.grad = out
            p.grad = None

    gather()
    return run_steps(model, args, lambda: (scatter(), opt.step(),
                                           opt.zero_grad(), gather()),
                     own_opt=False)


def run_steps(model, args, after_backward, own_opt=True):
    rank, world = dist.get_rank(), dist.get_world_size()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr) if own_opt \
        else None
    losses = []
    for step in range(args.steps):
        x, y = batch(step, rank, args)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        if opt is not None:
            opt.step()
            opt.zero_grad()
        else:
            after_backward()
        every = torch.empty(world)
        dist.all_gather_into_tensor(every, loss.detach().reshape(1))
        losses.append(float(every.mean()))
    return losses


def main():
    args = parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("tacl")
    rank, world = dist.get_rank(), dist.get_world_size()
    manual = args.manual or not has_fsdp2_hooks()
    train = train_manual if manual else train_fsdp2

    runs = {}
    for quantized in (False, True):
        wire = SentBytes()
        losses = train(args, quantized, wire)
        runs[quantized] = (losses, wire.sent())
        dist.barrier()

    if rank == 0:
        how = "manual ZeRO-3 loop" if manual else "FSDP2 custom hooks"
        print(f"{how}, {world} ranks, torch {torch.__version__}, "
              f"qwZ+qgZ {args.bits}-bit, block {args.block}")
        print(f"{'step':>4}  {'float32':>12}  {'quantized':>12}  "
              f"{'rel.diff':>9}")
        for s, (a, b) in enumerate(zip(runs[False][0], runs[True][0])):
            print(f"{s:>4}  {a:>12.6f}  {b:>12.6f}  "
                  f"{abs(a - b) / abs(a):>9.2e}")
        for name, q in (("float32", False), ("quantized", True)):
            print(f"{name:>9}: {runs[q][1] / 1e6:.3f} MB sent by rank 0 "
                  f"in the parameter and gradient collectives (tacl's "
                  f"counters)")
        plain, quant = runs[False][1], runs[True][1]
        print(f"bytes saved: {(plain - quant) / 1e6:.3f} MB "
              f"({100.0 * (plain - quant) / plain:.1f}%), measured by "
              f"tacl's counters")
        first, last = runs[True][0][0], runs[True][0][-1]
        print(f"quantized run: loss {first:.4f} -> {last:.4f}")
    status = 0
    if args.check and rank == 0:
        worst = max(abs(a - b) / abs(a)
                    for a, b in zip(runs[False][0], runs[True][0]))
        if not last < first / 2:
            print("check: the quantized run did not learn", file=sys.stderr)
            status = 1
        if worst > 0.05:
            print(f"check: quantized loss {worst:.1%} away from float32",
                  file=sys.stderr)
            status = 1
        if not quant < 0.4 * plain:
            print("check: quantized collectives did not save 60% of the "
                  "bytes", file=sys.stderr)
            status = 1
    flag = torch.tensor([status])
    dist.all_reduce(flag)
    dist.destroy_process_group()
    return int(flag.item() != 0)


if __name__ == "__main__":
    sys.exit(main())
