"""Every collective of the tacl backend against the same call on gloo.

Run under torchrun (tests/torch/run_torch.sh does it, on 2 and 4 ranks).
The default group is tacl; a second group over the same ranks is gloo.
Each check runs the call on both and compares:

- bit for bit wherever the result does not depend on the order of a
  reduction: every integer type, MIN/MAX, copies, and floating-point
  sums of small integers (exact in any order, so tacl's and gloo's
  different reduction orders still agree to the bit);
- with a tolerance for sums of random floats (rounding depends on the
  order in which ranks' values are added, and tacl's algorithms add in
  another order than gloo's), and for the DDP gradients.

Where gloo lacks a dtype or op (AVG, unsigned types, ...) the expected
result is computed locally from every rank's input, which each rank can
regenerate from its seed.  Any mismatch is printed and fails the run.
"""
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

import tacl_torch

R = dist.ReduceOp
failures = []


def check(name, ok, detail=""):
    if not ok:
        failures.append(name)
        print(f"[rank {RANK}] FAIL {name} {detail}", flush=True)


def same(a, b):
    """Bit-for-bit equality (NaN-free data)."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def close(a, b, rtol=1e-5, atol=1e-6):
    return a.shape == b.shape and torch.allclose(a.double(), b.double(),
                                                 rtol=rtol, atol=atol)


def data(rank, n, dtype, salt=0, low=None, high=None):
    """Rank's deterministic input: small integers in every dtype."""
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    lo = 0 if low is None else low
    hi = (5 if dtype.is_floating_point or dtype.is_complex else 100) \
        if high is None else high
    if dtype.is_complex:
        re = torch.randint(lo, hi, (n,), generator=g).float()
        im = torch.randint(lo, hi, (n,), generator=g).float()
        return torch.complex(re, im).to(dtype)
    return torch.randint(lo, hi, (n,), generator=g).to(dtype)


DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.bool,
          torch.complex64, torch.uint32, torch.uint64]
INTS = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.uint32,
        torch.uint64]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def local_reduce(ts, op):
    """The reference reduction of a list of tensors, in float64/int64."""
    wide = [t.to(torch.float64) if t.dtype.is_floating_point
            else t.to(torch.int64) for t in ts]
    out = wide[0].clone()
    for t in wide[1:]:
        if op == R.SUM or op == R.AVG:
            out = out + t
        elif op == R.PRODUCT:
            out = out * t
        elif op == R.MIN:
            out = torch.minimum(out, t)
        elif op == R.MAX:
            out = torch.maximum(out, t)
        elif op == R.BAND:
            out = out & t
        elif op == R.BOR:
            out = out | t
        elif op == R.BXOR:
            out = out ^ t
    if op == R.AVG:
        out = out / len(ts) if out.dtype.is_floating_point \
            else torch.div(out, len(ts), rounding_mode="trunc")
    return out.to(ts[0].dtype)


def reference(fn, expected_fn):
    """gloo's result, or the local one where gloo refuses the call."""
    try:
        return fn(), "gloo"
    except (RuntimeError, ValueError, TypeError, NotImplementedError):
        return expected_fn(), "local"


# ---------------------------------------------------------------- checks


def ops_for(dtype):
    if dtype == torch.bool:
        return [R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR]
    if dtype.is_complex:
        return [R.SUM, R.AVG]
    ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
    if dtype.is_floating_point:
        ops.append(R.AVG)
    if dtype in INTS:
        ops += [R.BAND, R.BOR, R.BXOR]
    return ops


def test_allreduce():
    n = 37
    for dtype in DTYPES:
        for op in ops_for(dtype):
            high = 3 if op == R.PRODUCT else None
            mine = data(RANK, n, dtype, 1, high=high)
            ours = mine.clone()
            dist.all_reduce(ours, op=op)
            everyone = [data(r, n, dtype, 1, high=high) for r in range(WORLD)]

            def on_gloo():
                t = mine.clone()
                dist.all_reduce(t, op=op, group=GLOO)
                return t
            ref, src = reference(on_gloo,
                                 lambda: local_reduce(everyone, op))
            check(f"all_reduce {dtype} {op} vs {src}", same(ours, ref),
                  f"{ours[:6]} vs {ref[:6]}")
    # PREMUL_SUM: scaled by a power of two, exact.
    for dtype in FLOATS:
        mine = data(RANK, n, dtype, 2)
        ours = mine.clone()
        dist.all_reduce(ours, op=dist._make_nccl_premul_sum(0.5))
        ref = local_reduce([data(r, n, dtype, 2) * 0.5 for r in range(WORLD)],
                           R.SUM)
        check(f"all_reduce {dtype} PREMUL_SUM", same(ours, ref))
    # Random floats: sums differ in the last bits with the order.
    g = torch.Generator().manual_seed(RANK)
    x = torch.randn(100_000, generator=g)
    ours, theirs = x.clone(), x.clone()
    dist.all_reduce(ours)
    dist.all_reduce(theirs, group=GLOO)
    check("all_reduce random float32 (tolerance)", close(ours, theirs))
    # Non-contiguous tensors.
    ours = data(RANK, 64, torch.int32, 3).view(8, 8).t()
    theirs = ours.contiguous()
    dist.all_reduce(ours)
    dist.all_reduce(theirs, group=GLOO)
    check("all_reduce non-contiguous", not ours.is_contiguous() and
          same(ours, theirs))


