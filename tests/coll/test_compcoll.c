/*
 * The compressed collectives (tacl_comp_allreduce, _reduce_scatter,
 * _allgather) against a reference every rank computes alone with the
 * codec API: every built-in codec, every scheme it takes, with and
 * without error feedback (two steps, so the second carries the first's
 * residual), 1 to 8 ranks and two emulated nodes of two.
 *
 * The reference encodes every rank's input as the scheme does (whole, or
 * chunk by chunk) and decodes and adds in rank order, so GATHER and
 * SHUFFLE must match it bit for bit, and so must the residuals.  SUM adds
 * encodings in the all-reduce's order, so its inputs are multiples of 1/4
 * below 8, whose sums are exact in float16, bfloat16 and float32: it too
 * must match bit for bit.  For the codecs with a bound against the true
 * value (fp16, bf16, int8, int4), the first step's result is also checked
 * against the true sum within the sum of the ranks' bounds (and the
 * owner's re-encoding for SHUFFLE).  Then each kind of bad input, named.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "rng.h"

typedef enum { K_ALLREDUCE, K_REDUCE_SCATTER, K_ALLGATHER } kind_t;

static const char *const kind_names[] = {"allreduce", "reduce_scatter",
                                         "allgather"};

typedef struct {
    const char *codec;
    tacl_codec_params_t params;
    double rel;  /* bound: rel * |x| (casts) */
    double step; /* bound: step * max|x| (quantizers); both 0: none */
} codec_case_t;

static const codec_case_t codecs[] = {
    {"fp16", {.bits = 0}, 0x1p-11, 0},
    {"bf16", {.bits = 0}, 0x1p-8, 0},
    {"int8", {.bits = 8, .block = 64}, 0, 1.0 / 254},
    {"int4", {.bits = 4, .block = 64}, 0, 1.0 / 14},
    {"topk", {.density = 0.1}, 0, 0},
    {"threshold", {.density = 0.1}, 0, 0},
    {"randk", {.density = 0.25, .seed = 11}, 0, 0},
    {"sign", {.bits = 0}, 0, 0},
};
#define NCODECS (sizeof(codecs) / sizeof(codecs[0]))

/* Values of a rank's input: the call's count argument and the total. */
static size_t in_count(kind_t k, size_t count, int n)
{
    return k == K_REDUCE_SCATTER ? count * (size_t)n : count;
}

/* Rank r's input at a step: the same on every rank. */
static void fill_input(float *x, size_t cnt, int r, int step, int exact,
                       unsigned salt)
{
    tt_rng_t rng = {0x7f4a7c159e3779b9ull ^ ((uint64_t)(r + 1) << 32) ^
                    ((uint64_t)step << 16) ^ salt};

    for (size_t i = 0; i < cnt; i++) {
        uint64_t u = tt_rng_next(&rng);

        if (exact)
            x[i] = (float)((int)(u % 63) - 31) / 4.0f;
        else
            x[i] = (float)(((double)(u >> 11) * 0x1p-53 - 0.5) *
                           ldexp(1.0, (int)(u % 9) - 4));
    }
}

/* Where chunk j of an encoding starts and its length, as tacl.h says. */
static void chunk(kind_t k, size_t count, int n, int j, size_t *off,
                  size_t *len)
{
    if (k == K_REDUCE_SCATTER) {
        *off = (size_t)j * count;
        *len = count;
        return;
    }
    *off = (size_t)((unsigned __int128)count * (unsigned)j / (unsigned)n);
    *len = (size_t)((unsigned __int128)count * (unsigned)(j + 1) /
                    (unsigned)n) -
           *off;
}

/* Encode cnt values of x (with err) and decode them into out, or add
 * them to out; what every scheme does to a piece of a rank's input. */
static int through_codec(const tacl_codec_t *codec,
                         const tacl_codec_params_t *p, const float *x,
                         size_t cnt, float *err, float *out, int add)
{
    size_t bound, bytes;
    void *enc;
    int rc;

    if (cnt == 0)
        return 0;
    if (tacl_codec_encoded_bound(codec, p, 1, &cnt, &bound) != TACL_OK)
        return -1;
    enc = malloc(bound);
    rc = enc == NULL ||
         tacl_codec_encode(codec, p, 1, &x, &cnt, err ? &err : NULL, enc,
                           bound, &bytes) != TACL_OK ||
         (add ? tacl_codec_decode_accumulate(codec, p, enc, bytes, 1, &out,
                                             &cnt)
              : tacl_codec_decode(codec, p, enc, bytes, 1, &out, &cnt)) !=
             TACL_OK;
    free(enc);
    return rc ? -1 : 0;
}

typedef struct {
    kind_t kind;
    tacl_comp_scheme_t scheme;
    const codec_case_t *cc;
    size_t count;
    int use_err;
} call_case_t;

/* Whether scheme s encodes a rank's input chunk by chunk. */
static int by_chunks(const call_case_t *c)
{
    return c->scheme == TACL_COMP_SHUFFLE ||
           (c->scheme == TACL_COMP_SUM && c->kind == K_REDUCE_SCATTER);
}

/* Whether the call is qwZ itself: an all-gather with a block quantizer
 * and no residual, which keeps the caller's own block exact. */
static int is_qwz(const call_case_t *c, const tacl_codec_t *codec)
{
    return c->kind == K_ALLGATHER && !c->use_err &&
           (strcmp(codec->name, "int8") == 0 ||
            strcmp(codec->name, "int4") == 0);
}

/*
 * The expected output of this rank (out) and every rank's residual after
 * the call (errs, n of them, updated), from every rank's input (xs).
 */
static int reference(const call_case_t *c, const tacl_codec_t *codec,
                     const tacl_codec_params_t *p, int n, int rank,
                     float *const *xs, float *const *errs, float *out)
{
    size_t ic = in_count(c->kind, c->count, n), off, len;
    float *sum = calloc(ic ? ic : 1, sizeof(float));
    int rc = sum == NULL;

    for (int r = 0; r < n && !rc; r++) {
        float *e = c->use_err ? errs[r] : NULL;

        if (c->kind == K_ALLGATHER && r == rank && is_qwz(c, codec)) {
            memcpy(out + r * ic, xs[r], ic * sizeof(float));
            continue;
        }
        if (c->kind == K_ALLGATHER) {
            rc = through_codec(codec, p, xs[r], ic, e, out + r * ic, 0);
            continue;
        }
        /* Rank r's input piece by piece as the scheme encodes it, decoded
         * and added in rank order. */
        for (int j = 0; j < (by_chunks(c) ? n : 1) && !rc; j++) {
            if (by_chunks(c))
                chunk(c->kind, c->count, n, j, &off, &len);
            else
                off = 0, len = ic;
            rc = through_codec(codec, p, xs[r] + off, len, e ? e + off : NULL,
                               sum + off, r > 0);
        }
    }
    if (!rc && c->kind == K_REDUCE_SCATTER)
        memcpy(out, sum + (size_t)rank * c->count, c->count * sizeof(float));
    if (!rc && c->kind == K_ALLREDUCE && c->scheme != TACL_COMP_SHUFFLE)
        memcpy(out, sum, ic * sizeof(float));
    /* SHUFFLE: each owner's sum is encoded once more. */
    for (int j = 0; !rc && c->kind == K_ALLREDUCE &&
                    c->scheme == TACL_COMP_SHUFFLE && j < n;
         j++) {
        chunk(c->kind, c->count, n, j, &off, &len);
        rc = through_codec(codec, p, sum + off, len, NULL, out + off, 0);
    }
    free(sum);
    return rc;
}

/*
 * The result against the true sum (or values) within the codec's bound,
 * for the codecs that state one against the input.
 */
static int within_bound(coll_ctx_t *ctx, const call_case_t *c, int n,
                        float *const *xs, const float *got)
{
    const codec_case_t *cc = c->cc;
    size_t ic = in_count(c->kind, c->count, n);
    size_t oc = c->kind == K_ALLGATHER        ? ic * (size_t)n
                : c->kind == K_REDUCE_SCATTER ? c->count
                                              : ic;
    double maxabs = 0;

    if (cc->rel == 0 && cc->step == 0)
        return 0;
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < ic; i++)
            maxabs = fmax(maxabs, fabs(xs[r][i]));
    for (size_t o = 0; o < oc; o++) {
        size_t i = c->kind == K_REDUCE_SCATTER
                       ? (size_t)ctx->rank * c->count + o
                       : o;
        double want = 0, absum = 0, tol;
        int from = 0, to = n;

        if (c->kind == K_ALLGATHER) {
            from = (int)(o / ic);
            to = from + 1;
            i = o % ic;
        }
        for (int r = from; r < to; r++) {
            want += xs[r][i];
            absum += fabs(xs[r][i]);
        }
        /* Each rank's encoding, float32 additions, and SHUFFLE's second
         * encoding of a sum of at most n * maxabs. */
        tol = cc->rel * absum + cc->step * maxabs * (to - from) +
              0x1p-22 * absum * n + (cc->rel > 0 ? 0x1p-24 * n : 0);
        if (c->scheme == TACL_COMP_SHUFFLE && c->kind == K_ALLREDUCE)
            tol += cc->rel * (absum + tol) + cc->step * maxabs * n * 1.1 +
                   (cc->rel > 0 ? 0x1p-24 : 0);
        if (fabs(got[o] - want) > tol)
            return coll_fail(ctx,
                             "%s %s %s: value %zu is %.9g, the true "
                             "one %.9g, beyond the bound %.3g",
                             kind_names[c->kind], cc->codec,
                             tacl_comp_scheme_name(c->scheme), o,
                             (double)got[o], want, tol);
    }
    return 0;
}

