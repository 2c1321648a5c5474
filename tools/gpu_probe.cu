/*
 * gpu_probe: what a GPU machine offers tacl, in a few seconds, before
 * anything of tacl is built (tools/gpu-check.sh compiles it with nvcc
 * alone, or runs the copy tools/gpu-prepare.sh built).
 *
 * One line per question, "probe: <what>: ok|FAILED|unsupported ...":
 *   driver and runtime versions; time of the driver's start (the first
 *   runtime call) and of a context on device 0; the device; a kernel
 *   launch and a copy back; stream memory operations (a stream waiting
 *   on cuStreamWaitValue32 for a host-mapped word, which the executor's
 *   stream joins use); a cudaIpc handle opened in a second process (the
 *   cuda_ipc transport's path for cudaMalloc memory); a cuMem allocation
 *   exported as a POSIX file descriptor and mapped in a second process
 *   (its path for tacl_mem_alloc memory).
 * The second process is forked before this one touches CUDA (CUDA does
 * not survive a fork) and talks over a socket pair.  Exit 0 when
 * everything tacl needs works, 1 otherwise; every step is bounded by an
 * alarm, so the probe never hangs.
 *
 *   nvcc -O2 -arch=sm_90 -Icore -o gpu_probe tools/gpu_probe.cu
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cu_entry.h"

/* Seconds any step may take before the alarm ends the process. */
#define PROBE_ALARM_S 20

static int failures;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void line(const char *what, int ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void line(const char *what, int ok, const char *fmt, ...)
{
    va_list ap;

    printf("probe: %s: %s", what, ok > 0 ? "ok" : ok == 0 ? "FAILED"
                                                          : "unsupported");
    if (fmt[0] != '\0') {
        printf(" (");
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf(")");
    }
    printf("\n");
    fflush(stdout);
    if (ok == 0)
        failures++;
}

/* A driver entry point through the runtime: no libcuda at link time. */
#define DRV(type, name) type name##_p = (type)tacl__cu_entry(#name)

__global__ void fill_kernel(unsigned *p, unsigned v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = v + (unsigned)i;
}

/* ---- the second process ---- */

enum { REQ_LEGACY = 1, REQ_VMM, REQ_QUIT };

typedef struct {
    int kind;
    unsigned expect;           /* the first word of the memory */
    size_t size;               /* VMM: the allocation's size */
    cudaIpcMemHandle_t handle; /* LEGACY */
} req_t;

typedef struct {
    int ok;
    unsigned seen;
    char why[160];
} rep_t;

static int send_fd(int sock, const void *buf, size_t len, int fd)
{
    char ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {(void *)buf, len};
    struct msghdr mh;

    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (fd >= 0) {
        memset(ctl, 0, sizeof(ctl));
        mh.msg_control = ctl;
        mh.msg_controllen = sizeof(ctl);
        CMSG_FIRSTHDR(&mh)->cmsg_level = SOL_SOCKET;
        CMSG_FIRSTHDR(&mh)->cmsg_type = SCM_RIGHTS;
        CMSG_FIRSTHDR(&mh)->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(CMSG_FIRSTHDR(&mh)), &fd, sizeof(int));
    }
    return sendmsg(sock, &mh, 0) == (ssize_t)len ? 0 : -1;
}

static int recv_fd(int sock, void *buf, size_t len, int *fd_p)
{
    char ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {buf, len};
    struct msghdr mh;
    struct cmsghdr *cm;

    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl;
    mh.msg_controllen = sizeof(ctl);
    *fd_p = -1;
    if (recvmsg(sock, &mh, 0) != (ssize_t)len)
        return -1;
    for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
            memcpy(fd_p, CMSG_DATA(cm), sizeof(int));
    return 0;
}

/* The cuMem entry points both processes use. */
typedef CUresult (*reserve_t)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
                              unsigned long long);
typedef CUresult (*map_t)(CUdeviceptr, size_t, size_t,
                          CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*access_t)(CUdeviceptr, size_t, const CUmemAccessDesc *,
                             size_t);

