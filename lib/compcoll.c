/*
 * Compressed collectives (tacl.h, tacl_comp_allreduce, _reduce_scatter,
 * _allgather): float32 data that travels encoded by a codec
 * (tacl_codec_*), by one of the schemes of the thesis "Zen, Espresso,
 * Cupcake, Gemini", section 4.4 (Espresso's compression strategies):
 *
 * - GATHER, the indivisible scheme: encode everything, all-gather (v) the
 *   encodings, decode and add them in rank order;
 * - SHUFFLE, the divisible scheme: encode a chunk per owner, all-to-all
 *   (v), the owner decodes and adds its chunk in rank order, re-encodes
 *   the sum, all-gather (v), decode (reduce-scatter stops after the sum);
 * - SUM, for summable codecs: reduce the encodings as they are.
 *
 * qwZ and qgZ are codec and scheme pairs of these calls: an all-gather
 * with int8 or int4 and no residual is tacl_allgather_quantized, and
 * scheme QUANT_A2A ("qgz") of a reduce-scatter is
 * tacl_reduce_scatter_quantized, each bit for bit.
 *
 * Like the sparse all-reduce (sparse.c), a scheme is a sequence of
 * tacl's public collectives on comm (holds nest), with the codec between
 * them; so the calls are flat in the sense that this file never looks at
 * the topology: on several nodes the all-gather-v and all-to-all-v are
 * hierarchical themselves, and every hop carries encoded data; an
 * all-reduce that keeps the links inside a node dense is comp_hier.c.
 *
 * Sums are taken in rank order on every rank (GATHER) or by the owner
 * before the encoding every rank decodes (SHUFFLE), so every rank gets
 * the same bits, and a test can compute them with the codec alone.  SUM's
 * order is the dense all-reduce's.
 *
 * Before the data moves, the ranks all-gather a small header (the count,
 * scheme, codec name and parameters, the size of the first encoding), so
 * that every rank fails alike, naming what differs, instead of waiting
 * for messages of other sizes.  A codec of fixed size needs no other
 * exchange of sizes; the others all-to-all or all-gather them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "compcoll.h"
#include "log.h"

/* Sizes travel as TACL_UINT64 straight from size_t arrays. */
_Static_assert(sizeof(size_t) == sizeof(uint64_t),
               "sizes are exchanged as uint64");

static const char *const scheme_names[TACL_NUM_COMP_SCHEMES] = {
    "gather",
    "shuffle",
    "sum",
    "qgz",
};

TACL_EXPORT const char *tacl_comp_scheme_name(tacl_comp_scheme_t scheme)
{
    return (unsigned)scheme < TACL_NUM_COMP_SCHEMES ? scheme_names[scheme]
                                                    : "invalid";
}

typedef enum {
    KIND_ALLREDUCE,
    KIND_REDUCE_SCATTER,
    KIND_ALLGATHER,
    KIND_NONE /* an estimate of something else */
} kind_t;

static const char *const kind_names[] = {
    "comp_allreduce",
    "comp_reduce_scatter",
    "comp_allgather",
};

/* One call: its arguments and the communicator's shape. */
typedef struct {
    kind_t kind;
    const char *name; /* kind_names[kind], for messages */
    const float *send;
    float *recv;
    size_t count;    /* the count argument of the call */
    size_t in_count; /* values in sendbuf (and err) */
    const tacl_codec_t *codec;
    const tacl_codec_params_t *params;
    float *err;
    tacl_comp_scheme_t scheme;
    tacl_coll_t coll;      /* an estimate's coll argument */
    tacl_comp_hops_t hops; /* tacl__comp_agree: the caller's hops */
    int n, rank;
    tacl_comm_t comm;
} call_t;

/* Where chunk j of the input starts and how long it is (SHUFFLE, SUM):
 * rank j's share of an all-reduce, block j of a reduce-scatter. */
static void chunk_of(const call_t *c, int j, size_t *off_p, size_t *len_p)
{
    size_t q = c->count / (size_t)c->n, r = c->count % (size_t)c->n;
    size_t start, end;

    if (c->kind == KIND_REDUCE_SCATTER) {
        *off_p = (size_t)j * c->count;
        *len_p = c->count;
        return;
    }
    /* j * count / n without overflow: j * q + j * r / n. */
    start = (size_t)j * q + (size_t)j * r / (size_t)c->n;
    end = (size_t)(j + 1) * q + (size_t)(j + 1) * r / (size_t)c->n;
    *off_p = start;
    *len_p = end - start;
}

/*
 * ---- The codec on one buffer; an empty buffer encodes to nothing. ----
 */

static tacl_status_t bound_of(const call_t *c, size_t cnt, size_t *bytes_p)
{
    if (cnt == 0) {
        *bytes_p = 0;
        return TACL_OK;
    }
    return tacl_codec_encoded_bound(c->codec, c->params, 1, &cnt, bytes_p);
}

