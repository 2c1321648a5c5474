"""The tacl backend on CUDA tensors: processes sharing one GPU (device 0).

    python3 test_cuda.py [--nproc N]      (2 processes by default)

First, without torchrun, it checks what it needs: torch must see a CUDA
device and tacl_torch must be built with CUDA.  Without either it says
which and exits 77 (skipped), or 1 under TT_REQUIRE_GPU=1 (a GPU check,
where a skip is a failure).  Then it starts itself under torchrun
(torch.distributed.run) on N processes, each on device 0, which is how one
GPU tests the device path between processes (cuda_ipc).

Every check compares with the exact result, which each rank computes from
every rank's input (regenerated from the rank's seed): inputs are small
integers, so every sum, average by a power of two, product, minimum and
maximum is exact in every dtype and order.  The checks:
  every collective the backend serves (all_reduce with each op, broadcast,
  reduce, all_gather list and into a tensor, reduce_scatter list and from
  a tensor, all_to_all single with even and uneven splits and of lists,
  gather, scatter, send/recv, barrier, coalesced all_reduce), a
  non-contiguous output, async_op with futures (then() included), tacl's
  own quantized (within the quantization bound) and coalesced calls;
  async_op overlapped with a matmul on the same stream, the host not
  blocked by the GPU's work ahead of the call; one DDP step against the
  same step computed locally from every rank's data.
Prints "[rank r] FAIL ..." for each failure and a verdict; exit 1 on any.
"""
import os
import sys
import time

import torch

R = None  # torch.distributed.ReduceOp, once imported
failures = []
RANK = WORLD = None
DEV = None


def need():
    """Why this machine cannot run the test, or None."""
    if not torch.cuda.is_available():
        return (f"torch {torch.__version__} sees no CUDA device "
                "(torch.cuda.is_available() is False: no GPU or no driver)")
    try:
        import tacl_torch
    except ImportError as err:
        return f"tacl_torch cannot be imported: {err}"
    if not tacl_torch.TaclBackend._has_cuda():
        return ("tacl_torch was built without CUDA (torch without CUDA, "
                "no CUDA toolkit at its build, or TACL_TORCH_CUDA=0)")
    return None


def launch():
    nproc = 2
    if "--nproc" in sys.argv:
        nproc = int(sys.argv[sys.argv.index("--nproc") + 1])
    why = need()
    if why is not None:
        required = os.environ.get("TT_REQUIRE_GPU") == "1"
        print(f"test_cuda: {'FAILED' if required else 'skipped'}: {why}",
              flush=True)
        sys.exit(1 if required else 77)
    print(f"test_cuda: torch {torch.__version__} (CUDA {torch.version.cuda}),"
          f" {torch.cuda.get_device_name(0)}; {nproc} processes on device 0",
          flush=True)
    os.execv(sys.executable, [sys.executable, "-m", "torch.distributed.run",
                              "--standalone", "--nproc-per-node", str(nproc),
                              "--max-restarts", "0", os.path.abspath(__file__),
                              "--worker"])


# ---------------------------------------------------------------- helpers


def check(name, ok, detail=""):
    if not ok:
        failures.append(name)
        print(f"[rank {RANK}] FAIL {name} {detail}", flush=True)


def same(a, b):
    return (a.dtype == b.dtype and a.shape == b.shape and
            torch.equal(a.cpu(), b.cpu()))


def data(rank, n, dtype, salt, high=5):
    """Rank's input on the device: small integers of dtype."""
    g = torch.Generator().manual_seed(1000 * rank + salt)
    return torch.randint(0, high, (n,), generator=g).to(dtype).to(DEV)


def everyone(n, dtype, salt, high=5):
    return [data(r, n, dtype, salt, high) for r in range(WORLD)]


# The exact reduction of a list of tensors: test_collectives' reference,
# imported by worker() (it needs tacl_torch).
reduced = None


# ---------------------------------------------------------------- checks

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32,
          torch.int64, torch.uint8]


