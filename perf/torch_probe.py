"""Where a rank's CPU goes during torch collectives on tacl.

    torchrun --standalone --nproc-per-node 4 perf/torch_probe.py \
        [--size MB] [--iters N] [--colls all_gather,reduce_scatter,all_reduce]
        [--perf PREFIX] [--stat PREFIX]

For each collective (float32, --size MB as nccl-tests counts it, the
buffers allocated once and reused, as perf/torch_bench.py times them):
three warm-up calls, a barrier, then --iters timed calls.  Each rank
prints one line: the wall time per call, its process's CPU time per call
(every thread, from /proc/self/task: the kernel counts it in clock ticks,
so use enough iterations), the context switches per call (voluntary and
not, every thread), the minor page faults per call, and the CPU per call
of its busiest threads by name (main: the Python thread; tacl-progress:
the library's progress thread; tacl-complete: the binding's completion
thread).  With --perf, rank 1 records the timed loop with `perf record -g`
into PREFIX.<collective> (see `perf report --sort pid,sym`); with --stat,
every rank counts it with `perf stat --per-thread` (task-clock, context
switches, page faults, and instructions and cycles where the machine
counts them) into PREFIX.<collective>.<rank>.
"""
import argparse
import collections
import os
import signal
import subprocess
import time

import torch
import torch.distributed as dist

import tacl_torch  # noqa: F401


def threads():
    """(cpu seconds by thread name, context switches (voluntary,
    involuntary) and minor page faults of every thread)."""
    tick = os.sysconf("SC_CLK_TCK")
    cpu, switches, faults = collections.Counter(), [0, 0], 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/self/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        switches[0] += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        switches[1] += int(line.split()[1])
        except OSError:
            continue  # the thread ended
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        if int(tid) == os.getpid():
            name = "main"
        fields = stat[stat.rindex(")") + 2:].split()
        cpu[f"{name}/{tid}"] += (int(fields[11]) + int(fields[12])) / tick
        faults += int(fields[7])
    return cpu, switches, faults


def call_of(coll, count, n):
    if coll == "all_gather":
        inp, out = torch.ones(count // n), torch.zeros(count)
        return lambda: dist.all_gather_into_tensor(out, inp)
    if coll == "reduce_scatter":
        inp, out = torch.ones(count), torch.zeros(count // n)
        return lambda: dist.reduce_scatter_tensor(out, inp)
    buf = torch.ones(count)
    return lambda: dist.all_reduce(buf)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=64, help="MB")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--colls", default="all_gather,reduce_scatter,all_reduce")
    ap.add_argument("--perf", help="perf record rank 1 into PREFIX.<coll>")
    ap.add_argument("--stat", help="perf stat every rank into "
                    "PREFIX.<coll>.<rank> (per thread)")
    a = ap.parse_args()
    dist.init_process_group("tacl")
    rank, n = dist.get_rank(), dist.get_world_size()
    count = (a.size << 20) // 4
    for coll in a.colls.split(","):
        call = call_of(coll, count, n)
        for _ in range(3):
            call()
        rec = None
        if a.perf and rank == 1:
            rec = subprocess.Popen(
                ["perf", "record", "-q", "-g", "-F", "1999", "-p",
                 str(os.getpid()), "-o", f"{a.perf}.{coll}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)  # perf attaches
        elif a.stat:
            rec = subprocess.Popen(
                ["perf", "stat", "-x", ",", "--per-thread", "-e",
                 "instructions,cycles,task-clock,context-switches,"
                 "page-faults", "-p", str(os.getpid()), "-o",
                 f"{a.stat}.{coll}.{rank}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)  # perf attaches
        dist.barrier()
        cpu0, sw0, pf0 = threads()
        t0 = time.perf_counter()
        for _ in range(a.iters):
            call()
        wall = (time.perf_counter() - t0) / a.iters
        cpu1, sw1, pf1 = threads()
        if rec is not None:
            rec.send_signal(signal.SIGINT)
            rec.wait()
        per = {t: (cpu1[t] - cpu0.get(t, 0)) / a.iters for t in cpu1}
        busiest = [f"{t.split('/')[0]}={v * 1e6:.0f}" for t, v in
                   sorted(per.items(), key=lambda kv: -kv[1])[:4] if v > 0]
        print(f"rank {rank} {coll} {a.size}M: wall {wall * 1e6:.0f} us, "
              f"cpu {sum(per.values()) * 1e6:.0f} us, context switches "
              f"{(sw1[0] - sw0[0]) / a.iters:.0f}+"
              f"{(sw1[1] - sw0[1]) / a.iters:.0f} (voluntary+not), minor "
              f"faults {(pf1 - pf0) / a.iters:.0f} per call; busiest "
              f"threads (us) {' '.join(busiest) or '-'}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
