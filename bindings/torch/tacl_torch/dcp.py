"""torch.distributed.checkpoint (DCP) storage in peers' memory: a
StorageWriter and StorageReader pair over tacl's snapshots, so that
dcp.save, dcp.async_save and dcp.load keep a checkpoint in host memory of
this node and of its peers instead of files.

    writer = PeerStorageWriter("my-job", group=ckpt_group)
    fut = dcp.async_save(state, storage_writer=writer, checkpoint_id=step,
                         process_group=ckpt_group)
    ...                                  # training goes on
    fut.result()                         # every rank's copies committed

    reader = PeerStorageReader("my-job", group=ckpt_group)
    if reader.find() is not None:        # the newest complete step
        dcp.load(state, storage_reader=reader, process_group=ckpt_group)
        step = reader.step

The checkpoint_id of a save is its step, which must grow.  async_save runs
the writer in a thread of its own, and the plan's collectives on its
process_group: give it a group of its own (dist.new_group()), so that this
thread and the training's collectives never share a communicator, and
wait for one save's future before the next save, as DCP asks.

Each rank keeps its whole local state, every tensor of its local plan:
DCP de-duplicates replicated tensors (DDP's) so that one file holds each,
but a restore from peers gives each rank back its own state only, so a
rank must hold what it will load.  A load therefore needs the ranks and
sharding that saved: a tensor chunk the rank did not save is an error
naming it.  Tensors travel as their bytes in the snapshot's regions;
objects as DCP serialises them (torch.save into a buffer), pickled with
the coordinator's Metadata beside the tensors (PeerCheckpointer's
non-tensor part, bounded by meta_bytes).  A second, one-region snapshot
set (the index) keeps the tensors' layout, which a fresh process must
know to register the regions before it restores them.
"""
from __future__ import annotations

import io
from typing import Optional

import torch
import torch.distributed as dist
from torch.distributed._shard._utils import narrow_tensor_by_index
from torch.futures import Future
from torch.distributed.checkpoint.metadata import Metadata
from torch.distributed.checkpoint.planner import (LoadItemType, LoadPlan,
                                                  LoadPlanner, SavePlan,
                                                  SavePlanner, WriteItemType)
from torch.distributed.checkpoint.storage import (StorageReader,
                                                  StorageWriter, WriteResult)

from .checkpoint import PeerCheckpointer, _first_difference


class PeerCheckpointNotFound(LookupError):
    """No rank holds the peer-memory checkpoint a load asks for."""


def _step_of(checkpoint_id) -> int:
    """A checkpoint_id is the step: a non-negative int or its digits."""
    if isinstance(checkpoint_id, int) and not isinstance(checkpoint_id,
                                                         bool):
        step = checkpoint_id
    elif isinstance(checkpoint_id, str) and checkpoint_id.isdigit():
        step = int(checkpoint_id)
    else:
        raise ValueError("tacl dcp: checkpoint_id must be the step, a "
                         "non-negative int, got " + repr(checkpoint_id))
    if step < 0:
        raise ValueError(f"tacl dcp: checkpoint_id {step} is negative")
    return step


def _is_step(checkpoint_id) -> bool:
    try:
        _step_of(checkpoint_id)
    except ValueError:
        return False
    return True


class _Sets:
    """The two snapshot sets of one key: the index (the tensors' layout,
    one region) and the data (tensors, objects, Metadata).  Making them
    is collective over the group.  The options are PeerCheckpointer's
    (replicas, domain, placement, meta_bytes)."""

    def __init__(self, key, group, **options):
        self.key = key
        self.group = group
        self.index = PeerCheckpointer(key + ".i", group, **options)
        self.data = PeerCheckpointer(key + ".d", group, **options)

    def close(self, purge):
        self.index.close(purge)
        self.data.close(purge)