static tacl_status_t encode_one(const call_t *c, const float *src, size_t cnt,
                                float *err, void *dst, size_t capacity,
                                size_t *bytes_p)
{
    float *errs[1] = {err};

    if (cnt == 0) {
        *bytes_p = 0;
        return TACL_OK;
    }
    return tacl_codec_encode(c->codec, c->params, 1, &src, &cnt,
                             err != NULL ? errs : NULL, dst, capacity,
                             bytes_p);
}

static tacl_status_t decode_one(const call_t *c, const void *src,
                                size_t bytes, float *dst, size_t cnt,
                                int accumulate)
{
    if (cnt == 0)
        return TACL_OK;
    if (accumulate)
        return tacl_codec_decode_accumulate(c->codec, c->params, src, bytes,
                                            1, &dst, &cnt);
    return tacl_codec_decode(c->codec, c->params, src, bytes, 1, &dst, &cnt);
}

/*
 * ---- The header every rank gathers first. ----
 */

enum { H_COUNT, H_KIND, H_SCHEME, H_CODEC, H_PARAMS, H_BYTES, H_LEN };

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t hash_name(const char *s)
{
    return tacl__fnv1a(TACL__FNV1A_SEED, s, strlen(s));
}

static uint64_t hash_params(const tacl_codec_params_t *p)
{
    uint64_t d;

    memcpy(&d, &p->density, sizeof(d));
    return mix(mix(mix(mix(0, d), (uint64_t)p->bits), p->block), p->seed);
}

/*
 * All-gather the header with this rank's first encoding of bytes; fill
 * bytes_all (n) with every rank's.  Every rank checks every header, so
 * all fail alike when one differs.
 */
static tacl_status_t exchange_header(const call_t *c, size_t bytes,
                                     size_t *bytes_all)
{
    static const char *const what[H_LEN] = {
        "count", "operation", "scheme", "codec", "codec parameters",
    };
    uint64_t mine[H_LEN] = {
        [H_COUNT] = c->count,
        [H_KIND] = (uint64_t)c->kind | (uint64_t)c->hops << 4,
        [H_SCHEME] = (uint64_t)c->scheme,
        [H_CODEC] = hash_name(c->codec->name),
        [H_PARAMS] = hash_params(c->params),
        [H_BYTES] = bytes,
    };
    uint64_t *all = malloc((size_t)c->n * sizeof(mine));
    tacl_status_t st;

    if (all == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "%s: no memory for %d headers", c->name, c->n);
    st = tacl_allgather(mine, all, H_LEN, TACL_UINT64, c->comm, NULL);
    for (int r = 0; st == TACL_OK && r < c->n; r++) {
        const uint64_t *h = all + (size_t)r * H_LEN;

        for (int f = 0; f < H_BYTES && st == TACL_OK; f++)
            if (h[f] != mine[f])
                st = tacl__error(TACL_ERR_INVALID_ARG, COLL,
                                 "%s: rank %d passes another %s than rank "
                                 "%d (%s%llu against %llu)",
                                 c->name, r, what[f], c->rank,
                                 f == H_COUNT ? "count " : "hash ",
                                 (unsigned long long)h[f],
                                 (unsigned long long)mine[f]);
        if (st == TACL_OK)
            bytes_all[r] = (size_t)h[H_BYTES];
    }
    free(all);
    return st;
}

/*
 * ---- The steps the schemes share. ----
 */

/*
 * All-gather every rank's encoding (enc, bytes[rank] long; bytes holds
 * every rank's) and decode rank j's into dsts[j] (cnts[j] values), adding
 * to what is there where add says.
 */
static tacl_status_t gather_decode(const call_t *c, const void *enc,
                                   const size_t *bytes, float *const *dsts,
                                   const size_t *cnts, const int *add)
{
    size_t *displs = malloc((size_t)c->n * sizeof(*displs));
    uint8_t *all = NULL;
    size_t total;
    tacl_status_t st;

    if (displs == NULL)
        goto err_memory;
    total = tacl__prefix_sums(bytes, c->n, displs);
    all = malloc(total ? total : 1);
    if (all == NULL)
        goto err_memory;
    st = tacl_allgatherv(enc, bytes[c->rank], all, bytes, displs, TACL_UINT8,
                         c->comm, NULL);
    for (int j = 0; st == TACL_OK && j < c->n; j++)
        st = decode_one(c, all + displs[j], bytes[j], dsts[j], cnts[j],
                        add[j]);
    free(all);
    free(displs);
    return st;
err_memory:
    free(displs);
    return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                       "%s: no memory for the gathered encodings", c->name);
}

/* The input encoded whole (GATHER, and the all-gather). */
typedef struct {
    uint8_t *enc;
    size_t *bytes; /* n: every rank's size */
} whole_t;

static void whole_free(whole_t *w)
{
    free(w->enc);
    free(w->bytes);
}