def test_allreduce(dist):
    for dtype in DTYPES:
        ops = [R.SUM, R.MIN, R.MAX, R.PRODUCT]
        if dtype.is_floating_point and WORLD in (1, 2, 4, 8):
            ops.append(R.AVG)   # a power of two: exact
        for op in ops:
            high = 3 if op == R.PRODUCT else 5
            t = data(RANK, 1001, dtype, 1, high)
            dist.all_reduce(t, op=op)
            check(f"all_reduce {dtype} {op}",
                  same(t, reduced(everyone(1001, dtype, 1, high), op)))
    # A non-contiguous output: copied back on the stream.
    t = data(RANK, 64, torch.float32, 2).view(8, 8).t()
    want = reduced([x.view(8, 8).t() for x in everyone(64, torch.float32, 2)],
                   R.SUM)
    dist.all_reduce(t)
    check("all_reduce non-contiguous", not t.is_contiguous() and same(t, want))
    # PREMUL_SUM by a power of two, exact.
    t = data(RANK, 100, torch.float32, 3)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    check("all_reduce PREMUL_SUM",
          same(t, reduced([x * 0.5 for x in everyone(100, torch.float32, 3)],
                          R.SUM)))
    # Coalesced.
    ts = [data(RANK, k, torch.float32, 10 + k) for k in (5, 1000, 33)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    for k, t in zip((5, 1000, 33), ts):
        check(f"all_reduce coalesced {k}",
              same(t, reduced(everyone(k, torch.float32, 10 + k), R.SUM)))


def test_broadcast_reduce(dist):
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        root = WORLD - 1
        t = data(RANK, 777, dtype, 20)
        dist.broadcast(t, src=root)
        check(f"broadcast {dtype}", same(t, data(root, 777, dtype, 20)))
        t = data(RANK, 333, dtype, 21)
        dist.reduce(t, dst=0, op=R.SUM)
        if RANK == 0:
            check(f"reduce {dtype}",
                  same(t, reduced(everyone(333, dtype, 21), R.SUM)))


def test_gathers(dist):
    n = 4099
    mine = data(RANK, n, torch.float32, 30)
    outs = [torch.empty_like(mine) for _ in range(WORLD)]
    dist.all_gather(outs, mine)
    check("all_gather list",
          all(same(o, e) for o, e in zip(outs, everyone(n, torch.float32,
                                                        30))))
    big = torch.empty(WORLD * n, device=DEV)
    dist.all_gather_into_tensor(big, mine)
    check("all_gather_into_tensor",
          same(big, torch.cat(everyone(n, torch.float32, 30))))
    ins = [data(RANK, n, torch.int32, 40 + p) for p in range(WORLD)]
    out = torch.empty(n, dtype=torch.int32, device=DEV)
    dist.reduce_scatter(out, ins)
    want = reduced([data(r, n, torch.int32, 40 + RANK)
                    for r in range(WORLD)], R.SUM)
    check("reduce_scatter list", same(out, want))
    src = data(RANK, WORLD * n, torch.float32, 50)
    out = torch.empty(n, device=DEV)
    dist.reduce_scatter_tensor(out, src)
    want = reduced(everyone(WORLD * n, torch.float32, 50),
                   R.SUM)[RANK * n:(RANK + 1) * n]
    check("reduce_scatter_tensor", same(out, want))
    # gather and scatter at root 0.
    outs = [torch.empty(n, device=DEV) for _ in range(WORLD)] \
        if RANK == 0 else None
    dist.gather(mine, outs, dst=0)
    if RANK == 0:
        check("gather", all(same(o, e) for o, e in
                            zip(outs, everyone(n, torch.float32, 30))))
    parts = [data(0, n, torch.float32, 60 + p) for p in range(WORLD)] \
        if RANK == 0 else None
    out = torch.empty(n, device=DEV)
    dist.scatter(out, parts, src=0)
    check("scatter", same(out, data(0, n, torch.float32, 60 + RANK)))


def test_alltoall(dist):
    n = 513
    src = data(RANK, WORLD * n, torch.float32, 70)
    out = torch.empty_like(src)
    dist.all_to_all_single(out, src)
    want = torch.cat([data(r, WORLD * n, torch.float32, 70)[RANK * n:
                                                             (RANK + 1) * n]
                      for r in range(WORLD)])
    check("all_to_all_single", same(out, want))
    # Uneven: rank r sends p + r + 1 rows to rank p.
    sends = [p + RANK + 1 for p in range(WORLD)]
    recvs = [RANK + r + 1 for r in range(WORLD)]
    src = data(RANK, sum(sends) * 3, torch.int32, 71).view(-1, 3)
    out = torch.empty(sum(recvs), 3, dtype=torch.int32, device=DEV)
    dist.all_to_all_single(out, src, recvs, sends)
    pieces = []
    for r in range(WORLD):
        theirs = data(r, sum(p + r + 1 for p in range(WORLD)) * 3,
                      torch.int32, 71).view(-1, 3)
        start = sum(p + r + 1 for p in range(RANK))
        pieces.append(theirs[start:start + RANK + r + 1])
    check("all_to_all_single uneven", same(out, torch.cat(pieces)))
    ins = [data(RANK, 100, torch.float32, 72 + p) for p in range(WORLD)]
    outs = [torch.empty(100, device=DEV) for _ in range(WORLD)]
    dist.all_to_all(outs, ins)
    check("all_to_all list", all(same(outs[r], data(r, 100, torch.float32,
                                                    72 + RANK))
                                 for r in range(WORLD)))


def test_p2p_barrier(dist):
    n = 1 << 16
    nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    out = torch.empty(n, device=DEV)
    reqs = [dist.isend(data(RANK, n, torch.float32, 80), nxt),
            dist.irecv(out, prv)]
    for r in reqs:
        r.wait()
    check("send/recv ring", same(out, data(prv, n, torch.float32, 80)))
    dist.barrier()


def test_async_futures(dist):
    t = data(RANK, 2048, torch.float32, 90)
    work = dist.all_reduce(t, async_op=True)
    doubled = work.get_future().then(lambda f: f.value()[0] * 2)
    work.wait()
    want = reduced(everyone(2048, torch.float32, 90), R.SUM)
    check("async all_reduce", same(t, want))
    check("future then()", same(doubled.wait(), want * 2))
    # Overlap: GPU work queued ahead of the call does not hold the host,
    # and a matmul after it on the same stream waits for its result.
    a = torch.randn(512, 512, device=DEV)
    t = data(RANK, 1 << 20, torch.float32, 91)
    torch.cuda._sleep(100_000_000)   # tens of milliseconds of GPU time
    start = time.monotonic()
    work = dist.all_reduce(t, async_op=True)
    returned = time.monotonic() - start
    c = a @ a + t[:512].view(1, -1)
    pending = not work.is_completed()
    work.wait()
    torch.cuda.synchronize()
    want = reduced(everyone(1 << 20, torch.float32, 91), R.SUM)
    check("async all_reduce behind GPU work", same(t, want))
    check("the call did not wait for the GPU", returned < 0.02 and pending,
          f"returned after {returned * 1e3:.1f} ms, pending {pending}")
    check("matmul after it saw the result",
          torch.allclose(c, a @ a + want[:512].view(1, -1)))


def test_tacl_calls(dist):
    import tacl_torch
    n = 4096
    mine = data(RANK, n, torch.float32, 100, high=100)
    out = torch.empty(WORLD * n, device=DEV)
    tacl_torch.all_gather_quantized(out, mine, bits=8)
    ref = torch.cat(everyone(n, torch.float32, 100, high=100))
    # Half a step of the largest magnitude (99 / 127) per element.
    check("all_gather_quantized",
          (out - ref).abs().max().item() <= 0.5 * 99 / 127 + 1e-4)
    src = data(RANK, WORLD * n, torch.float32, 101, high=100)
    out = torch.empty(n, device=DEV)
    tacl_torch.reduce_scatter_quantized(out, src, bits=8)
    want = reduced(everyone(WORLD * n, torch.float32, 101, high=100),
                   R.SUM)[RANK * n:(RANK + 1) * n]
    check("reduce_scatter_quantized",
          (out - want).abs().max().item() <= WORLD * (0.5 * 99 * WORLD / 127)
          + 1e-3)
    ins = [data(RANK, k, torch.float32, 110 + k) for k in (7, 300)]
    outs = [torch.empty(WORLD * k, device=DEV) for k in (7, 300)]
    tacl_torch.all_gather_coalesced(outs, ins)
    check("all_gather_coalesced",
          all(same(o, torch.cat(everyone(k, torch.float32, 110 + k)))
              for o, k in zip(outs, (7, 300))))
    ins = [data(RANK, WORLD * k, torch.float32, 120 + k) for k in (7, 300)]
    outs = [torch.empty(k, device=DEV) for k in (7, 300)]
    tacl_torch.reduce_scatter_coalesced(outs, ins)
    check("reduce_scatter_coalesced",
          all(same(o, reduced(everyone(WORLD * k, torch.float32, 120 + k),
                              R.SUM)[RANK * k:(RANK + 1) * k])
              for o, k in zip(outs, (7, 300))))


def test_ddp(dist):
    import torch.nn as nn

    def net():
        torch.manual_seed(5)
        return nn.Sequential(nn.Linear(32, 16), nn.ReLU(),
                             nn.Linear(16, 8)).to(DEV)

    def batch(r):
        g = torch.Generator().manual_seed(200 + r)
        return (torch.randn(16, 32, generator=g).to(DEV),
                torch.randn(16, 8, generator=g).to(DEV))

    model = nn.parallel.DistributedDataParallel(net(), device_ids=[DEV.index],
                                                bucket_cap_mb=0.01)
    x, y = batch(RANK)
    nn.functional.mse_loss(model(x), y).backward()
    # The same step, locally: the gradients averaged over every rank's
    # batch (summed in another order: equal within rounding).
    want = None
    for r in range(WORLD):
        local = net()
        xr, yr = batch(r)
        nn.functional.mse_loss(local(xr), yr).backward()
        grads = [p.grad / WORLD for p in local.parameters()]
        want = grads if want is None else [w + g for w, g in zip(want, grads)]
    check("DDP step", all(torch.allclose(p.grad, w, rtol=1e-5, atol=1e-6)
                          for p, w in zip(model.parameters(), want)))


def worker():
    global R, RANK, WORLD, DEV, reduced
    import torch.distributed as dist

    import tacl_torch  # noqa: F401  (registers the backend)
    from test_collectives import local_reduce
    reduced = local_reduce
    R = dist.ReduceOp
    torch.cuda.set_device(0)          # every process shares the one GPU
    DEV = torch.device("cuda", 0)
    dist.init_process_group("tacl")
    RANK, WORLD = dist.get_rank(), dist.get_world_size()
    tests = [test_allreduce, test_broadcast_reduce, test_gathers,
             test_alltoall, test_p2p_barrier, test_async_futures,
             test_tacl_calls, test_ddp]
    for t in tests:
        t0 = time.monotonic()
        try:
            t(dist)
            torch.cuda.synchronize()
        except Exception as err:  # noqa: BLE001
            check(t.__name__, False, f"raised {type(err).__name__}: {err}")
        if RANK == 0:
            print(f"{t.__name__}: {time.monotonic() - t0:.2f} s", flush=True)
    bad = torch.tensor([len(failures)], device=DEV)
    dist.all_reduce(bad)
    dist.destroy_process_group()
    if RANK == 0:
        print(f"test_cuda: {WORLD} processes on one GPU: "
              f"{'FAILED' if bad.item() else 'all passed'} "
              f"({bad.item()} failed checks)", flush=True)
    sys.exit(1 if failures or bad.item() else 0)


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker()
    else:
        launch()