/* One case over two steps, on comm. */
static int run_call(coll_ctx_t *ctx, tacl_comm_t comm, const call_case_t *c)
{
    int n = ctx->nranks, failed = 0;
    size_t ic = in_count(c->kind, c->count, n);
    size_t oc = c->kind == K_ALLGATHER        ? ic * (size_t)n
                : c->kind == K_REDUCE_SCATTER ? c->count
                                              : ic;
    const tacl_codec_t *codec;
    tacl_codec_params_t p = c->cc->params;
    float *xs[COLL_MAX_RANKS], *errs[COLL_MAX_RANKS];
    float *got = malloc(oc * sizeof(float)),
          *want = malloc(oc * sizeof(float));
    float *myerr = calloc(ic, sizeof(float));
    int exact = c->scheme == TACL_COMP_SUM;

    COLL_CHECK(ctx, got && want && myerr, "out of memory");
    COLL_CHECK_OK(ctx, tacl_codec_find(c->cc->codec, &codec));
    for (int r = 0; r < n; r++) {
        xs[r] = malloc(ic * sizeof(float));
        errs[r] = calloc(ic, sizeof(float));
        COLL_CHECK(ctx, xs[r] && errs[r], "out of memory");
    }
    for (int step = 0; step < 2 && !failed; step++) {
        if (strcmp(c->cc->codec, "randk") == 0)
            p.seed = c->cc->params.seed + (uint64_t)step;
        for (int r = 0; r < n; r++)
            fill_input(xs[r], ic, r, step, exact, (unsigned)c->count);
        COLL_CHECK(ctx,
                   reference(c, codec, &p, n, ctx->rank, xs, errs, want) == 0,
                   "the reference failed: %s", tacl_comm_last_error(comm));
        switch (c->kind) {
        case K_ALLREDUCE:
            COLL_CHECK_OK(ctx, tacl_comp_allreduce(xs[ctx->rank], got,
                                                   c->count, codec, &p,
                                                   c->use_err ? myerr : NULL,
                                                   c->scheme, comm));
            break;
        case K_REDUCE_SCATTER:
            COLL_CHECK_OK(ctx,
                          tacl_comp_reduce_scatter(xs[ctx->rank], got,
                                                   c->count, codec, &p,
                                                   c->use_err ? myerr : NULL,
                                                   c->scheme, comm));
            break;
        default:
            COLL_CHECK_OK(ctx, tacl_comp_allgather(xs[ctx->rank], got,
                                                   c->count, codec, &p,
                                                   c->use_err ? myerr : NULL,
                                                   comm));
        }
        for (size_t o = 0; o < oc && !failed; o++)
            if (memcmp(&got[o], &want[o], sizeof(float)) != 0)
                failed = coll_fail(ctx,
                                   "%s %s %s err %d step %d, %d ranks:"
                                   " value %zu is %.9g, want %.9g",
                                   kind_names[c->kind], c->cc->codec,
                                   tacl_comp_scheme_name(c->scheme),
                                   c->use_err, step, n, o, (double)got[o],
                                   (double)want[o]);
        if (!failed && c->use_err &&
            memcmp(myerr, errs[ctx->rank], ic * sizeof(float)) != 0)
            failed = coll_fail(ctx,
                               "%s %s %s step %d: the residual "
                               "differs from the reference's",
                               kind_names[c->kind], c->cc->codec,
                               tacl_comp_scheme_name(c->scheme), step);
        if (!failed && step == 0 && !c->use_err)
            failed = within_bound(ctx, c, n, xs, got);
    }
    for (int r = 0; r < n; r++) {
        free(xs[r]);
        free(errs[r]);
    }
    free(got);
    free(want);
    free(myerr);
    return failed;
}

/* Every kind, codec and scheme it takes, with and without feedback. */
static int body_all(coll_ctx_t *ctx)
{
    const int two_nodes = ctx->arg != NULL;
    tacl_comm_t comm = ctx->comm;
    int failed = 0;

    if (two_nodes)
        COLL_CHECK_OK(ctx, coll_join_node(ctx, "compcoll-node", 2, &comm));
    for (int k = 0; k < 3 && !failed; k++) {
        for (size_t ci = 0; ci < NCODECS && !failed; ci++) {
            for (int s = 0; s < TACL_COMP_QUANT_A2A && !failed; s++) {
                const tacl_codec_t *codec;
                call_case_t c = {.kind = (kind_t)k,
                                 .scheme = (tacl_comp_scheme_t)s,
                                 .cc = &codecs[ci],
                                 .count = k == K_ALLREDUCE        ? 1003
                                          : k == K_REDUCE_SCATTER ? 131
                                                                  : 301};

                COLL_CHECK_OK(ctx, tacl_codec_find(codecs[ci].codec, &codec));
                if (k == K_ALLGATHER && s != TACL_COMP_GATHER)
                    continue;
                if (s == TACL_COMP_SUM &&
                    !(codec->flags & TACL_CODEC_SUMMABLE))
                    continue;
                for (c.use_err = 0; c.use_err < 2 && !failed; c.use_err++)
                    failed = run_call(ctx, comm, &c);
            }
        }
    }
    if (two_nodes)
        COLL_CHECK_OK(ctx, tacl_comm_destroy(comm));
    return failed;
}

Test(compcoll, every_scheme_one_to_eight_ranks, .timeout = 600)
{
    for (int n = 1; n <= 8; n++) {
        coll_opts_t opts = {.nranks = n, .deadline_s = 240};

        coll_run_opts_expect_pass(&opts, body_all);
    }
}

Test(compcoll, two_emulated_nodes_of_two, .timeout = 300)
{
    static int two = 1;
    coll_opts_t opts = {.nranks = 4,
                        .deadline_s = 240,
                        .arg = &two,
                        .init = COLL_INIT_MANUAL};

    coll_run_opts_expect_pass(&opts, body_all);
}

/* A count of zero: nothing to do, on every scheme. */
static int body_empty(coll_ctx_t *ctx)
{
    const tacl_codec_t *codec;
    tacl_codec_params_t p = {.bits = 0};
    float x = 1, y = 7;

    COLL_CHECK_OK(ctx, tacl_codec_find("fp16", &codec));
    for (int s = 0; s < TACL_COMP_QUANT_A2A; s++) {
        COLL_CHECK_OK(ctx,
                      tacl_comp_allreduce(&x, &y, 0, codec, &p, NULL,
                                          (tacl_comp_scheme_t)s, ctx->comm));
        COLL_CHECK_OK(ctx,
                      tacl_comp_reduce_scatter(&x, &y, 0, codec, &p, NULL,
                                               (tacl_comp_scheme_t)s,
                                               ctx->comm));
    }
    COLL_CHECK_OK(ctx,
                  tacl_comp_allgather(&x, &y, 0, codec, &p, NULL, ctx->comm));
    COLL_CHECK(ctx, y == 7, "an empty call wrote %g", (double)y);
    return 0;
}

Test(compcoll, count_zero, .timeout = 120)
{
    coll_run_expect_pass(3, body_empty, NULL, NULL);
}

/* The call fails with INVALID_ARG and a last error holding word. */
#define EXPECT_BAD(ctx, call, word)                                          \
    COLL_CHECK_FAILS(ctx, call, TACL_ERR_INVALID_ARG, word)

