#!/usr/bin/env python3
"""tacl_torch's compressed collectives, DDP hook and FSDP2 reduce-scatter,
on 2 CPU ranks under torchrun (run_torch.sh):

- fp16 all-reduce (scheme sum) bit for bit against the float16 sum of
  the ranks' float16 casts; "auto" within the cast's bound; fp16 and
  bf16 with a residual: the residual after is what the cast rounded away;
- topk with error feedback, two steps: what was sent plus the residual
  is the input (plus the last residual) bit for bit, exactly ceil(density
  n) values sent, none dropped larger than one sent, and the result the
  sum of what the ranks sent;
- the same through DDP: the fp16 hook's gradients bit for bit against
  the reference, and the topk hook's residual per bucket on the first
  step;
- DDP training, 30 steps, with no hook, the fp16 hook and the topk hook
  with error feedback: each learns and ends near the uncompressed loss;
- compressed reduce-scatter (fp16 exact; topk's residual; hops "inter"
  dense on one node) and FSDP2's
  custom reduce-scatter training near FSDP2's own;
- bad arguments: each raises naming the argument, and the ranks still
  agree afterwards;
- torch's powerSGD_hook (whose callback waits on a tacl future) runs
  past its first PowerSGD step, the replicas equal;
- profile_model: an MLP's gradients in ready order with their bytes and
  times, read back by tacl-plan.

Exit 0 when all pass, 1 when one fails, 77 without torch.
"""
import faulthandler
import math
import os
import subprocess
import tempfile
import sys
import traceback
from datetime import timedelta

try:
    import torch
    import torch.distributed as dist
except ImportError as e:
    print(f"skipped: no torch ({e})")
    sys.exit(77)

import tacl_torch  # noqa: E402

STEPS = 30
# How far the mean loss of the last 5 steps of a compressed run may be
# from the uncompressed run's, as a share of what the uncompressed run
# removed (its first 5 steps' mean minus its last 5 steps').
FP16_RTOL = 0.01
TOPK_RTOL = 0.2
FAILED = []


def check(cond, what):
    if not cond:
        FAILED.append(what)
        print(f"rank {dist.get_rank()}: FAIL {what}", file=sys.stderr,
              flush=True)


def gather(t):
    """Every rank's t, in rank order (a plain all-gather copies)."""
    out = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(out, t.contiguous())
    return out


def fp16_sum(parts):
    """What scheme sum computes: the float16 casts added as float16."""
    acc = parts[0].half()
    for p in parts[1:]:
        acc = acc + p.half()
    return acc.float()


def data(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=g)


def test_fp16():
    rank = dist.get_rank()
    x = data(4097, 10 + rank)
    y = x.clone()
    tacl_torch.compressed_all_reduce(y, codec="fp16", scheme="sum")
    xs = gather(x)
    check(torch.equal(y, fp16_sum(xs)), "fp16 sum: not the float16 sum")
    z = x.clone()
    tacl_torch.compressed_all_reduce(z, codec="fp16")
    exact = sum(p.double() for p in xs)
    bound = 2.0 ** -11 * (sum(p.abs().double() for p in xs) + exact.abs())
    check(bool(((z.double() - exact).abs() <= bound).all()),
          "fp16 auto: beyond the cast's bound")
    # A bfloat16 tensor is staged through float32 and written back.
    b = x.to(torch.bfloat16)
    tacl_torch.compressed_all_reduce(b, codec="fp16", scheme="sum")
    check(torch.equal(b, fp16_sum([p.to(torch.bfloat16).float()
                                   for p in xs]).to(torch.bfloat16)),
          "fp16 on bfloat16 input: not the staged sum")
    # With a residual, the input plus the residual is what is cast, and
    # the residual after keeps what the cast rounded away, bit for bit;
    # bf16 the same on its own type.
    for codec, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        err = data(4097, 20 + rank) * 1e-3
        pre = x + err
        r = x.clone()
        tacl_torch.compressed_all_reduce(r, codec=codec, scheme="sum",
                                         error_feedback=err)
        check(torch.equal(err, pre - pre.to(dtype).float()),
              f"{codec} residual: not what the cast rounded away")
        acc = None
        for p in gather(pre):
            acc = p.to(dtype) if acc is None else acc + p.to(dtype)
        check(torch.equal(r, acc.float()),
              f"{codec} sum with residual: not the sum of the casts")


