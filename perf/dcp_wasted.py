#!/usr/bin/env python3
"""torch DCP's async_save to the emulated storage node: the terms of the
thesis' Equation 6.1 for perf/dcp_wasted.sh.

A remote-storage writer (DCP's fsspec writer on S3, for one) writes each
rank's files to the remote store from the save's background thread, and
the save's future completes once the coordinator has written the
metadata there.  UploadingWriter stands in for one: it is torch's
FileSystemWriter into a node-local folder whose write_data, still in the
background thread, puts the files this rank wrote on the storage node
(perf/storage_node.py) before it returns, and whose finish (the
coordinator's) puts the metadata file after them.  So async_save's future
completes only when the storage node holds the whole checkpoint, over
the shaped storage link, as it would with a remote writer; the local
write in front of it is the part a remote writer would stream instead.
FetchingReader is the load side: torch's FileSystemReader into a fresh
folder that first gets, from the storage node, the metadata and then the
byte ranges of the files its load plan reads (ranges closer than GAP
merged into one), each into a sparse local file at its offset: ranged
reads, as an fsspec reader makes of an object store.  With FSDP2 every
rank reads a few small items (Adam's step counters, which DCP saves
once) from every rank's file, so whole files would cost four times the
bytes.

--worker save (phase 1): the model (an MLP, BLOCKS
hidden WIDTH x WIDTH layers, FSDP2-sharded over the ranks, with Adam:
its parameters and both moments are the state, about WIDTH^2 * BLOCKS *
12 / ranks bytes a rank) trains STEPS steps without checkpoints
(T_iter, the mean step), then takes SAVES checkpoints by
dcp.async_save, each at the best sustainable frequency: training goes
on, a step at a time, until every rank's future has completed (the
ranks agree on that after each step), and the next save starts after
that step.  Per save it records the training thread's time inside
async_save (the staging copy and the call), the time from the call to
the future's completion (t_ckpt), the steps trained meanwhile, the
slowest rank's local write (what a remote writer would stream instead)
and its upload.  The last save's name goes to DIR/latest and each
rank's state digest (of every save, the last kept) to DIR/digest.RANK.
--worker load (phase 2, node 1 replaced): the same model and optimizer
made afresh, then dcp.load from FetchingReader: t_rtvl is the slowest
rank's time from the start of its downloads to its load's end; the
loaded state's digest must equal the saved one.

With --peer-key KEY the same is done through DCP's API into tacl's peer
memory (tacl_torch.PeerStorageWriter, then PeerStorageReader: node 1's
ranks fetch their state from their peers), SAVES saves after the file
ones and its load before the file load, under digests DIR/digest-peer.*.

Rank 0 prints the lines perf/dcp_wasted.sh reads:
    dcp state BYTES_PER_RANK t_iter SECONDS
    dcp save I t_ckpt S blocked S steps N step S write S upload S bytes B
    dcp load t_rtvl S get S bytes B
    dcp peer-save I t_ckpt S blocked S steps N step S
    dcp peer-load t_rtvl S
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GAP = 1 << 16


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", choices=("save", "load"))
    p.add_argument("--dir", help="the launch's shared folder")
    p.add_argument("--storage", help="the storage node's HOST:PORT")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--saves", type=int, default=3)
    p.add_argument("--width", type=int, default=980)
    p.add_argument("--blocks", type=int, default=3)
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--peer-key", help="also save and load through "
                   "tacl_torch.PeerStorageWriter/Reader under this key")
    return p.parse_args()


def storage_client():
    sys.path.insert(0, HERE)
    import storage_node
    return storage_node


def transfer(fn, *args):
    """A storage_node.py put or fetch; its exit on failure as an error."""
    try:
        return fn(*args)
    except SystemExit as e:
        raise RuntimeError(f"dcp_wasted: {e}") from None


def merge(spans, gap=GAP):
    """Sorted (offset, length) spans with those less than gap bytes apart
    joined: fewer requests for a few bytes more."""
    out = []
    for offset, length in spans:
        if out and offset <= out[-1][0] + out[-1][1] + gap:
            end = max(out[-1][0] + out[-1][1], offset + length)
            out[-1] = (out[-1][0], end - out[-1][0])
        else:
            out.append((offset, length))
    return out


def writer_class():
    from torch.distributed.checkpoint import FileSystemWriter
    from torch.futures import Future
    node = storage_client()

    class UploadingWriter(FileSystemWriter):
        """FileSystemWriter whose files reach the storage node before the
        save completes (module docstring)."""

        def __init__(self, path, storage, prefix):
            super().__init__(path)
            self.storage, self.prefix = storage, prefix
            self.upload_s, self.upload_bytes, self.write_s = 0.0, 0, 0.0

        def _put(self, name):
            local = os.path.join(self.path, name)
            t0 = time.monotonic()
            transfer(node.put, self.storage, local, self.prefix + name)
            self.upload_s += time.monotonic() - t0
            self.upload_bytes += os.path.getsize(local)

        def write_data(self, plan, planner):
            t0 = time.monotonic()
            results = super().write_data(plan, planner).wait()
            self.write_s = time.monotonic() - t0
            for name in sorted({r.storage_data.relative_path
                                for r in results}):
                self._put(name)
            done = Future()
            done.set_result(results)
            return done

        def finish(self, metadata, results):
            super().finish(metadata, results)
            self._put(".metadata")

    return UploadingWriter


def reader_class():
    from torch.distributed.checkpoint import FileSystemReader
    node = storage_client()

    class FetchingReader(FileSystemReader):
        """FileSystemReader that first gets what it reads from the
        storage node (module docstring)."""

        def __init__(self, path, storage, prefix):
            os.makedirs(path, exist_ok=True)
            super().__init__(path)
            self.storage, self.prefix = storage, prefix
            self.get_s, self.get_bytes = 0.0, 0

        def _get(self, name, spans=None):
            """The file name, or its spans [(offset, length)], into this
            folder (a file of holes elsewhere)."""
            t0 = time.monotonic()
            with open(os.path.join(self.path, name), "wb") as dst:
                for offset, length in spans or [(None, None)]:
                    if offset is not None:
                        dst.seek(offset)
                    self.get_bytes += transfer(node.fetch, self.storage,
                                               self.prefix + name, dst,
                                               offset, length)
            self.get_s += time.monotonic() - t0

        def read_metadata(self, *args, **kwargs):
            self._get(".metadata")
            return super().read_metadata(*args, **kwargs)

        def read_data(self, plan, planner):
            wanted = {}
            for item in plan.items:
                info = self.storage_data[item.storage_index]
                wanted.setdefault(info.relative_path, []).append(
                    (info.offset, info.length))
            for name, spans in sorted(wanted.items()):
                self._get(name, merge(sorted(spans)))
            return super().read_data(plan, planner)

    return FetchingReader


class Job:
    """The ranks' model, optimizer and data (the same in both phases)."""

    def __init__(self, torch, args):
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        nn = torch.nn

        self.torch, self.dist = torch, dist
        self.rank = dist.get_rank()
        torch.manual_seed(1234)
        layers = [nn.Linear(16, args.width), nn.Tanh()]
        for _ in range(args.blocks):
            layers += [nn.Linear(args.width, args.width), nn.Tanh()]
        layers.append(nn.Linear(args.width, 1))
        model = nn.Sequential(*layers)
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        self.model = fully_shard(model, mesh=mesh)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-4)
        self.batch = args.batch
        self.step_no = 0

    def step(self):
        torch = self.torch
        g = torch.Generator().manual_seed(1000 * self.step_no + self.rank)
        x = torch.randn(self.batch, 16, generator=g)
        y = torch.tanh(x.sum(dim=1, keepdim=True) / 4)
        self.opt.zero_grad()
        torch.nn.functional.mse_loss(self.model(x), y).backward()
        self.opt.step()
        self.step_no += 1

    def state(self):
        from torch.distributed.checkpoint.state_dict import get_state_dict
        model_sd, optim_sd = get_state_dict(self.model, self.opt)
        return {"model": model_sd, "optim": optim_sd}

    def set_state(self, state):
        from torch.distributed.checkpoint.state_dict import set_state_dict
        set_state_dict(self.model, self.opt,
                       model_state_dict=state["model"],
                       optim_state_dict=state["optim"])

    def local_tensors(self, state):
        """This rank's tensors of state (a DTensor's local shard)."""
        out = []

        def walk(v):
            if isinstance(v, dict):
                for k in sorted(v, key=str):
                    walk(v[k])
            elif isinstance(v, self.torch.Tensor):
                out.append(v.to_local() if hasattr(v, "to_local") else v)
        walk(state)
        return out

    def digest(self, state):
        """A fingerprint of this rank's state: each tensor's float64 sum
        and weighted sum, as text."""
        torch = self.torch
        parts = []
        for t in self.local_tensors(state):
            f = t.detach().reshape(-1).to(torch.float64)
            w = torch.arange(1, f.numel() + 1, dtype=torch.float64)
            parts.append(f"{f.sum().item():.17g}:{(f * w).sum().item():.17g}")
        return " ".join(parts)

    def max(self, *values):
        t = self.torch.tensor(values, dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return t.tolist()

    def all_true(self, flag):
        t = self.torch.tensor([1 if flag else 0])
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MIN)
        return bool(t.item())


