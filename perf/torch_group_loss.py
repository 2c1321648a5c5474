#!/usr/bin/env python3
"""How top-k's groups change training: the loss after STEPS steps of
perf/torch_compress.py's MLP under DDP on the tacl backend, with topk 1%
and error feedback applied to different groupings of its six gradients
(CompressionState plan "fusion" with the groups given here), beside no
compression and DDP's own buckets.  A sparsifier keeps its share of every
group it encodes, so a small group (the output layer's 1,025 values keep
10) is starved; the planner and the hook leave groups under a codec's
min_bytes uncompressed for that reason (planner.h), so every grouping
here runs with min_bytes 0.

    PYTHONPATH=BUILD/tests/torch/site torchrun --nproc-per-node 4 \\
        perf/torch_group_loss.py [CONFIG ...]

CONFIG names one of GROUPINGS (all by default); rank 0 prints a line a
config: its name, the ranks' mean loss at the last step, and the largest
difference between two ranks' parameters (0: the replicas agree).
"""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_compress import batch, make_model  # noqa: E402

# Gradient-ready order of the MLP's parameters: output layer first.
NAMES = ["4.bias", "4.weight", "2.bias", "2.weight", "0.bias", "0.weight"]
GROUPINGS = {
    "none": None,                 # DDP's all-reduce, no compression
    "buckets": "buckets",         # topk on each of DDP's buckets
    "one-group": [("topk", NAMES)],
    "two-groups": [("topk", NAMES[:4]), ("topk", NAMES[4:])],
    "output-alone": [("topk", NAMES[:2]), ("topk", NAMES[2:])],
    "three-groups": [("topk", NAMES[:2]), ("topk", NAMES[2:4]),
                     ("topk", NAMES[4:])],
    "output-dense": [("none", NAMES[:2]), ("topk", NAMES[2:])],
    "small-dense": [("none", NAMES[:2]), ("topk", NAMES[2:4]),
                    ("none", NAMES[4:])],
}
STEPS = 200


def train(name, rank, world):
    import tacl_torch

    model = torch.nn.parallel.DistributedDataParallel(make_model(torch, 1024))
    groups = GROUPINGS[name]
    if groups == "buckets":
        model.register_comm_hook(
            tacl_torch.CompressionState(codec="topk", density=0.01,
                                        min_bytes=0),
            tacl_torch.compression_hook)
    elif groups is not None:
        model.register_comm_hook(
            tacl_torch.CompressionState(codec="topk", density=0.01,
                                        plan="fusion", groups=groups,
                                        model=model.module, min_bytes=0),
            tacl_torch.compression_hook)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(STEPS):
        x, y = batch(torch, step, rank, 32)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    last = torch.tensor([loss.item()], dtype=torch.float64)
    dist.all_reduce(last)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    hi, lo = flat.clone(), flat.clone()
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    if rank == 0:
        print(f"{name:14s} loss {last.item() / world:.6g}  replica spread "
              f"{float((hi - lo).max()):.3g}", flush=True)


def main():
    import tacl_torch  # noqa: F401  (registers the backend)

    names = sys.argv[1:] or list(GROUPINGS)
    for n in names:
        if n not in GROUPINGS:
            sys.exit(f"unknown config {n!r}; one of {', '.join(GROUPINGS)}")
    torch.set_num_threads(1)
    dist.init_process_group("tacl")
    rank, world = dist.get_rank(), dist.get_world_size()
    for n in names:
        train(n, rank, world)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