def test_allreduce_coalesced():
    ts = [data(RANK, k, torch.float32, 10 + k) for k in (5, 1000, 33)]
    ours = [t.clone() for t in ts]
    with dist._coalescing_manager(async_ops=True) as cm:
        for t in ours:
            dist.all_reduce(t)
    cm.wait()
    for k, t in enumerate(ts):
        theirs = t.clone()
        dist.all_reduce(theirs, group=GLOO)
        check(f"all_reduce coalesced [{k}]", same(ours[k], theirs))


def test_broadcast_reduce():
    for dtype in DTYPES:
        root = WORLD - 1
        ours = data(RANK, 19, dtype, 20)
        dist.broadcast(ours, src=root)
        check(f"broadcast {dtype}", same(ours, data(root, 19, dtype, 20)))
    for dtype in [torch.int32, torch.float32, torch.bfloat16]:
        for op in [R.SUM, R.MAX, R.MIN]:
            root = 1 % WORLD
            ours = data(RANK, 23, dtype, 21)
            dist.reduce(ours, dst=root, op=op)
            if RANK == root:
                ref = local_reduce([data(r, 23, dtype, 21)
                                    for r in range(WORLD)], op)
                check(f"reduce {dtype} {op}", same(ours, ref))


def test_allgather():
    for dtype in DTYPES:
        mine = data(RANK, 11, dtype, 30)
        outs = [torch.empty_like(mine) for _ in range(WORLD)]
        dist.all_gather(outs, mine)
        check(f"all_gather {dtype}",
              all(same(outs[r], data(r, 11, dtype, 30)) for r in range(WORLD)))
        big = torch.empty(WORLD * 11, dtype=dtype)
        dist.all_gather_into_tensor(big, mine)
        check(f"all_gather_into_tensor {dtype}",
              same(big, torch.cat([data(r, 11, dtype, 30)
                                   for r in range(WORLD)])))
    # The coalesced form, against gloo one call at a time.
    check_coalesced("all_gather_into_tensor", dist.all_gather_into_tensor,
                    tacl_torch.all_gather_coalesced,
                    [data(RANK, k, torch.float32, 31 + k) for k in (3, 300)],
                    lambda t: WORLD * t.numel())


def check_coalesced(name, call, export, ins, out_numel):
    """call(out, inp, group=...) on several tensors through c10d's
    coalescing manager (one tacl_*_coalesced call), against gloo one call
    at a time, and against tacl_torch's own coalesced export."""
    outs = [torch.empty(out_numel(t)) for t in ins]
    with dist._coalescing_manager(async_ops=True) as cm:
        for o, i in zip(outs, ins):
            call(o, i)
    cm.wait()
    for k, (o, i) in enumerate(zip(outs, ins)):
        ref = torch.empty_like(o)
        call(ref, i, group=GLOO)
        check(f"{name} coalesced [{k}] vs gloo", same(o, ref))
    outs2 = [torch.empty_like(o) for o in outs]
    export(outs2, ins)
    check(f"tacl_torch's {name} coalesced",
          all(same(a, b) for a, b in zip(outs, outs2)))


def test_gather_scatter():
    root = WORLD - 1
    for dtype in [torch.int64, torch.float16, torch.bool]:
        mine = data(RANK, 9, dtype, 40)
        outs = [torch.empty_like(mine) for _ in range(WORLD)] \
            if RANK == root else None
        dist.gather(mine, outs, dst=root)
        if RANK == root:
            check(f"gather {dtype}", all(same(outs[r], data(r, 9, dtype, 40))
                                         for r in range(WORLD)))
        ins = [data(100 + r, 9, dtype, 41) for r in range(WORLD)] \
            if RANK == root else None
        out = torch.empty(9, dtype=dtype)
        dist.scatter(out, ins, src=root)
        check(f"scatter {dtype}", same(out, data(100 + RANK, 9, dtype, 41)))


