/*
 * Every collective on CUDA device buffers, through the public API, on 1,
 * 2 and 4 forked ranks sharing the machine's first GPU: in place and out
 * of place, blocking and _nb on the NULL stream, and on a stream where a
 * kernel writes the input just before the call and another checks the
 * output just after it, with no synchronisation between; in groups;
 * quantized calls within their bounds; and the device error paths.
 *
 * Inputs are small integers (stream_kernels.h), so every sum is exact in
 * float32 and results are compared for equality.  A case that needs a
 * device asks a child process whether one is usable (a process that forks
 * must not have touched CUDA) and skips without one, so that the program
 * exits 77 (skipped) after the checks that need no device ran
 * (tt_cuda_test_main), or fails under TT_REQUIRE_GPU=1; a rank that then
 * finds no device fails, it never passes without running.  Two and four
 * ranks need a transport that moves device memory between processes
 * (cuda_ipc).  The ranks are killed after TT_CUDA_DEADLINE_S seconds
 * (240 by default); Criterion's --timeout bounds each case.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <cuda_runtime_api.h>

#include "cuda_device.h"
#include "harness.h"
#include "stream_kernels.h"

TT_CUDA_TEST_MAIN()

#define DEADLINE_S 240
/* About a few milliseconds of GPU time before each input is written. */
#define SPIN_CYCLES 4000000LL

static float hval(int rank, size_t i, int iter)
{
    return (float)((rank + 1) * (int)(i % 7 + 1) + iter);
}

/* In a rank: fails the rank when its device is not usable. */
static int no_device(coll_ctx_t *ctx)
{
    char why[256];

    if (tt_cuda_usable(why, sizeof(why)))
        return 0;
    return coll_fail(ctx, "rank %d has no usable CUDA device although the "
                     "check before the fork found one: %s", ctx->rank, why);
}