/* Encode the whole input and exchange the header with its size. */
static tacl_status_t encode_whole(const call_t *c, whole_t *w)
{
    size_t bound, mine;
    tacl_status_t st = bound_of(c, c->in_count, &bound);

    if (st != TACL_OK)
        return st;
    w->enc = malloc(bound ? bound : 1);
    w->bytes = malloc((size_t)c->n * sizeof(*w->bytes));
    if (w->enc == NULL || w->bytes == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "%s: no memory for an encoding of %zu bytes",
                           c->name, bound);
    st = encode_one(c, c->send, c->in_count, c->err, w->enc, bound, &mine);
    if (st != TACL_OK)
        return st;
    return exchange_header(c, mine, w->bytes);
}

/*
 * Every rank's whole encoding gathered and decoded: for GATHER, added in
 * rank order into out (in_count values); for the all-gather (apart),
 * rank j's into out + j * in_count.
 */
static tacl_status_t run_whole(const call_t *c, float *out, int apart)
{
    whole_t w = {0};
    float **dsts = malloc((size_t)c->n * sizeof(*dsts));
    size_t *cnts = malloc((size_t)c->n * sizeof(*cnts));
    int *add = malloc((size_t)c->n * sizeof(*add));
    tacl_status_t st = TACL_ERR_NO_MEMORY;

    if (dsts == NULL || cnts == NULL || add == NULL) {
        tacl__error(st, COLL, "%s: no memory for %d ranks", c->name, c->n);
        goto out;
    }
    for (int j = 0; j < c->n; j++) {
        dsts[j] = apart ? out + (size_t)j * c->in_count : out;
        cnts[j] = c->in_count;
        add[j] = !apart && j > 0;
    }
    st = encode_whole(c, &w);
    if (st == TACL_OK && c->in_count > 0)
        st = gather_decode(c, w.enc, w.bytes, dsts, cnts, add);
out:
    whole_free(&w);
    free(dsts);
    free(cnts);
    free(add);
    return st;
}

/* Chunk tables of a SHUFFLE: offsets and lengths, sizes and places. */
typedef struct {
    size_t *off, *len;         /* n: chunk j of the input */
    size_t *sb, *sd, *rb, *rd; /* n: bytes sent to / received from j */
    uint8_t *senc, *renc;
} chunks_t;

static void chunks_free(chunks_t *k)
{
    free(k->off);
    free(k->len);
    free(k->sb);
    free(k->sd);
    free(k->rb);
    free(k->rd);
    free(k->senc);
    free(k->renc);
}

/*
 * The first half of SHUFFLE: encode chunk j for rank j, exchange them
 * all-to-all, and decode and add what came in rank order into this
 * rank's chunk of recvbuf (an all-reduce's chunk, or a reduce-scatter's
 * whole output).  The input is all encoded before recvbuf is written, so
 * in place is safe.
 */
static tacl_status_t shuffle_sum(const call_t *c, chunks_t *k)
{
    size_t n = (size_t)c->n, total, rbytes;
    float *dst;
    tacl_status_t st = TACL_OK;

    k->off = malloc(n * sizeof(size_t));
    k->len = malloc(n * sizeof(size_t));
    k->sb = malloc(n * sizeof(size_t));
    k->sd = malloc(n * sizeof(size_t));
    k->rb = malloc(n * sizeof(size_t));
    k->rd = malloc(n * sizeof(size_t));
    if (!k->off || !k->len || !k->sb || !k->sd || !k->rb || !k->rd)
        goto err_memory;
    for (int j = 0; j < c->n && st == TACL_OK; j++) {
        chunk_of(c, j, &k->off[j], &k->len[j]);
        st = bound_of(c, k->len[j], &k->sb[j]);
    }
    if (st != TACL_OK)
        return st;
    total = tacl__prefix_sums(k->sb, c->n, k->sd);
    k->senc = malloc(total ? total : 1);
    if (k->senc == NULL)
        goto err_memory;
    for (int j = 0; j < c->n && st == TACL_OK; j++)
        st = encode_one(c, c->send + k->off[j], k->len[j],
                        c->err ? c->err + k->off[j] : NULL,
                        k->senc + k->sd[j], k->sb[j], &k->sb[j]);
    if (st == TACL_OK)
        st = exchange_header(c, 0, k->rb);
    if (st != TACL_OK)
        return st;
    if (c->codec->flags & TACL_CODEC_FIXED_SIZE) {
        /* Every rank's chunk for this rank has this rank's length. */
        st = bound_of(c, k->len[c->rank], &rbytes);
        for (int j = 0; j < c->n; j++)
            k->rb[j] = rbytes;
    } else {
        st = tacl_alltoall(k->sb, k->rb, 1, TACL_UINT64, c->comm, NULL);
    }
    if (st != TACL_OK)
        return st;
    total = tacl__prefix_sums(k->rb, c->n, k->rd);
    k->renc = malloc(total ? total : 1);
    if (k->renc == NULL)
        goto err_memory;
    st = tacl_alltoallv(k->senc, k->sb, k->sd, k->renc, k->rb, k->rd,
                        TACL_UINT8, c->comm, NULL);
    dst = c->kind == KIND_ALLREDUCE ? c->recv + k->off[c->rank] : c->recv;
    for (int j = 0; j < c->n && st == TACL_OK; j++)
        st = decode_one(c, k->renc + k->rd[j], k->rb[j], dst, k->len[c->rank],
                        j > 0);
    return st;
err_memory:
    return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                       "%s: no memory for the chunks of %d ranks", c->name,
                       c->n);
}