static int body_bad(coll_ctx_t *ctx)
{
    const tacl_codec_t *fp16, *topk;
    tacl_codec_params_t p = {.density = 0.1}, zero = {.bits = 0};
    float x[64] = {0}, y[64 * 4];
    tacl_comm_t comm = ctx->comm;

    COLL_CHECK_OK(ctx, tacl_codec_find("fp16", &fp16));
    COLL_CHECK_OK(ctx, tacl_codec_find("topk", &topk));
    EXPECT_BAD(ctx,
               tacl_comp_allreduce(x, y, 64, NULL, &p, NULL, TACL_COMP_GATHER,
                                   comm),
               "codec is NULL");
    EXPECT_BAD(ctx,
               tacl_comp_allreduce(x, y, 64, fp16, NULL, NULL,
                                   TACL_COMP_GATHER, comm),
               "params");
    EXPECT_BAD(ctx,
               tacl_comp_allreduce(x, y, 64, fp16, &p, NULL,
                                   (tacl_comp_scheme_t)7, comm),
               "unknown scheme 7");
    EXPECT_BAD(ctx,
               tacl_comp_reduce_scatter(x, y, 16, topk, &p, NULL,
                                        TACL_COMP_SUM, comm),
               "topk is not");
    EXPECT_BAD(ctx,
               tacl_comp_allreduce(x, y, 64, topk, &zero, NULL,
                                   TACL_COMP_GATHER, comm),
               "density");
    EXPECT_BAD(ctx,
               tacl_comp_allreduce(NULL, y, 64, fp16, &p, NULL,
                                   TACL_COMP_GATHER, comm),
               "sendbuf");
    EXPECT_BAD(ctx, tacl_comp_allgather(x, NULL, 16, fp16, &p, NULL, comm),
               "recvbuf");
    /* Disagreements between ranks: every rank fails, naming them. */
    EXPECT_BAD(ctx,
               tacl_comp_allreduce(x, y, ctx->rank == 1 ? 63 : 64, fp16, &p,
                                   NULL, TACL_COMP_GATHER, comm),
               "count");
    EXPECT_BAD(ctx,
               tacl_comp_allreduce(x, y, 64, topk, &p, NULL,
                                   ctx->rank == 2 ? TACL_COMP_SHUFFLE
                                                  : TACL_COMP_GATHER,
                                   comm),
               "scheme");
    EXPECT_BAD(ctx,
               tacl_comp_allgather(x, y, 16, ctx->rank == 0 ? topk : fp16, &p,
                                   NULL, comm),
               "codec");
    /* And the communicator still works. */
    COLL_CHECK_OK(ctx, tacl_comp_allreduce(x, y, 64, fp16, &p, NULL,
                                           TACL_COMP_SUM, comm));
    COLL_CHECK(ctx,
               strcmp(tacl_comp_scheme_name(TACL_COMP_SHUFFLE), "shuffle") ==
                       0 &&
                   strcmp(tacl_comp_scheme_name((tacl_comp_scheme_t)9),
                          "invalid") == 0,
               "scheme names");
    return 0;
}

Test(compcoll, bad_input_is_named, .timeout = 120)
{
    coll_run_expect_pass(3, body_bad, NULL, NULL);
}

/* Bytes this rank sends over every link class. */
static uint64_t total_bytes(const tacl_sim_info_t *info)
{
    uint64_t sum = 0;

    for (int l = 0; l < TACL_NUM_LINK_CLASSES; l++)
        sum += info->bytes[l];
    return sum;
}

/* The estimate is the sum of the collectives the scheme runs. */
static int body_estimate(coll_ctx_t *ctx)
{
    const tacl_codec_t *fp16, *topk, *int8;
    tacl_codec_params_t p = {.density = 0.01, .bits = 8, .block = 64};
    tacl_sim_info_t got, hdr, data, data2, plain;
    size_t chunk_bytes, chunk = 1024;
    tacl_comm_t comm = ctx->comm;

    COLL_CHECK_OK(ctx, tacl_codec_find("fp16", &fp16));
    COLL_CHECK_OK(ctx, tacl_codec_find("topk", &topk));
    COLL_CHECK_OK(ctx, tacl_codec_find("int8", &int8));
    COLL_CHECK_OK(ctx, tacl_comm_estimate(comm, TACL_COLL_ALLGATHER, 6,
                                          TACL_UINT64, TACL_SUM, 0, &hdr));
    /* SUM: the header and an all-reduce of float16. */
    COLL_CHECK_OK(ctx, tacl_comp_estimate(comm, TACL_COLL_ALLREDUCE, 4096,
                                          fp16, &p, TACL_COMP_SUM, &got));
    COLL_CHECK_OK(ctx, tacl_comm_estimate(comm, TACL_COLL_ALLREDUCE, 4096,
                                          TACL_FLOAT16, TACL_SUM, 0, &data));
    COLL_CHECK(ctx,
               got.seconds == hdr.seconds + data.seconds &&
                   total_bytes(&got) ==
                       total_bytes(&hdr) + total_bytes(&data) &&
                   strcmp(got.algorithm, "sum") == 0,
               "sum: %g s %llu bytes (%s), want %g s %llu bytes", got.seconds,
               (unsigned long long)total_bytes(&got), got.algorithm,
               hdr.seconds + data.seconds,
               (unsigned long long)(total_bytes(&hdr) + total_bytes(&data)));
    /* SHUFFLE of a fixed-size codec: header, all-to-all-v, all-gather-v
     * of a chunk's encoding (4096 values on 4 ranks: 1024 each). */
    COLL_CHECK_OK(ctx, tacl_codec_encoded_bound(int8, &p, 1, &chunk,
                                                &chunk_bytes));
    COLL_CHECK_OK(ctx, tacl_comp_estimate(comm, TACL_COLL_ALLREDUCE, 4096,
                                          int8, &p, TACL_COMP_SHUFFLE, &got));
    COLL_CHECK_OK(ctx,
                  tacl_comm_estimate(comm, TACL_COLL_ALLTOALLV, chunk_bytes,
                                     TACL_UINT8, TACL_SUM, 0, &data));
    COLL_CHECK_OK(ctx,
                  tacl_comm_estimate(comm, TACL_COLL_ALLGATHERV, chunk_bytes,
                                     TACL_UINT8, TACL_SUM, 0, &data2));
    COLL_CHECK(ctx,
               total_bytes(&got) == total_bytes(&hdr) + total_bytes(&data) +
                                        total_bytes(&data2),
               "shuffle: %llu bytes, want %llu",
               (unsigned long long)total_bytes(&got),
               (unsigned long long)(total_bytes(&hdr) + total_bytes(&data) +
                                    total_bytes(&data2)));
    /* top-k 1% gathered sends far less than the float32 all-reduce. */
    COLL_CHECK_OK(ctx, tacl_comp_estimate(comm, TACL_COLL_ALLREDUCE, 1 << 16,
                                          topk, &p, TACL_COMP_GATHER, &got));
    COLL_CHECK_OK(ctx, tacl_comm_estimate(comm, TACL_COLL_ALLREDUCE, 1 << 16,
                                          TACL_FLOAT32, TACL_SUM, 0, &plain));
    COLL_CHECK(ctx, total_bytes(&got) * 4 < total_bytes(&plain),
               "topk 1%%: %llu bytes against %llu uncompressed",
               (unsigned long long)total_bytes(&got),
               (unsigned long long)total_bytes(&plain));
    EXPECT_BAD(ctx,
               tacl_comp_estimate(comm, TACL_COLL_BROADCAST, 16, fp16, &p,
                                  TACL_COMP_GATHER, &got),
               "broadcast");
    EXPECT_BAD(ctx,
               tacl_comp_estimate(comm, TACL_COLL_REDUCE_SCATTER, 16, topk,
                                  &p, TACL_COMP_SUM, &got),
               "topk is not");
    EXPECT_BAD(ctx,
               tacl_comp_estimate(comm, TACL_COLL_ALLGATHER, 16, fp16, &p,
                                  TACL_COMP_GATHER, NULL),
               "info_p");
    return 0;
}

Test(compcoll, estimate_sums_the_schemes_collectives, .timeout = 120)
{
    coll_run_expect_pass(4, body_estimate, NULL, NULL);
}

/* Values of share l (share long) that exist in count. */
static size_t share_len(size_t count, size_t share, int l)
{
    size_t start = (size_t)l * share;

    return start >= count ? 0 : count - start < share ? count - start : share;
}

/*
 * Hops between nodes only (tacl_comp_allreduce_hops): on nodes of per
 * ranks, the expected result is the flat reference over the nodes of
 * each share of the node sums (exact values: the node sums are exact in
 * any order), the residual of this rank's share that of its node's.
 */
