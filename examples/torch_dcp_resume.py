"""Resume DDP or FSDP2 training from peers' memory through
torch.distributed.checkpoint after a process is killed.

    KILL_AT=12 torchrun --standalone --nproc-per-node 2 --max-restarts 1 \\
        examples/torch_dcp_resume.py --key my-job [--fsdp]

Every step ends with dcp.async_save of the model and the Adam state into
tacl_torch.PeerStorageWriter: the state goes into this node's memory and
to a peer's while the next step trains, and the step waits for the
previous save first. With KILL_AT=S in the environment (or --kill-at S),
rank 1 of the first attempt kills itself (SIGKILL) in step S. torchrun
restarts every rank; each finds the newest step all ranks saved
completely (PeerStorageReader.find), loads it with dcp.load, and goes on
from the step after it, with that step's data (each step's batch comes
from its own seed).

DCP's plan collectives run in async_save's thread, so they get a group of
their own (dist.new_group()): the training's collectives keep the default
group's communicator to the main thread.

Rank 0 prints "loss STEP HEX" for every step it trains, the loss as a
float's exact hex, so a run killed and resumed can be checked against an
uninterrupted one bit for bit (tests/torch/test_dcp.py). Options: --steps
N (default 30), --key NAME (the store's name, the same for the restarted
ranks; required), --fsdp (FSDP2's fully_shard instead of DDP), --keep
(leave the stores at the end instead of purging them).
"""
import argparse
import os
import signal

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import (get_state_dict,
                                                     set_state_dict)

import tacl_torch


def wrap(model, fsdp):
    if not fsdp:
        return nn.parallel.DistributedDataParallel(model)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def resume(key, group, model, opt):
    """Load the newest complete step from peer memory; the first step to
    train (0 when nothing was saved)."""
    reader = tacl_torch.PeerStorageReader(key, group=group)
    step = reader.find()
    if step is not None:
        model_sd, optim_sd = get_state_dict(model, opt)
        state = {"model": model_sd, "optim": optim_sd}
        dcp.load(state, storage_reader=reader, process_group=group)
        set_state_dict(model, opt, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])
    reader.close()
    return 0 if step is None else step + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--key", required=True)
    ap.add_argument("--kill-at", type=int,
                    default=int(os.environ.get("KILL_AT", "-1")))
    ap.add_argument("--fsdp", action="store_true")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()

    dist.init_process_group("tacl")
    ckpt_group = dist.new_group()
    rank = dist.get_rank()
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))

    torch.manual_seed(0)  # the same hidden map and initial model everywhere
    true_map = torch.randn(16, 4)
    model = wrap(nn.Sequential(nn.Linear(16, 64), nn.Tanh(),
                               nn.Linear(64, 4)), args.fsdp)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    # The optimizer's state exists before its first step (get_state_dict
    # makes it), so a fresh process has the tensors a load writes into.
    get_state_dict(model, opt)

    first = resume(args.key, ckpt_group, model, opt)
    if first > 0 and rank == 0:
        print(f"attempt {attempt}: restored step {first - 1} from peer "
              f"memory", flush=True)

    writer = tacl_torch.PeerStorageWriter(args.key, group=ckpt_group)
    saving = None
    for step in range(first, args.steps):
        if attempt == 0 and step == args.kill_at and rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        g = torch.Generator().manual_seed(1000 * step + rank)
        x = torch.randn(64, 16, generator=g)
        y = x @ true_map
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if saving is not None:
            saving.result()
        model_sd, optim_sd = get_state_dict(model, opt)
        saving = dcp.async_save({"model": model_sd, "optim": optim_sd},
                                storage_writer=writer, checkpoint_id=step,
                                process_group=ckpt_group)
        avg = loss.detach().clone()
        dist.all_reduce(avg)
        if rank == 0:
            print(f"loss {step} {avg.item().hex()}", flush=True)
    if saving is not None:
        saving.result()
    writer.close(purge=not args.keep)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
