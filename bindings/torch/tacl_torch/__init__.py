"""torch.distributed backend "tacl".

Importing this package registers the backend for CPU tensors and, when
the extension was built with CUDA (torch has CUDA), for CUDA tensors, so

    torch.distributed.init_process_group("tacl")                # CPU, CUDA
    torch.distributed.init_process_group("cpu:tacl,cuda:nccl")  # mixed

work (torch also finds the backend through the package's entry point
without an explicit import).  One communicator serves both: a CUDA
tensor's operation is ordered on torch's current stream of its device
and never waits on the host (as NCCL's); async_op works as with NCCL.
Make the device current before init_process_group
(torch.cuda.set_device), as for NCCL: the communicator's device is the
one current when it is made.  Several processes may share one GPU.

Subgroups reuse the default group's tacl communicator (no new bootstrap,
no store traffic, the parent's connections):
- split_group(), always, and new_group() when the default group is bound
  to a device (init_process_group(..., device_id=torch.device("cpu", 0))):
  c10d hands the backend its split source and has non-members split with
  no color (tacl_comm_split);
- new_group() of every rank of the default group, bound or not
  (tacl_comm_split with one color);
- new_group() of only some ranks on an unbound default group: c10d calls
  the backend on the members only, so the members make it among
  themselves with tacl_comm_create_group (collective over the listed ranks
  only, like MPI_Comm_create_group); the group's name, the same on every
  member, gives the tag that keeps groups made at once apart.  This is
  what DeepSpeed's hpZ and MiCS groups take.
Only a group whose default group has no tacl backend (or whose ranks are
not the default group's) bootstraps a communicator through the store.

Beyond what torch.distributed offers, the functions below run tacl's own
collectives on a group's communicator: quantized all-gather (qwZ) and
reduce-scatter (qgZ), the coalesced forms of all-gather and reduce-scatter
over lists of tensors of different sizes, and the communicator's byte
counters; compressed all-reduce and reduce-scatter through tacl's codecs,
a DDP communication hook and an FSDP2 reduce-scatter on them
(compress.py).  PeerCheckpointer (checkpoint.py) keeps a training state in
peers' host memory through tacl's snapshots; PeerStorageWriter and
PeerStorageReader (dcp.py) do the same for torch.distributed.checkpoint.
"""
from __future__ import annotations

import atexit
import zlib
from datetime import timedelta

import torch
import torch.distributed as dist

from ._C import TaclBackend
from .checkpoint import PeerCheckpointer
from .compress import (CompressedReduceScatter, CompressionState,
                       compressed_all_reduce, compressed_reduce_scatter,
                       compression_hook)
from .dcp import (PeerCheckpointNotFound, PeerStorageReader,
                  PeerStorageWriter)
from .profile import ModelProfile, profile_model, read_plan

__all__ = [
    "TaclBackend",
    "PeerCheckpointer",
    "PeerStorageWriter",
    "PeerStorageReader",
    "PeerCheckpointNotFound",
    "all_gather_quantized",
    "reduce_scatter_quantized",
    "all_gather_coalesced",
    "reduce_scatter_coalesced",
    "compressed_all_reduce",
    "compressed_reduce_scatter",
    "CompressionState",
    "compression_hook",
    "CompressedReduceScatter",
    "ModelProfile",
    "profile_model",
    "read_plan",
    "backend_of",
    "counters",
    "reset_counters",
]

_NAME = "tacl"


def _timeout_of(timeout) -> timedelta:
    if isinstance(timeout, timedelta):
        return timeout
    return timedelta(seconds=float(timeout))


def _default_tacl():
    """The default group's tacl backend, if the default group has one."""
    if not dist.is_initialized():
        return None
    try:
        backend = dist.distributed_c10d._get_default_group()._get_backend(
            torch.device("cpu"))
    except RuntimeError:
        return None
    return backend if isinstance(backend, TaclBackend) else None


def _create(dist_opts, backend_options=None):
    """Creator for register_backend(extended_api=True)."""
    backend = _create_backend(dist_opts)
    # Collectives started inside future callbacks run on a communicator
    # of their own, bootstrapped through the group's store when first
    # needed (a split or group has no other).
    if dist_opts.store is not None:
        backend._set_store(dist_opts.store)
    return backend


def _create_backend(dist_opts):
    """The backend of a new group: a split, a group of some ranks, or a
    bootstrap through the store."""
    rank, size = dist_opts.group_rank, dist_opts.group_size
    timeout = _timeout_of(dist_opts.timeout)
    name = str(dist_opts.group_id or "tacl")
    parent = getattr(dist_opts, "split_from", None)
    ranks = list(dist_opts.global_ranks_in_group or [])
    if isinstance(parent, TaclBackend) and ranks:
        # new_group() with a split source: the parent is the default
        # group, whose ranks are the global ranks.  Non-members call
        # perform_nocolor_split() (c10d does that for them).
        return TaclBackend(parent, min(ranks), rank, rank, size, timeout,
                           name)
    world = _default_tacl()
    if world is not None and ranks and \
            sorted(ranks) == list(range(world.size())):
        # Every rank of the default group is a member, so every one calls
        # this creator, in the same order of new_group() calls: a split
        # with one color is collective over the whole parent, as
        # tacl_comm_split needs.
        return TaclBackend(world, 0, rank, rank, size, timeout, name)
    if world is not None and len(ranks) == size and \
            len(set(ranks)) == size and \
            all(0 <= r < world.size() for r in ranks):
        # A subset: c10d asks its members only, in the group's rank order
        # (global ranks, which are the default group's).  They meet among
        # themselves; the group's name tells this group from others being
        # made at the same time.
        tag = zlib.crc32(name.encode()) & 0x7fffffff
        return TaclBackend(world, [int(r) for r in ranks], tag, rank, size,
                           timeout, name)
    return TaclBackend(dist_opts.store, rank, size, timeout, name)