static int hier_case(coll_ctx_t *ctx, tacl_comm_t comm, int per,
                     const call_case_t *c)
{
    int n = ctx->nranks, nodes = n / per, node = ctx->rank / per;
    int lr = ctx->rank % per, failed = 0;
    size_t count = c->count, share = (count + (size_t)per - 1) / (size_t)per;
    size_t valid = share_len(count, share, lr);
    call_case_t rc = *c;
    const tacl_codec_t *codec;
    tacl_codec_params_t p = c->cc->params;
    float *x = malloc(count * sizeof(float));
    float *got = malloc(count * sizeof(float));
    float *want = malloc(share * (size_t)per * sizeof(float));
    float *myerr = calloc(count, sizeof(float));
    float *ns[COLL_MAX_RANKS], *errs[COLL_MAX_RANKS][COLL_MAX_RANKS];

    COLL_CHECK(ctx, x && got && want && myerr, "out of memory");
    COLL_CHECK_OK(ctx, tacl_codec_find(c->cc->codec, &codec));
    for (int j = 0; j < nodes; j++) {
        ns[j] = malloc(share * (size_t)per * sizeof(float));
        for (int l = 0; l < per; l++)
            errs[l][j] = calloc(share, sizeof(float));
    }
    for (int step = 0; step < 2 && !failed; step++) {
        if (strcmp(c->cc->codec, "randk") == 0)
            p.seed = c->cc->params.seed + (uint64_t)step;
        for (int j = 0; j < nodes; j++) {
            memset(ns[j], 0, share * (size_t)per * sizeof(float));
            for (int r = j * per; r < (j + 1) * per; r++) {
                fill_input(x, count, r, step, 1, 77);
                for (size_t i = 0; i < count; i++)
                    ns[j][i] += x[i];
            }
        }
        for (int l = 0; l < per; l++) {
            float *xs[COLL_MAX_RANKS];

            /* The rails encode the values of their share that exist. */
            rc.count = share_len(count, share, l);
            for (int j = 0; j < nodes; j++)
                xs[j] = ns[j] + (size_t)l * share;
            COLL_CHECK(ctx,
                       reference(&rc, codec, &p, nodes, node, xs, errs[l],
                                 want + (size_t)l * share) == 0,
                       "the reference failed");
        }
        fill_input(x, count, ctx->rank, step, 1, 77);
        COLL_CHECK_OK(ctx,
                      tacl_comp_allreduce_hops(x, got, count, codec, &p,
                                               c->use_err ? myerr : NULL,
                                               c->scheme,
                                               TACL_COMP_HOPS_INTER, comm));
        for (size_t i = 0; i < count && !failed; i++)
            if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
                failed = coll_fail(ctx,
                                   "hops inter %s %s err %d step %d, "
                                   "%d nodes of %d: value %zu is %.9g, "
                                   "want %.9g",
                                   c->cc->codec,
                                   tacl_comp_scheme_name(c->scheme),
                                   c->use_err, step, nodes, per, i,
                                   (double)got[i], (double)want[i]);
        if (!failed && c->use_err &&
            memcmp(myerr + (size_t)lr * share, errs[lr][node],
                   valid * sizeof(float)) != 0)
            failed = coll_fail(ctx,
                               "hops inter %s %s step %d: the "
                               "residual differs",
                               c->cc->codec, tacl_comp_scheme_name(c->scheme),
                               step);
    }
    for (int j = 0; j < nodes; j++) {
        free(ns[j]);
        for (int l = 0; l < per; l++)
            free(errs[l][j]);
    }
    free(x);
    free(got);
    free(want);
    free(myerr);
    return failed;
}

/* The hierarchical call of kind c->kind (reduce-scatter or all-gather). */
static tacl_status_t call_hops(const call_case_t *c, const float *x,
                               float *got, const tacl_codec_t *codec,
                               const tacl_codec_params_t *p, float *err,
                               tacl_comm_t comm)
{
    if (c->kind == K_REDUCE_SCATTER)
        return tacl_comp_reduce_scatter_hops(x, got, c->count, codec, p, err,
                                             c->scheme, TACL_COMP_HOPS_INTER,
                                             comm);
    return tacl_comp_allgather_hops(x, got, c->count, codec, p, err,
                                    TACL_COMP_HOPS_INTER, comm);
}

/*
 * Reduce-scatter and all-gather with hops between nodes only, on nodes of
 * per ranks (rank r on node r / per, rail r % per).  Reduce-scatter: the
 * flat reference over the nodes of rail l's blocks of the node sums (in
 * node order; exact values, so the node sums are exact in any order);
 * the residual of those blocks at their places, every other entry
 * untouched.  All-gather: the flat reference over each rail's ranks, its
 * blocks put at their ranks' places.
 */
static int hier_rs_ag_case(coll_ctx_t *ctx, tacl_comm_t comm, int per,
                           const call_case_t *c)
{
    int n = ctx->nranks, nodes = n / per, node = ctx->rank / per;
    int lr = ctx->rank % per, rs = c->kind == K_REDUCE_SCATTER, failed = 0;
    size_t cnt = c->count, ic = in_count(c->kind, cnt, n);
    size_t oc = rs ? cnt : cnt * (size_t)n, rail_in = rs ? cnt * nodes : cnt;
    const tacl_codec_t *codec;
    tacl_codec_params_t p = c->cc->params;
    float *x = malloc(ic * sizeof(float)), *got = malloc(oc * sizeof(float));
    float *want = malloc(oc * sizeof(float));
    float *rail_out = malloc(cnt * nodes * sizeof(float));
    float *myerr = calloc(ic, sizeof(float));
    float *xs[COLL_MAX_RANKS], *errs[COLL_MAX_RANKS][COLL_MAX_RANKS];

    COLL_CHECK(ctx, x && got && want && rail_out && myerr, "out of memory");
    COLL_CHECK_OK(ctx, tacl_codec_find(c->cc->codec, &codec));
    for (int j = 0; j < nodes; j++) {
        xs[j] = malloc(rail_in * sizeof(float));
        for (int l = 0; l < per; l++)
            errs[l][j] = calloc(rail_in, sizeof(float));
    }
    for (int step = 0; step < 2 && !failed; step++) {
        if (strcmp(c->cc->codec, "randk") == 0)
            p.seed = c->cc->params.seed + (uint64_t)step;
        for (int l = 0; l < per; l++) {
            call_case_t rc = *c;

            /* Rail l's inputs, node by node. */
            for (int j = 0; j < nodes; j++) {
                memset(xs[j], 0, rail_in * sizeof(float));
                for (int r = j * per; r < (j + 1) * per; r++) {
                    if (!rs && r != j * per + l)
                        continue;
                    fill_input(x, ic, r, step, 1, 91);
                    for (int i = 0; i < (rs ? nodes : 1); i++)
                        for (size_t v = 0; v < cnt; v++)
                            xs[j][(size_t)i * cnt + v] +=
                                x[(rs ? (size_t)(i * per + l) * cnt : 0) + v];
                }
            }
            COLL_CHECK(ctx,
                       reference(&rc, codec, &p, nodes, node, xs, errs[l],
                                 rail_out) == 0,
                       "the reference failed");
            if (rs && l == lr)
                memcpy(want, rail_out, cnt * sizeof(float));
            for (int j = 0; !rs && j < nodes; j++)
                memcpy(want + (size_t)(j * per + l) * cnt,
                       rail_out + (size_t)j * cnt, cnt * sizeof(float));
        }
        fill_input(x, ic, ctx->rank, step, 1, 91);
        COLL_CHECK_OK(ctx, call_hops(c, x, got, codec, &p,
                                     c->use_err ? myerr : NULL, comm));
        for (size_t i = 0; i < oc && !failed; i++)
            if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
                failed = coll_fail(ctx,
                                   "hops inter %s %s %s err %d step %d, %d "
                                   "nodes of %d: value %zu is %.9g, want "
                                   "%.9g",
                                   kind_names[c->kind], c->cc->codec,
                                   tacl_comp_scheme_name(c->scheme),
                                   c->use_err, step, nodes, per, i,
                                   (double)got[i], (double)want[i]);
        for (size_t i = 0; i < ic && !failed && c->use_err; i++) {
            size_t b = i / cnt, v = i % cnt;
            float w = !rs                    ? errs[lr][node][i]
                      : (int)b % per == lr ? errs[lr][node][b / per * cnt + v]
                                             : 0.0f;

            if (memcmp(&myerr[i], &w, sizeof(float)) != 0)
                failed = coll_fail(ctx,
                                   "hops inter %s %s %s step %d: residual "
                                   "%zu is %.9g, want %.9g",
                                   kind_names[c->kind], c->cc->codec,
                                   tacl_comp_scheme_name(c->scheme), step, i,
                                   (double)myerr[i], (double)w);
        }
    }
    for (int j = 0; j < nodes; j++) {
        free(xs[j]);
        for (int l = 0; l < per; l++)
            free(errs[l][j]);
    }
    free(x);
    free(got);
    free(want);
    free(rail_out);
    free(myerr);
    return failed;
}

static int body_hier(coll_ctx_t *ctx)
{
    int per = *(const int *)ctx->arg, failed = 0;
    tacl_comm_t comm;

    COLL_CHECK_OK(ctx, coll_join_node(ctx, "comphier-node", per, &comm));
    for (size_t ci = 0; ci < NCODECS && !failed; ci++) {
        const tacl_codec_t *codec;

        COLL_CHECK_OK(ctx, tacl_codec_find(codecs[ci].codec, &codec));
        for (int s = 0; s < TACL_COMP_QUANT_A2A && !failed; s++) {
            call_case_t c = {.kind = K_ALLREDUCE,
                             .scheme = (tacl_comp_scheme_t)s,
                             .cc = &codecs[ci],
                             .count = 1003};

            if (s == TACL_COMP_SUM && !(codec->flags & TACL_CODEC_SUMMABLE))
                continue;
            for (c.use_err = 0; c.use_err < 2 && !failed; c.use_err++) {
                failed = hier_case(ctx, comm, per, &c);
                c.kind = K_REDUCE_SCATTER;
                c.count = 101;
                if (!failed)
                    failed = hier_rs_ag_case(ctx, comm, per, &c);
                c.kind = K_ALLGATHER;
                if (!failed && s == TACL_COMP_GATHER)
                    failed = hier_rs_ag_case(ctx, comm, per, &c);
                c.kind = K_ALLREDUCE;
                c.count = 1003;
            }
        }
    }
    /* Ranks that disagree all fail, naming what differs, before the
     * nodes' steps could wait on one another; then an empty call. */
    if (!failed) {
        const tacl_codec_t *fp16;
        tacl_codec_params_t p = {.bits = 0};
        float x[64] = {0}, y[64];
        tacl_comm_t saved = ctx->comm;

        ctx->comm = comm;
        COLL_CHECK_OK(ctx, tacl_codec_find("fp16", &fp16));
        EXPECT_BAD(ctx,
                   tacl_comp_allreduce_hops(x, y,
                                            ctx->rank == ctx->nranks - 1 ? 63
                                                                         : 64,
                                            fp16, &p, NULL, TACL_COMP_GATHER,
                                            TACL_COMP_HOPS_INTER, comm),
                   "count");
        EXPECT_BAD(ctx,
                   tacl_comp_allreduce_hops(x, y, 64, fp16, &p, NULL,
                                            TACL_COMP_GATHER,
                                            ctx->rank == 1
                                                ? TACL_COMP_HOPS_ALL
                                                : TACL_COMP_HOPS_INTER,
                                            comm),
                   "operation");
        COLL_CHECK_OK(ctx,
                      tacl_comp_allreduce_hops(x, y, 0, fp16, &p, NULL,
                                               TACL_COMP_SUM,
                                               TACL_COMP_HOPS_INTER, comm));
        ctx->comm = saved;
    }
    COLL_CHECK_OK(ctx, tacl_comm_destroy(comm));
    return failed;
}

