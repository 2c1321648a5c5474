"""Resume DDP training from peers' memory after a process is killed.

    torchrun --standalone --nproc-per-node 4 --max-restarts 1 \\
        examples/torch_peer_resume.py --key my-job --kill-at 12

Every step ends with tacl_torch.PeerCheckpointer.save() of the model, the
Adam state and the step: the state goes into this node's memory, and
training goes on while the copies are checked.  DDP's ranks hold the
same state, so they are declared replicas (replica_group=0): each rank's
own copy serves as its peer's copy, and a save sends the peer only its
checksums, which the peer holds against its own. With
--kill-at S, rank 1 of the first attempt kills itself (SIGKILL) in step
S. torchrun then restarts every rank, and each one restores the newest
step that all ranks saved completely, from its own node-local store or
from a peer. It continues from the step after it, with the data of that
step (each step's batch comes from its own seed).

Rank 0 prints "loss STEP HEX" for every step it trains, the loss as a
float's exact hex, so a run killed and resumed can be checked against an
uninterrupted one, bit for bit (tests/torch/test_peer_resume.sh).
Options: --steps N (default 30), --key NAME (the store's name: the same
for the restarted ranks; required), --kill-at S, --keep (leave the
stores at the end instead of purging them).
"""
import argparse
import os
import signal

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import (get_state_dict,
                                                     set_state_dict)

import tacl_torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--key", required=True)
    ap.add_argument("--kill-at", type=int, default=-1)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()

    dist.init_process_group("tacl")
    rank = dist.get_rank()
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))

    torch.manual_seed(0)  # the same hidden map and initial model everywhere
    true_map = torch.randn(16, 4)
    model = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 4))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=0.01)

    # The optimizer's state exists before its first step, so a fresh
    # process has the tensors a restore writes into.
    model_sd, optim_sd = get_state_dict(ddp, opt)
    state = {"model": model_sd, "optim": optim_sd}
    ckpt = tacl_torch.PeerCheckpointer(args.key, replica_group=0)
    restored = ckpt.restore(state)
    first = 0
    if restored is not None:
        set_state_dict(ddp, opt, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])
        first = restored + 1
        if rank == 0:
            print(f"attempt {attempt}: restored step {restored} from peer "
                  f"memory ({ckpt.domain} domain)", flush=True)

    for step in range(first, args.steps):
        if attempt == 0 and step == args.kill_at and rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        g = torch.Generator().manual_seed(1000 * step + rank)
        x = torch.randn(64, 16, generator=g)
        y = x @ true_map
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        model_sd, optim_sd = get_state_dict(ddp, opt)
        ckpt.save({"model": model_sd, "optim": optim_sd}, step)
        avg = loss.detach().clone()
        dist.all_reduce(avg)
        if rank == 0:
            print(f"loss {step} {avg.item().hex()}", flush=True)
    ckpt.close(purge=not args.keep)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
