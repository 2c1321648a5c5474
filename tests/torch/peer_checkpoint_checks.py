"""PeerCheckpointer's contract on 2 ranks (torchrun): nothing saved gives
None and leaves the state alone; a restore gives back the saved tensors
bit for bit and the non-tensor leaves; a changed layout, a step that does
not increase and a bad domain are refused with a message naming them;
a state of 100 tensors of mixed dtypes comes back bit for bit; replicas
(replica_group) serve a rank that lost its copy, and a save where they
differ fails naming them."""
import os
import sys

import torch
import torch.distributed as dist

import tacl_torch


def expect_error(what, fn, *words):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  the message is what is checked
        msg = str(e)
        missing = [w for w in words if w not in msg]
        if missing:
            sys.exit(f"{what}: the error lacks {missing}: {msg}")
        return
    sys.exit(f"{what}: no error")


def main():
    dist.init_process_group("tacl")
    rank = dist.get_rank()
    key = sys.argv[1]

    expect_error("a bad domain",
                 lambda: tacl_torch.PeerCheckpointer(key + "-x",
                                                     domain="planet"),
                 "planet", "node or rank")

    ckpt = tacl_torch.PeerCheckpointer(key, domain="rank")
    w = torch.arange(12, dtype=torch.float32).reshape(3, 4) + rank
    b = torch.full((5,), 0.25 * rank, dtype=torch.float64)
    state = {"w": w, "inner": {"b": b, "lr": 0.5, "steps": [1, 2, 3]}}
    if ckpt.restore(state) is not None:
        sys.exit("restore found a step under a fresh key")
    if not torch.equal(w, torch.arange(12.0).reshape(3, 4) + rank):
        sys.exit("a restore that found nothing changed the state")

    saved_w, saved_b = w.clone(), b.clone()
    ckpt.save(state, 1).wait()
    w.mul_(-3.0)
    b.add_(1.0)
    state["inner"]["lr"] = 0.7
    state["inner"]["steps"] = [9]
    step = ckpt.restore(state)
    if step != 1:
        sys.exit(f"restore gave step {step}, saved 1")
    if not (torch.equal(w, saved_w) and torch.equal(b, saved_b)):
        sys.exit("the restored tensors differ from the saved ones")
    if state["inner"]["lr"] != 0.5 or state["inner"]["steps"] != [1, 2, 3]:
        sys.exit(f"the non-tensor leaves came back as {state['inner']}")
    if ckpt.latest() != 1:
        sys.exit(f"latest() is {ckpt.latest()} after restoring 1")

    bigger = {"w": torch.zeros(4, 4), "inner": state["inner"]}
    expect_error("a changed layout", lambda: ckpt.save(bigger, 2),
                 "layout changed", "('w',)", "[4, 4]")

    def same_step():
        ckpt.save(state, 1)
        ckpt.wait()
    expect_error("a step that does not increase", same_step, "version")

    ckpt.save(state, 2)
    ckpt.wait()
    w.zero_()
    if ckpt.restore(state) != 2 or not torch.equal(w, saved_w):
        sys.exit("a restore after saving 2 did not give step 2 back")
    if ckpt.latest() != 2:
        sys.exit(f"latest() is {ckpt.latest()} after restoring 2")
    ckpt.close(purge=True)

    # A model's worth of tensors (more than a snapshot set's 32 regions),
    # of mixed dtypes and odd sizes, one of them empty.
    many = tacl_torch.PeerCheckpointer(key + "-many", domain="rank")
    dtypes = (torch.float32, torch.float16, torch.int64, torch.uint8)
    big = {f"p{i}": (torch.arange(i * 7 % 23 + (i != 5) - 1) * (rank + 1)
                     ).to(dtypes[i % 4]) for i in range(100)}
    kept = {k: v.clone() for k, v in big.items()}
    many.save(big, 1).wait()
    for v in big.values():
        v.fill_(3)
    if many.restore(big) != 1 or \
            not all(torch.equal(big[k], kept[k]) for k in big):
        sys.exit("100 tensors: the restored ones differ from the saved")
    many.close(purge=True)

    # Replicas (as DDP's ranks): the same state on both ranks, declared.
    # A restarted job whose rank 1 lost its own copy gets it from rank 0;
    # a state that differs fails the save, naming both ranks.
    def twin_state():
        return {"w": torch.arange(10.0), "inner": {"lr": 0.5}}

    twin = tacl_torch.PeerCheckpointer(key + "-twin", domain="rank",
                                       replica_group=0)
    state = twin_state()
    twin.save(state, 1).wait()
    twin.save(state, 2).wait()
    twin.close(purge=False)
    dist.barrier()
    if rank == 1:
        os.remove(f"/dev/shm/tacl-snap-{key}-twin-h1-s1")
    dist.barrier()
    twin = tacl_torch.PeerCheckpointer(key + "-twin", domain="rank",
                                       replica_group=0)
    state = twin_state()
    state["w"].zero_()
    if twin.restore(state) != 2 or \
            not torch.equal(state["w"], torch.arange(10.0)):
        sys.exit("replicas: rank 1's state did not come back from rank 0")
    if rank == 1:
        state["w"][4] += 1
    twin.save(state, 3).wait()
    expect_error("replicas that differ", lambda: twin.save(state, 4),
                 "ranks 0 and 1 are declared replicas but differ at "
                 "version 3")
    twin.close(purge=True)
    expect_error("a negative replica group",
                 lambda: tacl_torch.PeerCheckpointer(key + "-y",
                                                     replica_group=-1),
                 "replica_group -1")
    dist.destroy_process_group()
    print(f"rank {rank}: peer checkpoint checks passed", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("TACL_TIMEOUT", "60")
    main()