/*
 * SHUFFLE of an all-reduce: the owners' sums re-encoded, gathered and
 * decoded by every rank, the owner too, so all hold the same bits.
 */
static tacl_status_t run_shuffle_allreduce(const call_t *c)
{
    chunks_t k = {0};
    size_t n = (size_t)c->n, bound, mine;
    size_t *gb = malloc(n * sizeof(*gb));
    float **dsts = malloc(n * sizeof(*dsts));
    int *add = calloc(n, sizeof(*add));
    uint8_t *enc = NULL;
    tacl_status_t st = TACL_ERR_NO_MEMORY;

    if (gb == NULL || dsts == NULL || add == NULL) {
        tacl__error(st, COLL, "%s: no memory for %d ranks", c->name, c->n);
        goto out;
    }
    st = shuffle_sum(c, &k);
    if (st == TACL_OK)
        st = bound_of(c, k.len[c->rank], &bound);
    if (st != TACL_OK)
        goto out;
    enc = malloc(bound ? bound : 1);
    if (enc == NULL) {
        st = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                         "%s: no memory to "
                         "re-encode %zu values",
                         c->name, k.len[c->rank]);
        goto out;
    }
    st = encode_one(c, c->recv + k.off[c->rank], k.len[c->rank], NULL, enc,
                    bound, &mine);
    if (st != TACL_OK)
        goto out;
    if (c->codec->flags & TACL_CODEC_FIXED_SIZE) {
        for (int j = 0; j < c->n && st == TACL_OK; j++)
            st = bound_of(c, k.len[j], &gb[j]);
    } else {
        uint64_t m = mine;

        st = tacl_allgather(&m, gb, 1, TACL_UINT64, c->comm, NULL);
    }
    for (int j = 0; j < c->n; j++)
        dsts[j] = c->recv + k.off[j];
    if (st == TACL_OK)
        st = gather_decode(c, enc, gb, dsts, k.len, add);
out:
    chunks_free(&k);
    free(gb);
    free(dsts);
    free(add);
    free(enc);
    return st;
}

/*
 * SUM: the encodings reduced as arrays of the codec's sum_dtype.  An
 * all-reduce encodes its input whole; a reduce-scatter block by block,
 * each block the same size, so that block r of the reduced encodings is
 * the encoding of the sum of block r.
 */
static tacl_status_t run_sum(const call_t *c)
{
    int rs = c->kind == KIND_REDUCE_SCATTER;
    size_t esz = tacl_dtype_size(c->codec->sum_dtype);
    size_t unit = rs ? c->count : c->in_count, nblocks = rs ? c->n : 1;
    size_t bound, got, *bytes = malloc((size_t)c->n * sizeof(*bytes));
    uint8_t *enc = NULL, *out = NULL;
    tacl_status_t st = bound_of(c, unit, &bound);

    if (st != TACL_OK)
        goto out;
    enc = malloc(bound * nblocks > 0 ? bound * nblocks : 1);
    out = malloc(bound ? bound : 1);
    if (bytes == NULL || enc == NULL || out == NULL) {
        st = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                         "%s: no memory for "
                         "%zu encoded bytes",
                         c->name, bound * nblocks);
        goto out;
    }
    for (size_t b = 0; b < nblocks && st == TACL_OK; b++) {
        st = encode_one(c, c->send + b * unit, unit,
                        c->err ? c->err + b * unit : NULL, enc + b * bound,
                        bound, &got);
        if (st == TACL_OK && (got != bound || got % esz != 0))
            st = tacl__error(TACL_ERR_INVALID_ARG, COLL,
                             "%s: scheme sum: codec %s encoded %zu values "
                             "into %zu bytes, not its bound %zu in %s",
                             c->name, c->codec->name, unit, got, bound,
                             tacl_dtype_name(c->codec->sum_dtype));
    }
    if (st == TACL_OK)
        st = exchange_header(c, bound, bytes);
    if (st != TACL_OK || unit == 0)
        goto out;
    if (rs)
        st = tacl_reduce_scatter(enc, out, bound / esz, c->codec->sum_dtype,
                                 TACL_SUM, c->comm, NULL);
    else
        st = tacl_allreduce(enc, out, bound / esz, c->codec->sum_dtype,
                            TACL_SUM, c->comm, NULL);
    if (st == TACL_OK)
        st = decode_one(c, out, bound, c->recv, unit, 0);