def test_reduce_scatter():
    for dtype in [torch.int32, torch.int8, torch.float32, torch.bfloat16,
                  torch.float64]:
        for op in [R.SUM, R.MAX, R.MIN]:
            big = data(RANK, WORLD * 13, dtype, 50)
            out = torch.empty(13, dtype=dtype)
            dist.reduce_scatter_tensor(out, big, op=op)

            def on_gloo():
                t = torch.empty(13, dtype=dtype)
                dist.reduce_scatter_tensor(t, big, op=op, group=GLOO)
                return t
            everyone = [data(r, WORLD * 13, dtype, 50) for r in range(WORLD)]
            ref, src = reference(
                on_gloo, lambda: local_reduce(everyone, op)
                [RANK * 13:(RANK + 1) * 13])
            check(f"reduce_scatter_tensor {dtype} {op} vs {src}",
                  same(out, ref))
            ins = list(big.chunk(WORLD))
            out2 = torch.empty(13, dtype=dtype)
            dist.reduce_scatter(out2, ins, op=op)
            check(f"reduce_scatter list {dtype} {op}", same(out2, ref))
    # AVG and PREMUL_SUM (exact: power-of-two scales of small integers).
    big = data(RANK, WORLD * 8, torch.float32, 51)
    everyone = [data(r, WORLD * 8, torch.float32, 51) for r in range(WORLD)]
    out = torch.empty(8)
    dist.reduce_scatter_tensor(out, big, op=R.AVG)
    check("reduce_scatter_tensor AVG",
          same(out, local_reduce(everyone, R.AVG)[RANK * 8:(RANK + 1) * 8]))
    dist.reduce_scatter_tensor(out, big, op=dist._make_nccl_premul_sum(2.0))
    check("reduce_scatter_tensor PREMUL_SUM",
          same(out, 2 * local_reduce(everyone, R.SUM)[RANK * 8:(RANK + 1) * 8]))
    check_coalesced("reduce_scatter_tensor", dist.reduce_scatter_tensor,
                    tacl_torch.reduce_scatter_coalesced,
                    [data(RANK, WORLD * k, torch.float32, 52 + k)
                     for k in (4, 250)],
                    lambda t: t.numel() // WORLD)


def test_alltoall():
    for dtype in [torch.int32, torch.float32, torch.bfloat16, torch.uint8]:
        inp = data(RANK, WORLD * 6, dtype, 60).view(WORLD * 3, 2)
        ours = torch.empty_like(inp)
        dist.all_to_all_single(ours, inp)
        theirs = torch.empty_like(inp)
        dist.all_to_all_single(theirs, inp, group=GLOO)
        check(f"all_to_all_single even {dtype}", same(ours, theirs))
    # Uneven: rank r sends (r + p) % 3 + (p == 0) rows to rank p.
    rows = lambda src, dst: (src + dst) % 3 + (dst == 0)  # noqa: E731
    send = [rows(RANK, p) for p in range(WORLD)]
    recv = [rows(p, RANK) for p in range(WORLD)]
    inp = data(RANK, sum(send) * 3, torch.int64, 61).view(sum(send), 3)
    ours = torch.empty(sum(recv), 3, dtype=torch.int64)
    dist.all_to_all_single(ours, inp, recv, send)
    theirs = torch.empty_like(ours)
    dist.all_to_all_single(theirs, inp, recv, send, group=GLOO)
    check("all_to_all_single uneven vs gloo", same(ours, theirs))
    # List form, tensors of different sizes per peer.
    ins = [data(RANK, 2 + p, torch.float64, 62 + p) for p in range(WORLD)]
    outs = [torch.empty(2 + RANK, dtype=torch.float64) for _ in range(WORLD)]
    dist.all_to_all(outs, ins)
    check("all_to_all list", all(
        same(outs[p], data(p, 2 + RANK, torch.float64, 62 + RANK))
        for p in range(WORLD)))


def test_uneven():
    """Uneven all_to_all_single and all_gather run as tacl_alltoallv and
    tacl_allgatherv: results as gloo's, and one message per peer that
    has anything to move (a peer of zero rows gets none)."""
    # Mixture-of-experts dispatch: rank 0 sends every peer 2 + p rows of
    # 4, the others send rank 0 one row and nobody else anything.
    rows = lambda src, dst: (2 + dst if src == 0 else int(dst == 0))  # noqa
    send = [rows(RANK, p) for p in range(WORLD)]
    recv = [rows(p, RANK) for p in range(WORLD)]
    inp = data(RANK, sum(send) * 4, torch.float32, 70).view(sum(send), 4)
    ours = torch.empty(sum(recv), 4)
    tacl_torch.reset_counters()
    dist.all_to_all_single(ours, inp, recv, send)
    msgs = tacl_torch.counters()["messages"]
    theirs = torch.empty_like(ours)
    dist.all_to_all_single(theirs, inp, recv, send, group=GLOO)
    check("all_to_all_single dispatch vs gloo", same(ours, theirs))
    peers = sum(1 for p in range(WORLD) if p != RANK and send[p] > 0)
    check("all_to_all_single: a message per peer with rows", msgs == peers,
          f"{msgs} messages for {peers} peers")
    # all_gather of tensors of 1 + r elements from rank r.
    mine = data(RANK, 1 + RANK, torch.int64, 71)
    outs = [torch.empty(1 + r, dtype=torch.int64) for r in range(WORLD)]
    dist.all_gather(outs, mine)
    check("all_gather uneven", all(
        same(outs[r], data(r, 1 + r, torch.int64, 71))
        for r in range(WORLD)))


def test_p2p_barrier():
    nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    for dtype in [torch.float32, torch.int8, torch.complex64]:
        out = torch.empty(17, dtype=dtype)
        reqs = [dist.isend(data(RANK, 17, dtype, 70), nxt),
                dist.irecv(out, prv)]
        for q in reqs:
            q.wait()
        check(f"send/recv ring {dtype}", same(out, data(prv, 17, dtype, 70)))
    ops = [dist.P2POp(dist.isend, data(RANK, 5, torch.int32, 71), nxt),
           dist.P2POp(dist.irecv, torch.empty(5, dtype=torch.int32), prv)]
    for q in dist.batch_isend_irecv(ops):
        q.wait()
    check("batch_isend_irecv", same(ops[1].tensor, data(prv, 5, torch.int32,
                                                         71)))
    # Tags keep messages apart: tag 2's message, sent last, is received
    # first; tag 1's two in their order (MPI's rule).
    sends = [dist.isend(data(RANK, 4, torch.int64, 72 + k), nxt, tag=t)
             for k, t in enumerate([1, 1, 2])]
    got = [torch.empty(4, dtype=torch.int64) for _ in range(3)]
    dist.recv(got[2], prv, tag=2)
    dist.recv(got[0], prv, tag=1)
    dist.recv(got[1], prv, tag=1)
    for q in sends:
        q.wait()
    check("send/recv with tags", all(
        same(got[k], data(prv, 4, torch.int64, 72 + k)) for k in range(3)))
    # Receive from any source: rank 0 hears from every other rank once,
    # and recv() returns who sent.
    if RANK == 0:
        heard = set()
        for _ in range(WORLD - 1):
            t = torch.empty(3, dtype=torch.int32)
            src = dist.recv(t, tag=9)
            heard.add(src)
            check("recv from any source: payload of the sender",
                  same(t, data(src, 3, torch.int32, 75)))
        check("recv from any source: every sender once",
              heard == set(range(1, WORLD)), str(heard))
    else:
        dist.send(data(RANK, 3, torch.int32, 75), 0, tag=9)
    # all_gather_coalesced: outs[r][i] gets rank r's input i (gloo's
    # layout), inputs of different sizes and a complex one.
    ins = [data(RANK, 3, torch.float32, 76), data(RANK, 5, torch.float32, 77),
           data(RANK, 0, torch.float32, 78)]
    outs = [[torch.empty_like(x) for x in ins] for _ in range(WORLD)]
    dist.all_gather_coalesced(outs, ins)
    check("all_gather_coalesced", all(
        same(outs[p][i], data(p, len(ins[i]), torch.float32, 76 + i))
        for p in range(WORLD) for i in range(3)))
    cins = [data(RANK, 4, torch.complex64, 79)]
    couts = [[torch.empty_like(cins[0])] for _ in range(WORLD)]
    dist.all_gather_coalesced(couts, cins)
    check("all_gather_coalesced complex", all(
        same(couts[p][0], data(p, 4, torch.complex64, 79))
        for p in range(WORLD)))
    # c10d's coalescing manager: the calls inside become one tacl group
    # (startCoalescing/endCoalescing), as DeepSpeed's all_gather_coalesced
    # and MiCS use it.
    cpu = torch.device("cpu")
    check("the backend says it coalesces",
          dist.group.WORLD._get_backend(cpu).supports_coalescing)
    a, b = data(RANK, 6, torch.float32, 78), data(RANK, 9, torch.float32, 79)
    ag = [torch.empty(4 * WORLD), torch.empty(2 * WORLD)]
    ag_in = [data(RANK, 4, torch.float32, 80), data(RANK, 2, torch.float32,
                                                     81)]
    with dist._coalescing_manager(device=cpu, async_ops=True) as cm:
        dist.all_reduce(a)
        dist.all_reduce(b)
    cm.wait()
    check("coalesced all_reduce", same(a, local_reduce(
        [data(p, 6, torch.float32, 78) for p in range(WORLD)], R.SUM)) and
        same(b, local_reduce([data(p, 9, torch.float32, 79)
                              for p in range(WORLD)], R.SUM)))
    with dist._coalescing_manager(device=cpu, async_ops=True) as cm:
        for o, i in zip(ag, ag_in):
            dist.all_gather_into_tensor(o, i)
    cm.wait()
    check("coalesced all_gather_into_tensor", all(
        same(ag[k], torch.cat([data(p, len(ag_in[k]), torch.float32, 80 + k)
                               for p in range(WORLD)])) for k in range(2)))
    # monitored_barrier passes when all come, twice (nothing left over).
    dist.monitored_barrier(timeout=timedelta(seconds=20))
    dist.monitored_barrier(timeout=timedelta(seconds=20), wait_all_ranks=True)
    check("monitored_barrier passes when all come", True)
    # The barrier holds everyone until the last rank arrives.
    if RANK == 0:
        time.sleep(0.3)
    t0 = time.monotonic()
    flag = torch.tensor([time.time()], dtype=torch.float64)
    dist.barrier()
    dist.all_reduce(flag, op=R.MAX)
    check("barrier", RANK == 0 or time.monotonic() - t0 > 0.2,
          f"left after {time.monotonic() - t0:.3f} s")


def test_futures_without_wait():
    t = data(RANK, 1000, torch.float32, 80)
    ref = t.clone()
    dist.all_reduce(ref, group=GLOO)
    work = dist.all_reduce(t, async_op=True)
    seen = []
    work.get_future().then(lambda f: seen.append(f.value()[0].clone()))
    deadline = time.monotonic() + 30
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)  # nobody calls wait() or is_completed()
    check("future completes without wait", len(seen) == 1)
    if seen:
        check("future value", same(seen[0], ref))
    # Several in flight at once, including p2p.
    works = [dist.all_gather_into_tensor(torch.empty(WORLD * 50),
                                         data(RANK, 50, torch.float32, 81 + k),
                                         async_op=True) for k in range(4)]
    done = []
    for w in works:
        w.get_future().then(lambda f: done.append(1))
    deadline = time.monotonic() + 30
    while len(done) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    check("four futures complete without wait", len(done) == 4)


