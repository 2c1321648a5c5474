"""Peer checkpoints: a training state kept in host memory of this node and
of its peers (tacl_snapshot_*), saved every step without stopping
training, restored after a killed process or a lost node.

    ckpt = tacl_torch.PeerCheckpointer("my-job")
    step = ckpt.restore(state)          # None on a fresh start
    for step in range(start, steps):
        ...train...
        ckpt.save(state, step)          # returns at once
    ckpt.close(purge=True)              # the job is over

`state` is a state dict as torch.distributed.checkpoint takes it: nested
dicts (and lists) whose tensor leaves are written in place on restore,
for instance {"model": model.state_dict(), "optim":
optimizer.state_dict()} (get_state_dict from
torch.distributed.checkpoint.state_dict makes the optimizer's state
exist before the first step, so a fresh process can restore into it).
Leaves that are not tensors (steps, learning rates, lists of ints) travel
pickled beside the tensors and are put back into their containers.

The layout (every tensor's path, shape and dtype) is fixed by the first
save or restore; a later state of another layout is refused, naming the
first difference.  Tensors may live on a GPU: each save copies them to
host staging buffers, which the library copies into its node-local store
before save() returns, so training may change them at once.
"""
from __future__ import annotations

import pickle
import struct
from typing import Any, Optional

import torch

from ._C import _Snapshot

_LENGTH = struct.Struct("<Q")


def _walk(node, path, tensors, others):
    """Split a state into its tensor leaves and its other leaves, each with
    its path (the keys and indices that lead to it), in a fixed order.  A
    list of plain values (no tensor, dict or list in it) is one leaf."""
    if isinstance(node, torch.Tensor):
        tensors.append((path, node))
    elif isinstance(node, dict):
        for key in node:
            _walk(node[key], path + (key,), tensors, others)
    elif isinstance(node, list) and any(
            isinstance(item, (torch.Tensor, dict, list)) for item in node):
        for i, item in enumerate(node):
            _walk(item, path + (i,), tensors, others)
    else:
        others.append((path, node))


def _layout(tensors):
    return [(path, tuple(t.shape), str(t.dtype)) for path, t in tensors]


def _first_difference(want, got) -> str:
    for (pw, sw, dw), (pg, sg, dg) in zip(want, got):
        if (pw, sw, dw) != (pg, sg, dg):
            return (f"tensor {pw!r} {list(sw)} {dw} where the state has "
                    f"{pg!r} {list(sg)} {dg}")
    return f"{len(want)} tensors where the state has {len(got)}"


# Each tensor's staging starts on a multiple of this many bytes, so its
# view has its dtype's alignment (and a cache line's).
_ALIGN = 64


def _put(state, path, value):
    node = state
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