def test_async():
    """async_op=True returns before the peers even issue theirs (rank 1
    waits for rank 0's key first), several run at once, and each ends
    with the blocking call's result, averaged where asked."""
    rank = dist.get_rank()
    store = dist.distributed_c10d._get_default_store()
    # The first _nb call on the group splits the worker's communicator,
    # which waits for every rank.
    tacl_torch.compressed_all_reduce(torch.ones(8), codec="fp16",
                                     scheme="sum", async_op=True).wait()
    x = data(3000, 40 + rank)
    y = x.clone()
    if rank == 0:
        work = tacl_torch.compressed_all_reduce(y, codec="fp16",
                                                scheme="sum", async_op=True)
        store.set("comp-async-issued", "1")
    else:
        try:
            store.wait(["comp-async-issued"], timedelta(seconds=60))
            returned = True
        except Exception:  # noqa: BLE001
            returned = False
        check(returned, "async compressed all_reduce: rank 0 did not "
              "return before rank 1 issued")
        work = tacl_torch.compressed_all_reduce(y, codec="fp16",
                                                scheme="sum", async_op=True)
    check(work.wait() and work.is_completed() and work.is_success(),
          "async compressed all_reduce: not complete after wait")
    xs = gather(x)
    check(torch.equal(y, fp16_sum(xs)), "async fp16 sum: not the float16 "
          "sum")
    # In flight together, one averaged, one staged from bfloat16, one
    # reduce-scatter; each finished (averaged, written back) by its wait.
    a, b = x.clone(), x.to(torch.bfloat16)
    world = dist.get_world_size()
    xr = data(1500 * world, 60 + rank)
    out = torch.empty(1500)
    works = [tacl_torch.compressed_all_reduce(a, codec="fp16", scheme="sum",
                                              op=dist.ReduceOp.AVG,
                                              async_op=True),
             tacl_torch.compressed_all_reduce(b, codec="fp16", scheme="sum",
                                              async_op=True),
             tacl_torch.compressed_reduce_scatter(out, xr, codec="fp16",
                                                  scheme="sum",
                                                  async_op=True)]
    vals = [w.get_future().wait() for w in works]
    works[0].wait()
    check(torch.equal(a, fp16_sum(xs) / dist.get_world_size()) and
          vals[0][0] is a, "async AVG: not the float16 sum over the size")
    check(torch.equal(b, fp16_sum([p.to(torch.bfloat16).float()
                                   for p in xs]).to(torch.bfloat16)),
          "async on bfloat16: not the staged sum written back")
    check(torch.equal(out, fp16_sum(gather(xr))[rank * 1500:
                                                (rank + 1) * 1500]),
          "async reduce-scatter: not this rank's block of the sum")


def check_topk_step(x, err_before, err_after, k, what):
    """x + err_before = sent + err_after bit for bit, sent has k values,
    none dropped larger than one sent; returns sent."""
    pre = x + err_before
    sent = pre - err_after
    check(torch.equal(sent + err_after, pre), f"{what}: sent + residual "
          "is not the input")
    check(bool(((sent == 0) | (err_after == 0)).all()),
          f"{what}: a value both sent and kept")
    check(int((sent != 0).sum()) == k, f"{what}: {int((sent != 0).sum())} "
          f"values sent, not {k}")
    kept = sent[sent != 0].abs()
    dropped = err_after[sent == 0].abs()
    if kept.numel() and dropped.numel():
        check(float(kept.min()) >= float(dropped.max()),
              f"{what}: a dropped value larger than a sent one")
    return sent