out:
    free(bytes);
    free(enc);
    free(out);
    return st;
}

void *tacl__comp_scratch(tacl_comm_t comm, size_t bytes)
{
    void *ptr;

    pthread_mutex_lock(&comm->x.ctx->lock);
    ptr = tacl__scratch_get(&comm->x.scratch, bytes, 0);
    pthread_mutex_unlock(&comm->x.ctx->lock);
    return ptr;
}

void tacl__comp_scratch_put(tacl_comm_t comm, void *ptr)
{
    if (ptr == NULL)
        return;
    pthread_mutex_lock(&comm->x.ctx->lock);
    tacl__scratch_put(&comm->x.scratch, ptr, 0);
    pthread_mutex_unlock(&comm->x.ctx->lock);
}

/* GATHER of a reduce-scatter: decode every whole input, keep block r. */
static tacl_status_t run_gather_reduce_scatter(const call_t *c)
{
    float *all = tacl__comp_scratch(c->comm, (c->in_count ? c->in_count
                                                         : 1) *
                                                 sizeof(float));
    tacl_status_t st;

    if (all == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "%s: no memory to "
                           "decode %zu values",
                           c->name, c->in_count);
    st = run_whole(c, all, 0);
    if (st == TACL_OK)
        memcpy(c->recv, all + (size_t)c->rank * c->count,
               c->count * sizeof(float));
    tacl__comp_scratch_put(c->comm, all);
    return st;
}

/*
 * ---- Entry points. ----
 */

/* The codecs whose encoding is qgZ's block quantization (codec.c). */
static int is_block_quantizer(const tacl_codec_t *codec)
{
    return strcmp(codec->name, "int8") == 0 ||
           strcmp(codec->name, "int4") == 0;
}

/*
 * An all-gather with a block quantizer and no residual is qwZ itself
 * (tacl_allgather_quantized: every all-gather algorithm, hierarchical
 * ones included, with the quantization inside the schedule), so its
 * result is qwZ's bit for bit and the caller's own block is exact.  With
 * a residual it stays GATHER, which keeps one (qwZ does not).
 */
static int is_qwz(const call_t *c)
{
    return c->kind == KIND_ALLGATHER && c->err == NULL &&
           is_block_quantizer(c->codec);
}

static tacl_status_t run_qwz(const call_t *c)
{
    tacl_quant_t q = {.bits = c->params->bits, .block = c->params->block};

    return tacl_allgather_quantized(c->send, c->recv, c->count, TACL_FLOAT32,
                                    &q, c->comm, NULL);
}

/*
 * QUANT_A2A: the qgZ builder itself (algorithms/qgz.c, thesis section
 * 4.4's divisible all-to-all with requantization between the hops), so
 * the result is tacl_reduce_scatter_quantized's bit for bit.
 */
static tacl_status_t run_qgz(const call_t *c)
{
    /* The codec has checked that bits is its name's width. */
    tacl_quant_t q = {.bits = c->params->bits, .block = c->params->block};

    return tacl_reduce_scatter_quantized(c->send, c->recv, c->count,
                                         TACL_FLOAT32, TACL_SUM, &q, c->comm,
                                         NULL);
}

tacl_status_t tacl__comp_check(const char *name, const tacl_codec_t *codec,
                               const tacl_codec_params_t *params,
                               tacl_comp_scheme_t scheme)
{
    if (codec == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: the codec is NULL (tacl_codec_find gives "
                           "one by name)",
                           name);
    if (params == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: the codec params are NULL", name);
    if ((unsigned)scheme >= TACL_NUM_COMP_SCHEMES)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: unknown scheme %d (gather, shuffle, sum or "
                           "qgz)",
                           name, (int)scheme);
    if (scheme == TACL_COMP_SUM && !(codec->flags & TACL_CODEC_SUMMABLE))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: scheme sum needs a summable codec; %s is "
                           "not (use gather or shuffle)",
                           name, codec->name);
    if (scheme == TACL_COMP_QUANT_A2A && !is_block_quantizer(codec))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: scheme qgz needs a block quantizer (int8 "
                           "or int4); %s is not",
                           name, codec->name);
    return tacl_codec_check(codec, params);
}

/* The arguments every call and estimate takes. */
static tacl_status_t check_args(const call_t *c)
{
    tacl_status_t st;

    if (c->kind != KIND_ALLREDUCE && c->n > 0 &&
        c->count > SIZE_MAX / (size_t)c->n)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: count %zu times %d ranks overflows", c->name,
                           c->count, c->n);
    st = tacl__comp_check(c->name, c->codec, c->params, c->scheme);
    if (st != TACL_OK || c->scheme != TACL_COMP_QUANT_A2A)
        return st;
    if (c->kind != KIND_REDUCE_SCATTER)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: scheme qgz is a reduce-scatter (use "
                           "tacl_comp_reduce_scatter)",
                           c->name);
    /* qgZ requantizes between its hops and keeps no residual: an err
     * here would be left stale, so it is refused, not ignored. */
    if (c->err != NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: scheme qgz keeps no error feedback; pass "
                           "err NULL",
                           c->name);
    return TACL_OK;
}

