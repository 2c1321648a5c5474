"""The DCP storage pair's contract (tacl_torch.dcp), under torchrun on 2
ranks, in two runs so that the load happens in fresh processes:

    dcp_checks.py save KEY    dcp.save of step 3, dcp.async_save of step 4
                              (tensors of three dtypes, NaN and -0.0,
                              plain objects); a save without its step and
                              one of another layout refused, naming why
    dcp_checks.py load KEY    the newest step found, loaded into a fresh
                              state equal bit for bit; a step not held, a
                              key not saved and a key nobody saved under
                              refused, naming the problem

Each rank prints "<phase> checks passed" at the end.
"""
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

import tacl_torch


def state_at(step):
    """The state saved as `step`: the same on every rank, as DDP's."""
    g = torch.Generator().manual_seed(step)
    return {
        "model": {
            "w": torch.randn(5, 3, generator=g),
            "b": torch.randn(7, generator=g).to(torch.bfloat16),
            "n": torch.randint(0, 1 << 40, (4,), generator=g),
            "odd": torch.tensor([float("nan"), -0.0, step]),
        },
        "extra": {"step": step, "name": f"run-{step}",
                  "lrs": [0.1 * step, 0.2]},
    }


def blank():
    """A fresh state of the same keys, every value different."""
    return {
        "model": {"w": torch.zeros(5, 3),
                  "b": torch.zeros(7, dtype=torch.bfloat16),
                  "n": torch.zeros(4, dtype=torch.int64),
                  "odd": torch.zeros(3)},
        "extra": {"step": -1, "name": "", "lrs": []},
    }


def same(want, got, path=""):
    """Equal bit for bit: tensors by dtype, shape and bytes."""
    if isinstance(want, dict):
        assert set(want) == set(got), f"{path}: keys {set(got)}"
        for k in want:
            same(want[k], got[k], f"{path}.{k}")
    elif isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype and got.shape == want.shape, \
            f"{path}: {got.dtype} {list(got.shape)}"
        assert got.view(torch.uint8).numpy().tobytes() == \
            want.view(torch.uint8).numpy().tobytes(), f"{path}: {got}"
    else:
        assert got == want, f"{path}: {got!r}, saved {want!r}"


def refused(words, fn):
    """fn must raise, and its message name the problem (`words`)."""
    try:
        fn()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # DCP's CheckpointException is one
        assert words in str(e), f"refused without {words!r}: {e}"
        return
    raise AssertionError(f"not refused: {words!r}")


def save(key, group):
    writer = tacl_torch.PeerStorageWriter(key, group=group)
    dcp.save(state_at(3), storage_writer=writer, checkpoint_id=3,
             process_group=group)
    fut = dcp.async_save(state_at(4), storage_writer=writer,
                         checkpoint_id=4, process_group=group)
    fut.result()
    refused("needs its step as checkpoint_id",
            lambda: dcp.save(state_at(5), storage_writer=writer,
                             process_group=group))
    grown = state_at(5)
    grown["model"]["new"] = torch.ones(2)
    refused("layout changed",
            lambda: dcp.save(grown, storage_writer=writer, checkpoint_id=5,
                             process_group=group))
    writer.close()


def load(key, group):
    reader = tacl_torch.PeerStorageReader(key, group=group)
    assert reader.find() == 4, f"found step {reader.find()}, saved 4"
    fresh = blank()
    dcp.load(fresh, storage_reader=reader, process_group=group)
    same(state_at(4), fresh)
    refused("step 3 is not held",
            lambda: dcp.load(blank(), storage_reader=reader,
                             checkpoint_id=3, process_group=group))
    wider = blank()
    wider["model"]["other"] = torch.zeros(2)
    refused("model.other",
            lambda: dcp.load(wider, storage_reader=reader,
                             process_group=group))
    reader.close()

    none = tacl_torch.PeerStorageReader(key + "-none", group=group)
    assert none.find() is None
    refused("no rank holds a peer-memory checkpoint",
            lambda: dcp.load(blank(), storage_reader=none,
                             process_group=group))
    none.close()


def main():
    phase, key = sys.argv[1], sys.argv[2]
    dist.init_process_group("tacl")
    # DCP's plan collectives get a communicator of their own, as
    # async_save's thread needs.
    group = dist.new_group()
    {"save": save, "load": load}[phase](key, group)
    print(f"{phase} checks passed", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