def test_topk_error_feedback():
    rank = dist.get_rank()
    n, density = 1000, 0.01
    k = math.ceil(density * n)
    err = torch.zeros(n)
    for step in range(2):
        x = data(n, 100 * step + rank)
        before = err.clone()
        y = x.clone()
        tacl_torch.compressed_all_reduce(y, codec="topk", density=density,
                                         error_feedback=err, scheme="gather")
        sent = check_topk_step(x, before, err, k, f"topk step {step}")
        check(torch.equal(y, sum(gather(sent))),
              f"topk step {step}: the result is not the sum of what the "
              "ranks sent")


def make_model(width=64):
    torch.manual_seed(1234)
    return torch.nn.Sequential(
        torch.nn.Linear(16, width), torch.nn.Tanh(),
        torch.nn.Linear(width, width), torch.nn.Tanh(),
        torch.nn.Linear(width, 1))


def batch(step, rank, size=32):
    """A learnable target: a fixed random teacher's tanh(x w)."""
    w = torch.randn(16, 1, generator=torch.Generator().manual_seed(99)) / 4
    g = torch.Generator().manual_seed(100003 * step + rank)
    x = torch.randn(size, 16, generator=g)
    return x, torch.tanh(x @ w)


def ddp(model, state=None, hook=None, bucket_mb=0.01):
    m = torch.nn.parallel.DistributedDataParallel(
        model, bucket_cap_mb=bucket_mb)
    if state is not None:
        m.register_comm_hook(state, hook or tacl_torch.compression_hook)
    return m


