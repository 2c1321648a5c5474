#!/usr/bin/env python3
"""torch's monitored_barrier on tacl when a rank stays away, under
torchrun with 3 or more ranks: rank 0 must name the late rank in torch's
words ("Rank 1 failed to pass monitoredBarrier"), every other rank that
came must fail too, saying rank 0 failed it, and all within seconds of the
barrier's timeout (not after the group's own).  Rank 1 stays away; a gloo
group keeps the ranks together afterwards.  Exits 1 on a failed check.
"""
import os
import sys
import time
from datetime import timedelta

import torch.distributed as dist

import tacl_torch  # noqa: F401  (registers the backend)


def main():
    dist.init_process_group("cpu:tacl", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    failures = []
    if rank != 1:
        t0 = time.monotonic()
        try:
            dist.monitored_barrier(timeout=timedelta(seconds=1))
            failures.append("a barrier rank 1 missed passed")
        except RuntimeError as err:
            msg = str(err)
            want = ("Rank 1 failed to pass monitoredBarrier" if rank == 0
                    else f"Rank {rank} successfully reached monitoredBarrier,"
                    " but received errors while waiting for send/recv from"
                    " rank 0")
            if want not in msg:
                failures.append(f"message {msg!r} lacks {want!r}")
        took = time.monotonic() - t0
        if took > 10:
            failures.append(f"took {took:.1f} s for a 1 s timeout")
        print(f"rank {rank}: monitored_barrier failed after {took:.2f} s",
              flush=True)
    dist.barrier(group=gloo)
    for f in failures:
        print(f"rank {rank}: FAIL {f}", flush=True)
    print(f"rank {rank}: {'FAILED' if failures else 'passed'}", flush=True)
    # The tacl group failed on purpose; leave without destroying it.
    os._exit(1 if failures else 0)


if __name__ == "__main__":
    sys.exit(main())