class PeerStorageWriter(StorageWriter):
    """A DCP StorageWriter into tacl's peer snapshots under `key` (the
    node-local store's name, the same after a restart).  The options are
    PeerCheckpointer's (replicas, domain, placement, meta_bytes); the
    constructor is collective over `group`.
    write_data returns once this rank's copies are sent and the copies it
    keeps for others are committed, so the save's future completes when
    every rank's state has `replicas` committed copies."""

    def __init__(self, key: str, group=None, **options):
        super().__init__()
        self._sets = _Sets(key, group, **options)
        self._step: Optional[int] = None
        self._items = []
        self._coordinator = False
        self._indexed = False
        self._layout = None

    def reset(self, checkpoint_id=None) -> None:
        self._step = None if checkpoint_id is None else _step_of(
            checkpoint_id)

    def set_up_storage_writer(self, is_coordinator: bool, *args,
                              **kwargs) -> None:
        self._coordinator = is_coordinator

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        # Before DCP's de-duplication: every item of this rank's state.
        self._items = list(plan.items)
        return plan

    def prepare_global_plan(self, plans: list[SavePlan]) -> list[SavePlan]:
        return plans

    def write_data(self, plan: SavePlan,
                   planner: SavePlanner) -> Future[list[WriteResult]]:
        # DCP calls reset only with a checkpoint_id: a save without one
        # must not reuse this step.
        step, self._step = self._step, None
        problem = None
        try:
            state, layout = self._prepare(step, planner)
        except (TypeError, ValueError) as e:
            problem = str(e)
        _agree(self._sets.group, problem)
        if not self._indexed:
            # Before the first data version, so that a version a fresh
            # process restores always has its layout.
            self._sets.index.save({"layout": layout}, step).wait()
            self._indexed = True
        self._sets.data.save(state, step).wait()
        results = [WriteResult(index=item.index,
                               size_in_bytes=_size(item),
                               storage_data=step)
                   for item in plan.items]
        fut: Future = Future()
        fut.set_result(results)
        return fut

    def _prepare(self, step, planner):
        """The state to save and its layout, checked: the step known, the
        layout the first save's."""
        if step is None:
            raise ValueError("a save needs its step as checkpoint_id "
                             "(dcp.save(..., checkpoint_id=step))")
        state = self._state(planner)
        layout = [(index, tuple(t.shape), t.dtype)
                  for index, t in zip(state["o"]["items"], state["t"])]
        if self._layout is None:
            self._layout = layout
        elif layout != self._layout:
            raise ValueError("the state's layout changed since the first "
                             "save: " +
                             _first_difference(self._layout, layout))
        return state, layout

    def _state(self, planner):
        """This rank's items as PeerCheckpointer's state: tensors in "t",
        in plan order; their indices, the objects' bytes and (on the
        coordinator) DCP's Metadata pickled in "o"."""
        tensors, indices, blobs = [], [], []
        for item in self._items:
            data = planner.resolve_data(item)
            if item.type == WriteItemType.BYTE_IO:
                blobs.append((item.index, data.getvalue()))
            else:
                tensors.append(data.detach())
                indices.append(item.index)
        metadata = None
        if self._coordinator:
            # The Metadata reaches the writer only at finish(), on the
            # coordinator alone, after the data is saved; the planner
            # made it before write_data.
            metadata = getattr(planner, "metadata", None)
            if not isinstance(metadata, Metadata):
                raise TypeError(f"the save planner "
                                f"{type(planner).__name__} keeps no "
                                f"Metadata (DefaultSavePlanner does)")
        return {"t": tensors,
                "o": {"items": indices, "bytes": blobs,
                      "metadata": metadata}}

    def finish(self, metadata: Metadata,
               results: list[list[WriteResult]]) -> None:
        # Every rank's write_data has returned, so the step is complete.
        pass

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id) -> bool:
        return _is_step(checkpoint_id)

    def close(self, purge: bool = False) -> None:
        """Destroy the snapshot sets (collective); purge also removes this
        rank's node-local stores (the job is over)."""
        self._sets.close(purge)


def _size(item) -> int:
    return item.tensor_storage_size() or 0