def timed_save(job, group, writer, digest_path, checkpoint_id=None):
    """One dcp.async_save of the state while training goes on until
    every rank's future has completed; the slowest rank's time in the
    call and from the call to the completion, the steps trained, their
    mean time.  The saved state's digest goes to digest_path."""
    import torch.distributed.checkpoint as dcp

    state = job.state()
    with open(digest_path, "w") as f:
        f.write(job.digest(state))
    done = []
    t0 = time.monotonic()
    fut = dcp.async_save(state, storage_writer=writer,
                         checkpoint_id=checkpoint_id, process_group=group)
    blocked = time.monotonic() - t0
    # AsyncSaveResponse (a staging future of its own) or the future.
    fut = getattr(fut, "upload_completion", fut)
    fut.add_done_callback(lambda _: done.append(time.monotonic()))
    steps = 0
    while True:
        job.step()
        steps += 1
        if job.all_true(fut.done()):
            break
    fut.result()
    step_s = (time.monotonic() - t0) / steps
    t_ckpt, blocked = job.max(done[0] - t0, blocked)
    return f"t_ckpt {t_ckpt:.4f} blocked {blocked:.4f} steps {steps} " \
        f"step {step_s:.4f}"


def timed_load(job, group, reader, digest_path):
    """dcp.load from reader into fresh state; the slowest rank's time.
    The loaded state must equal the saved one's digest."""
    import torch.distributed.checkpoint as dcp

    with open(digest_path) as f:
        saved = f.read()
    state = job.state()  # makes Adam's state for the load to fill
    job.dist.barrier()
    t0 = time.monotonic()
    if hasattr(reader, "find") and reader.find() is None:
        sys.exit("dcp_wasted: no rank holds the peer checkpoint")
    dcp.load(state, storage_reader=reader, process_group=group)
    job.set_state(state)
    took = time.monotonic() - t0
    if not job.all_true(job.digest(job.state()) == saved):
        sys.exit(f"dcp_wasted: the state loaded through "
                 f"{type(reader).__name__} differs from the saved one")
    return job.max(took)[0]


