"""A 4-rank-style all-gather loop from Python through ctypes, no binding.

    tacl-run -n N setsid -w PYTHON perf/allgather_ctypes.py LIBTACL MODE MB ITERS

Loads LIBTACL (the shared library) with ctypes, makes a communicator
from the launcher's environment (tacl_comm_init_env) and times ITERS
blocking tacl_allgather calls of MB megabytes gathered (float32, as
nccl-tests counts the size) after 3 warm-up calls.  MODE "plain": the
buffers come from posix_memalign (page-aligned) and torch is not
imported; MODE "tensor": torch is imported and torch tensors are the
buffers.  Each rank prints "MODE rank R US" (microseconds per call).
perf/torch_gap.sh sets this beside the C perf binary and the binding,
to tell the binding's cost from a Python process's.
"""
import ctypes
import os
import sys
import time


def main():
    libpath, mode, mb, iters = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
        int(sys.argv[4])
    lib = ctypes.CDLL(libpath)
    libc = ctypes.CDLL("libc.so.6")
    comm = ctypes.c_void_p()
    if lib.tacl_comm_init_env(ctypes.byref(comm)) != 0:
        sys.exit("allgather_ctypes: tacl_comm_init_env failed")
    n = int(os.environ["TACL_NRANKS"])
    count = (mb << 20) // 4 // n
    if mode == "tensor":
        import torch
        keep = (torch.ones(count), torch.zeros(count * n))
        send = ctypes.c_void_p(keep[0].data_ptr())
        recv = ctypes.c_void_p(keep[1].data_ptr())
    elif mode == "plain":
        send, recv = ctypes.c_void_p(), ctypes.c_void_p()
        for buf, size in ((send, count * 4), (recv, count * 4 * n)):
            if libc.posix_memalign(ctypes.byref(buf), 4096,
                                   ctypes.c_size_t(size)) != 0:
                sys.exit("allgather_ctypes: out of memory")
        ctypes.memset(send, 1, count * 4)
        ctypes.memset(recv, 0, count * 4 * n)
    else:
        sys.exit("allgather_ctypes: MODE is plain or tensor")
    allgather = lib.tacl_allgather
    allgather.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                          ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    float32 = 8  # TACL_FLOAT32 in include/tacl.h's tacl_dtype_t
    for _ in range(3):
        if allgather(send, recv, count, float32, comm, None) != 0:
            sys.exit("allgather_ctypes: tacl_allgather failed")
    t0 = time.perf_counter()
    for _ in range(iters):
        if allgather(send, recv, count, float32, comm, None) != 0:
            sys.exit("allgather_ctypes: tacl_allgather failed")
    us = (time.perf_counter() - t0) / iters * 1e6
    print(f"{mode} rank {os.environ['TACL_RANK']} {us:.0f}", flush=True)
    lib.tacl_comm_destroy(comm)


if __name__ == "__main__":
    main()
