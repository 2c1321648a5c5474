/*
 * Tests of the cuda_ipc transport with real processes sharing one GPU:
 * the harness forks the ranks (tl_harness.h), each rank allocates device
 * memory (cudaMalloc, or tacl_mem_alloc's cuMem memory) and the
 * transport moves it between them; the bytes are checked on the host.
 *
 * The parent never touches CUDA (a CUDA runtime does not survive fork):
 * whether a device is usable is asked of a forked child.  Without one the
 * device cases skip and the program exits 77 (tt_cuda_test_main), after
 * the cases that need no device have checked what a machine without one
 * sees: the transport reaches no peer and tacl_mem_alloc says why.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common.h"
#include "cuda_device.h"
#include "cuda_ipc/cuda_ipc.h"
#include "tl_harness.h"

#define MB (1u << 20)

/* Whether a device is usable, asked of a child; why in why when not. */
static int device_usable(char *why, size_t len)
{
    int fds[2], status = 0;
    ssize_t n;
    pid_t pid;

    if (pipe(fds) != 0)
        return 0;
    pid = fork();
    if (pid == 0) {
        char text[256] = "";
        int ok = tt_cuda_usable(text, sizeof(text));

        if (write(fds[1], text, strlen(text)) < 0)
            _exit(2);
        _exit(ok ? 0 : 1);
    }
    close(fds[1]);
    n = read(fds[0], why, len - 1);
    why[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return 0;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void need_device(void)
{
    char why[256];

    if (!device_usable(why, sizeof(why)))
        cr_skip_test("no CUDA device: these tests need a GPU and driver "
                     "(%s)", why);
}

/* How a rank gets its device buffers. */
typedef enum { MEM_CUDAMALLOC, MEM_TACL } mem_kind_t;

static void *dev_alloc(mem_kind_t kind, size_t len)
{
    void *p = NULL;

    if (len == 0)
        len = 1;
    if (kind == MEM_TACL) {
        tacl_status_t st = tacl_mem_alloc(&p, len, TACL_MEM_CUDA);

        CHECK(st == TACL_OK, "tacl_mem_alloc: %s", tacl__last_error());
    } else {
        CHECK(cudaMalloc(&p, len) == cudaSuccess);
    }
    return p;
}

static void dev_free(mem_kind_t kind, void *p)
{
    if (kind == MEM_TACL)
        CHECK(tacl_mem_free(p) == TACL_OK, "%s", tacl__last_error());
    else
        CHECK(cudaFree(p) == cudaSuccess);
}

/* Fill len bytes of device memory with tlh_fill's pattern for seed. */
static void dev_fill(void *dst, size_t len, uint64_t seed)
{
    void *host = malloc(len ? len : 1);

    CHECK(host != NULL);
    tlh_fill(host, len, seed);
    CHECK(cudaMemcpy(dst, host, len, cudaMemcpyHostToDevice) == cudaSuccess);
    free(host);
}

/* Whether len bytes of device memory hold the pattern for seed. */
static int dev_check(const void *src, size_t len, uint64_t seed)
{
    void *host = malloc(len ? len : 1);
    int ok;

    CHECK(host != NULL);
    CHECK(cudaMemcpy(host, src, len, cudaMemcpyDeviceToHost) == cudaSuccess);
    ok = tlh_check(host, len, seed);
    free(host);
    return ok;
}

static tacl__tl_op_t *dev_op(tlh_op_t *t, int peer, uint64_t tag, void *buf,
                             uint64_t len, int *pending)
{
    tacl__tl_op_t *op = tlh_op(t, peer, tag, buf, len, pending);

    op->memtype = TACL_MEM_CUDA;
    return op;
}

static tacl__tl_t *dev_init(int rank, int nranks, const char *const *ids)
{
    CHECK(cudaSetDevice(0) == cudaSuccess);
    return tlh_init(&tacl__tl_cuda_ipc_ops, rank, nranks, ids);
}

static const size_t sizes[] = {0, 1, 4096, MB, 64 * MB};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Every rank sends every size to every other rank; all bytes checked. */
static int all_sizes_rank(int rank, int nranks, void *arg)
{
    mem_kind_t kind = (mem_kind_t)(intptr_t)arg;
    tacl__tl_t *tl = dev_init(rank, nranks, NULL);

    for (size_t s = 0; s < NSIZES; s++) {
        size_t len = sizes[s];
        tlh_op_t sends[TLH_MAX_RANKS], recvs[TLH_MAX_RANKS];
        void *rbuf[TLH_MAX_RANKS];
        void *sbuf = dev_alloc(kind, len);
        int pending = 0;

        dev_fill(sbuf, len, (uint64_t)rank * 100 + s);
        for (int p = 0; p < nranks; p++) {
            if (p == rank)
                continue;
            rbuf[p] = dev_alloc(kind, len);
            CHECK(tacl__tl_recv(tl, dev_op(&recvs[p], p, s, rbuf[p], len,
                                           &pending)) == TACL_OK,
                  "%s", tacl__last_error());
        }
        for (int p = 0; p < nranks; p++)
            if (p != rank)
                CHECK(tacl__tl_send(tl, dev_op(&sends[p], p, s, sbuf, len,
                                               &pending)) == TACL_OK,
                      "%s", tacl__last_error());
        CHECK(tlh_drive(tl, &pending, 100, 30) == 0, "size %zu", len);
        for (int p = 0; p < nranks; p++) {
            if (p == rank)
                continue;
            CHECK(sends[p].status == TACL_OK && sends[p].calls == 1);
            CHECK(recvs[p].status == TACL_OK && recvs[p].calls == 1);
            CHECK(dev_check(rbuf[p], len, (uint64_t)p * 100 + s),
                  "%zu bytes from rank %d", len, p);
            dev_free(kind, rbuf[p]);
        }
        tlh_barrier();   /* nobody reads sbuf any more */
        dev_free(kind, sbuf);
    }
    tacl__tl_close(tl);
    return 0;
}

Test(transport_cuda_ipc, sizes_cudamalloc_2, .timeout = 120)
{
    need_device();
    cr_assert_eq(tlh_run(2, NULL, all_sizes_rank,
                         (void *)(intptr_t)MEM_CUDAMALLOC, -1), 0);
}

Test(transport_cuda_ipc, sizes_cudamalloc_4, .timeout = 120)
{
    need_device();
    cr_assert_eq(tlh_run(4, NULL, all_sizes_rank,
                         (void *)(intptr_t)MEM_CUDAMALLOC, -1), 0);
}

Test(transport_cuda_ipc, sizes_tacl_mem_2, .timeout = 120)
{
    need_device();
    cr_assert_eq(tlh_run(2, NULL, all_sizes_rank, (void *)(intptr_t)MEM_TACL,
                         -1), 0);
}

Test(transport_cuda_ipc, sizes_tacl_mem_4, .timeout = 120)
{
    need_device();
    cr_assert_eq(tlh_run(4, NULL, all_sizes_rank, (void *)(intptr_t)MEM_TACL,
                         -1), 0);
}

/* Live entries of the cache of rank 1's peer 0. */
static int live_maps(tacl__tl_t *tl, int peer)
{
    tacl__cipc_t *c = (tacl__cipc_t *)tl;
    const tacl__cipc_peer_t *p = &c->peers[c->base.local_of[peer]];
    int n = 0;

    for (int i = 0; i < TACL_CIPC_MAPS; i++)
        n += p->maps[i].mem != TACL_CIPC_MEM_NONE;
    return n;
}

/* One message from rank 0 to rank 1, checked there. */
static void one_message(tacl__tl_t *tl, int rank, void *buf, size_t len,
                        uint64_t tag, uint64_t seed)
{
    tlh_op_t t;
    int pending = 0;

    if (rank == 0)
        CHECK(tacl__tl_send(tl, dev_op(&t, 1, tag, buf, len, &pending)) ==
                  TACL_OK, "%s", tacl__last_error());
    else
        CHECK(tacl__tl_recv(tl, dev_op(&t, 0, tag, buf, len, &pending)) ==
                  TACL_OK, "%s", tacl__last_error());
    CHECK(tlh_drive(tl, &pending, 100, 30) == 0);
    CHECK(t.status == TACL_OK);
    if (rank == 1)
        CHECK(dev_check(buf, len, seed), "tag %llu", (unsigned long long)tag);
}

/*
 * Two messages from one allocation (at two offsets) open it once; after
 * the owner frees it and allocates again (perhaps at the same address),
 * the next message opens the new allocation and carries its bytes, and
 * the old one's mapping goes once the owner's news arrives (cuMem) or
 * stays cached under its old id (cudaMalloc, whose frees tacl cannot see).
 */
static int cache_rank(int rank, int nranks, void *arg)
{
    mem_kind_t kind = (mem_kind_t)(intptr_t)arg;
    tacl__tl_t *tl = dev_init(rank, nranks, NULL);
    size_t len = 3 * MB;
    void *buf = dev_alloc(kind, 2 * len);
    uint64_t opens = tacl__cipc_open_count();
    uint64_t deadline;

    if (rank == 0) {
        dev_fill(buf, len, 1);
        dev_fill((char *)buf + len, len, 2);
    }
    one_message(tl, rank, buf, len, 1, 1);
    if (rank == 1)
        CHECK(tacl__cipc_open_count() == opens + 1);
    one_message(tl, rank, (char *)buf + (rank == 0 ? len : 0), len, 2, 2);
    if (rank == 1) {
        CHECK(tacl__cipc_open_count() == opens + 1,
              "the second message reopened the allocation");
        CHECK(live_maps(tl, 0) == 1);
    }
    tlh_barrier();
    if (rank == 0) {
        dev_free(kind, buf);
        buf = dev_alloc(kind, 2 * len);
        dev_fill(buf, len, 3);
    }
    one_message(tl, rank, buf, len, 3, 3);
    if (rank == 1) {
        CHECK(tacl__cipc_open_count() == opens + 2,
              "the new allocation was not opened");
        /* The old mapping goes when the free's news arrives (cuMem). */
        deadline = tacl__now_ns() + 10ull * 1000000000;
        while (kind == MEM_TACL && live_maps(tl, 0) != 1 &&
               tacl__now_ns() < deadline)
            CHECK(tacl__tl_progress(tl) >= 0);
        CHECK(live_maps(tl, 0) == (kind == MEM_TACL ? 1 : 2),
              "%d mappings", live_maps(tl, 0));
    }
    tlh_barrier();
    dev_free(kind, buf);
    tacl__tl_close(tl);
    return 0;
}

Test(transport_cuda_ipc, cache_cudamalloc, .timeout = 60)
{
    need_device();
    cr_assert_eq(tlh_run(2, NULL, cache_rank,
                         (void *)(intptr_t)MEM_CUDAMALLOC, -1), 0);
}

Test(transport_cuda_ipc, cache_tacl_mem, .timeout = 60)
{
    need_device();
    cr_assert_eq(tlh_run(2, NULL, cache_rank, (void *)(intptr_t)MEM_TACL,
                         -1), 0);
}

/*
 * Freed device memory and host memory posted as device memory are
 * errors of the post, with a message; the transport still works after.
 */
static int bad_buffer_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl = dev_init(rank, nranks, NULL);
    void *gone = dev_alloc(MEM_CUDAMALLOC, MB);
    void *gone_tacl = dev_alloc(MEM_TACL, MB);
    char host[64];
    tlh_op_t t;
    int pending = 0;
    void *ok;

    dev_free(MEM_CUDAMALLOC, gone);
    dev_free(MEM_TACL, gone_tacl);
    tacl__last_error_clear();
    CHECK(tacl__tl_send(tl, dev_op(&t, 1 - rank, 9, gone, MB, &pending)) !=
          TACL_OK);
    CHECK(strstr(tacl__last_error(), "not CUDA device memory") != NULL,
          "%s", tacl__last_error());
    CHECK(tacl__tl_recv(tl, dev_op(&t, 1 - rank, 9, gone_tacl, MB,
                                   &pending)) != TACL_OK);
    CHECK(tacl__tl_send(tl, dev_op(&t, 1 - rank, 9, host, sizeof(host),
                                   &pending)) != TACL_OK);
    /* A good message still goes both ways. */
    ok = dev_alloc(MEM_CUDAMALLOC, MB);
    dev_fill(ok, MB, 7);
    pending = 0;
    {
        tlh_op_t s, r;
        void *in = dev_alloc(MEM_CUDAMALLOC, MB);

        CHECK(tacl__tl_recv(tl, dev_op(&r, 1 - rank, 10, in, MB,
                                       &pending)) == TACL_OK);
        CHECK(tacl__tl_send(tl, dev_op(&s, 1 - rank, 10, ok, MB,
                                       &pending)) == TACL_OK);
        CHECK(tlh_drive(tl, &pending, 100, 30) == 0);
        CHECK(r.status == TACL_OK && s.status == TACL_OK);
        CHECK(dev_check(in, MB, 7));
        tlh_barrier();
        dev_free(MEM_CUDAMALLOC, in);
    }
    dev_free(MEM_CUDAMALLOC, ok);
    tacl__tl_close(tl);
    return 0;
}

Test(transport_cuda_ipc, freed_pointer_is_an_error, .timeout = 60)
{
    need_device();
    cr_assert_eq(tlh_run(2, NULL, bad_buffer_rank, NULL, -1), 0);
}

/* A receive of the wrong length fails on both sides with the message. */
static int length_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl = dev_init(rank, nranks, NULL);
    void *buf = dev_alloc(MEM_CUDAMALLOC, 2 * MB);
    tlh_op_t t;
    int pending = 0;

    if (rank == 0)
        CHECK(tacl__tl_send(tl, dev_op(&t, 1, 4, buf, 2 * MB, &pending)) ==
              TACL_OK);
    else
        CHECK(tacl__tl_recv(tl, dev_op(&t, 0, 4, buf, MB, &pending)) ==
              TACL_OK);
    CHECK(tlh_drive(tl, &pending, 100, 30) == 0);
    CHECK(t.status == TACL_ERR_INVALID_USAGE, "%d", (int)t.status);
    CHECK(t.calls == 1);
    tlh_barrier();
    dev_free(MEM_CUDAMALLOC, buf);
    tacl__tl_close(tl);
    return 0;
}

