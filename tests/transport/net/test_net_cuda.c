/*
 * Tests of the CUDA staging of the network transports (transport/
 * stage.c), built once per transport (NET_OFI: ofi over libfabric's tcp
 * provider; else ucx over tcp): device buffers between two emulated
 * nodes on one machine, moved through pinned host chunks.
 *
 * The ranks are forked processes, and the CUDA runtime does not survive
 * a fork: this process never touches CUDA.  Whether a device is usable is
 * asked in a child of its own; the rank processes then use CUDA freely.
 *
 * Without a device the capability case still runs (the instance must not
 * claim CUDA memory and must refuse a device buffer with an error, not
 * crash), the device cases skip, and the program exits 77 (skipped).
 * With one, every case must pass: messages of one byte to many chunks in
 * both directions at once, more chunks than the pool holds, receives
 * posted in the reverse order of the sends, a device send to a host
 * receive (one chunk), all compared byte for byte.  ofi runs the same
 * messages once more with device buffers handed to the provider as they
 * are (FI_HMEM), where its provider offers that.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_device.h"
#include "harness.h"

#ifdef NET_OFI
#include "ofi/ofi.h"
const tacl__transport_ops_t *const net_ops = &tacl__tl_ofi_ops;
#define SUITE ofi_cuda
#define NET_ENV() ofi_env()
#else
#include "ucx/ucx.h"
const tacl__transport_ops_t *const net_ops = &tacl__tl_ucx_ops;
#define SUITE ucx_cuda
#define NET_ENV() ucx_env("tcp")
#endif

/* Chunk size the cases set, small so that messages span many chunks. */
#define CHUNK (64 * 1024)

static void skip_without_device(void)
{
    tt_skip_without_device_forked();
}

static void stage_env(void)
{
    NET_ENV();
    /* Staged, even where the provider could take device memory. */
    setenv("TACL_OFI_HMEM", "off", 1);
    setenv("TACL_NET_CUDA_CHUNK", "64K", 1);
    setenv("TACL_NET_CUDA_CHUNKS", "4", 1);
}

/*
 * The instance moves CUDA memory exactly when this process has a device;
 * without one a device buffer is refused at the post, with no callback.
 */
static void caps_rank(shared_t *sh, int rank)
{
    char why[256];
    int has = tt_cuda_usable(why, sizeof(why));
    xctx_t x;
    tacl__tl_t *tl = rank_init(sh, rank, &x);
    int cuda = (tl->ops->caps & TACL__TL_CAP_CUDA) != 0;

    CHECK(cuda == has, "caps say CUDA %d, device usable %d (%s)", cuda, has,
          has ? "" : why);
    CHECK(tl->ops->caps & TACL__TL_CAP_HOST, "host memory dropped");
    if (!has) {
        char buf[16];
        tacl__tl_op_t op = {0};
        tacl_status_t st;

        op.peer = 1 - rank;
        op.tag = TACL__TAG(7, 1);
        op.buf = buf;
        op.len = sizeof(buf);
        st = post_mem(tl, &op, rank == 0, TACL_MEM_CUDA);
        CHECK(st != TACL_OK, "a device buffer was taken without a device");
        CHECK(tacl__tl_progress(tl) >= 0, "progress failed");
        CHECK(op_result(&op) == TACL_IN_PROGRESS, "a refused op completed");
    }
    CHECK(barrier(sh) == 0, "barrier");
    ping(tl, rank, 0, 1, TACL__TAG(7, 2));
    tacl__tl_close(tl);
}

Test(SUITE, caps_follow_the_device)
{
    stage_env();
    run_ranks(2, caps_rank, NULL, NULL);
}

/* Lengths around the chunk size, and far more chunks than the pool. */
static const uint64_t dev_sizes[] = {1,         CHUNK - 1,     CHUNK,
                                     CHUNK + 1, 5 * CHUNK + 7, 3 << 20,
                                     1000,      2 * CHUNK,     17};
#define NDEV TACL_ARRAY_SIZE(dev_sizes)

static void *dev_buf(uint64_t len)
{
    void *p = NULL;

    CHECK(cudaMalloc(&p, len) == cudaSuccess, "cudaMalloc %llu",
          (unsigned long long)len);
    return p;
}

/*
 * Both ranks send every size to the other at once, the receives posted
 * in reverse order, device to device; then rank 0 sends one chunk from
 * the device to a host buffer of rank 1.
 */