def test_synchronous_calls():
    """asyncOp false (torch's default, async_op=False) runs the operation
    to its end in the calling thread: the work comes back complete, and a
    failure of the operation itself, here a timeout, reaches wait()."""
    opts = dist.AllreduceOptions()
    opts.asyncOp = False
    t = data(RANK, 1000, torch.float32, 90)
    ref = t.clone()
    dist.all_reduce(ref, group=GLOO)
    w = dist.group.WORLD.allreduce([t], opts)
    check("a synchronous call's work is complete on return",
          w.is_completed())
    w.wait()
    check("a synchronous call's value", same(t, ref))
    seen = []
    w.get_future().then(lambda f: seen.append(1))
    check("a synchronous call's future is complete", seen == [1])
    # Its own communicator (an abort closes its bootstrap), a 2 s
    # timeout, and an all-reduce only rank 0 calls.
    store = dist.PrefixStore("sync_timeout/",
                             dist.distributed_c10d._get_default_store())
    b = tacl_torch.TaclBackend(store, RANK, WORLD, timedelta(seconds=2),
                               "sync_timeout")
    if RANK == 0:
        t0 = time.monotonic()
        msg = ""
        w = b.allreduce([torch.ones(2)], opts)
        check("a synchronous call that times out comes back complete",
              w.is_completed())
        try:
            w.wait()
            check("a synchronous call's timeout reaches wait()", False,
                  "no error raised")
        except Exception as err:  # noqa: BLE001
            msg = str(err)
            check("a synchronous call's timeout reaches wait()",
                  "no progress" in msg and "sync_timeout" in msg, msg)
        elapsed = time.monotonic() - t0
        check("a synchronous call times out after the group's timeout",
              1.5 < elapsed < 30, f"{elapsed:.1f} s")
        # torch's own barrier tests match these words.
        check("a timeout says \" Timed out \"", " Timed out " in msg, msg)
        print(f"sync_timeout: a 2 s timeout raised after {elapsed:.3f} s",
              flush=True)
    dist.barrier(group=GLOO)
    b.abort()