/* The buffers and the context of a call that runs (not an estimate). */
static tacl_status_t check_buffers(const call_t *c)
{
    size_t out_count = c->kind == KIND_ALLGATHER ? c->in_count * (size_t)c->n
                                                 : c->count;

    if ((c->in_count > 0 && c->send == NULL) ||
        (out_count > 0 && c->recv == NULL))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: %s is NULL with count %zu", c->name,
                           c->send == NULL ? "sendbuf" : "recvbuf", c->count);
    if ((c->send && tacl__memtype_detect(c->send) != TACL_MEM_HOST) ||
        (c->recv && tacl__memtype_detect(c->recv) != TACL_MEM_HOST) ||
        (c->err && tacl__memtype_detect(c->err) != TACL_MEM_HOST))
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                           "%s: device memory is not taken yet; pass host "
                           "buffers",
                           c->name);
    if (tacl__group_active())
        return tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                           "%s cannot sit in a group (it is several "
                           "collectives in a row)",
                           c->name);
    return TACL_OK;
}

/* The kind of a compressed call of collective coll. */
static kind_t kind_of(tacl_coll_t coll)
{
    return coll == TACL_COLL_ALLGATHER        ? KIND_ALLGATHER
           : coll == TACL_COLL_REDUCE_SCATTER ? KIND_REDUCE_SCATTER
                                              : KIND_ALLREDUCE;
}

const char *tacl__comp_name(tacl_coll_t coll)
{
    return kind_names[kind_of(coll)];
}

tacl_status_t tacl__comp_agree(tacl_comm_t comm, tacl_coll_t coll,
                               size_t count, const tacl_codec_t *codec,
                               const tacl_codec_params_t *params,
                               tacl_comp_scheme_t scheme,
                               tacl_comp_hops_t hops)
{
    call_t c = {.kind = kind_of(coll),
                .name = kind_names[kind_of(coll)],
                .count = count,
                .codec = codec,
                .params = params,
                .scheme = scheme,
                .hops = hops,
                .comm = comm,
                .n = comm->size,
                .rank = comm->rank};
    size_t *bytes = malloc((size_t)comm->size * sizeof(*bytes));
    tacl_status_t st;

    if (bytes == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "%s: no memory for %d headers", c.name,
                           comm->size);
    st = exchange_header(&c, 0, bytes);
    free(bytes);
    return st;
}

/* Fill in what c's arguments imply and check them. */
static tacl_status_t comp_prepare(call_t *c)
{
    if (c->name == NULL)
        c->name = kind_names[c->kind];
    c->n = c->comm->size;
    c->rank = c->comm->rank;
    if (c->kind == KIND_REDUCE_SCATTER && c->count <= SIZE_MAX / (size_t)c->n)
        c->in_count = c->count * (size_t)c->n;
    else
        c->in_count = c->count;
    return check_args(c);
}

static tacl_status_t comp_run(call_t *c)
{
    tacl_status_t st = comp_prepare(c);

    if (st == TACL_OK)
        st = check_buffers(c);
    if (st != TACL_OK)
        return st;
    switch (c->kind) {
    case KIND_ALLGATHER:
        return is_qwz(c) ? run_qwz(c) : run_whole(c, c->recv, 1);
    case KIND_REDUCE_SCATTER:
        if (c->scheme == TACL_COMP_QUANT_A2A)
            return run_qgz(c);
        if (c->scheme == TACL_COMP_GATHER)
            return run_gather_reduce_scatter(c);
        if (c->scheme == TACL_COMP_SHUFFLE) {
            chunks_t k = {0};

            st = shuffle_sum(c, &k);
            chunks_free(&k);
            return st;
        }
        return run_sum(c);
    default:
        if (c->scheme == TACL_COMP_GATHER)
            return run_whole(c, c->recv, 0);
        if (c->scheme == TACL_COMP_SHUFFLE)
            return run_shuffle_allreduce(c);
        return run_sum(c);
    }
}

/*
 * ---- The estimate. ----
 */

/* One collective a scheme runs, as tacl_comm_estimate takes it. */
typedef struct {
    tacl_coll_t coll;
    size_t count;
    tacl_dtype_t dtype;
} step_t;

#define MAX_STEPS 5

/*
 * The collectives c's scheme runs, in order, with every encoding at its
 * bound (the run functions above, step for step): the header, then the
 * data and the size exchanges a codec of variable size needs.
 */