def _create_plain(store, rank, size, timeout):
    """Creator for torch versions without the extended API."""
    return TaclBackend(store, rank, size, _timeout_of(timeout), "tacl")


def _devices() -> list:
    """The device types the backend serves."""
    return ["cpu", "cuda"] if TaclBackend._has_cuda() else ["cpu"]


def _register() -> None:
    if _NAME.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    try:
        dist.Backend.register_backend(_NAME, _create, extended_api=True,
                                      devices=_devices())
    except TypeError:
        dist.Backend.register_backend(_NAME, _create_plain,
                                      devices=_devices())


_register()
# The completion thread must not touch Python objects while it finalizes.
atexit.register(TaclBackend._stop_completer)


def _inline_callbacks_apart(name: str) -> None:
    """Future.then (and add_done_callback) on a future that is already
    complete runs the callback at once, in the caller's thread.  A tacl
    work's future completes in a completion thread, so whether a callback
    runs there or inline in the main thread differs between ranks; the
    collectives it starts must go to the group's callback communicator
    either way (backend.cpp, Completer).  So the call counts as running
    callbacks; for other backends' futures that changes nothing."""
    original = getattr(torch._C.Future, name)
    if getattr(original, "_tacl_wrapped", False):
        return

    def wrapped(self, callback):
        return TaclBackend._as_callbacks(original, self, callback)

    wrapped._tacl_wrapped = True
    wrapped.__doc__ = original.__doc__
    setattr(torch._C.Future, name, wrapped)


for _name in ("then", "add_done_callback"):
    _inline_callbacks_apart(_name)


def backend_of(group=None) -> TaclBackend:
    """The tacl backend serving a group's CPU tensors (default: world); the
    same one serves its CUDA tensors, and the functions below take both."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    backend = pg._get_backend(torch.device("cpu"))
    if not isinstance(backend, TaclBackend):
        raise RuntimeError(
            "tacl_torch: the group's CPU backend is "
            f"{type(backend).__name__}, not tacl")
    return backend


def counters(group=None) -> dict:
    """tacl_comm_get_counters of the group's communicator (default:
    world): what this rank sent since the communicator was made or its
    counters reset, as {"bytes": B, "messages": M, "links": {class:
    {"bytes", "messages"}}, "transports": {name: {"bytes", "messages"}}}.
    "bytes" and "messages" count what went to other ranks: every link
    class ("host", "gpu", "net") but "self"."""
    return backend_of(group)._counters()


def reset_counters(group=None) -> None:
    """Zero the group's communicator's counters
    (tacl_comm_reset_counters)."""
    backend_of(group)._reset_counters()


def _finish(work, async_op):
    if async_op:
        return work
    work.wait()
    return None


def all_gather_quantized(output, input, group=None, bits=8, block=256,
                         async_op=False):
    """qwZ all-gather: like all_gather_into_tensor, but every rank's block
    travels quantized to `bits` (8 or 4) bits with one float32 scale per
    `block` values; the caller's own block is copied exactly, the others
    are within half a quantization step.  float32, float16, bfloat16."""
    work = backend_of(group)._all_gather_quantized(output, input, bits, block,
                                                   async_op)
    return _finish(work, async_op)


def reduce_scatter_quantized(output, input, op=dist.ReduceOp.SUM,
                             group=None, bits=8, block=256, async_op=False):
    """qgZ reduce-scatter (SUM or AVG): like reduce_scatter_tensor, with the
    exchanged partial sums quantized to `bits` bits per value."""
    work = backend_of(group)._reduce_scatter_quantized(output, input, op,
                                                       bits, block, async_op)
    return _finish(work, async_op)


def all_gather_coalesced(outputs, inputs, group=None, async_op=False):
    """all_gather_into_tensor over lists: outputs[i] receives every rank's
    inputs[i]; sizes may differ between list entries.  One tacl operation
    (tacl_allgather_coalesced)."""
    work = backend_of(group)._all_gather_coalesced(list(outputs), list(inputs),
                                                   async_op)
    return _finish(work, async_op)


def reduce_scatter_coalesced(outputs, inputs, op=dist.ReduceOp.SUM,
                             group=None, async_op=False):
    """reduce_scatter_tensor over lists, as one tacl operation
    (tacl_reduce_scatter_coalesced)."""
    work = backend_of(group)._reduce_scatter_coalesced(list(outputs),
                                                       list(inputs), op,
                                                       async_op)
    return _finish(work, async_op)