def test_subgroups():
    boots = tacl_torch.TaclBackend._bootstraps()
    # new_group of every rank: split from the default group, bound or not.
    w = dist.new_group(list(range(WORLD)))
    check("new_group of every rank made by split",
          w._get_backend(torch.device("cpu"))._from_split())
    t = data(RANK, 10, torch.int64, 89)
    dist.all_reduce(t, group=w)
    check("new_group of every rank all_reduce",
          same(t, local_reduce([data(r, 10, torch.int64, 89)
                                for r in range(WORLD)], R.SUM)))
    # new_group of ranks 0 and 1 (every rank calls it).
    g = dist.new_group([0, 1])
    if RANK < 2:
        t = data(RANK, 10, torch.int64, 90)
        dist.all_reduce(t, group=g)
        check("new_group([0,1]) all_reduce",
              same(t, data(0, 10, torch.int64, 90) +
                   data(1, 10, torch.int64, 90)))
        b = g._get_backend(torch.device("cpu"))
        check("new_group backend is tacl",
              isinstance(b, tacl_torch.TaclBackend))
        # Bound to a device, c10d hands the backend its split source; on
        # 2 ranks [0, 1] is every rank.  A subset on an unbound default
        # group is made by its members (c10d asks them only).
        want = "split" if BOUND or WORLD == 2 else "group"
        check("new_group([0,1]) made from the default group",
              b._made_by() == want, f"made by {b._made_by()}, not {want}")
    if WORLD >= 4:
        subsets_against_gloo()
    # split_group: halves (or the pair and the rest), split from the
    # parent's tacl communicator.
    halves = [list(range(0, WORLD // 2)), list(range(WORLD // 2, WORLD))] \
        if WORLD >= 4 else [[0, 1]]
    s = dist.split_group(split_ranks=halves)
    mine = next(h for h in halves if RANK in h)
    check("split_group membership", s is not None and
          dist.get_world_size(s) == len(mine))
    check("split_group made by tacl_comm_split",
          s._get_backend(torch.device("cpu"))._from_split())
    t = data(RANK, 10, torch.int32, 91)
    dist.all_reduce(t, group=s)
    check("split_group all_reduce",
          same(t, local_reduce([data(r, 10, torch.int32, 91) for r in mine],
                               R.SUM)))
    big = torch.empty(len(mine) * 4)
    dist.all_gather_into_tensor(big, torch.full((4,), float(RANK)), group=s)
    check("split_group all_gather_into_tensor",
          same(big, torch.cat([torch.full((4,), float(r)) for r in mine])))
    # Every subgroup came from the default group's communicator.
    made = tacl_torch.TaclBackend._bootstraps() - boots
    check("subgroups did not bootstrap", made == 0, f"{made} bootstraps")


def subsets_against_gloo():
    """new_group() of subsets, overlapping and made one after another (as
    DeepSpeed's hpZ and MiCS make them): tacl's collectives on each match
    gloo's on the same ranks, and on an unbound default group each was
    made by its members from the default group's communicator."""
    for k, ranks in enumerate([[1, 2, 3], [0, 3], [0, 2], [2, 3], [0, 1, 3]]):
        g = dist.new_group(ranks)
        ref = dist.new_group(ranks, backend="gloo")
        if RANK not in ranks:
            continue
        b = g._get_backend(torch.device("cpu"))
        want = "split" if BOUND else "group"
        check(f"new_group({ranks}) made from the default group",
              b._made_by() == want, f"made by {b._made_by()}, not {want}")
        t = data(RANK, 33, torch.float32, 120 + k)
        u = t.clone()
        dist.all_reduce(t, group=g)
        dist.all_reduce(u, group=ref)
        check(f"new_group({ranks}) all_reduce equals gloo's", close(t, u))
        t = data(RANK, 17, torch.int64, 130 + k)
        u = t.clone()
        dist.all_reduce(t, op=R.MAX, group=g)
        dist.all_reduce(u, op=R.MAX, group=ref)
        check(f"new_group({ranks}) all_reduce MAX equals gloo's", same(t, u))
        x = data(RANK, 8, torch.float32, 140 + k)
        out = torch.empty(len(ranks) * 8)
        ours = [torch.empty(8) for _ in ranks]
        dist.all_gather_into_tensor(out, x, group=g)
        dist.all_gather(ours, x, group=ref)
        check(f"new_group({ranks}) all_gather_into_tensor equals gloo's",
              same(out, torch.cat(ours)))


def test_counters():
    tacl_torch.reset_counters()
    zero = tacl_torch.counters()
    check("counters reset", zero["bytes"] == 0 and zero["messages"] == 0,
          str(zero))
    n = 4096
    out = torch.empty(WORLD * n)
    dist.all_gather_into_tensor(out, torch.ones(n))
    c = tacl_torch.counters()
    check("counters have the link classes",
          {"self", "host", "net"} <= set(c["links"]), str(c["links"]))
    check("counters have the transports", "shm" in c["transports"],
          str(c["transports"]))
    check("bytes are the sum of the links but self",
          c["bytes"] == sum(v["bytes"] for k, v in c["links"].items()
                            if k != "self"))
    # Every rank's block reaches the WORLD - 1 others at least once.
    every = torch.tensor([c["bytes"]], dtype=torch.int64)
    dist.all_reduce(every, group=GLOO)
    check("counted bytes cover the all-gather",
          every.item() >= WORLD * (WORLD - 1) * n * 4,
          f"{every.item()} bytes in all")
    check("counters of the world group are the default's",
          tacl_torch.counters(dist.group.WORLD)["bytes"] == c["bytes"])
    try:
        tacl_torch.counters(GLOO)
        check("counters of a gloo group refused", False)
    except RuntimeError as err:
        check("counters of a gloo group refused", "not tacl" in str(err),
              str(err))


def test_errors():
    def raises(name, fn, words):
        try:
            fn()
        except Exception as err:  # noqa: BLE001
            msg = str(err)
            check(name, all(w in msg for w in words),
                  f"message {msg!r} lacks {words}")
            return
        check(name, False, "no error raised")
    raises("int16 is refused, naming the dtype",
           lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)),
           ["tacl", "Short"])
    raises("a negative tag is refused, naming it",
           lambda: dist.send(torch.ones(2), (RANK + 1) % WORLD, tag=-3),
           ["tag -3"])
    raises("bool SUM is refused",
           lambda: dist.all_reduce(torch.ones(2, dtype=torch.bool)),
           ["bool", "sum"])
    # A tacl error carries tacl's message: BAND on float32.
    raises("tacl's own message reaches Python",
           lambda: dist.all_reduce(torch.ones(4), op=R.BAND),
           ["tacl", "float32"])
    # shutdown of a group, and abort of a communicator with its own
    # bootstrap (a split shares its parent's connections, which an abort
    # would close; every new_group() here is a split): the backend
    # refuses later calls, naming why.
    h = dist.new_group(list(range(WORLD)))
    b = h._get_backend(torch.device("cpu"))
    t = torch.ones(2)
    dist.all_reduce(t, group=h)
    dist.barrier(group=GLOO)
    b.shutdown()
    raises("no calls after shutdown",
           lambda: dist.all_reduce(torch.ones(2), group=h),
           ["aborted or shut down"])
    store = dist.PrefixStore("abort_test/",
                             dist.distributed_c10d._get_default_store())
    b = tacl_torch.TaclBackend(store, RANK, WORLD, timedelta(seconds=60),
                               "abort_test")
    t = torch.ones(2)
    b.allreduce([t]).wait()
    check("a bootstrapped backend works", same(t, torch.full((2,),
                                                             float(WORLD))))
    dist.barrier(group=GLOO)
    b.abort()
    raises("no calls after abort", lambda: b.allreduce([torch.ones(2)]),
           ["aborted or shut down"])
    # The default communicator still works after refused calls.
    t = torch.ones(3)
    dist.all_reduce(t)
    check("usable after errors", same(t, torch.full((3,), float(WORLD))))


def test_quantized():
    x = torch.linspace(-1, 1, 512) * (RANK + 1)
    out = torch.empty(WORLD * 512)
    tacl_torch.all_gather_quantized(out, x, bits=8, block=128)
    exact = torch.cat([torch.linspace(-1, 1, 512) * (r + 1)
                       for r in range(WORLD)])
    # Own block exact; the others within half a step of an 8-bit scale.
    check("all_gather_quantized own block exact",
          same(out[RANK * 512:(RANK + 1) * 512], x))
    check("all_gather_quantized within a step",
          close(out, exact, rtol=0, atol=WORLD / 127.0))
    big = torch.linspace(-1, 1, WORLD * 256) * (RANK + 1)
    rs = torch.empty(256)
    tacl_torch.reduce_scatter_quantized(rs, big, bits=8, block=256)
    ref = torch.empty(256)
    dist.reduce_scatter_tensor(ref, big, group=GLOO)
    check("reduce_scatter_quantized near gloo's sum",
          close(rs, ref, rtol=0, atol=0.1 * WORLD))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(32, 64)
        self.b = nn.Linear(64, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def ddp_grads(group):
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(Net(), process_group=group,
                                                bucket_cap_mb=0.01)
    g = torch.Generator().manual_seed(100 + RANK)
    x, y = torch.randn(16, 32, generator=g), torch.randn(16, 8, generator=g)
    nn.functional.mse_loss(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


def test_ddp():
    ours = ddp_grads(dist.group.WORLD)
    theirs = ddp_grads(GLOO)
    flat = torch.cat([g.reshape(-1) for g in ours])
    everyone = [torch.empty_like(flat) for _ in range(WORLD)]
    dist.all_gather(everyone, flat, group=GLOO)
    check("DDP gradients identical on every rank",
          all(same(everyone[0], e) for e in everyone))
    # Summed in another order than gloo's: equal within rounding.
    check("DDP gradients equal gloo's", all(close(a, b) for a, b in
                                            zip(ours, theirs)))


def sparse_input(salt, shape, sparse_dim, nnz):
    """A rank's uncoalesced sparse COO tensor: nnz entries (some indices
    repeated, as autograd leaves them), small integer values."""
    g = torch.Generator().manual_seed(5000 + 97 * RANK + salt)
    idx = torch.stack([torch.randint(0, shape[d], (nnz,), generator=g)
                       for d in range(sparse_dim)])
    vals = torch.randint(-4, 5, (nnz,) + tuple(shape[sparse_dim:]),
                         generator=g).float()
    return torch.sparse_coo_tensor(idx, vals, shape, check_invariants=True)


def test_sparse_allreduce():
    """all_reduce of sparse COO tensors, gloo's contract: the coalesced
    sum replaces the tensor; every scheme equals gloo's bit for bit."""
    cases = [((1000, 8), 1, 50), ((40, 30), 2, 60), ((500,), 1, 0 if RANK
                                                     == 1 else 20)]
    for k, (shape, sd, nnz) in enumerate(cases):
        for scheme in ["auto", "zen", "agsparse", "ps", "dense", "sparcml",
                       "omni", "agpadded", "zen_hier", "dense_zen"]:
            os.environ["TACL_TORCH_SPARSE"] = scheme
            t = sparse_input(k, shape, sd, nnz)
            u = t.clone()
            dist.all_reduce(t)
            dist.all_reduce(u, group=GLOO)
            u = u.coalesce()
            check(f"sparse all_reduce {shape}/{sd} {scheme}: coalesced",
                  t.is_coalesced())
            check(f"sparse all_reduce {shape}/{sd} {scheme} equals gloo's",
                  same(t._indices(), u._indices()) and
                  same(t._values(), u._values()),
                  f"{t._nnz()} rows against {u._nnz()}")
    os.environ.pop("TACL_TORCH_SPARSE")
    test_sparse_allreduce_async(cases)
    t = sparse_input(9, (10, 4), 1, 3)
    try:
        dist.all_reduce(t, op=R.MAX)
        check("sparse all_reduce MAX refused", False, "no error")
    except Exception as err:  # noqa: BLE001
        check("sparse all_reduce MAX refused with its reason",
              "only SUM" in str(err), str(err))


def test_sparse_allreduce_async(cases):
    """async_op=True (DDP's buckets): the call returns before the sum is
    done, several are in flight at once, and each work's tensor equals
    gloo's sum once it completes."""
    store = dist.distributed_c10d._get_default_store()
    # Every rank's first one splits the worker's communicator; after it,
    # rank 0's call must return while rank 1 has not even issued its own
    # (a blocking one would wait for rank 1, which waits for the key).
    warm = sparse_input(20, (100, 2), 1, 4)
    dist.all_reduce(warm, async_op=True).wait()
    t = sparse_input(21, (1000, 8), 1, 50)
    u = t.clone()
    if RANK == 0:
        work = dist.all_reduce(t, async_op=True)
        store.set("sparse-async-issued", "1")
    else:
        try:
            store.wait(["sparse-async-issued"], timedelta(seconds=60))
            returned = True
        except Exception:  # noqa: BLE001
            returned = False
        check("async sparse all_reduce returns before the peers issue",
              returned, "rank 0 did not return within 60 s")
        work = dist.all_reduce(t, async_op=True)
    work.wait()
    dist.all_reduce(u, group=GLOO)
    check("async sparse all_reduce equals gloo's after wait",
          t.is_coalesced() and same(t._indices(), u.coalesce()._indices())
          and same(t._values(), u.coalesce()._values()))
    # Several in flight, finished through their futures.
    ins = [sparse_input(30 + k, shape, sd, nnz)
           for k, (shape, sd, nnz) in enumerate(cases)]
    refs = [x.clone() for x in ins]
    works = [dist.all_reduce(x, async_op=True) for x in ins]
    for w in works:
        w.get_future().wait()
    for k, (x, r) in enumerate(zip(ins, refs)):
        dist.all_reduce(r, group=GLOO)
        r = r.coalesce()
        check(f"async sparse all_reduce {k} of {len(ins)} in flight "
              f"equals gloo's", x.is_coalesced() and
              same(x._indices(), r._indices()) and
              same(x._values(), r._values()))


def sparse_ddp_grads(group, find_unused):
    """DDP over an nn.Embedding(sparse=True): its gradient is a sparse
    tensor the backend's all_reduce sums."""
    torch.manual_seed(0)
    emb = nn.Embedding(300, 8, sparse=True)
    head = nn.Linear(8, 1)
    unused = nn.Linear(3, 3)
    model = nn.ModuleDict({"emb": emb, "head": head, "unused": unused})

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, tokens):
            return self.m["head"](self.m["emb"](tokens).mean(dim=1))

    ddp = nn.parallel.DistributedDataParallel(
        Net(), process_group=group, find_unused_parameters=find_unused)
    g = torch.Generator().manual_seed(300 + RANK)
    tokens = torch.randint(0, 300, (6, 5), generator=g)
    ddp(tokens).pow(2).sum().backward()
    return emb.weight.grad.coalesce(), head.weight.grad.clone()


def test_sparse_ddp():
    for find_unused in (False, True):
        ours, ours_dense = sparse_ddp_grads(dist.group.WORLD, find_unused)
        theirs, theirs_dense = sparse_ddp_grads(GLOO, find_unused)
        check(f"DDP sparse embedding gradient equals gloo's "
              f"(find_unused_parameters={find_unused})",
              same(ours._indices(), theirs._indices()) and
              close(ours._values(), theirs._values()))
        check("DDP dense gradient beside it equals gloo's",
              close(ours_dense, theirs_dense))


def main():
    global RANK, WORLD, GLOO, BOUND
    # --bind: the default group bound to a device, as NCCL users do; then
    # new_group() splits the default group's communicator.
    BOUND = "--bind" in sys.argv[1:]
    dist.init_process_group(
        "tacl", device_id=torch.device("cpu", 0) if BOUND else None)
    RANK, WORLD = dist.get_rank(), dist.get_world_size()
    GLOO = dist.new_group(backend="gloo")
    tests = [test_allreduce, test_allreduce_coalesced, test_broadcast_reduce,
             test_allgather, test_gather_scatter, test_reduce_scatter,
             test_alltoall, test_uneven, test_p2p_barrier, test_futures_without_wait,
             test_synchronous_calls, test_subgroups, test_counters,
             test_errors, test_quantized, test_ddp,
             test_sparse_allreduce, test_sparse_ddp]
    only = os.environ.get("TACL_TORCH_TESTS")
    if "--only" in sys.argv[1:]:
        only = sys.argv[sys.argv.index("--only") + 1]
    for t in tests:
        if only and t.__name__ not in only.split(","):
            continue
        t0 = time.monotonic()
        try:
            t()
        except Exception as err:  # noqa: BLE001
            check(t.__name__, False, f"raised {type(err).__name__}: {err}")
        if RANK == 0:
            print(f"{t.__name__}: {time.monotonic() - t0:.2f} s", flush=True)
    # Every rank's verdict, so rank 0 reports the whole run.
    bad = torch.tensor([len(failures)])
    dist.all_reduce(bad, group=GLOO)
    dist.destroy_process_group()
    if RANK == 0:
        print(f"{WORLD} ranks: {'FAILED' if bad.item() else 'all passed'} "
              f"({bad.item()} failed checks)", flush=True)
    sys.exit(1 if failures or bad.item() else 0)


RANK = WORLD = GLOO = BOUND = None
if __name__ == "__main__":
    main()