def local_grads(step):
    """This rank's own gradients of the first step (no DDP)."""
    model = make_model()
    x, y = batch(step, dist.get_rank())
    torch.nn.functional.mse_loss(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


def test_ddp_fp16_hook():
    """Two backward passes (DDP rebuilds its buckets after the first),
    the parameters unchanged: every gradient bit for bit."""
    state = tacl_torch.CompressionState(codec="fp16", scheme="sum",
                                        error_feedback=False)
    model = ddp(make_model(), state)
    for step in range(2):
        x, y = batch(step, dist.get_rank())
        torch.nn.functional.mse_loss(model(x), y).backward()
        mine = local_grads(step)
        for i, p in enumerate(model.parameters()):
            ref = fp16_sum(gather(mine[i])) / dist.get_world_size()
            check(torch.equal(p.grad, ref), f"fp16 hook step {step}: "
                  f"gradient {i} is not the float16 sum / world")
        model.zero_grad()
    check(state.calls >= 3, f"fp16 hook: {state.calls} buckets in two steps "
          "(expected several with bucket_cap_mb 0.01)")


def test_ddp_topk_hook():
    """Each bucket of two steps: the residual before plus the input is
    what was sent plus the residual after, and the result the mean of
    what the ranks sent."""
    density = 0.05
    state = tacl_torch.CompressionState(codec="topk", density=density,
                                        scheme="gather", min_bytes=0)
    seen = []

    def hook(st, bucket):
        inp = bucket.buffer().clone()
        before = st.residual(bucket.index(), inp.numel()).clone()
        i = bucket.index()
        fut = tacl_torch.compression_hook(st, bucket)

        def record(f):
            # The hook returns before the call ends: read the residual
            # and the result when its future completes.
            out = f.value()
            seen.append((i, inp, before, st.residuals[i].clone(),
                         out.clone()))
            return out

        return fut.then(record)

    model = ddp(make_model(), state, hook)
    for step in range(2):
        x, y = batch(step, dist.get_rank())
        torch.nn.functional.mse_loss(model(x), y).backward()
        model.zero_grad()
    check(len(seen) >= 3, f"topk hook: {len(seen)} buckets in two steps")
    for j, (i, inp, before, err, out) in enumerate(seen):
        k = math.ceil(density * inp.numel())
        sent = check_topk_step(inp, before, err, k,
                               f"topk hook call {j} bucket {i}")
        check(torch.equal(out, sum(gather(sent)) / dist.get_world_size()),
              f"topk hook call {j} bucket {i}: the result is not the mean "
              "of what was sent")


def test_min_bytes():
    """A topk bucket below min_bytes goes through the plain all-reduce:
    the mean of the ranks' gradients, no residual; at or above it, the
    compressed call.  The same for FSDP2's reduce-scatter input."""
    model = make_model()
    small = max(4 * p.numel() for p in model.parameters()) + 4
    big = 4 * sum(p.numel() for p in model.parameters())
    for limit, dense in ((None, True), (big + 4, True), (small, False)):
        state = tacl_torch.CompressionState(codec="topk", density=0.05,
                                            scheme="gather",
                                            min_bytes=limit)
        m = ddp(make_model(), state, bucket_mb=25)
        x, y = batch(0, dist.get_rank())
        torch.nn.functional.mse_loss(m(x), y).backward()
        mine = local_grads(0)
        exact = all(torch.allclose(p.grad, sum(gather(mine[i])) /
                                   dist.get_world_size(), rtol=1e-6,
                                   atol=1e-7)
                    for i, p in enumerate(m.parameters()))
        what = f"min_bytes {limit} (model {big} bytes)"
        check(state.dense_calls == (1 if dense else 0),
              f"{what}: {state.dense_calls} dense calls")
        check(exact == dense, f"{what}: gradients "
              f"{'differ from' if dense else 'equal'} the plain mean")
        check(bool(state.residuals) != dense,
              f"{what}: residuals {list(state.residuals)}")
    check(tacl_torch.CompressionState(codec="fp16").min_bytes == 0,
          "fp16's default min_bytes is not 0")
    rs = tacl_torch.CompressedReduceScatter("topk", density=0.05)
    out, inp = torch.empty(8), torch.ones(16) * (dist.get_rank() + 1)
    rs(out, inp, dist.group.WORLD, dist.ReduceOp.SUM)
    check(rs.dense_calls == 1 and torch.equal(out, torch.full((8,), 3.0)),
          f"fsdp2 reduce-scatter below min_bytes: {rs.dense_calls} dense "
          f"calls, {out.tolist()}")


def train(state=None, steps=STEPS):
    model = ddp(make_model(), state, bucket_mb=25)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for step in range(steps):
        x, y = batch(step, dist.get_rank())
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        every = torch.stack(gather(loss.detach().reshape(1)))
        losses.append(float(every.mean()))
    return losses


def test_ddp_training():
    base = train()
    runs = {
        "fp16": (train(tacl_torch.CompressionState(codec="fp16")), FP16_RTOL),
        "topk 10% + EF": (train(tacl_torch.CompressionState(
            codec="topk", density=0.1, min_bytes=0)), TOPK_RTOL),
    }
    if dist.get_rank() == 0:
        print(f"ddp {STEPS} steps: none {base[0]:.4f} -> {base[-1]:.4f}; "
              + "; ".join(f"{k} {v[0][0]:.4f} -> {v[0][-1]:.4f}"
                          for k, v in runs.items()), flush=True)
    # Per-step losses are noisy (a new batch a step): means of 5 steps.
    def head(v):
        return sum(v[:5]) / 5

    def tail(v):
        return sum(v[-5:]) / 5

    check(tail(base) < 0.7 * head(base), "uncompressed run did not learn")
    learned = head(base) - tail(base)
    for name, (losses, rtol) in runs.items():
        check(tail(losses) < 0.7 * head(losses), f"{name}: did not learn")
        lost = (tail(losses) - tail(base)) / learned
        check(abs(lost) <= rtol, f"{name}: last 5 steps' loss "
              f"{tail(losses):.5f} against uncompressed {tail(base):.5f}: "
              f"{lost:.1%} of what training removed (bound {rtol:.0%})")


def test_reduce_scatter():
    rank, world = dist.get_rank(), dist.get_world_size()
    n = 513
    x = data(n * world, 300 + rank)
    out = torch.empty(n)
    tacl_torch.compressed_reduce_scatter(out, x, codec="fp16", scheme="sum")
    ref = fp16_sum(gather(x))[rank * n:(rank + 1) * n]
    check(torch.equal(out, ref), "fp16 reduce-scatter: not the float16 sum")
    err = torch.zeros(n * world)
    tacl_torch.compressed_reduce_scatter(out, x, codec="topk", density=0.02,
                                         error_feedback=err, scheme="gather",
                                         op=dist.ReduceOp.AVG)
    sent = check_topk_step(x, torch.zeros_like(x), err,
                           math.ceil(0.02 * n * world), "topk reduce-scatter")
    ref = (sum(gather(sent)) / world)[rank * n:(rank + 1) * n]
    check(torch.equal(out, ref), "topk reduce-scatter: not the mean of what "
          "was sent")
    # hops "inter" on one node: the links inside it stay dense, so the
    # exact sum (two ranks: one addition, the same in any order).
    tacl_torch.compressed_reduce_scatter(out, x, codec="topk", density=0.02,
                                         scheme="gather", hops="inter")
    ref = sum(gather(x))[rank * n:(rank + 1) * n]
    check(torch.equal(out, ref), "hops inter on one node: not the dense sum")


def test_fsdp2():
    try:
        from torch.distributed.fsdp import FSDPModule, fully_shard
        from torch.distributed.device_mesh import init_device_mesh
    except ImportError:
        print("fsdp2: skipped, torch has no fully_shard")
        return
    if not hasattr(FSDPModule, "set_custom_reduce_scatter"):
        print("fsdp2: skipped, torch has no set_custom_reduce_scatter")
        return
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))

    def run(codec):
        model = make_model()
        mods = [fully_shard(m, mesh=mesh) for m in model
                if isinstance(m, torch.nn.Linear)]
        mods.append(fully_shard(model, mesh=mesh))
        scatters = []
        if codec is not None:
            for m in mods:
                s = tacl_torch.CompressedReduceScatter(codec)
                m.set_custom_reduce_scatter(s)
                scatters.append(s)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        losses = []
        for step in range(12):
            x, y = batch(step, dist.get_rank())
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(float(torch.stack(
                gather(loss.detach().reshape(1))).mean()))
        return losses, sum(s.calls for s in scatters)

    base, _ = run(None)
    fp16, calls = run("fp16")
    if dist.get_rank() == 0:
        print(f"fsdp2 12 steps: own {base[0]:.4f} -> {base[-1]:.4f}; "
              f"fp16 {fp16[0]:.4f} -> {fp16[-1]:.4f}", flush=True)
    check(calls >= 12, f"fsdp2: the compressed reduce-scatter ran {calls} "
          "times")
    check(fp16[-1] < 0.9 * fp16[0], "fsdp2 fp16: did not learn")
    rel = abs(fp16[-1] - base[-1]) / base[-1]
    check(rel <= FP16_RTOL, f"fsdp2 fp16: final loss {rel:.1%} from FSDP2's "
          f"own (bound {FP16_RTOL:.0%})")