def save_phase(job, args, group):
    Writer = writer_class()

    for _ in range(2):  # warm-up: Adam's state exists after a step
        job.step()
    job.dist.barrier()
    t0 = time.monotonic()
    for _ in range(args.steps):
        job.step()
    job.dist.barrier()
    (t_iter,) = job.max((time.monotonic() - t0) / args.steps)
    state_bytes = sum(t.numel() * t.element_size()
                      for t in job.local_tensors(job.state()))
    (state_max,) = job.max(state_bytes)
    if job.rank == 0:
        print(f"dcp state {int(state_max)} t_iter {t_iter:.4f}", flush=True)

    local = os.path.join(args.dir, "local", f"rank{job.rank}")
    for i in range(args.saves):
        name = f"s{i}"
        writer = Writer(os.path.join(local, name), args.storage, name + "-")
        times = timed_save(job, group, writer,
                           os.path.join(args.dir, f"digest.{job.rank}"))
        write, upload, up_bytes = job.max(writer.write_s, writer.upload_s,
                                          writer.upload_bytes)
        if job.rank == 0:
            print(f"dcp save {i} {times} write {write:.4f} upload "
                  f"{upload:.4f} bytes {int(up_bytes)}", flush=True)
    if job.rank == 0:
        with open(os.path.join(args.dir, "latest"), "w") as f:
            f.write(f"s{args.saves - 1}\n")
    if args.peer_key:
        import tacl_torch
        writer = tacl_torch.PeerStorageWriter(args.peer_key, group=group)
        for i in range(args.saves):
            times = timed_save(job, group, writer, os.path.join(
                args.dir, f"digest-peer.{job.rank}"), checkpoint_id=i)
            if job.rank == 0:
                print(f"dcp peer-save {i} {times}", flush=True)
        writer.close(purge=False)  # phase 2 restores from it


def load_phase(job, args, group):
    if args.peer_key:
        import tacl_torch
        reader = tacl_torch.PeerStorageReader(args.peer_key, group=group)
        took = timed_load(job, group, reader, os.path.join(
            args.dir, f"digest-peer.{job.rank}"))
        reader.close()
        if job.rank == 0:
            print(f"dcp peer-load t_rtvl {took:.4f}", flush=True)

    with open(os.path.join(args.dir, "latest")) as f:
        name = f.read().strip()
    reader = reader_class()(
        os.path.join(args.dir, "fetched", f"rank{job.rank}"), args.storage,
        name + "-")
    took = timed_load(job, group, reader,
                      os.path.join(args.dir, f"digest.{job.rank}"))
    get, got = job.max(reader.get_s, reader.get_bytes)
    if job.rank == 0:
        print(f"dcp load t_rtvl {took:.4f} get {get:.4f} bytes "
              f"{int(got)}", flush=True)


def main():
    args = parse_args()
    if not args.worker or not args.dir or not args.storage:
        sys.exit("dcp_wasted: --worker save|load, --dir and --storage "
                 "are needed (perf/dcp_wasted.sh runs it)")
    import torch
    import torch.distributed as dist
    import tacl_torch  # noqa: F401  (registers the backend)

    torch.set_num_threads(1)
    dist.init_process_group("tacl")
    # DCP's plan collectives run in async_save's thread: a group of their
    # own keeps the training's communicator to the main thread.
    group = dist.new_group()
    job = Job(torch, args)
    if args.worker == "save":
        save_phase(job, args, group)
    else:
        load_phase(job, args, group)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