/* Map size bytes of h at a new range, read-write from device 0. */
static CUresult map_rw(CUmemGenericAllocationHandle h, size_t size,
                       CUdeviceptr *va_p)
{
    DRV(reserve_t, cuMemAddressReserve);
    DRV(map_t, cuMemMap);
    DRV(access_t, cuMemSetAccess);
    CUmemAccessDesc acc;
    CUresult r;

    if (!cuMemAddressReserve_p || !cuMemMap_p || !cuMemSetAccess_p)
        return CUDA_ERROR_NOT_SUPPORTED;
    r = cuMemAddressReserve_p(va_p, size, 0, 0, 0);
    if (r == CUDA_SUCCESS)
        r = cuMemMap_p(*va_p, size, 0, h, 0);
    memset(&acc, 0, sizeof(acc));
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = 0;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (r == CUDA_SUCCESS)
        r = cuMemSetAccess_p(*va_p, size, &acc, 1);
    return r;
}

static void child_vmm(const req_t *rq, int fd, rep_t *rp)
{
    typedef CUresult (*import_t)(CUmemGenericAllocationHandle *, void *,
                                 CUmemAllocationHandleType);
    DRV(import_t, cuMemImportFromShareableHandle);
    CUmemGenericAllocationHandle h;
    CUdeviceptr va = 0;
    CUresult r;

    if (!cuMemImportFromShareableHandle_p) {
        snprintf(rp->why, sizeof(rp->why), "driver lacks the cuMem calls");
        return;
    }
    r = cuMemImportFromShareableHandle_p(
        &h, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (r == CUDA_SUCCESS)
        r = map_rw(h, rq->size, &va);
    if (r != CUDA_SUCCESS) {
        snprintf(rp->why, sizeof(rp->why), "import/map: CUresult %d",
                 (int)r);
        return;
    }
    if (cudaMemcpy(&rp->seen, (void *)va, 4, cudaMemcpyDeviceToHost) !=
        cudaSuccess) {
        snprintf(rp->why, sizeof(rp->why), "copy: %s",
                 cudaGetErrorString(cudaGetLastError()));
        return;
    }
    rp->ok = rp->seen == rq->expect;
}

static void child_main(int sock)
{
    for (;;) {
        req_t rq;
        rep_t rp;
        int fd = -1;

        if (recv_fd(sock, &rq, sizeof(rq), &fd) != 0 || rq.kind == REQ_QUIT)
            _exit(0);
        memset(&rp, 0, sizeof(rp));
        if (cudaSetDevice(0) != cudaSuccess) {
            snprintf(rp.why, sizeof(rp.why), "cudaSetDevice: %s",
                     cudaGetErrorString(cudaGetLastError()));
        } else if (rq.kind == REQ_LEGACY) {
            void *p = NULL;
            cudaError_t e = cudaIpcOpenMemHandle(
                &p, rq.handle, cudaIpcMemLazyEnablePeerAccess);

            if (e == cudaSuccess)
                e = cudaMemcpy(&rp.seen, p, 4, cudaMemcpyDeviceToHost);
            if (e != cudaSuccess)
                snprintf(rp.why, sizeof(rp.why), "%s", cudaGetErrorString(e));
            else
                rp.ok = rp.seen == rq.expect;
            if (p != NULL)
                cudaIpcCloseMemHandle(p);
        } else {
            child_vmm(&rq, fd, &rp);
        }
        if (fd >= 0)
            close(fd);
        if (send(sock, &rp, sizeof(rp), 0) != (ssize_t)sizeof(rp))
            _exit(1);
    }
}

/* Ask the second process; 1 when it read what it should have. */
static int ask(int sock, const req_t *rq, int fd, char *why, size_t len)
{
    rep_t rp;

    memset(&rp, 0, sizeof(rp));
    if (send_fd(sock, rq, sizeof(*rq), fd) != 0 ||
        recv(sock, &rp, sizeof(rp), 0) != (ssize_t)sizeof(rp)) {
        snprintf(why, len, "the second process did not answer");
        return 0;
    }
    if (!rp.ok && rp.why[0] == '\0')
        snprintf(rp.why, sizeof(rp.why), "read 0x%x, not 0x%x", rp.seen,
                 rq->expect);
    snprintf(why, len, "%s", rp.why);
    return rp.ok;
}

/* ---- the checks ---- */

static void check_memops(void)
{
    typedef CUresult (*wait_t)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
    DRV(wait_t, cuStreamWaitValue32);
    volatile unsigned *word = NULL;
    void *dword = NULL;
    cudaStream_t s = NULL;
    cudaEvent_t ev = NULL;
    double t0;
    int held;

    if (!cuStreamWaitValue32_p) {
        line("stream memory operations", -1, "no cuStreamWaitValue32: "
             "tacl falls back to host functions");
        return;
    }
    if (cudaHostAlloc((void **)&word, 4, cudaHostAllocMapped) !=
            cudaSuccess ||
        cudaHostGetDevicePointer(&dword, (void *)word, 0) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) !=
            cudaSuccess ||
        cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) !=
            cudaSuccess) {
        line("stream memory operations", 0, "setup: %s",
             cudaGetErrorString(cudaGetLastError()));
        return;
    }
    *word = 0;
    if (cuStreamWaitValue32_p((CUstream)s, (CUdeviceptr)(uintptr_t)dword, 1,
                              CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS) {
        line("stream memory operations", -1, "cuStreamWaitValue32 refused: "
             "tacl falls back to host functions");
        cudaStreamDestroy(s);
        return;
    }
    cudaEventRecord(ev, s);
    usleep(20000);
    held = cudaEventQuery(ev) == cudaErrorNotReady;
    __atomic_store_n(word, 1u, __ATOMIC_RELEASE);
    t0 = now_s();
    while (cudaEventQuery(ev) == cudaErrorNotReady && now_s() - t0 < 2)
        ;
    line("stream memory operations", held && cudaEventQuery(ev) ==
                                                 cudaSuccess,
         "cuStreamWaitValue32 held the stream %s, released %.1f us after "
         "the host's store", held ? "until the store" : "NOT",
         (now_s() - t0) * 1e6);
    cudaEventDestroy(ev);
    cudaStreamDestroy(s);
    cudaFreeHost((void *)word);
}