Test(compcoll, hops_inter_on_emulated_nodes, .timeout = 600)
{
    static const int shapes[][2] = {{4, 2}, {6, 2}, {6, 3}};

    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        int per = shapes[i][1];
        coll_opts_t opts = {.nranks = shapes[i][0],
                            .deadline_s = 240,
                            .arg = &per,
                            .init = COLL_INIT_MANUAL};

        coll_run_opts_expect_pass(&opts, body_hier);
    }
}

/*
 * tacl_comp_estimate_hops: HOPS_ALL is tacl_comp_estimate; HOPS_INTER on
 * nodes of per ranks sends the dense steps' bytes on the host link
 * (reduce-scatter and all-gather of ceil(count / per) values a rank) and
 * only the rail's encoded bytes on the network, fewer there than every
 * hop encoded; one node is the dense all-reduce's estimate; uneven nodes
 * and bad hops are named.
 */
static int body_estimate_hops(coll_ctx_t *ctx)
{
    int per = *(const int *)ctx->arg, nodes = ctx->nranks / per;
    const tacl_codec_t *topk;
    tacl_codec_params_t p = {.density = 0.01};
    tacl_sim_info_t all, flat, inter, dense, hdr;
    size_t count = 1 << 20, share = (count + (size_t)per - 1) / per;
    size_t share_bound, header = 6 * 8;
    tacl_comm_t comm;
    int failed = 0;

    COLL_CHECK_OK(ctx, coll_join_node(ctx, "compest-node", per, &comm));
    COLL_CHECK_OK(ctx, tacl_codec_find("topk", &topk));
    if (ctx->nranks % per != 0) {
        tacl_comm_t saved = ctx->comm;

        ctx->comm = comm;
        COLL_CHECK_FAILS(ctx,
                         tacl_comp_estimate_hops(comm, TACL_COLL_ALLREDUCE,
                                                 count, topk, &p,
                                                 TACL_COMP_GATHER,
                                                 TACL_COMP_HOPS_INTER,
                                                 &inter),
                         TACL_ERR_UNSUPPORTED,
                         "same number of ranks on every node (3 ranks on 2 "
                         "nodes)");
        ctx->comm = saved;
        COLL_CHECK_OK(ctx, tacl_comm_destroy(comm));
        return 0;
    }
    COLL_CHECK_OK(ctx, tacl_comp_estimate_hops(comm, TACL_COLL_ALLREDUCE,
                                               count, topk, &p,
                                               TACL_COMP_GATHER,
                                               TACL_COMP_HOPS_ALL, &all));
    COLL_CHECK_OK(ctx, tacl_comp_estimate(comm, TACL_COLL_ALLREDUCE, count,
                                          topk, &p, TACL_COMP_GATHER, &flat));
    COLL_CHECK(ctx,
               all.seconds == flat.seconds &&
                   memcmp(all.bytes, flat.bytes, sizeof(all.bytes)) == 0,
               "hops all: %g s, not tacl_comp_estimate's %g s", all.seconds,
               flat.seconds);
    COLL_CHECK_OK(ctx, tacl_comp_estimate_hops(comm, TACL_COLL_ALLREDUCE,
                                               count, topk, &p,
                                               TACL_COMP_GATHER,
                                               TACL_COMP_HOPS_INTER, &inter));
    COLL_CHECK_OK(ctx, tacl_comm_estimate(comm, TACL_COLL_ALLREDUCE, count,
                                          TACL_FLOAT32, TACL_SUM, 0, &dense));
    if (nodes == 1) {
        COLL_CHECK(ctx,
                   inter.seconds == dense.seconds &&
                       strcmp(inter.algorithm, dense.algorithm) == 0,
                   "one node: %g s (%s), not the dense all-reduce's %g s "
                   "(%s)",
                   inter.seconds, inter.algorithm, dense.seconds,
                   dense.algorithm);
        COLL_CHECK_OK(ctx, tacl_comm_destroy(comm));
        return 0;
    }
    COLL_CHECK_OK(ctx, tacl_codec_encoded_bound(topk, &p, 1, &share,
                                                &share_bound));
    /* First the header all-gather on the whole communicator. */
    COLL_CHECK_OK(ctx, tacl_comm_estimate(comm, TACL_COLL_ALLGATHER, 6,
                                          TACL_UINT64, TACL_SUM, 0, &hdr));
    /* Inside the node: two ring steps' worth per other local rank. */
    COLL_CHECK(ctx,
               inter.bytes[TACL_LINK_HOST] ==
                   hdr.bytes[TACL_LINK_HOST] +
                       2 * (uint64_t)(per - 1) * share * 4,
               "%d nodes of %d: %llu bytes inside the node, want %llu", nodes,
               per, (unsigned long long)inter.bytes[TACL_LINK_HOST],
               (unsigned long long)(hdr.bytes[TACL_LINK_HOST] +
                                    2 * (uint64_t)(per - 1) * share * 4));
    /* Between nodes: the rail's header and its encoded share from each
     * other node. */
    COLL_CHECK(ctx,
               inter.bytes[TACL_LINK_NET] ==
                   hdr.bytes[TACL_LINK_NET] +
                       (uint64_t)(nodes - 1) * (header + share_bound),
               "%d nodes of %d: %llu bytes between nodes, want %llu", nodes,
               per, (unsigned long long)inter.bytes[TACL_LINK_NET],
               (unsigned long long)(hdr.bytes[TACL_LINK_NET] +
                                    (uint64_t)(nodes - 1) *
                                        (header + share_bound)));
    /* Summed over the ranks (a ring's edges inside a node send nothing
     * between nodes, so one rank's bytes say little). */
    {
        uint64_t net[2] = {inter.bytes[TACL_LINK_NET],
                           all.bytes[TACL_LINK_NET]};

        COLL_CHECK_OK(ctx, tacl_allreduce(net, net, 2, TACL_UINT64, TACL_SUM,
                                          comm, NULL));
        COLL_CHECK(ctx,
                   net[0] < net[1] &&
                       strcmp(inter.algorithm, "gather/inter") == 0,
                   "%d nodes of %d: %llu bytes between nodes (%s), not "
                   "fewer than every hop encoded's %llu",
                   nodes, per, (unsigned long long)net[0], inter.algorithm,
                   (unsigned long long)net[1]);
    }
    COLL_CHECK(ctx, inter.seconds > 0 && inter.seconds < dense.seconds,
               "%d nodes of %d: %g s, not below the dense all-reduce's %g s",
               nodes, per, inter.seconds, dense.seconds);
    /* The reduce-scatter and all-gather forms price their own shapes. */
    {
        tacl_sim_info_t rs, ag;

        COLL_CHECK_OK(ctx, tacl_comp_estimate_hops(
                               comm, TACL_COLL_REDUCE_SCATTER, 4096, topk, &p,
                               TACL_COMP_SHUFFLE, TACL_COMP_HOPS_INTER, &rs));
        COLL_CHECK_OK(ctx, tacl_comp_estimate_hops(
                               comm, TACL_COLL_ALLGATHER, 4096, topk, &p,
                               TACL_COMP_SUM, TACL_COMP_HOPS_INTER, &ag));
        uint64_t want = hdr.bytes[TACL_LINK_HOST] +
                        (uint64_t)(per - 1) * nodes * 4096 * 4;

        COLL_CHECK(ctx,
                   rs.bytes[TACL_LINK_HOST] == want &&
                       ag.bytes[TACL_LINK_HOST] == want &&
                       strcmp(rs.algorithm, "shuffle/inter") == 0 &&
                       strcmp(ag.algorithm, "gather/inter") == 0,
                   "reduce-scatter %llu bytes inside (%s), all-gather %llu "
                   "(%s): want %llu each",
                   (unsigned long long)rs.bytes[TACL_LINK_HOST], rs.algorithm,
                   (unsigned long long)ag.bytes[TACL_LINK_HOST], ag.algorithm,
                   (unsigned long long)want);
    }
    {
        tacl_comm_t saved = ctx->comm;

        ctx->comm = comm;
        EXPECT_BAD(ctx,
                   tacl_comp_estimate_hops(comm, TACL_COLL_ALLREDUCE, count,
                                           topk, &p, TACL_COMP_GATHER,
                                           (tacl_comp_hops_t)5, &inter),
                   "unknown hops 5");
        EXPECT_BAD(ctx,
                   tacl_comp_estimate_hops(comm, TACL_COLL_ALLREDUCE, count,
                                           topk, &p, TACL_COMP_SUM,
                                           TACL_COMP_HOPS_INTER, &inter),
                   "topk is not");
        EXPECT_BAD(ctx,
                   tacl_comp_estimate_hops(comm, TACL_COLL_BROADCAST, count,
                                           topk, &p, TACL_COMP_GATHER,
                                           TACL_COMP_HOPS_INTER, &inter),
                   "broadcast");
        EXPECT_BAD(ctx,
                   tacl_comp_estimate_hops(comm, TACL_COLL_ALLREDUCE, count,
                                           topk, &p, TACL_COMP_GATHER,
                                           TACL_COMP_HOPS_INTER, NULL),
                   "info_p");
        ctx->comm = saved;
    }
    COLL_CHECK_OK(ctx, tacl_comm_destroy(comm));
    return failed;
}