def test_torch_powersgd():
    """torch's powerSGD_hook on this backend: its callback waits for an
    all-reduce it starts, which another completion thread must finish
    (with one, the first PowerSGD step hung).  10 steps, PowerSGD from
    step 2; the replicas must stay equal."""
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
    faulthandler.dump_traceback_later(240, exit=True)
    state = powerSGD_hook.PowerSGDState(process_group=None,
                                        matrix_approximation_rank=1,
                                        start_powerSGD_iter=2)
    model = torch.nn.parallel.DistributedDataParallel(make_model())
    model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(10):
        x, y = batch(step, dist.get_rank())
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    faulthandler.cancel_dump_traceback_later()
    for i, p in enumerate(model.parameters()):
        both = gather(p.detach())
        check(torch.equal(both[0], both[1]), f"powerSGD: parameter {i} "
              "differs between the ranks")


def raises(what, name, f, *args, **kw):
    try:
        f(*args, **kw)
    except (ValueError, TypeError) as e:
        check(name in str(e), f"bad {what}: '{name}' not in: {e}")
        return
    check(False, f"bad {what}: no error")


def test_bad_inputs():
    t = torch.ones(64)
    car = tacl_torch.compressed_all_reduce
    raises("codec", "'nope'", car, t, codec="nope")
    raises("codec type", "codec", car, t, codec=3)
    raises("density 0", "density", car, t, codec="topk", density=0)
    raises("density 1.5", "density", car, t, codec="randk", density=1.5)
    raises("density type", "density", car, t, codec="topk", density="x")
    raises("bits", "bits", car, t, codec="int8", bits=3)
    raises("scheme", "scheme", car, t, scheme="best")
    raises("scheme sum on topk", "scheme sum", car, t, codec="topk",
           density=0.1, scheme="sum")
    raises("hops", "hops", car, t, hops="some")
    raises("op", "op", car, t, op=dist.ReduceOp.MAX)
    raises("dtype", "tensor", car, torch.ones(4, dtype=torch.int32))
    raises("not a tensor", "tensor", car, [1.0])
    raises("residual size", "error_feedback", car, t,
           error_feedback=torch.zeros(3))
    raises("residual dtype", "error_feedback", car, t,
           error_feedback=torch.zeros(64, dtype=torch.float64))
    raises("state plan", "groups", tacl_torch.CompressionState, plan="fusion")
    raises("state codec", "'nope'", tacl_torch.CompressionState,
           codec="nope")
    raises("state density", "density", tacl_torch.CompressionState,
           codec="threshold", density=-1)
    raises("rs size", "input", tacl_torch.compressed_reduce_scatter,
           torch.empty(5), torch.empty(7))
    raises("rs hops", "hops", tacl_torch.compressed_reduce_scatter,
           torch.empty(4), torch.empty(8), hops="some")
    raises("fsdp2 hops", "hops", tacl_torch.CompressedReduceScatter,
           hops="some")
    raises("fsdp2 codec", "density", tacl_torch.CompressedReduceScatter,
           "topk")
    raises("state min_bytes", "min_bytes", tacl_torch.CompressionState,
           codec="topk", density=0.1, min_bytes=-1)
    raises("fsdp2 min_bytes", "min_bytes",
           tacl_torch.CompressedReduceScatter, "fp16", min_bytes=1.5)
    # Nothing was sent: the ranks still agree.
    u = torch.full((8,), float(dist.get_rank() + 1))
    tacl_torch.compressed_all_reduce(u, codec="fp16", scheme="sum")
    check(torch.equal(u, torch.full((8,), 3.0)), "after bad inputs: the "
          "next call's result is wrong")