Test(transport_cuda_ipc, length_mismatch, .timeout = 60)
{
    need_device();
    cr_assert_eq(tlh_run(2, NULL, length_rank, NULL, -1), 0);
}

/* Fenced by node identity: ranks 0 and 1 share a node, rank 2 does not. */
static int fence_rank(int rank, int nranks, void *arg)
{
    static const char *const ids[] = {"n0", "n0", "n1"};
    tacl__tl_t *tl = dev_init(rank, nranks, ids);

    CHECK(!tacl__tl_reachable(tl, rank));
    for (int p = 0; p < nranks; p++)
        if (p != rank)
            CHECK(tacl__tl_reachable(tl, p) == (rank < 2 && p < 2),
                  "rank %d reaches %d", rank, p);
    tacl__tl_close(tl);
    return 0;
}

Test(transport_cuda_ipc, fenced_by_node_id, .timeout = 60)
{
    need_device();
    cr_assert_eq(tlh_run(3, NULL, fence_rank, NULL, -1), 0);
}

/*
 * The killed peer: a send whose receiver dies before answering fails
 * with an error naming that rank, not a hang.
 */
static int killed_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl = dev_init(rank, nranks, NULL);
    void *buf = dev_alloc(MEM_CUDAMALLOC, MB);
    tacl_status_t st;
    tlh_op_t t;
    int pending = 0;

    if (rank == 1) {
        atomic_store(&tlh_shared->flags[0], 1);
        pause();   /* killed by the parent */
    }
    /* The kill may come before the post (which then fails at once) or
     * after it (and the send completes with the error). */
    st = tacl__tl_send(tl, dev_op(&t, 1, 5, buf, MB, &pending));
    if (st == TACL_OK) {
        CHECK(tlh_drive(tl, &pending, 100, 20) != 0);
        CHECK(t.calls == 1 && t.status == TACL_ERR_REMOTE, "%d",
              (int)t.status);
    } else {
        CHECK(st == TACL_ERR_REMOTE, "%d", (int)st);
    }
    CHECK(strstr(tacl__last_error(), "rank 1") != NULL, "%s",
          tacl__last_error());
    tacl__tl_close(tl);
    return 0;
}

