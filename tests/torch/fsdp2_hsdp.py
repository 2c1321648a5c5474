#!/usr/bin/env python3
"""FSDP2 fully_shard with hybrid sharding (HSDP) on a 2x2 CPU device mesh.

Run under torchrun on 4 ranks.  The mesh's first dimension replicates, the
second shards: FSDP2 all-gathers parameters and reduce-scatters gradients
inside each pair of ranks and all-reduces the gradient shards between the
pairs.  Same seeds and data as on any other backend, so the printed losses
of two runs differ only by the collectives; rank 0 prints

    step S loss MEAN hex HEX ranks L0,L1,...

and at the end "params SUM hex HEX" (the sum of the full parameters,
gathered), then checks that the two replicas hold the same shards.  Exits
77 with a reason when the installed torch has no fully_shard or no CPU
device mesh.
"""
import argparse
import sys


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="gloo")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--width", type=int, default=64)
    return p.parse_args()


def main():
    args = parse_args()
    if args.backend == "tacl":
        import tacl_torch  # noqa: F401  (registers the "tacl" backend)
    import torch
    import torch.distributed as dist
    import train_common
    try:
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.device_mesh import init_device_mesh
    except ImportError as e:
        print(f"skipped: torch {torch.__version__} has no FSDP2 ({e})")
        return 77

    torch.set_num_threads(1)
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != 4:
        print(f"needs 4 ranks for a 2x2 mesh, got {world}", file=sys.stderr)
        return 2
    mesh = init_device_mesh("cpu", (2, 2),
                            mesh_dim_names=("replicate", "shard"))

    torch.manual_seed(1234)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, args.width), torch.nn.Tanh(),
        torch.nn.Linear(args.width, args.width), torch.nn.Tanh(),
        torch.nn.Linear(args.width, 1))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    if rank == 0:
        print(f"backend {dist.get_backend()} world {world} mesh 2x2 "
              f"torch {torch.__version__}", flush=True)

    for step in range(args.steps):
        x, y = train_common.batch(step, rank, args.batch)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()

        train_common.report_loss(step, loss)

    # The two replicas of each shard must be equal bit for bit: gather the
    # local shards over the replicate dimension and compare.
    rep = mesh.get_group("replicate")
    bad = 0
    total = 0.0
    for p in model.parameters():
        local = p.to_local().detach().contiguous()
        both = [torch.empty_like(local) for _ in range(2)]
        dist.all_gather(both, local, group=rep)
        if not torch.equal(both[0], both[1]):
            bad += 1
        with torch.no_grad():
            total += float(p.full_tensor().double().sum())
    flag = torch.tensor([bad])
    dist.all_reduce(flag)
    if rank == 0:
        print(f"params {total:.12g} hex {total.hex()}", flush=True)
        if flag.item():
            print(f"replicas differ in {flag.item()} parameter shards",
                  file=sys.stderr)
    dist.barrier()
    dist.destroy_process_group()
    return 1 if flag.item() else 0


if __name__ == "__main__":
    sys.exit(main())