def test_profile():
    """profile_model on a 3-layer MLP (no communication): every weight and
    bias in gradient-ready order (the last layer's first), its bytes, the
    times non-negative and within the step; tacl-plan reads the file."""
    import os
    import subprocess
    import tempfile
    import time
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(),
                                torch.nn.Linear(64, 32), torch.nn.Tanh(),
                                torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = data(16 * 256, 40).reshape(256, 16), data(256, 41).reshape(256, 1)

    def after():
        opt.step()
        opt.zero_grad()
    t0 = time.perf_counter()
    prof = tacl_torch.profile_model(
        model, lambda: torch.nn.functional.mse_loss(model(x), y), steps=3,
        after=after)
    wall = time.perf_counter() - t0
    names = [n for n, _, _ in prof.tensors]
    check(sorted(names) == sorted(n for n, _ in model.named_parameters()),
          f"profile: tensors {names}")
    check(names.index("4.weight") < names.index("2.weight") <
          names.index("0.weight"),
          f"profile: not in gradient-ready order: {names}")
    sizes = dict(model.named_parameters())
    check(all(b == sizes[n].numel() * 4 for n, b, _ in prof.tensors),
          "profile: a tensor's bytes are not its gradient's")
    back = sum(s for _, _, s in prof.tensors)
    check(prof.forward > 0 and all(s >= 0 for _, _, s in prof.tensors) and
          prof.forward + back < wall,
          f"profile: forward {prof.forward} s, backward {back} s in "
          f"{wall} s for 4 steps")
    for bad in (0, -1):
        try:
            tacl_torch.profile_model(model, lambda: model(x).sum(),
                                     steps=bad)
            check(False, f"profile: steps {bad} accepted")
        except ValueError as e:
            check("steps" in str(e), f"profile: {e}")
    frozen = torch.nn.Linear(4, 4)
    for p in frozen.parameters():
        p.requires_grad_(False)
    try:
        tacl_torch.profile_model(frozen, lambda: frozen(x[:, :4]).sum())
        check(False, "profile: a model without trainable parameters")
    except ValueError as e:
        check("no trainable" in str(e), f"profile: {e}")
    plan = os.path.join(os.environ.get("TACL_BUILD_ROOT", ""), "planner",
                        "tacl-plan")
    if dist.get_rank() != 0 or not os.access(plan, os.X_OK):
        return
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "mlp.profile")
        prof.write(path)
        with open(path, "a") as f:
            f.write("comm 2 30e-6 1.4e-9 5.6e-9\n")
        out = subprocess.run([plan, path], capture_output=True, text=True,
                             timeout=60)
    check(out.returncode == 0 and "6 tensors" in out.stdout,
          f"profile: tacl-plan on the written profile: rc "
          f"{out.returncode}: {out.stdout[-300:]} {out.stderr[-300:]}")