static void dev_messages(shared_t *sh, int rank, tacl__tl_t *tl)
{
    tacl__tl_op_t sends[NDEV] = {{0}}, recvs[NDEV] = {{0}};
    tacl__tl_op_t mixed = {0};
    uint8_t *host = NULL;
    int peer = 1 - rank;
    tacl_status_t st;

    CHECK(tl->ops->caps & TACL__TL_CAP_CUDA, "no CUDA capability");
    for (size_t i = 0; i < NDEV; ++i) {
        size_t k = NDEV - 1 - i;

        recvs[k].peer = peer;
        recvs[k].tag = TACL__TAG(9, k);
        recvs[k].len = dev_sizes[k];
        recvs[k].buf = dev_buf(dev_sizes[k]);
        CHECK(cudaMemset(recvs[k].buf, 0, dev_sizes[k]) == cudaSuccess,
              "cudaMemset");
        st = post_mem(tl, &recvs[k], 0, TACL_MEM_CUDA);
        CHECK(st == TACL_OK, "recv %zu: %s", k, tacl_status_string(st));
    }
    for (size_t i = 0; i < NDEV; ++i) {
        uint8_t *h = malloc(dev_sizes[i]);

        CHECK(h != NULL, "malloc");
        sends[i].peer = peer;
        sends[i].tag = TACL__TAG(9, i);
        sends[i].len = dev_sizes[i];
        sends[i].buf = dev_buf(dev_sizes[i]);
        fill(h, dev_sizes[i], rank, sends[i].tag);
        CHECK(cudaMemcpy(sends[i].buf, h, dev_sizes[i],
                         cudaMemcpyHostToDevice) == cudaSuccess,
              "cudaMemcpy");
        free(h);
        st = post_mem(tl, &sends[i], 1, TACL_MEM_CUDA);
        CHECK(st == TACL_OK, "send %zu: %s", i, tacl_status_string(st));
    }
    st = drive(tl, 2 * NDEV, 30);
    CHECK(st == TACL_OK, "drive: %s", tacl_status_string(st));
    for (size_t i = 0; i < NDEV; ++i) {
        uint8_t *h = malloc(dev_sizes[i]);

        CHECK(h != NULL, "malloc");
        CHECK(op_result(&sends[i]) == TACL_OK, "send %zu", i);
        CHECK(op_result(&recvs[i]) == TACL_OK, "recv %zu", i);
        CHECK(cudaMemcpy(h, recvs[i].buf, dev_sizes[i],
                         cudaMemcpyDeviceToHost) == cudaSuccess,
              "cudaMemcpy");
        CHECK(verify(h, dev_sizes[i], peer, recvs[i].tag),
              "%llu device bytes from rank %d corrupted",
              (unsigned long long)dev_sizes[i], peer);
        free(h);
        cudaFree(sends[i].buf);
        cudaFree(recvs[i].buf);
    }

    /* One chunk, device to host: the same bytes on the wire. */
    done_count = 0;
    mixed.peer = peer;
    mixed.tag = TACL__TAG(10, 0);
    mixed.len = CHUNK - 3;
    host = malloc(CHUNK);
    CHECK(host != NULL, "malloc");
    if (rank == 0) {
        fill(host, mixed.len, rank, mixed.tag);
        mixed.buf = dev_buf(mixed.len);
        CHECK(cudaMemcpy(mixed.buf, host, mixed.len,
                         cudaMemcpyHostToDevice) == cudaSuccess,
              "cudaMemcpy");
        st = post_mem(tl, &mixed, 1, TACL_MEM_CUDA);
    } else {
        mixed.buf = host;
        st = post_mem(tl, &mixed, 0, TACL_MEM_HOST);
    }
    CHECK(st == TACL_OK, "mixed post: %s", tacl_status_string(st));
    st = drive(tl, 1, 20);
    CHECK(st == TACL_OK && op_result(&mixed) == TACL_OK, "mixed: %s",
          tacl_status_string(st));
    if (rank == 1)
        CHECK(verify(host, mixed.len, 0, mixed.tag), "mixed corrupted");
    else
        cudaFree(mixed.buf);
    free(host);
    CHECK(barrier(sh) == 0, "barrier");
}

static void dev_rank(shared_t *sh, int rank)
{
    xctx_t x;

    tacl__tl_t *tl = rank_init(sh, rank, &x);

    dev_messages(sh, rank, tl);
    tacl__tl_close(tl);
}

Test(SUITE, device_messages_both_ways)
{
    skip_without_device();
    stage_env();
    run_ranks(2, dev_rank, NULL, NULL);
}

#ifdef NET_OFI
/*
 * The same messages with TACL_OFI_HMEM=on: device buffers handed to the
 * provider as they are, registered by tacl (ofi_mr.c), nothing staged.
 * A provider without FI_HMEM refuses at init, alike on both ranks: the
 * case then skips, naming it.
 */
static void hmem_rank(shared_t *sh, int rank)
{
    xctx_t x;
    tacl__tl_t *tl = NULL;
    tacl_status_t st = rank_try_init(sh, rank, &x, &tl);

    if (st == TACL_ERR_UNSUPPORTED &&
        strstr(tacl__last_error(), "FI_HMEM") != NULL) {
        if (rank == 0)
            snprintf(sh->skip, sizeof(sh->skip), "%s", tacl__last_error());
        return;
    }
    CHECK(st == TACL_OK, "init: %s", tacl__last_error());
    CHECK(((tacl__ofi_t *)tl)->hmem && ((tacl__ofi_t *)tl)->stage == NULL,
          "TACL_OFI_HMEM=on, yet device memory is staged");
    dev_messages(sh, rank, tl);
    CHECK(((tacl__ofi_t *)tl)->mrs.stats.regs > 0, "no device memory "
          "was registered");
    tacl__tl_close(tl);
}

Test(SUITE, device_messages_straight_to_the_provider)
{
    shared_t *sh = NULL;

    skip_without_device();
    NET_ENV();
    setenv("TACL_OFI_HMEM", "on", 1);
    run_ranks(2, hmem_rank, NULL, &sh);
    if (sh->skip[0] != '\0')
        cr_skip_test("%s", sh->skip);
    munmap(sh, sizeof(*sh));
}
#endif

TT_CUDA_TEST_MAIN()