Test(compcoll, estimate_hops_prices_each_link, .timeout = 300)
{
    /* 2 nodes of 2, 3 of 2, one node of 3, nodes of 2 and 1. */
    static const int shapes[][2] = {{4, 2}, {6, 2}, {3, 3}, {3, 2}};

    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        int per = shapes[i][1];
        coll_opts_t opts = {.nranks = shapes[i][0],
                            .deadline_s = 120,
                            .arg = &per,
                            .init = COLL_INIT_MANUAL};

        coll_run_opts_expect_pass(&opts, body_estimate_hops);
    }
}

/* On one node the hops between nodes are none: a dense all-reduce. */
static int body_hier_one_node(coll_ctx_t *ctx)
{
    const tacl_codec_t *topk;
    tacl_codec_params_t p = {.density = 0.1};
    float x[301], got[301], want[301] = {0};

    COLL_CHECK_OK(ctx, tacl_codec_find("topk", &topk));
    for (int r = 0; r < ctx->nranks; r++) {
        fill_input(x, 301, r, 0, 1, 5);
        for (int i = 0; i < 301; i++)
            want[i] += x[i];
    }
    fill_input(x, 301, ctx->rank, 0, 1, 5);
    COLL_CHECK_OK(ctx,
                  tacl_comp_allreduce_hops(x, got, 301, topk, &p, NULL,
                                           TACL_COMP_GATHER,
                                           TACL_COMP_HOPS_INTER, ctx->comm));
    COLL_CHECK(ctx, memcmp(got, want, sizeof(got)) == 0,
               "one node: not the exact sum");
    EXPECT_BAD(ctx,
               tacl_comp_allreduce_hops(x, got, 301, topk, &p, NULL,
                                        TACL_COMP_GATHER, (tacl_comp_hops_t)5,
                                        ctx->comm),
               "hops 5");
    EXPECT_BAD(ctx,
               tacl_comp_allreduce_hops(x, got, 301, topk, &p, NULL,
                                        TACL_COMP_SUM, TACL_COMP_HOPS_INTER,
                                        ctx->comm),
               "topk is not");
    /* The reduce-scatter and the all-gather: dense here too. */
    {
        float rsin[3 * 101], rsgot[101], agin[101], agot[3 * 101];

        fill_input(rsin, 3 * 101, ctx->rank, 0, 1, 6);
        COLL_CHECK_OK(ctx, tacl_comp_reduce_scatter_hops(
                               rsin, rsgot, 101, topk, &p, NULL,
                               TACL_COMP_GATHER, TACL_COMP_HOPS_INTER,
                               ctx->comm));
        for (int i = 0; i < 101; i++) {
            float w = 0;

            for (int r = 0; r < ctx->nranks; r++) {
                fill_input(rsin, 3 * 101, r, 0, 1, 6);
                w += rsin[ctx->rank * 101 + i];
            }
            COLL_CHECK(ctx, rsgot[i] == w,
                       "one node: reduce-scatter value %d is %g, want %g", i,
                       (double)rsgot[i], (double)w);
        }
        fill_input(agin, 101, ctx->rank, 0, 0, 7);
        COLL_CHECK_OK(ctx, tacl_comp_allgather_hops(agin, agot, 101, topk, &p,
                                                    NULL,
                                                    TACL_COMP_HOPS_INTER,
                                                    ctx->comm));
        for (int r = 0; r < ctx->nranks; r++) {
            fill_input(agin, 101, r, 0, 0, 7);
            COLL_CHECK(ctx, memcmp(agot + r * 101, agin, sizeof(agin)) == 0,
                       "one node: rank %d's block is not its input", r);
        }
        EXPECT_BAD(ctx,
                   tacl_comp_allgather_hops(agin, agot, 101, topk, &p, NULL,
                                            (tacl_comp_hops_t)5, ctx->comm),
                   "comp_allgather: unknown hops 5");
        EXPECT_BAD(ctx,
                   tacl_comp_reduce_scatter_hops(rsin, rsgot, 101, topk, &p,
                                                 NULL, TACL_COMP_SUM,
                                                 TACL_COMP_HOPS_INTER,
                                                 ctx->comm),
                   "topk is not");
    }
    return 0;
}

Test(compcoll, hops_inter_on_one_node, .timeout = 120)
{
    coll_run_expect_pass(3, body_hier_one_node, NULL, NULL);
}

/*
 * Scheme qgz is qgZ itself: tacl_comp_reduce_scatter with it equals
 * tacl_reduce_scatter_quantized bit for bit, on one node and on two
 * emulated ones (where qgZ's two hops and requantization run).
 */
/*
 * Its estimate is qgZ's: named qgz, and between nodes it sends the
 * quantized bytes (bits / 32 of the dense reduce-scatter's plus a
 * float32 scale per block, within 10%); on one node nothing crosses.
 */
static int qgz_priced(coll_ctx_t *ctx, tacl_comm_t comm,
                      const tacl_codec_t *codec,
                      const tacl_codec_params_t *p, size_t count)
{
    tacl_sim_info_t q, dense;
    double want;

    COLL_CHECK_OK(ctx, tacl_comp_estimate(comm, TACL_COLL_REDUCE_SCATTER,
                                          count, codec, p,
                                          TACL_COMP_QUANT_A2A, &q));
    COLL_CHECK_OK(ctx, tacl_comm_estimate(comm, TACL_COLL_REDUCE_SCATTER,
                                          count, TACL_FLOAT32, TACL_SUM, 0,
                                          &dense));
    COLL_CHECK(ctx, strcmp(q.algorithm, "qgz") == 0 && q.seconds > 0,
               "qgz estimate: %s in %g s", q.algorithm, q.seconds);
    want = (double)dense.bytes[TACL_LINK_NET] *
           ((double)p->bits / 32.0 + 1.0 / (double)p->block);
    COLL_CHECK(ctx,
               (double)q.bytes[TACL_LINK_NET] <= 1.1 * want &&
                   (double)q.bytes[TACL_LINK_NET] >= 0.9 * want,
               "%s count %zu: qgz estimate sends %llu bytes between nodes, "
               "the dense reduce-scatter %llu (want about %.0f)",
               codec->name, count,
               (unsigned long long)q.bytes[TACL_LINK_NET],
               (unsigned long long)dense.bytes[TACL_LINK_NET], want);
    return 0;
}

/*
 * The all-gather with a block quantizer and no residual is qwZ: the same
 * bits as tacl_allgather_quantized, and priced as that call ("qwz").
 */
static int qwz_case(coll_ctx_t *ctx, tacl_comm_t comm,
                    const tacl_codec_t *codec, const tacl_quant_t *q,
                    const tacl_codec_params_t *p, const float *x,
                    size_t count)
{
    size_t out = count * (size_t)ctx->nranks;
    float *got = malloc(out * sizeof(float));
    float *want = malloc(out * sizeof(float));
    tacl_sim_info_t info;

    COLL_CHECK(ctx, got != NULL && want != NULL, "no memory");
    COLL_CHECK_OK(ctx, tacl_allgather_quantized(x, want, count, TACL_FLOAT32,
                                                q, comm, NULL));
    COLL_CHECK_OK(ctx,
                  tacl_comp_allgather(x, got, count, codec, p, NULL, comm));
    COLL_CHECK(ctx, memcmp(got, want, out * sizeof(float)) == 0,
               "%s count %zu: the all-gather differs from qwZ",
               codec->name, count);
    COLL_CHECK(ctx,
               memcmp(got + (size_t)ctx->rank * count, x,
                      count * sizeof(float)) == 0,
               "%s count %zu: the own block is not exact", codec->name,
               count);
    COLL_CHECK_OK(ctx, tacl_comp_estimate(comm, TACL_COLL_ALLGATHER, count,
                                          codec, p, TACL_COMP_GATHER, &info));
    COLL_CHECK(ctx, strcmp(info.algorithm, "qwz") == 0,
               "%s: the all-gather is priced as %s, not qwz", codec->name,
               info.algorithm);
    free(got);
    free(want);
    return 0;
}