class PeerStorageReader(StorageReader):
    """A DCP StorageReader from tacl's peer snapshots under `key`.  The
    first read_metadata (or find) restores, collectively, the newest step
    every rank can get back intact, from its own node-local store or a
    peer's; read_data serves the load from it.  A checkpoint_id asks for
    that step: another newest step is PeerCheckpointNotFound."""

    def __init__(self, key: str, group=None, **options):
        super().__init__()
        self._sets = _Sets(key, group, **options)
        self._want: Optional[int] = None
        self._found = False
        self.step: Optional[int] = None
        self._metadata: Optional[Metadata] = None
        self._tensors = {}
        self._bytes = {}

    def reset(self, checkpoint_id=None) -> None:
        self._want = None if checkpoint_id is None else _step_of(
            checkpoint_id)

    def find(self) -> Optional[int]:
        """Restore the newest complete step (collective, once) and return
        it; None when no rank holds a checkpoint under the key."""
        if not self._found:
            self._restore()
            self._found = True
        return self.step

    def _restore(self):
        found = {"layout": None}
        if self._sets.index.restore(found) is None:
            return
        layout = found["layout"]
        state = {"t": [torch.empty(shape, dtype=dtype)
                       for _, shape, dtype in layout],
                 "o": {"items": None, "bytes": None, "metadata": None}}
        step = self._sets.data.restore(state)
        if step is None:
            raise PeerCheckpointNotFound(
                f"tacl dcp: key {self._sets.key!r} has an index but no "
                f"data in peer memory")
        problem = None
        if state["o"]["items"] != [entry[0] for entry in layout]:
            problem = (f"step {step} under key {self._sets.key!r} was "
                       f"saved with another list of tensors than its index "
                       f"holds")
        _agree(self._sets.group, problem)
        self._tensors = dict(zip(state["o"]["items"], state["t"]))
        self._bytes = dict(state["o"]["bytes"])
        self._metadata = _from_coordinator(state["o"]["metadata"],
                                           self._sets.group)
        self.step = step

    def read_metadata(self) -> Metadata:
        step = self.find()
        if step is None:
            raise PeerCheckpointNotFound(
                f"tacl dcp: no rank holds a peer-memory checkpoint under "
                f"key {self._sets.key!r} (nothing saved, or the stores "
                f"were purged)")
        # DCP calls reset only with a checkpoint_id: the next load
        # without one must not ask for this step.
        want, self._want = self._want, None
        if want is not None and want != step:
            raise PeerCheckpointNotFound(
                f"tacl dcp: step {want} is not held under key "
                f"{self._sets.key!r}: the newest step every rank can get "
                f"back is {step}")
        return self._metadata

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool,
                              *args, **kwargs) -> None:
        pass

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return plan

    def prepare_global_plan(self, plans: list[LoadPlan]) -> list[LoadPlan]:
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        for item in plan.items:
            if item.type == LoadItemType.BYTE_IO:
                planner.load_bytes(item, io.BytesIO(self._blob(item)))
                continue
            src = narrow_tensor_by_index(self._tensor(item),
                                         item.storage_offsets, item.lengths)
            dst = planner.resolve_tensor(item).detach()
            if dst.size() != src.size():
                raise ValueError(f"tacl dcp: {_name(item)}: the state's "
                                 f"chunk is {list(dst.size())}, the saved "
                                 f"one {list(src.size())}")
            dst.copy_(src)
            planner.commit_tensor(item, dst)
        fut: Future = Future()
        fut.set_result(None)
        return fut

    def _tensor(self, item):
        try:
            return self._tensors[item.storage_index]
        except KeyError:
            raise KeyError(self._missing(item)) from None

    def _blob(self, item):
        try:
            return self._bytes[item.storage_index]
        except KeyError:
            raise KeyError(self._missing(item)) from None

    def _missing(self, item) -> str:
        return (f"tacl dcp: {_name(item)} is not in this rank's state of "
                f"step {self.step}: a peer-memory checkpoint loads onto "
                f"the ranks and sharding that saved it")

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id) -> bool:
        return _is_step(checkpoint_id)

    def close(self) -> None:
        """Destroy the snapshot sets (collective); the stores stay."""
        self._sets.close(False)


def _name(item) -> str:
    index = item.storage_index
    where = "" if index.offset is None else f" at {list(index.offset)}"
    return f"{index.fqn!r}{where}"


def _agree(group, problem: Optional[str]) -> None:
    """Raise on every rank when any rank found a problem before a
    collective step, naming the ranks and their problems, so that no rank
    waits in that step for one that left."""
    problems = [None] * dist.get_world_size(group)
    dist.all_gather_object(problems, problem, group=group)
    found = [f"rank {r}: {p}" for r, p in enumerate(problems) if p]
    if found:
        raise ValueError("tacl dcp: " + "; ".join(found))


def _from_coordinator(metadata, group):
    """The coordinator's Metadata on every rank (the coordinator is the
    group's rank 0, as DCP's default)."""
    box = [metadata]
    dist.broadcast_object_list(box, group_src=0, group=group)
    if not isinstance(box[0], Metadata):
        raise RuntimeError("tacl dcp: the restored step's coordinator "
                           "holds no DCP Metadata")
    return box[0]
