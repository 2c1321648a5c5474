/*
 * shm_bench: one-way bandwidth of the shm transport between two processes
 * of this machine, for each way of moving large messages (cma: one copy
 * with process_vm_readv; copy: two copies through the slots), beside
 * memcpy on one core for the same size.  The parent forks the two ranks;
 * they exchange setup records through an anonymous shared mapping guarded
 * by a process-shared barrier.
 *
 * Each measurement: rank 0 sends `iters` messages back to back, rank 1
 * receives them into one buffer and answers with an empty message; the
 * time on rank 0 from the first send to that answer gives the bandwidth.
 * Usage: shm_bench [max_mb]   (default 128)
 *
 * shm_bench -m measures instead the two small-message figures of the
 * tuner's shm model (algorithms/cost.h): step_us, one 8-byte message each
 * way between the two ranks, posted and completed (the alpha of one step
 * of a latency-bound algorithm, transport only); and msg_us, what each
 * further message in the same step adds (an exchange of K messages each
 * way takes step_us + (K - 1) * msg_us; a direct algorithm's step, which
 * talks to every peer at once, is such a batch).  Each is the fastest of
 * 20 blocks, averaged over the two ranks: the cost when neither rank was
 * descheduled.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "config.h"
#include "transport.h"

#define BENCH_MAX_REC 256

typedef struct {
    pthread_barrier_t barrier;
    double gbps[2][8];         /* per mode, per size */
    double msg_s[2][2];        /* -m: per rank, seconds per batch of 1, K */
    unsigned char recs[2 * BENCH_MAX_REC];
} bench_shared_t;

typedef struct {
    bench_shared_t *sh;
    int rank;
} bench_ctx_t;

static tacl_status_t bench_exchange(void *ctx, void *all, size_t size)
{
    bench_ctx_t *bc = ctx;

    if (size > BENCH_MAX_REC)
        return TACL_ERR_INTERNAL;
    memcpy(bc->sh->recs + (size_t)bc->rank * size,
           (char *)all + (size_t)bc->rank * size, size);
    pthread_barrier_wait(&bc->sh->barrier);
    memcpy(all, bc->sh->recs, 2 * size);
    pthread_barrier_wait(&bc->sh->barrier);
    return TACL_OK;
}

static void on_done(tacl__tl_op_t *op, tacl_status_t status)
{
    int *pending = op->arg;

    if (status != TACL_OK) {
        fprintf(stderr, "shm_bench: operation failed: %s\n",
                tacl_status_string(status));
        exit(2);
    }
    --*pending;
}

/* Drive the transport until *pending reaches zero. */
static void drive(tacl__tl_t *tl, int *pending)
{
    long long spin = tacl__config_int(TACL_CFG_SHM_SPIN);
    long long idle = 0;

    while (*pending > 0) {
        int n = tacl__tl_progress(tl);

        if (n < 0) {
            fprintf(stderr, "shm_bench: progress failed: %s\n",
                    tacl_status_string(n));
            exit(2);
        }
        idle = n ? 0 : idle + 1;
        if (idle > spin)
            tacl__tl_wait(tl, 100000);
    }
}

static double run_size(tacl__tl_t *tl, int rank, uint8_t *buf, size_t size,
                       int iters)
{
    tacl__tl_op_t ops[64], ack;
    int pending = 0;
    uint64_t t0 = 0;

    memset(&ack, 0, sizeof(ack));
    ack.peer = !rank;
    ack.tag = 1u << 20;
    ack.memtype = TACL_MEM_HOST;
    ack.cb = on_done;
    ack.arg = &pending;
    for (int pass = 0; pass < 2; ++pass) {  /* pass 0 warms up */
        int n = pass ? iters : 1;

        t0 = tacl__now_ns();
        for (int i = 0; i < n; ++i) {
            memset(&ops[i], 0, sizeof(ops[i]));
            ops[i].peer = !rank;
            ops[i].tag = (uint64_t)i;
            ops[i].buf = buf;
            ops[i].len = size;
            ops[i].memtype = TACL_MEM_HOST;
            ops[i].cb = on_done;
            ops[i].arg = &pending;
            ++pending;
            if ((rank ? tacl__tl_recv : tacl__tl_send)(tl, &ops[i]))
                exit(2);
        }
        ++pending;
        if ((rank ? tacl__tl_send : tacl__tl_recv)(tl, &ack))
            exit(2);
        drive(tl, &pending);
    }
    return (double)size * iters / (double)(tacl__now_ns() - t0);
}

/* Messages per batch of the -m measurement's second figure. */
#define MSG_K 16
#define MSG_BLOCKS 20
#define MSG_ITERS 500