static int qgz_case(coll_ctx_t *ctx, tacl_comm_t comm, const char *name,
                    size_t count)
{
    const tacl_codec_t *codec;
    tacl_quant_t q = {.bits = strcmp(name, "int8") == 0 ? 8 : 4,
                      .block = 64};
    tacl_codec_params_t p = {.bits = q.bits, .block = 64};
    int n = ctx->nranks;
    float *x = malloc(count * (size_t)n * sizeof(float));
    float *got = malloc(count * sizeof(float));
    float *want = malloc(count * sizeof(float));
    int failed = x == NULL || got == NULL || want == NULL;

    COLL_CHECK(ctx, !failed, "no memory");
    COLL_CHECK_OK(ctx, tacl_codec_find(name, &codec));
    fill_input(x, count * (size_t)n, ctx->rank, 0, 0, 3);
    COLL_CHECK_OK(ctx, tacl_reduce_scatter_quantized(x, want, count,
                                                     TACL_FLOAT32, TACL_SUM,
                                                     &q, comm, NULL));
    COLL_CHECK_OK(ctx, tacl_comp_reduce_scatter(x, got, count, codec, &p,
                                                NULL, TACL_COMP_QUANT_A2A,
                                                comm));
    COLL_CHECK(ctx, memcmp(got, want, count * sizeof(float)) == 0,
               "%s count %zu: scheme qgz differs from qgZ", name, count);
    if (qwz_case(ctx, comm, codec, &q, &p, x, count) != 0)
        return 1;
    if (count >= 1000 && qgz_priced(ctx, comm, codec, &p, count) != 0)
        return 1;
    free(x);
    free(got);
    free(want);
    return 0;
}

static int body_qgz(coll_ctx_t *ctx)
{
    static const char *const names[] = {"int8", "int4"};
    static const size_t counts[] = {1, 64, 131, 1000};
    tacl_comm_t comm = ctx->comm;
    int failed = 0;

    if (ctx->arg != NULL)
        COLL_CHECK_OK(ctx, coll_join_node(ctx, "qgz-node", 2, &comm));
    for (size_t i = 0; i < 2 && !failed; i++)
        for (size_t j = 0; j < 4 && !failed; j++)
            failed = qgz_case(ctx, comm, names[i], counts[j]);
    if (ctx->arg != NULL)
        COLL_CHECK_OK(ctx, tacl_comm_destroy(comm));
    return failed;
}

Test(compcoll, qgz_scheme_is_qgz_and_int8_allgather_qwz, .timeout = 300)
{
    static int two = 2;
    coll_opts_t one = {.nranks = 4, .deadline_s = 240};
    coll_opts_t nodes = {.nranks = 4,
                         .deadline_s = 240,
                         .arg = &two,
                         .init = COLL_INIT_MANUAL};

    coll_run_opts_expect_pass(&one, body_qgz);
    coll_run_opts_expect_pass(&nodes, body_qgz);
}

/* Scheme qgz refuses what qgZ cannot do, naming it. */
static int body_qgz_bad(coll_ctx_t *ctx)
{
    const tacl_codec_t *fp16, *int8;
    tacl_codec_params_t p = {.bits = 8, .block = 64};
    float x[64] = {0}, y[64] = {0}, err[64] = {0};
    tacl_sim_info_t info;

    COLL_CHECK_OK(ctx, tacl_codec_find("fp16", &fp16));
    COLL_CHECK_OK(ctx, tacl_codec_find("int8", &int8));
    EXPECT_BAD(ctx,
               tacl_comp_reduce_scatter(x, y, 16, fp16, &p, NULL,
                                        TACL_COMP_QUANT_A2A, ctx->comm),
               "fp16 is not");
    EXPECT_BAD(ctx,
               tacl_comp_reduce_scatter(x, y, 16, int8, &p, err,
                                        TACL_COMP_QUANT_A2A, ctx->comm),
               "no error feedback");
    EXPECT_BAD(ctx,
               tacl_comp_allreduce(x, y, 64, int8, &p, NULL,
                                   TACL_COMP_QUANT_A2A, ctx->comm),
               "qgz is a reduce-scatter");
    EXPECT_BAD(ctx,
               tacl_comp_estimate(ctx->comm, TACL_COLL_ALLREDUCE, 64, int8,
                                  &p, TACL_COMP_QUANT_A2A, &info),
               "qgz is a reduce-scatter");
    COLL_CHECK(ctx,
               strcmp(tacl_comp_scheme_name(TACL_COMP_QUANT_A2A), "qgz") == 0,
               "scheme name");
    return 0;
}

Test(compcoll, qgz_bad_input_is_named, .timeout = 120)
{
    coll_run_expect_pass(4, body_qgz_bad, NULL, NULL);
}

/*
 * ---- Coalesced calls: a list of buffers as one compressed call. ----
 *
 * The reference (for the blocking and the _nb forms alike) is the single
 * call with hops on the list packed by hand:
 * element k of block b of buffer i (a reduce-scatter's input and an
 * all-gather's output have n blocks a buffer, the rest one) is element
 * b * total + off[i] + k of the packed array.  The coalesced call must
 * give the same bits, outputs and residuals, over two steps.
 */
static const size_t list_counts[] = {5, 0, 37, 64};
#define NLIST 4

typedef struct {
    kind_t kind;
    const char *codec;
    tacl_codec_params_t params;
    tacl_comp_scheme_t scheme;
} list_case_t;

/* Copy between the buffers (blocks each) and the packed array. */
static void by_hand(float *const *bufs, float *packed, size_t blocks,
                    int to_packed)
{
    size_t total = 0, off[NLIST];

    for (int i = 0; i < NLIST; i++) {
        off[i] = total;
        total += list_counts[i];
    }
    for (int i = 0; i < NLIST; i++)
        for (size_t e = 0; e < blocks * list_counts[i]; e++) {
            size_t b = e / list_counts[i], k = e % list_counts[i];
            float *p = packed + b * total + off[i] + k;

            if (to_packed)
                *p = bufs[i][e];
            else
                bufs[i][e] = *p;
        }
}

static tacl_status_t single_call(const list_case_t *lc, const float *x,
                                 float *y, size_t total,
                                 const tacl_codec_t *codec, float *err,
                                 tacl_comp_hops_t hops, tacl_comm_t comm)
{
    if (lc->kind == K_ALLREDUCE)
        return tacl_comp_allreduce_hops(x, y, total, codec, &lc->params, err,
                                        lc->scheme, hops, comm);
    if (lc->kind == K_REDUCE_SCATTER)
        return tacl_comp_reduce_scatter_hops(x, y, total, codec, &lc->params,
                                             err, lc->scheme, hops, comm);
    return tacl_comp_allgather_hops(x, y, total, codec, &lc->params, err,
                                    hops, comm);
}

static tacl_status_t list_call_nb(const list_case_t *lc, float *const *x,
                                  float *const *y, const tacl_codec_t *codec,
                                  float *const *errs, tacl_comp_hops_t hops,
                                  tacl_comm_t comm)
{
    const float *const *cx = (const float *const *)x;
    tacl_request_t req = NULL;
    tacl_status_t st;

    if (lc->kind == K_ALLREDUCE)
        st = tacl_comp_allreduce_coalesced_nb(NLIST, cx, y, list_counts,
                                              codec, &lc->params, errs,
                                              lc->scheme, hops, comm, &req);
    else if (lc->kind == K_REDUCE_SCATTER)
        st = tacl_comp_reduce_scatter_coalesced_nb(
            NLIST, cx, y, list_counts, codec, &lc->params, errs, lc->scheme,
            hops, comm, &req);
    else
        st = tacl_comp_allgather_coalesced_nb(NLIST, cx, y, list_counts,
                                              codec, &lc->params, errs, hops,
                                              comm, &req);
    if (st != TACL_OK)
        return st;
    st = tacl_request_wait(req);
    tacl_request_free(req);
    return st;
}

/* The coalesced call, blocking or (nb) its _nb form waited for. */
static tacl_status_t list_call(const list_case_t *lc, float *const *x,
                               float *const *y, const tacl_codec_t *codec,
                               float *const *errs, tacl_comp_hops_t hops,
                               tacl_comm_t comm, int nb)
{
    const float *const *cx = (const float *const *)x;

    if (nb)
        return list_call_nb(lc, x, y, codec, errs, hops, comm);
    if (lc->kind == K_ALLREDUCE)
        return tacl_comp_allreduce_coalesced(NLIST, cx, y, list_counts, codec,
                                             &lc->params, errs, lc->scheme,
                                             hops, comm);
    if (lc->kind == K_REDUCE_SCATTER)
        return tacl_comp_reduce_scatter_coalesced(NLIST, cx, y, list_counts,
                                                  codec, &lc->params, errs,
                                                  lc->scheme, hops, comm);
    return tacl_comp_allgather_coalesced(NLIST, cx, y, list_counts, codec,
                                         &lc->params, errs, hops, comm);
}