Test(transport_cuda_ipc, dead_peer_fails, .timeout = 60)
{
    need_device();
    cr_assert_eq(tlh_run(2, NULL, killed_rank, NULL, 1), 0);
}

/*
 * What a machine without a usable device sees (this case skips on one
 * with a device): the transport is created but reaches nobody, so a
 * device message fails to post instead of hanging, and tacl_mem_alloc
 * of device memory says what is missing.
 */
static int no_device_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl = tlh_init(&tacl__tl_cuda_ipc_ops, rank, nranks, NULL);
    char buf[16];
    void *p = buf;
    tlh_op_t t;
    int pending = 0;

    CHECK(!tacl__tl_reachable(tl, 1 - rank));
    CHECK(tacl__tl_send(tl, dev_op(&t, 1 - rank, 1, buf, sizeof(buf),
                                   &pending)) == TACL_ERR_INVALID_ARG);
    CHECK(strstr(tacl__last_error(), "cuda_ipc cannot reach") != NULL,
          "%s", tacl__last_error());
    CHECK(tacl__tl_progress(tl) == 0);
    CHECK(tacl_mem_alloc(&p, 4096, TACL_MEM_CUDA) == TACL_ERR_UNSUPPORTED);
    CHECK(p == NULL);
    CHECK(strstr(tacl__last_error(), "CUDA") != NULL, "%s",
          tacl__last_error());
    tacl__tl_close(tl);
    return 0;
}

Test(transport_cuda_ipc, without_device_reaches_nobody, .timeout = 60)
{
    char why[256];

    if (device_usable(why, sizeof(why)))
        cr_skip_test("a device is usable: this case is for machines "
                     "without one");
    cr_assert_eq(tlh_run(2, NULL, no_device_rank, NULL, -1), 0);
}

TT_CUDA_TEST_MAIN()
