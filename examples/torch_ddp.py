"""Train a small model with DistributedDataParallel on the tacl backend.

    pip install --no-build-isolation ./bindings/torch
    torchrun --standalone --nproc-per-node 4 examples/torch_ddp.py

Each rank fits its own shard of a synthetic regression problem; DDP
averages the gradients through tacl's all-reduce.  Rank 0 prints the
loss, which falls as the shared model learns the hidden linear map.
Options: --steps N (default 50), --backend NAME (e.g. gloo, to compare),
--check (exit 1 unless the last loss is below half the first: the test).
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn

import tacl_torch  # noqa: F401  (registers the "tacl" backend)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--backend", default="tacl")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()

    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)  # the same hidden map and initial model everywhere
    true_map = torch.randn(16, 4)
    model = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 4))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)

    g = torch.Generator().manual_seed(1 + rank)  # each rank its own shard
    losses = []
    for step in range(args.steps):
        x = torch.randn(64, 16, generator=g)
        y = x @ true_map
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        # The mean loss over all ranks, for the printout.
        avg = loss.detach().clone()
        dist.all_reduce(avg)
        losses.append(avg.item() / world)
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:3d}  loss {avg.item() / world:.4f}", flush=True)
    dist.destroy_process_group()
    if args.check and not losses[-1] < losses[0] / 2:
        print(f"rank {rank}: the loss did not halve: {losses[0]:.4f} -> "
              f"{losses[-1]:.4f}", flush=True)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