/* Seconds per batch of k 8-byte messages each way, fastest block. */
static double msg_batch(tacl__tl_t *tl, int rank, int k)
{
    tacl__tl_op_t ops[2 * MSG_K];
    uint64_t sendv[MSG_K], recvv[MSG_K], tag = 0;
    double best = 1e30;
    int pending = 0;

    for (int b = -1; b < MSG_BLOCKS; b++) {  /* block -1 warms up */
        uint64_t t0 = tacl__now_ns();

        for (int it = 0; it < MSG_ITERS; it++, tag++) {
            memset(ops, 0, sizeof(ops));
            for (int i = 0; i < 2 * k; i++) {
                tacl__tl_op_t *op = &ops[i];

                op->peer = !rank;
                op->tag = (tag % (1u << 16)) * MSG_K + (uint64_t)(i % k);
                op->buf = i < k ? (void *)&sendv[i] : (void *)&recvv[i - k];
                op->len = sizeof(uint64_t);
                op->memtype = TACL_MEM_HOST;
                op->cb = on_done;
                op->arg = &pending;
                ++pending;
                if ((i < k ? tacl__tl_send : tacl__tl_recv)(tl, op))
                    exit(2);
            }
            drive(tl, &pending);
        }
        if (b >= 0)
            best = TACL_MIN(best,
                            (double)(tacl__now_ns() - t0) * 1e-9 / MSG_ITERS);
    }
    return best;
}

static const size_t sizes[] = {64u << 10, 256u << 10, 1u << 20, 16u << 20,
                               128u << 20};
static const int iters[] = {64, 64, 64, 16, 4};

/* mode 2: the -m measurement. */
static void child(bench_shared_t *sh, int rank, int mode, size_t max)
{
    const char *ids[2] = {"n0", "n0"};
    bench_ctx_t ctx = {sh, rank};
    tacl__tl_params_t params = {
        .rank = rank, .nranks = 2, .node_id = "n0", .node_ids = ids,
        .timeout_s = 60, .exchange = bench_exchange, .exchange_ctx = &ctx};
    tacl__tl_t *tl;
    uint8_t *buf = malloc(max);

    setenv("TACL_SHM_MODE", mode == 1 ? "copy" : "cma", 1);
    tacl__config_reload();
    if (!buf || tacl__tl_shm_ops.init(&params, &tl) != TACL_OK)
        exit(2);
    if (mode == 2) {
        sh->msg_s[rank][0] = msg_batch(tl, rank, 1);
        sh->msg_s[rank][1] = msg_batch(tl, rank, MSG_K);
        max = 0;
    }
    memset(buf, rank + 1, max);
    for (size_t s = 0; s < TACL_ARRAY_SIZE(sizes) && sizes[s] <= max; ++s) {
        double gbps = run_size(tl, rank, buf, sizes[s], iters[s]);

        if (rank == 0)
            sh->gbps[mode][s] = gbps;
    }
    tacl__tl_close(tl);
    free(buf);
    exit(0);
}

static double memcpy_gbps(size_t size)
{
    uint8_t *a = malloc(size), *b = malloc(size);
    int reps = (int)TACL_MAX((size_t)4, (256u << 20) / size);
    uint64_t t0;

    if (!a || !b)
        exit(2);
    memset(a, 1, size);
    memset(b, 2, size);
    t0 = tacl__now_ns();
    for (int i = 0; i < reps; ++i) {
        a[0] = (uint8_t)i;
        memcpy(b, a, size);
    }
    t0 = tacl__now_ns() - t0;
    if (b[0] != (uint8_t)(reps - 1))
        exit(2);
    free(a);
    free(b);
    return (double)size * reps / (double)t0;
}

int main(int argc, char **argv)
{
    int msg = argc > 1 && strcmp(argv[1], "-m") == 0;
    size_t max = (size_t)(argc > 1 && !msg ? atoi(argv[1]) : 128) << 20;
    pthread_barrierattr_t attr;
    bench_shared_t *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    if (sh == MAP_FAILED)
        return 2;
    pthread_barrierattr_init(&attr);
    pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&sh->barrier, &attr, 2);
    for (int mode = msg ? 2 : 0; mode < (msg ? 3 : 2); ++mode) {
        pid_t pids[2];
        int ok = 1, st;

        for (int r = 0; r < 2; ++r) {
            pids[r] = fork();
            if (pids[r] == 0)
                child(sh, r, mode, max);
        }
        for (int r = 0; r < 2; ++r)
            ok &= waitpid(pids[r], &st, 0) == pids[r] && WIFEXITED(st) &&
                  WEXITSTATUS(st) == 0;
        if (!ok) {
            fprintf(stderr, "shm_bench: a rank failed in mode %s\n",
                    mode == 2 ? "-m" : mode ? "copy" : "cma");
            return 1;
        }
    }
    if (msg) {
        double one = (sh->msg_s[0][0] + sh->msg_s[1][0]) / 2;
        double many = (sh->msg_s[0][1] + sh->msg_s[1][1]) / 2;

        printf("step_us %.3f\n", one * 1e6);
        printf("msg_us %.3f\n", (many - one) / (MSG_K - 1) * 1e6);
        return 0;
    }
    printf("%10s %12s %12s %12s\n", "size", "cma GB/s", "copy GB/s",
           "memcpy GB/s");
    for (size_t s = 0; s < TACL_ARRAY_SIZE(sizes) && sizes[s] <= max; ++s)
        printf("%8zuKB %12.2f %12.2f %12.2f\n", sizes[s] >> 10,
               sh->gbps[0][s], sh->gbps[1][s], memcpy_gbps(sizes[s]));
    return 0;
}