static int list_case(coll_ctx_t *ctx, tacl_comm_t comm,
                     const list_case_t *lc, tacl_comp_hops_t hops,
                     int in_place, int nb)
{
    const tacl_codec_t *codec;
    size_t total = 0, n = (size_t)ctx->nranks;
    size_t ib = lc->kind == K_REDUCE_SCATTER ? n : 1;
    size_t ob = lc->kind == K_ALLGATHER ? n : 1;
    float *px, *pe, *py, *ge, *gy, *bx[NLIST], *be[NLIST], *by[NLIST];
    int failed = 0;

    for (int i = 0; i < NLIST; i++)
        total += list_counts[i];
    COLL_CHECK_OK(ctx, tacl_codec_find(lc->codec, &codec));
    px = malloc(total * ib * sizeof(float));
    pe = calloc(total * ib, sizeof(float));
    py = malloc(total * ob * sizeof(float));
    ge = malloc(total * ib * sizeof(float));
    gy = malloc(total * ob * sizeof(float));
    for (int i = 0; i < NLIST; i++) {
        bx[i] = malloc((list_counts[i] * ib + 1) * sizeof(float));
        be[i] = calloc(list_counts[i] * ib + 1, sizeof(float));
        by[i] = in_place ? bx[i]
                         : malloc((list_counts[i] * ob + 1) * sizeof(float));
    }
    for (int step = 0; step < 2 && !failed; step++) {
        fill_input(px, total * ib, ctx->rank, step, 0, 77);
        by_hand(bx, px, ib, 0);
        COLL_CHECK_OK(ctx, single_call(lc, px, py, total, codec, pe, hops,
                                       comm));
        COLL_CHECK_OK(ctx, list_call(lc, bx, by, codec, be, hops, comm, nb));
        by_hand(by, gy, ob, 1);
        by_hand(be, ge, ib, 1);
        failed = memcmp(gy, py, total * ob * sizeof(float)) != 0 ||
                 memcmp(ge, pe, total * ib * sizeof(float)) != 0;
        COLL_CHECK(ctx, !failed,
                   "coalesced %s%s %s %s hops %s%s, step %d: the %s "
                   "differ from the single call's",
                   kind_names[lc->kind], nb ? " _nb" : "", lc->codec,
                   tacl_comp_scheme_name(lc->scheme),
                   hops == TACL_COMP_HOPS_ALL ? "all" : "inter",
                   in_place ? " in place" : "", step,
                   memcmp(gy, py, total * ob * sizeof(float)) ? "outputs"
                                                              : "residuals");
    }
    for (int i = 0; i < NLIST; i++) {
        if (!in_place)
            free(by[i]);
        free(bx[i]);
        free(be[i]);
    }
    free(px);
    free(pe);
    free(py);
    free(ge);
    free(gy);
    return failed;
}

static int body_coalesced(coll_ctx_t *ctx)
{
    static const list_case_t cases[] = {
        {K_ALLREDUCE, "fp16", {.bits = 0}, TACL_COMP_SUM},
        {K_ALLREDUCE, "topk", {.density = 0.1}, TACL_COMP_SHUFFLE},
        {K_ALLREDUCE, "int8", {.bits = 8, .block = 16}, TACL_COMP_GATHER},
        {K_REDUCE_SCATTER, "topk", {.density = 0.1}, TACL_COMP_SHUFFLE},
        {K_REDUCE_SCATTER, "bf16", {.bits = 0}, TACL_COMP_SUM},
        {K_REDUCE_SCATTER, "sign", {.bits = 0}, TACL_COMP_GATHER},
        {K_ALLGATHER, "randk", {.density = 0.25, .seed = 3}, TACL_COMP_GATHER},
        {K_ALLGATHER, "int4", {.bits = 4, .block = 16}, TACL_COMP_GATHER},
    };
    int per = *(const int *)ctx->arg, failed = 0;
    tacl_comm_t comm = ctx->comm;

    if (per > 0)
        COLL_CHECK_OK(ctx, coll_join_node(ctx, "complist-node", per, &comm));
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]) && !failed; i++)
        for (int h = 0; h < TACL_NUM_COMP_HOPS && !failed; h++)
            for (int nb = 0; nb < 2 && !failed; nb++)
                failed = list_case(ctx, comm, &cases[i], (tacl_comp_hops_t)h,
                                   cases[i].kind == K_ALLREDUCE && h == 0,
                                   nb);
    if (per > 0)
        COLL_CHECK_OK(ctx, tacl_comm_destroy(comm));
    return failed;
}

Test(compcoll, coalesced_lists_are_the_single_call, .timeout = 300)
{
    int one_node = 0, per = 2;
    coll_opts_t opts = {.nranks = 4,
                        .deadline_s = 240,
                        .arg = &per,
                        .init = COLL_INIT_MANUAL};

    coll_run_expect_pass(3, body_coalesced, &one_node, NULL);
    coll_run_opts_expect_pass(&opts, body_coalesced);
}

static int body_coalesced_bad(coll_ctx_t *ctx)
{
    const tacl_codec_t *topk;
    tacl_codec_params_t p = {.density = 0.1};
    float a[8] = {0}, b[8] = {0}, c[8];
    const float *xs[2] = {a, b};
    float *ys[2] = {c, c + 4}, *nul[2] = {a, NULL};
    size_t counts[2] = {4, 4}, other[2] = {3, 5};
    tacl_comm_t comm = ctx->comm;

    COLL_CHECK_OK(ctx, tacl_codec_find("topk", &topk));
    EXPECT_BAD(ctx,
               tacl_comp_allreduce_coalesced(-1, xs, ys, counts, topk, &p,
                                             NULL, TACL_COMP_GATHER,
                                             TACL_COMP_HOPS_ALL, comm),
               "nbufs -1");
    EXPECT_BAD(ctx,
               tacl_comp_allreduce_coalesced(2, xs, ys, NULL, topk, &p, NULL,
                                             TACL_COMP_GATHER,
                                             TACL_COMP_HOPS_ALL, comm),
               "counts is NULL");
    EXPECT_BAD(ctx,
               tacl_comp_allreduce_coalesced(2, xs, nul, counts, topk, &p,
                                             NULL, TACL_COMP_GATHER,
                                             TACL_COMP_HOPS_ALL, comm),
               "buffer 1: recvbufs[i] is NULL");
    /* The same total split otherwise on one rank: every rank fails. */
    EXPECT_BAD(ctx,
               tacl_comp_allreduce_coalesced(2, xs, ys,
                                             ctx->rank == 1 ? other : counts,
                                             topk, &p, NULL, TACL_COMP_GATHER,
                                             TACL_COMP_HOPS_ALL, comm),
               "passes another list of buffers");
    /* What the single call refuses, the list's call refuses alike. */
    EXPECT_BAD(ctx,
               tacl_comp_allreduce_coalesced(2, xs, ys, counts, topk, &p,
                                             NULL, TACL_COMP_SUM,
                                             TACL_COMP_HOPS_ALL, comm),
               "topk is not");
    /* The _nb forms check at issue, with the same messages. */
    {
        tacl_request_t req = NULL;

        EXPECT_BAD(ctx,
                   tacl_comp_reduce_scatter_coalesced_nb(
                       2, xs, nul, counts, topk, &p, NULL, TACL_COMP_GATHER,
                       TACL_COMP_HOPS_ALL, comm, &req),
                   "buffer 1: recvbufs[i] is NULL");
        EXPECT_BAD(ctx,
                   tacl_comp_allreduce_coalesced_nb(
                       2, xs, ys, counts, topk, &p, NULL, TACL_COMP_SUM,
                       TACL_COMP_HOPS_ALL, comm, &req),
                   "topk is not");
        EXPECT_BAD(ctx,
                   tacl_comp_allgather_coalesced_nb(
                       2, xs, ys, counts, topk, &p, NULL,
                       (tacl_comp_hops_t)5, comm, &req),
                   "unknown hops 5");
        COLL_CHECK(ctx, req == NULL, "a refused call made a request");
    }
    /* An empty list, then the communicator still works. */
    COLL_CHECK_OK(ctx, tacl_comp_allgather_coalesced(0, NULL, NULL, NULL,
                                                     topk, &p, NULL,
                                                     TACL_COMP_HOPS_ALL,
                                                     comm));
    COLL_CHECK_OK(ctx, tacl_comp_allreduce_coalesced(2, xs, ys, counts, topk,
                                                     &p, NULL,
                                                     TACL_COMP_GATHER,
                                                     TACL_COMP_HOPS_ALL,
                                                     comm));
    return 0;
}

Test(compcoll, coalesced_bad_input_is_named, .timeout = 120)
{
    coll_run_expect_pass(3, body_coalesced_bad, NULL, NULL);
}