static void check_legacy_ipc(int sock)
{
    unsigned *p = NULL;
    req_t rq;
    char why[200];

    memset(&rq, 0, sizeof(rq));
    rq.kind = REQ_LEGACY;
    rq.expect = 0x1234u;
    if (cudaMalloc((void **)&p, 1 << 20) != cudaSuccess ||
        cudaMemcpy(p, &rq.expect, 4, cudaMemcpyHostToDevice) !=
            cudaSuccess ||
        cudaIpcGetMemHandle(&rq.handle, p) != cudaSuccess) {
        line("cudaIpc handle in a second process", 0, "export: %s",
             cudaGetErrorString(cudaGetLastError()));
        return;
    }
    line("cudaIpc handle in a second process", ask(sock, &rq, -1, why,
                                                    sizeof(why)),
         "%s", why);
    cudaFree(p);
}

static void check_vmm(int sock)
{
    typedef CUresult (*gran_t)(size_t *, const CUmemAllocationProp *,
                               CUmemAllocationGranularity_flags);
    typedef CUresult (*create_t)(CUmemGenericAllocationHandle *, size_t,
                                 const CUmemAllocationProp *,
                                 unsigned long long);
    typedef CUresult (*export_t)(void *, CUmemGenericAllocationHandle,
                                 CUmemAllocationHandleType,
                                 unsigned long long);
    DRV(gran_t, cuMemGetAllocationGranularity);
    DRV(create_t, cuMemCreate);
    DRV(export_t, cuMemExportToShareableHandle);
    const char *what = "cuMem calls";
    CUmemAllocationProp prop;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va = 0;
    CUresult r = CUDA_ERROR_NOT_SUPPORTED;
    size_t gran = 0;
    int fd = -1;
    req_t rq;
    char why[200];

    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    if (cuMemGetAllocationGranularity_p && cuMemCreate_p &&
        cuMemExportToShareableHandle_p) {
        what = "cuMemGetAllocationGranularity";
        r = cuMemGetAllocationGranularity_p(&gran, &prop,
                                            CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    }
    if (r == CUDA_SUCCESS) {
        what = "cuMemCreate";
        r = cuMemCreate_p(&h, gran, &prop, 0);
    }
    if (r == CUDA_SUCCESS) {
        what = "cuMemAddressReserve/cuMemMap/cuMemSetAccess";
        r = map_rw(h, gran, &va);
    }
    if (r == CUDA_SUCCESS) {
        what = "cuMemExportToShareableHandle";
        r = cuMemExportToShareableHandle_p(
            &fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    }
    memset(&rq, 0, sizeof(rq));
    rq.kind = REQ_VMM;
    rq.expect = 0x5678u;
    rq.size = gran;
    if (r == CUDA_SUCCESS &&
        cudaMemcpy((void *)va, &rq.expect, 4, cudaMemcpyHostToDevice) !=
            cudaSuccess) {
        what = "cudaMemcpy into the mapping";
        r = CUDA_ERROR_UNKNOWN;
    }
    if (r != CUDA_SUCCESS) {
        line("cuMem with POSIX descriptors in a second process", 0,
             "%s: CUresult %d", what, (int)r);
        return;
    }
    line("cuMem with POSIX descriptors in a second process",
         ask(sock, &rq, fd, why, sizeof(why)), "%s", why);
    close(fd);
}

int main(void)
{
    int sv[2], driver = 0, runtime = 0, n = 0;
    struct cudaDeviceProp prop;
    unsigned *d = NULL, h[256];
    double t0;
    cudaError_t e;
    pid_t pid;

    alarm(PROBE_ALARM_S);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) {
        perror("probe: socketpair");
        return 1;
    }
    pid = fork();
    if (pid == 0) {
        close(sv[0]);
        child_main(sv[1]);
    }
    close(sv[1]);
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    line("versions", driver > 0, "driver API %d.%d, runtime %d.%d",
         driver / 1000, driver % 1000 / 10, runtime / 1000,
         runtime % 1000 / 10);
    t0 = now_s();
    e = cudaGetDeviceCount(&n);
    line("driver start (first runtime call)", e == cudaSuccess && n > 0,
         "%.3f s, %d device%s%s%s", now_s() - t0, n, n == 1 ? "" : "s",
         e != cudaSuccess ? ": " : "",
         e != cudaSuccess ? cudaGetErrorString(e) : "");
    if (e != cudaSuccess || n == 0)
        goto out;
    t0 = now_s();
    e = cudaSetDevice(0);
    if (e == cudaSuccess)
        e = cudaFree(0);
    line("context on device 0", e == cudaSuccess, "%.3f s%s%s",
         now_s() - t0, e != cudaSuccess ? ": " : "",
         e != cudaSuccess ? cudaGetErrorString(e) : "");
    if (e != cudaSuccess)
        goto out;
    cudaGetDeviceProperties(&prop, 0);
    line("device 0", 1, "%s, sm_%d%d, %d SMs, %.1f GiB", prop.name,
         prop.major, prop.minor, prop.multiProcessorCount,
         prop.totalGlobalMem / 1073741824.0);
    e = cudaMalloc((void **)&d, sizeof(h));
    if (e == cudaSuccess) {
        fill_kernel<<<1, 256>>>(d, 7u, 256);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
    line("kernel launch and copy", e == cudaSuccess && h[255] == 7u + 255,
         "%s", e != cudaSuccess ? cudaGetErrorString(e) : "");
    cudaFree(d);
    check_memops();
    check_legacy_ipc(sv[0]);
    check_vmm(sv[0]);
out: {
        req_t quit;

        memset(&quit, 0, sizeof(quit));
        quit.kind = REQ_QUIT;
        send(sv[0], &quit, sizeof(quit), 0);
        waitpid(pid, NULL, 0);
    }
    if (n == 0)
        failures++;
    printf("probe: RESULT %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
