#!/usr/bin/env python3
"""DeepSpeed ZeRO-3 (optionally hpZ) training of a tiny model on CPU.

Run under torchrun (or any launcher that sets RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT); the process group uses the backend named by
--backend ("gloo", or "tacl" which `import tacl_torch` registers).  Every
rank starts from the same seeded weights and draws its own batch from a
generator seeded by (step, rank), so two runs on different backends see the
same data and start from the same point: any difference in their losses
comes from the collectives.

Rank 0 prints one line per step:

    step S loss MEAN hex HEX ranks L0,L1,...

MEAN is the mean of the ranks' losses, gathered with all_gather (a copy,
so exact on every backend) and summed on rank 0 in rank order; HEX is its
float.hex() so that a comparison can be bit for bit.

ZeRO-3 with zero_hpz_partition_size=H keeps a secondary copy of the
parameters sharded over groups of H ranks and all-gathers them there in the
backward pass (all_gather_into_tensor on subgroups).  The optimizer is
torch's own Adam: DeepSpeed's CPU Adam would be compiled at run time with a
C++ compiler, which a test should not depend on, and
zero_force_ds_cpu_optimizer is false so DeepSpeed accepts it.
"""
import argparse
import os
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="gloo",
                   help="torch.distributed backend (gloo or tacl)")
    p.add_argument("--hpz", type=int, default=1,
                   help="zero_hpz_partition_size (1: plain ZeRO-3)")
    p.add_argument("--mics", type=int, default=0,
                   help="mics_shard_size (0: no MiCS): DeepSpeed's MiCS, "
                   "parameters sharded within groups of this many ranks "
                   "and gathered with all_gather_coalesced")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=8,
                   help="micro batch per rank")
    p.add_argument("--width", type=int, default=64)
    return p.parse_args()


def build_model(torch, width):
    # Several layers of different shapes so that ZeRO-3 partitions and
    # gathers parameters in more than one bucket, with uneven sizes.
    return torch.nn.Sequential(
        torch.nn.Linear(16, width), torch.nn.Tanh(),
        torch.nn.Linear(width, width), torch.nn.Tanh(),
        torch.nn.Linear(width, 24), torch.nn.Tanh(),
        torch.nn.Linear(24, 1))


def ds_config(args, world):
    return {
        "train_micro_batch_size_per_gpu": args.batch,
        "train_batch_size": args.batch * world,
        "gradient_accumulation_steps": 1,
        "zero_allow_untested_optimizer": True,
        "zero_force_ds_cpu_optimizer": False,
        "wall_clock_breakdown": False,
        "steps_per_print": 1 << 30,
        "zero_optimization": {
            "stage": 3,
            "zero_hpz_partition_size": args.hpz,
            # Partition every parameter, however small, and keep the
            # buckets small so that several collectives run per step.
            "stage3_param_persistence_threshold": 0,
            "stage3_model_persistence_threshold": 0,
            "stage3_prefetch_bucket_size": 2048,
            "reduce_bucket_size": 2048,
            "allgather_bucket_size": 2048,
            "overlap_comm": False,
            "contiguous_gradients": True,
            **({"mics_shard_size": args.mics,
                "mics_hierarchical_params_gather": False}
               if args.mics else {}),
        },
    }


def main():
    args = parse_args()
    if args.backend == "tacl":
        import tacl_torch  # noqa: F401  (registers the "tacl" backend)
    import torch
    import torch.distributed as dist
    import train_common
    import deepspeed
    from deepspeed.utils import logger

    logger.setLevel("WARNING")
    torch.set_num_threads(1)
    deepspeed.init_distributed(dist_backend=args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.hpz > 1 and world % args.hpz:
        print(f"--hpz {args.hpz} must divide the world size {world}",
              file=sys.stderr)
        return 2

    torch.manual_seed(1234)
    config = ds_config(args, world)
    if args.mics:
        # MiCS shards the parameters as the model is made.
        with deepspeed.zero.MiCS_Init(config_dict_or_path=config):
            model = build_model(torch, args.width)
    else:
        model = build_model(torch, args.width)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt,
                                           config=config)
    backend = dist.get_backend()
    if rank == 0:
        print(f"backend {backend} world {world} hpz {args.hpz} "
              f"mics {args.mics} "
              f"torch {torch.__version__} deepspeed {deepspeed.__version__}",
              flush=True)

    secondary = 0
    for step in range(args.steps):
        x, y = train_common.batch(step, rank, args.batch)
        loss = torch.nn.functional.mse_loss(engine(x), y)
        engine.backward(loss)
        # hpZ keeps a secondary shard of each parameter for the subgroup
        # all-gathers of the backward pass until the step drops it.
        secondary = max(secondary, sum(
            getattr(p, "ds_secondary_tensor", None) is not None
            for p in engine.module.parameters()))
        engine.step()

        train_common.report_loss(step, loss)

    # Make sure the hpZ path really ran.
    if rank == 0:
        print(f"params {sum(1 for _ in engine.module.parameters())} "
              f"with hpz secondary shards {secondary}", flush=True)
    status = 0
    if args.hpz > 1 and secondary == 0:
        print(f"rank {rank}: hpz {args.hpz} but no parameter has a "
              f"secondary shard", file=sys.stderr)
        status = 1
    dist.barrier()
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())