static tacl_status_t scheme_steps(const call_t *c, step_t *steps,
                                  int *nsteps_p)
{
    int fixed = (c->codec->flags & TACL_CODEC_FIXED_SIZE) != 0, k = 0;
    size_t whole, part, off, esz = tacl_dtype_size(c->codec->sum_dtype);
    tacl_status_t st = bound_of(c, c->in_count, &whole);

    /* The largest chunk: SHUFFLE's blocks are priced as all that size. */
    chunk_of(c, 0, &off, &part);
    if (st == TACL_OK)
        st = bound_of(c, part, &part);
    if (st != TACL_OK)
        return st;
    steps[k++] = (step_t){TACL_COLL_ALLGATHER, H_LEN, TACL_UINT64};
    if (c->kind == KIND_ALLGATHER || c->scheme == TACL_COMP_GATHER) {
        steps[k++] = (step_t){TACL_COLL_ALLGATHERV, whole, TACL_UINT8};
    } else if (c->scheme == TACL_COMP_SUM) {
        steps[k++] = (step_t){c->kind == KIND_ALLREDUCE
                                  ? TACL_COLL_ALLREDUCE
                                  : TACL_COLL_REDUCE_SCATTER,
                              (c->kind == KIND_ALLREDUCE ? whole : part) /
                                  esz,
                              c->codec->sum_dtype};
    } else {
        if (!fixed)
            steps[k++] = (step_t){TACL_COLL_ALLTOALL, 1, TACL_UINT64};
        steps[k++] = (step_t){TACL_COLL_ALLTOALLV, part, TACL_UINT8};
        if (c->kind == KIND_ALLREDUCE && !fixed)
            steps[k++] = (step_t){TACL_COLL_ALLGATHER, 1, TACL_UINT64};
        if (c->kind == KIND_ALLREDUCE)
            steps[k++] = (step_t){TACL_COLL_ALLGATHERV, part, TACL_UINT8};
    }
    *nsteps_p = k;
    return TACL_OK;
}

tacl_status_t tacl__comp_flat_bytes(tacl_coll_t coll, size_t count,
                                    const tacl_codec_t *codec,
                                    const tacl_codec_params_t *params,
                                    tacl_comp_scheme_t scheme, int n,
                                    double *bytes_p, int *messages_p)
{
    call_t c = {.kind = kind_of(coll),
                .count = count,
                .codec = codec,
                .params = params,
                .scheme = scheme};
    step_t steps[MAX_STEPS];
    int nsteps = 0;
    tacl_status_t st;

    *bytes_p = 0;
    *messages_p = 0;
    c.n = n;
    c.in_count = c.kind == KIND_REDUCE_SCATTER ? count * (size_t)n : count;
    /* qgZ's quantized blocks go all-to-all once: SHUFFLE's first half. */
    if (scheme == TACL_COMP_QUANT_A2A)
        c.scheme = TACL_COMP_SHUFFLE;
    if (n < 2)
        return TACL_OK;
    st = scheme_steps(&c, steps, &nsteps);
    for (int i = 0; i < nsteps && st == TACL_OK; i++) {
        double b = (double)steps[i].count *
                   (double)tacl_dtype_size(steps[i].dtype);

        if (steps[i].coll == TACL_COLL_ALLREDUCE) {
            *bytes_p += 2.0 * (n - 1) / n * b;
            *messages_p += 2 * (n - 1);
        } else {
            *bytes_p += (double)(n - 1) * b;
            *messages_p += n - 1;
        }
    }
    return st;
}

/* The estimate of a call that is qwZ or qgZ itself: that call, as the
 * decider would run it, named after its scheme. */
static tacl_status_t quant_estimate(const call_t *c, tacl_sim_info_t *info_p)
{
    int qwz = c->kind == KIND_ALLGATHER;
    tacl__coll_args_t a = {.type = qwz ? TACL_COLL_ALLGATHER
                                       : TACL_COLL_REDUCE_SCATTER,
                           .count = c->count,
                           .dtype = TACL_FLOAT32,
                           .op = TACL_SUM,
                           .qbits = c->params->bits,
                           .qblock = c->params->block};
    tacl_status_t st = tacl__estimate_args(c->comm, &a, info_p);

    if (st == TACL_OK)
        snprintf(info_p->algorithm, sizeof(info_p->algorithm), "%s",
                 qwz ? "qwz" : tacl_comp_scheme_name(c->scheme));
    return st;
}