class PeerCheckpointer:
    """A state saved into peers' host memory by tacl's snapshots.

    key names the node-local store: the same key after a restart finds
    what was saved (letters, digits, '.', '_', '-'; at most 64).
    replicas counts the copies, the own one included (default 2).
    domain is what one failure takes down: "node" (copies on other
    nodes; needs at least `replicas` nodes) or "rank"; None picks "node"
    when the group spans enough nodes, else "rank".  placement: "auto",
    "group" or "ring".  meta_bytes bounds the pickled non-tensor leaves.
    replica_group: ranks passing the same number hold the same state at
    every save (DDP's ranks: 0 on every rank), so each one's own copy
    serves as the others' and a save sends them its checksums only; a
    save where they differ fails, naming the ranks.  None: this rank's
    state is its own.  Every call is collective over the group (default:
    world)."""

    def __init__(self, key: str, group=None, replicas: int = 2,
                 domain: Optional[str] = None, placement: str = "auto",
                 meta_bytes: int = 1 << 20,
                 replica_group: Optional[int] = None):
        from . import backend_of
        if domain is None:
            domain = "node" if _nodes(group) >= max(replicas, 2) else "rank"
        if meta_bytes < _LENGTH.size:
            raise ValueError(f"PeerCheckpointer: meta_bytes {meta_bytes} "
                             f"(at least {_LENGTH.size})")
        if replica_group is not None and replica_group < 0:
            raise ValueError(f"PeerCheckpointer: replica_group "
                             f"{replica_group} (0 or more, or None)")
        self._set = _Snapshot(backend_of(group), key, replicas, placement,
                              domain)
        self._set.replicated(-1 if replica_group is None else replica_group)
        self._meta = torch.zeros(meta_bytes, dtype=torch.uint8)
        self._layout = None
        self._staging = []
        self.domain = domain

    def _bind(self, state):
        """The state's tensors and other leaves; the first call fixes the
        layout and registers the staging: one buffer for every tensor,
        each a view at its own aligned offset, so that a model of any
        number of tensors is two regions (a set holds at most 32)."""
        tensors, others = [], []
        _walk(state, (), tensors, others)
        layout = _layout(tensors)
        if self._layout is None:
            offsets, total = [], 0
            for _, t in tensors:
                offsets.append(total)
                total += -(-t.numel() * t.element_size() // _ALIGN) * _ALIGN
            flat = torch.empty(total, dtype=torch.uint8)
            for off, (_, t) in zip(offsets, tensors):
                nbytes = t.numel() * t.element_size()
                self._staging.append(
                    flat[off:off + nbytes].view(t.dtype).view(t.shape))
            if total > 0:
                self._set.add("tensors", flat)
            self._set.add("meta", self._meta)
            self._layout = layout
        elif layout != self._layout:
            raise ValueError("PeerCheckpointer: the state's layout changed "
                             "since the first save or restore: " +
                             _first_difference(self._layout, layout))
        return tensors, others

    def save(self, state, step: int) -> "PeerCheckpointer":
        """Save state as version `step` (steps must increase). Returns once
        this rank's copy is taken; the copies to peers travel meanwhile.
        wait() (or the next save, a restore, close) ends the save."""
        tensors, others = self._bind(state)
        meta = pickle.dumps({"step": int(step), "layout": self._layout,
                             "others": others})
        if _LENGTH.size + len(meta) > self._meta.numel():
            raise ValueError(f"PeerCheckpointer: the state's non-tensor "
                             f"leaves take {len(meta)} bytes pickled, more "
                             f"than meta_bytes {self._meta.numel()} allows")
        with torch.no_grad():
            for buf, (_, t) in zip(self._staging, tensors):
                buf.copy_(t.detach())
        head = _LENGTH.pack(len(meta)) + meta
        self._meta[:len(head)] = torch.frombuffer(bytearray(head),
                                                  dtype=torch.uint8)
        self._set.save(int(step))
        return self

    def wait(self) -> None:
        """End the last save: raise if it failed."""
        self._set.wait()

    def done(self) -> bool:
        """Whether this rank's part of the last save is over."""
        return self._set.done()

    def latest(self) -> Optional[int]:
        """The newest step known complete on every rank, or None: a save
        is known so from the next save, restore or close on (they agree
        on it with the other ranks), a restore at once."""
        return self._set.latest()

    def restore(self, state) -> Optional[int]:
        """Write the newest step every rank can get back intact into state
        (tensors in place, other leaves into their containers) and return
        it; None, state untouched, when nothing was saved under the key."""
        tensors, _ = self._bind(state)
        step = self._set.restore()
        if step is None:
            return None
        (length,) = _LENGTH.unpack(bytes(self._meta[:_LENGTH.size].tolist()))
        if length > self._meta.numel() - _LENGTH.size:
            raise RuntimeError(f"PeerCheckpointer: restored step {step} "
                               f"has a non-tensor part of {length} bytes, "
                               f"more than meta_bytes allows")
        raw = self._meta[_LENGTH.size:_LENGTH.size + length].numpy()
        meta: Any = pickle.loads(raw.tobytes())
        if meta["layout"] != self._layout:
            raise RuntimeError("PeerCheckpointer: restored step "
                               f"{step} was saved from another layout: " +
                               _first_difference(meta["layout"],
                                                 self._layout))
        with torch.no_grad():
            for buf, (_, t) in zip(self._staging, tensors):
                t.copy_(buf)
        for path, value in meta["others"]:
            _put(state, path, value)
        return meta["step"]

    def close(self, purge: bool = False) -> None:
        """Destroy the snapshot set (collective); purge also removes this
        rank's node-local stores (the job is over)."""
        self._set.close(purge)


def _nodes(group) -> int:
    """How many nodes the group's ranks run on (by host name)."""
    import socket

    import torch.distributed as dist
    names = [None] * dist.get_world_size(group)
    dist.all_gather_object(names, socket.gethostname(), group=group)
    return len(set(names))