def fusion_run(groups, codec="fp16", steps=2):
    """DDP on the plan's groups for `steps` backward passes: each step's
    gradients against the mean of the ranks' own (fp16 groups: of their
    float16 casts), bit for bit (two ranks: a + b in any order); the
    state, for its count of calls."""
    model = make_model()
    state = tacl_torch.CompressionState(codec=codec, scheme="sum",
                                        error_feedback=False, plan="fusion",
                                        groups=groups, model=model)
    option = {n: opt for opt, names in groups for n in names}
    m = ddp(model, state)
    for step in range(steps):
        x, y = batch(step, dist.get_rank())
        torch.nn.functional.mse_loss(m(x), y).backward()
        mine = local_grads(step)
        for i, (name, p) in enumerate(model.named_parameters()):
            parts = gather(mine[i])
            ref = (fp16_sum(parts) if option[name] != "none"
                   else sum(parts)) / dist.get_world_size()
            check(torch.equal(p.grad, ref), f"fusion step {step}: "
                  f"{name} ({option[name]}) is not the mean of the ranks'")
        m.zero_grad()
    return state


def test_ddp_fusion():
    """The planner's groups in the DDP hook: one call a group, not a
    bucket; tacl-plan's own output read back; bad plans named."""
    names = [n for n, _ in make_model().named_parameters()]
    ready = names[::-1]     # backward makes the last layer's ready first
    # Hand-made: the last two layers in float16, the first dense.
    groups = [("fp16", ready[:4]), ("none", ready[4:])]
    state = fusion_run(groups)
    check(state.calls == 4, f"fusion: {state.calls} calls in 2 steps of 2 "
          "groups (DDP's buckets: at least 3 a step)")
    # The whole model one group: one call a step.
    state = fusion_run([("none", ready)])
    check(state.calls == 2, f"fusion: {state.calls} calls in 2 steps of "
          "one group")
    # tacl-plan's groups for this model (rank 0 plans, all read them).
    plan = os.path.join(os.environ.get("TACL_BUILD_ROOT", ""), "planner",
                        "tacl-plan")
    got = [None]
    if dist.get_rank() == 0 and os.access(plan, os.X_OK):
        model = make_model()
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        x, y = batch(0, 0)

        def after():
            opt.step()
            opt.zero_grad()
        prof = tacl_torch.profile_model(
            model, lambda: torch.nn.functional.mse_loss(model(x), y),
            steps=2, after=after)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "mlp.profile")
            prof.write(path)
            with open(path, "a") as f:
                f.write("comm 2 30e-6 1.4e-9 5.6e-9\n")
            out = subprocess.run([plan, path], capture_output=True,
                                 text=True, timeout=60)
            with open(os.path.join(d, "plan"), "w") as f:
                f.write(out.stdout)
            got[0] = tacl_torch.read_plan(os.path.join(d, "plan"), prof)
            # A plan whose groups skip a tensor is refused.
            lines = out.stdout.splitlines()
            head = lines.index("first    last              bytes  option"
                               ) if "first    last              bytes  "\
                "option" in lines else None
            if head is not None and len(got[0]) > 1:
                bad = lines[:head + 1] + lines[head + 2:]
                with open(os.path.join(d, "bad"), "w") as f:
                    f.write("\n".join(bad) + "\n")
                raises("plan file", "group 0", tacl_torch.read_plan,
                       os.path.join(d, "bad"), prof)
    dist.broadcast_object_list(got, src=0)
    if got[0] is not None:
        planned = got[0]
        check(sorted(n for _, ns in planned for n in ns) == sorted(names),
              f"read_plan: the groups {planned} do not hold every "
              "parameter once")
        state = fusion_run(planned)
        check(state.calls == 2 * len(planned), f"fusion on tacl-plan's "
              f"{len(planned)} groups: {state.calls} calls in 2 steps")
        if dist.get_rank() == 0:
            print(f"fusion: tacl-plan's groups {[len(ns) for _, ns in planned]}"
                  f" ({', '.join(o for o, _ in planned)})", flush=True)
    # Bad plans, each named.
    model = make_model()

    def state(**kw):
        return tacl_torch.CompressionState(codec="fp16", plan="fusion",
                                           model=model, **kw)
    raises("fusion option", "'topk'", state,
           groups=[("topk", ready)])
    raises("fusion name", "'nope'", state,
           groups=[("none", ready + ["nope"])])
    raises("fusion twice", "twice", state,
           groups=[("none", ready), ("none", ready[:1])])
    raises("fusion missing", "leaves out", state,
           groups=[("none", ready[1:])])
    raises("fusion without groups", "groups",
           tacl_torch.CompressionState, plan="fusion")
    raises("plan", "'best'", tacl_torch.CompressionState, plan="best")


TESTS = [test_fp16, test_async, test_topk_error_feedback, test_ddp_fp16_hook,
         test_ddp_topk_hook, test_min_bytes, test_reduce_scatter,
         test_bad_inputs, test_ddp_training, test_fsdp2, test_torch_powersgd,
         test_profile, test_ddp_fusion]


def main():
    torch.set_num_threads(1)
    dist.init_process_group("tacl")
    only = sys.argv[1:]
    for t in TESTS:
        if only and t.__name__ not in only:
            continue
        before = len(FAILED)
        try:
            t()
        except Exception:
            traceback.print_exc()
            FAILED.append(f"{t.__name__} raised")
        if dist.get_rank() == 0:
            print(f"{t.__name__}: "
                  f"{'ok' if len(FAILED) == before else 'FAILED'}",
                  flush=True)
    flag = torch.tensor([len(FAILED)])
    dist.all_reduce(flag)
    dist.destroy_process_group()
    return 1 if flag.item() else 0


if __name__ == "__main__":
    sys.exit(main())