static tacl_status_t comp_estimate(call_t *c, tacl_sim_info_t *info_p)
{
    step_t steps[MAX_STEPS];
    tacl_sim_info_t sum, one;
    int nsteps;
    tacl_status_t st;

    if (info_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "comp_estimate: info_p is NULL");
    if (c->kind == KIND_NONE)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "comp_estimate: coll %s is not a compressed "
                           "collective (allreduce, reduce_scatter, "
                           "allgather)",
                           tacl_coll_name(c->coll));
    st = comp_prepare(c);
    if (st == TACL_OK && (c->scheme == TACL_COMP_QUANT_A2A || is_qwz(c)))
        return quant_estimate(c, info_p);
    if (st == TACL_OK)
        st = scheme_steps(c, steps, &nsteps);
    if (st != TACL_OK)
        return st;
    memset(&sum, 0, sizeof(sum));
    for (int i = 0; i < nsteps; i++) {
        st = tacl_comm_estimate(c->comm, steps[i].coll, steps[i].count,
                                steps[i].dtype, TACL_SUM, 0, &one);
        if (st != TACL_OK)
            return st;
        sum.seconds += one.seconds;
        for (int l = 0; l < TACL_NUM_LINK_CLASSES; l++) {
            sum.bytes[l] += one.bytes[l];
            sum.messages[l] += one.messages[l];
        }
    }
    snprintf(sum.algorithm, sizeof(sum.algorithm), "%s",
             tacl_comp_scheme_name(c->scheme));
    snprintf(sum.engine, sizeof(sum.engine), "schedule");
    *info_p = sum;
    return TACL_OK;
}

static call_t call_make(kind_t kind, const float *send, float *recv,
                        size_t count, const tacl_codec_t *codec,
                        const tacl_codec_params_t *params, float *err,
                        tacl_comp_scheme_t scheme, tacl_comm_t comm)
{
    call_t c = {.kind = kind,
                .send = send,
                .recv = recv,
                .count = count,
                .codec = codec,
                .params = params,
                .err = err,
                .scheme = scheme,
                .comm = comm};

    return c;
}

tacl_status_t tacl__comp_check_call(tacl_coll_t coll, const float *send,
                                   float *recv, size_t count,
                                   const tacl_codec_t *codec,
                                   const tacl_codec_params_t *params,
                                   float *err, tacl_comp_scheme_t scheme,
                                   tacl_comm_t comm)
{
    call_t c = call_make(kind_of(coll), send, recv, count, codec, params,
                         err, scheme, comm);
    tacl_status_t st = comp_prepare(&c);

    return st == TACL_OK ? check_buffers(&c) : st;
}

/*
 * Run one call, or its estimate into *info_p, holding its communicator,
 * under the last-error rule.
 */
static tacl_status_t comp_entry(call_t *c, int estimate,
                                tacl_sim_info_t *info_p)
{
    tacl_status_t st;

    tacl__last_error_clear();
    st = tacl__comm_enter(c->comm);
    if (st != TACL_OK)
        return st;
    st = estimate ? comp_estimate(c, info_p) : comp_run(c);
    tacl__comm_leave(c->comm);
    return st == TACL_OK ? TACL_OK : tacl__comm_fail(c->comm, st);
}

TACL_EXPORT tacl_status_t tacl_comp_allreduce(
    const float *sendbuf, float *recvbuf, size_t count,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comp_scheme_t scheme, tacl_comm_t comm)
{
    call_t c = call_make(KIND_ALLREDUCE, sendbuf, recvbuf, count, codec,
                         params, err, scheme, comm);

    return comp_entry(&c, 0, NULL);
}

TACL_EXPORT tacl_status_t tacl_comp_reduce_scatter(
    const float *sendbuf, float *recvbuf, size_t recvcount,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comp_scheme_t scheme, tacl_comm_t comm)
{
    call_t c = call_make(KIND_REDUCE_SCATTER, sendbuf, recvbuf, recvcount,
                         codec, params, err, scheme, comm);

    return comp_entry(&c, 0, NULL);
}

TACL_EXPORT tacl_status_t tacl_comp_allgather(
    const float *sendbuf, float *recvbuf, size_t sendcount,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comm_t comm)
{
    call_t c = call_make(KIND_ALLGATHER, sendbuf, recvbuf, sendcount, codec,
                         params, err, TACL_COMP_GATHER, comm);

    return comp_entry(&c, 0, NULL);
}

TACL_EXPORT tacl_status_t tacl_comp_estimate(
    tacl_comm_t comm, tacl_coll_t coll, size_t count,
    const tacl_codec_t *codec, const tacl_codec_params_t *params,
    tacl_comp_scheme_t scheme, tacl_sim_info_t *info_p)
{
    kind_t kind = coll == TACL_COLL_ALLREDUCE        ? KIND_ALLREDUCE
                  : coll == TACL_COLL_REDUCE_SCATTER ? KIND_REDUCE_SCATTER
                  : coll == TACL_COLL_ALLGATHER      ? KIND_ALLGATHER
                                                     : KIND_NONE;
    call_t c = call_make(kind, NULL, NULL, count, codec, params, NULL,
                         kind == KIND_ALLGATHER ? TACL_COMP_GATHER : scheme,
                         comm);

    c.name = "comp_estimate";
    c.coll = coll;
    return comp_entry(&c, 1, info_p);
}