#define CU(ctx, call)                                                        \
    do {                                                                     \
        cudaError_t e_ = (call);                                             \
        if (e_ != cudaSuccess)                                               \
            return coll_fail(ctx, "%s: %s", #call, cudaGetErrorString(e_));  \
    } while (0)

#define OK(ctx, call)                                                        \
    do {                                                                     \
        tacl_status_t s_ = (call);                                           \
        if (s_ != TACL_OK)                                                   \
            return coll_fail(ctx, "%s: %s (%s)", #call,                      \
                             tacl_status_string(s_),                         \
                             tacl_comm_last_error((ctx)->comm));             \
    } while (0)

typedef enum {
    C_ALLREDUCE_SUM,
    C_ALLREDUCE_AVG,
    C_ALLREDUCE_MAX,
    C_ALLGATHER,
    C_REDUCE_SCATTER,
    C_BROADCAST,
    C_REDUCE,
    C_ALLTOALL,
    C_SENDRECV,
    C_NUM
} coll_t;

static const char *const coll_names[C_NUM] = {
    "allreduce sum", "allreduce avg", "allreduce max", "allgather",
    "reduce_scatter", "broadcast", "reduce", "alltoall", "send/recv"};

/* Elements of the send and receive buffers (n per block). */
static void sizes(coll_t c, size_t n, int p, size_t *sn, size_t *rn)
{
    *sn = *rn = n;
    if (c == C_ALLGATHER)
        *rn = n * (size_t)p;
    else if (c == C_REDUCE_SCATTER)
        *sn = n * (size_t)p;
    else if (c == C_ALLTOALL)
        *sn = *rn = n * (size_t)p;
}

/* What element i of the output must be on rank r of p. */
static float expect(coll_t c, size_t n, int r, int p, size_t i)
{
    float acc = 0;
    size_t j = i;
    int q;

    switch (c) {
    case C_ALLGATHER:
        return hval((int)(i / n), i % n, 0);
    case C_REDUCE_SCATTER:
        j = (size_t)r * n + i;
        /* fall through */
    case C_ALLREDUCE_SUM:
    case C_REDUCE:
        for (q = 0; q < p; q++)
            acc += hval(q, j, 0);
        return acc;
    case C_ALLREDUCE_AVG:
        for (q = 0; q < p; q++)
            acc += hval(q, i, 0);
        return acc / (float)p;
    case C_ALLREDUCE_MAX:
        return hval(p - 1, i, 0);
    case C_BROADCAST:
        return hval(p - 1, i, 0);
    case C_ALLTOALL: /* block q of rank r came from block r of rank q */
        return hval((int)(i / n), (size_t)r * n + i % n, 0);
    default: /* send/recv around the ring: the previous rank's input */
        return hval((r + p - 1) % p, i, 0);
    }
}

/* Start collective c on device buffers; req_p NULL: the blocking form. */
static tacl_status_t call(coll_t c, const float *s, float *r, size_t n,
                          tacl_comm_t comm, int rank, int p, void *stream,
                          tacl_request_t *req_p)
{
    tacl_op_t op = c == C_ALLREDUCE_AVG   ? TACL_AVG
                   : c == C_ALLREDUCE_MAX ? TACL_MAX
                                          : TACL_SUM;
    tacl_status_t st;

    switch (c) {
    case C_ALLREDUCE_SUM:
    case C_ALLREDUCE_AVG:
    case C_ALLREDUCE_MAX:
        return req_p ? tacl_allreduce_nb(s, r, n, TACL_FLOAT32, op, comm,
                                         stream, req_p)
                     : tacl_allreduce(s, r, n, TACL_FLOAT32, op, comm,
                                      stream);
    case C_ALLGATHER:
        return req_p ? tacl_allgather_nb(s, r, n, TACL_FLOAT32, comm, stream,
                                         req_p)
                     : tacl_allgather(s, r, n, TACL_FLOAT32, comm, stream);
    case C_REDUCE_SCATTER:
        return req_p ? tacl_reduce_scatter_nb(s, r, n, TACL_FLOAT32, op, comm,
                                              stream, req_p)
                     : tacl_reduce_scatter(s, r, n, TACL_FLOAT32, op, comm,
                                           stream);
    case C_BROADCAST:
        return req_p ? tacl_broadcast_nb(s, r, n, TACL_FLOAT32, p - 1, comm,
                                         stream, req_p)
                     : tacl_broadcast(s, r, n, TACL_FLOAT32, p - 1, comm,
                                      stream);
    case C_REDUCE:
        return req_p ? tacl_reduce_nb(s, r, n, TACL_FLOAT32, op, 0, comm,
                                      stream, req_p)
                     : tacl_reduce(s, r, n, TACL_FLOAT32, op, 0, comm,
                                   stream);
    case C_ALLTOALL:
        return req_p ? tacl_alltoall_nb(s, r, n, TACL_FLOAT32, comm, stream,
                                        req_p)
                     : tacl_alltoall(s, r, n, TACL_FLOAT32, comm, stream);
    default:
        tacl_group_start();
        tacl_send(s, n, TACL_FLOAT32, (rank + 1) % p, comm, stream);
        tacl_recv(r, n, TACL_FLOAT32, (rank + p - 1) % p, comm, stream);
        st = req_p ? tacl_group_end_nb(req_p) : tacl_group_end();
        return st;
    }
}

/*
 * One collective on the NULL stream: inputs copied in, the call (blocking
 * or _nb and wait), the output copied out and compared element by
 * element.
 */
static int run_case(coll_ctx_t *ctx, coll_t c, size_t n, int in_place,
                    int nb)
{
    int r = ctx->rank, p = ctx->nranks;
    size_t sn, rn, i;
    float *hs, *hr, *ds = NULL, *dr = NULL;
    const float *send;
    tacl_request_t req = NULL;
    int fails = 0;

    sizes(c, n, p, &sn, &rn);
    hs = malloc(sn * sizeof(float));
    hr = malloc(rn * sizeof(float));
    if (hs == NULL || hr == NULL)
        return coll_fail(ctx, "out of host memory");
    for (i = 0; i < sn; i++)
        hs[i] = hval(r, i, 0);
    CU(ctx, cudaMalloc((void **)&dr, (rn > sn ? rn : sn) * sizeof(float)));
    CU(ctx, cudaMemset(dr, 0xff, rn * sizeof(float)));
    if (in_place) {
        /* NCCL's in-place layouts (tacl.h). */
        size_t at = c == C_ALLGATHER ? (size_t)r * n : 0;
        send = dr + at;
        CU(ctx, cudaMemcpy(dr + at, hs, sn * sizeof(float),
                           cudaMemcpyHostToDevice));
        if (c == C_REDUCE_SCATTER) {
            send = dr;
            dr += (size_t)r * n;
        }
    } else {
        CU(ctx, cudaMalloc((void **)&ds, sn * sizeof(float)));
        CU(ctx, cudaMemcpy(ds, hs, sn * sizeof(float),
                           cudaMemcpyHostToDevice));
        send = ds;
    }
    OK(ctx, call(c, send, dr, n, ctx->comm, r, p, NULL, nb ? &req : NULL));
    if (nb)
        OK(ctx, tacl_request_wait(req));
    if (nb)
        OK(ctx, tacl_request_free(req));
    CU(ctx, cudaMemcpy(hr, dr, rn * sizeof(float), cudaMemcpyDeviceToHost));
    if (c == C_REDUCE_SCATTER && in_place)
        dr -= (size_t)r * n;
    for (i = 0; i < rn && fails < 5; i++) {
        float want = expect(c, n, r, p, i);

        if (c == C_REDUCE && r != 0)
            break; /* only the root's output is defined */
        if (hr[i] != want)
            fails += coll_fail(ctx, "%s of %zu, %s, %s: element %zu is %g, "
                               "not %g", coll_names[c], n,
                               in_place ? "in place" : "out of place",
                               nb ? "_nb" : "blocking", i, hr[i], want);
    }
    cudaFree(ds);
    cudaFree(dr);
    free(hs);
    free(hr);
    return fails != 0;
}

static int body_every_collective(coll_ctx_t *ctx)
{
    static const size_t counts[] = {1000, 300001};

    if (no_device(ctx))
        return 1;
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
        for (int c = 0; c < C_NUM; c++)
            for (int in_place = 0; in_place < 2; in_place++)
                for (int nb = 0; nb < 2; nb++) {
                    if (in_place && (c == C_ALLTOALL || c == C_SENDRECV))
                        continue;
                    if (run_case(ctx, (coll_t)c, counts[k], in_place, nb))
                        return 1;
                }
    return 0;
}

/*
 * Stream order: on one stream, per iteration, a delay, a kernel writing
 * the input, the call (the blocking form on even iterations, _nb on odd
 * ones), and a kernel checking the output, with no synchronisation until
 * the end.  A call that read its input before the kernel wrote it, or a
 * check that ran before the call ended, counts mismatches.
 */
static int stream_case(coll_ctx_t *ctx, cudaStream_t s, coll_t c, int kind,
                       size_t n, unsigned *bad)
{
    int r = ctx->rank, p = ctx->nranks;
    size_t sn, rn;
    float *ds, *dr;
    tacl_request_t reqs[4] = {NULL};
    unsigned nbad = 0;

    sizes(c, n, p, &sn, &rn);
    CU(ctx, cudaMalloc((void **)&ds, sn * sizeof(float)));
    CU(ctx, cudaMalloc((void **)&dr, rn * sizeof(float)));
    CU(ctx, cudaMemset(bad, 0, sizeof(*bad)));
    CU(ctx, cudaDeviceSynchronize());
    for (int it = 0; it < 4; it++) {
        if (ttk_spin(s, SPIN_CYCLES) || ttk_fill(ds, sn, r, it, s))
            return coll_fail(ctx, "a test kernel did not launch");
        /* The input is rank r's at iteration it; the check expects the
         * same formula (stream_kernels.cu). */
        OK(ctx, call(c, ds, dr, n, ctx->comm, r, p, s,
                     it % 2 ? &reqs[it] : NULL));
        if (ttk_check(dr, c == C_REDUCE_SCATTER ? n : rn, kind, p, r, p - 1,
                      it, bad, s))
            return coll_fail(ctx, "the check kernel did not launch");
    }
    CU(ctx, cudaStreamSynchronize(s));
    for (int it = 0; it < 4; it++)
        if (reqs[it] != NULL) {
            OK(ctx, tacl_request_wait(reqs[it]));
            OK(ctx, tacl_request_free(reqs[it]));
        }
    CU(ctx, cudaMemcpy(&nbad, bad, sizeof(nbad), cudaMemcpyDeviceToHost));
    cudaFree(ds);
    cudaFree(dr);
    if (nbad != 0)
        return coll_fail(ctx, "%s of %zu on a stream: %u elements wrong "
                         "over 4 iterations (the call did not keep the "
                         "stream's order)", coll_names[c], n, nbad);
    return 0;
}

/* Two collectives in one group on the stream, checked after it. */
static int stream_group(coll_ctx_t *ctx, cudaStream_t s, size_t n,
                        unsigned *bad)
{
    int r = ctx->rank, p = ctx->nranks;
    float *a, *ar, *g;
    unsigned nbad = 0;

    CU(ctx, cudaMalloc((void **)&a, n * sizeof(float)));
    CU(ctx, cudaMalloc((void **)&ar, n * sizeof(float)));
    CU(ctx, cudaMalloc((void **)&g, n * (size_t)p * sizeof(float)));
    CU(ctx, cudaMemset(bad, 0, sizeof(*bad)));
    CU(ctx, cudaDeviceSynchronize());
    if (ttk_spin(s, SPIN_CYCLES) || ttk_fill(a, n, r, 5, s))
        return coll_fail(ctx, "a test kernel did not launch");
    OK(ctx, tacl_group_start());
    OK(ctx, tacl_allreduce(a, ar, n, TACL_FLOAT32, TACL_SUM, ctx->comm, s));
    OK(ctx, tacl_allgather(a, g, n, TACL_FLOAT32, ctx->comm, s));
    OK(ctx, tacl_group_end());
    if (ttk_check(ar, n, TTK_SUM, p, r, 0, 5, bad, s) ||
        ttk_check(g, n * (size_t)p, TTK_GATHER, p, r, 0, 5, bad, s))
        return coll_fail(ctx, "the check kernel did not launch");
    CU(ctx, cudaStreamSynchronize(s));
    CU(ctx, cudaMemcpy(&nbad, bad, sizeof(nbad), cudaMemcpyDeviceToHost));
    cudaFree(a);
    cudaFree(ar);
    cudaFree(g);
    if (nbad != 0)
        return coll_fail(ctx, "a group on a stream: %u elements wrong",
                         nbad);
    return 0;
}

static int body_streams(coll_ctx_t *ctx)
{
    static const struct {
        coll_t c;
        int kind;
    } cases[] = {{C_ALLREDUCE_SUM, TTK_SUM},
                 {C_ALLGATHER, TTK_GATHER},
                 {C_REDUCE_SCATTER, TTK_SCATTER_SUM},
                 {C_BROADCAST, TTK_BCAST}};
    cudaStream_t s;
    unsigned *bad;

    if (no_device(ctx))
        return 1;
    CU(ctx, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CU(ctx, cudaMalloc((void **)&bad, sizeof(*bad)));
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
        for (size_t n = 4096; n <= (1u << 20); n *= 256)
            if (stream_case(ctx, s, cases[k].c, cases[k].kind, n, bad))
                return 1;
    if (stream_group(ctx, s, 50000, bad))
        return 1;
    cudaFree(bad);
    cudaStreamDestroy(s);
    return 0;
}

/*
 * Quantized calls on device buffers (NULL stream), within the bound the
 * quantization implies: half a step of the largest input magnitude per
 * quantized contribution (a looser bound than tests/coll/test_quant.c's
 * per-block one, valid wherever the blocks fall), plus float32 rounding.
 */
static int body_quantized(coll_ctx_t *ctx)
{
    int r = ctx->rank, p = ctx->nranks;
    size_t n = 5000, i;
    float *hs, *hr, *ds, *dr, top = 0;
    tacl_quant_t q = {8, 0};

    if (no_device(ctx))
        return 1;
    hs = malloc(n * (size_t)p * sizeof(float));
    hr = malloc(n * (size_t)p * sizeof(float));
    if (hs == NULL || hr == NULL)
        return coll_fail(ctx, "out of host memory");
    for (int k = 0; k < p; k++)
        top = fmaxf(top, hval(k, 6, 0)); /* i % 7 == 6: the largest */
    for (i = 0; i < n * (size_t)p; i++)
        hs[i] = hval(r, i, 0);
    CU(ctx, cudaMalloc((void **)&ds, n * (size_t)p * sizeof(float)));
    CU(ctx, cudaMalloc((void **)&dr, n * (size_t)p * sizeof(float)));
    CU(ctx, cudaMemcpy(ds, hs, n * (size_t)p * sizeof(float),
                       cudaMemcpyHostToDevice));
    OK(ctx, tacl_allgather_quantized(ds, dr, n, TACL_FLOAT32, &q, ctx->comm,
                                     NULL));
    CU(ctx, cudaMemcpy(hr, dr, n * (size_t)p * sizeof(float),
                       cudaMemcpyDeviceToHost));
    for (i = 0; i < n * (size_t)p; i++) {
        float x = hval((int)(i / n), i % n, 0);
        double e = 0.5 * top / 127 * (1 + 1e-6) + 0x1p-24 * (fabs(x) + top);

        if ((int)(i / n) == r ? hr[i] != x : fabs(hr[i] - x) > e)
            return coll_fail(ctx, "quantized allgather: element %zu is %g, "
                             "expected %g within %g", i, hr[i], x,
                             (int)(i / n) == r ? 0.0 : e);
    }
    OK(ctx, tacl_reduce_scatter_quantized(ds, dr, n, TACL_FLOAT32, TACL_SUM,
                                          &q, ctx->comm, NULL));
    CU(ctx, cudaMemcpy(hr, dr, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (i = 0; i < n; i++) {
        double sum = 0, err = p * (0.5 * top / 127 * (1 + 1e-6));

        for (int k = 0; k < p; k++)
            sum += hval(k, (size_t)r * n + i, 0);
        err += 0x1p-22 * p * (top + err) + 0x1p-24 * (fabs(sum) + err);
        if (fabs(hr[i] - sum) > err)
            return coll_fail(ctx, "quantized reduce_scatter: element %zu "
                             "is %g, expected %g within %g", i, hr[i], sum,
                             err);
    }
    cudaFree(ds);
    cudaFree(dr);
    free(hs);
    free(hr);
    return 0;
}

/* The status and the message a refused call must give. */
static int expect_refused(coll_ctx_t *ctx, tacl_status_t st,
                          tacl_status_t want, const char *part,
                          const char *what)
{
    const char *msg = tacl_comm_last_error(ctx->comm);

    if (st != want)
        return coll_fail(ctx, "%s gave %s, not %s (%s)", what,
                         tacl_status_string(st), tacl_status_string(want),
                         msg);
    if (strstr(msg, part) == NULL)
        return coll_fail(ctx, "%s: the message \"%s\" does not say \"%s\"",
                         what, msg, part);
    return 0;
}

static int body_errors(coll_ctx_t *ctx)
{
    float *d, *freed, host[16] = {0};
    cudaStream_t s;
    int ndev = 0;

    if (no_device(ctx))
        return 1;
    CU(ctx, cudaMalloc((void **)&d, 64 * sizeof(float)));
    CU(ctx, cudaMalloc((void **)&freed, 64 * sizeof(float)));
    CU(ctx, cudaFree(freed));
    CU(ctx, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    /* A freed pointer is no device memory: with a stream, refused. */
    if (expect_refused(ctx, tacl_allreduce(freed, freed, 16, TACL_FLOAT32,
                                           TACL_SUM, ctx->comm, s),
                       TACL_ERR_INVALID_ARG, "host memory",
                       "a freed device pointer on a stream"))
        return 1;
    /* Host and device buffers in one call. */
    if (expect_refused(ctx, tacl_allreduce(d, host, 16, TACL_FLOAT32,
                                           TACL_SUM, ctx->comm, NULL),
                       TACL_ERR_INVALID_ARG, "recvbuf",
                       "device sendbuf with host recvbuf") ||
        expect_refused(ctx, tacl_allgather(host, d, 16, TACL_FLOAT32,
                                           ctx->comm, s),
                       TACL_ERR_INVALID_ARG, "CUDA device memory",
                       "host sendbuf with device recvbuf"))
        return 1;
    CU(ctx, cudaGetDeviceCount(&ndev));
    if (ndev >= 2) {
        cudaStream_t other;
        float *far;
        int cur;

        CU(ctx, cudaGetDevice(&cur));
        CU(ctx, cudaSetDevice(cur == 0 ? 1 : 0));
        CU(ctx, cudaStreamCreate(&other));
        CU(ctx, cudaMalloc((void **)&far, 64 * sizeof(float)));
        CU(ctx, cudaSetDevice(cur));
        if (expect_refused(ctx, tacl_allreduce(d, d, 16, TACL_FLOAT32,
                                               TACL_SUM, ctx->comm, other),
                           TACL_ERR_INVALID_ARG, "belongs to CUDA device",
                           "a stream of another device") ||
            expect_refused(ctx, tacl_allreduce(far, far, 16, TACL_FLOAT32,
                                               TACL_SUM, ctx->comm, NULL),
                           TACL_ERR_INVALID_ARG, "the communicator's device",
                           "memory of another device"))
            return 1;
        cudaFree(far);
        cudaStreamDestroy(other);
    } else {
        fprintf(stderr, "rank %d: one CUDA device: the other-device cases "
                "are left out\n", ctx->rank);
    }
    /* The communicator still works. */
    CU(ctx, cudaMemset(d, 0, 64 * sizeof(float)));
    OK(ctx, tacl_allreduce(d, d, 64, TACL_FLOAT32, TACL_SUM, ctx->comm, s));
    CU(ctx, cudaStreamSynchronize(s));
    cudaStreamDestroy(s);
    cudaFree(d);
    return 0;
}

/*
 * Needs no device: a stream with host buffers is refused with a message
 * saying the buffers are host memory (on every build).
 */
static int body_host_stream(coll_ctx_t *ctx)
{
    float a[8] = {0}, b[8];
    tacl_stream_t fake = (tacl_stream_t)(uintptr_t)0x1000;

    return expect_refused(ctx, tacl_allreduce(a, b, 8, TACL_FLOAT32,
                                              TACL_SUM, ctx->comm, fake),
                          TACL_ERR_INVALID_ARG, "host memory",
                          "a stream with host buffers");
}

static void run(int nranks, coll_body_t body)
{
    coll_opts_t opts = {.nranks = nranks,
                        .deadline_s = tt_cuda_deadline_s(DEADLINE_S)};
    coll_result_t res;

    coll_run(&opts, body, &res);
    coll_expect_pass(&res);
}

/* A case on device buffers: skipped (or failed) without a device. */
static void run_dev(int nranks, coll_body_t body)
{
    tt_skip_without_device_forked();
    run(nranks, body);
}

Test(cuda_coll, host_buffers_with_a_stream) { run(1, body_host_stream); }
Test(cuda_coll, every_collective_1) { run_dev(1, body_every_collective); }
Test(cuda_coll, every_collective_2) { run_dev(2, body_every_collective); }
Test(cuda_coll, every_collective_4) { run_dev(4, body_every_collective); }
Test(cuda_coll, streams_1) { run_dev(1, body_streams); }
Test(cuda_coll, streams_2) { run_dev(2, body_streams); }
Test(cuda_coll, streams_4) { run_dev(4, body_streams); }
Test(cuda_coll, quantized_2) { run_dev(2, body_quantized); }
Test(cuda_coll, quantized_4) { run_dev(4, body_quantized); }
Test(cuda_coll, errors) { run_dev(1, body_errors); }
