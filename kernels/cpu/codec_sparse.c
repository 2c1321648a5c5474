/*
 * The sparsifying codecs "topk" and "threshold" (Deep Gradient
 * Compression, Lin et al. 2018; the thesis' DGC, chapter 5).  Both keep
 * values of the largest magnitudes of the whole list (one selection for a
 * fused group) and send them with their global indices:
 *
 *     uint64 total      values of the list (checked when decoding)
 *     uint64 n          values kept
 *     uint32 idx[n]     global indices, strictly increasing
 *     float  val[n]     the values, exact
 *
 * topk keeps exactly k = ceil(density * total): every value of magnitude
 * above the k-th largest, then those equal to it in index order.
 * threshold estimates the k-th magnitude from a strided sample of at most
 * 4096 values, as DGC does to avoid a full selection, and keeps every
 * value at or above it; when that would keep more than 2k values it falls
 * back to the exact top k, so its size is bounded by 2k.  Indices are 32
 * bits: a list of 2^32 values or more is refused.
 *
 * Magnitudes are ordered by their bits with the sign cleared, which is
 * their order as numbers for every float but NaN; a NaN ranks above
 * infinity, so a NaN gradient is kept and seen, as a dense sum would show
 * it.
 *
 * The exact k-th magnitude costs about one pass over the list.  A sample
 * of 16384 values, one at a jittered place in each stretch of the list,
 * brackets the k-th magnitude between two of its order statistics with
 * a margin of four standard deviations.  One pass (the sweep) counts the
 * values above the bracket, keeps the magnitudes inside it and the
 * places of both; a selection among the few inside gives the exact
 * answer, and the encoding is written from the places, not from another
 * pass.  When the bracket misses (a rare sample, or many equal values),
 * or the list is small, a radix selection on the magnitudes' bits (three
 * passes, no memory) gives it instead.  threshold sweeps once with its
 * estimate as the bracket's floor.
 *
 * Nothing here copies the list: a fused group is read where it lies.
 * Error feedback (tacl__codec_fused_feedback) sums x into the caller's
 * residual in the sweep itself and then zeroes the kept places, which is
 * what decoding and subtracting would leave.
 */
#include "codec_list.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define SPARSE_HEADER (2 * sizeof(uint64_t))
#define THRESHOLD_SAMPLE 4096u
#define BRACKET_SAMPLE 16384u
/* Below this many values the radix selection is as quick as bracketing. */
#define BRACKET_MIN (4 * BRACKET_SAMPLE)

/*
 * A buffer list read in place: nbufs buffers of counts[b] values.  With
 * error feedback the values encoded are x + e, summed into e by the first
 * pass (summed says it is done); a buffer without a residual (e NULL, or
 * e[b] NULL) encodes x.
 */
typedef struct {
    int nbufs;
    const float *const *x;
    float *const *e;
    const size_t *counts;
    size_t total;
    int summed;
} list_t;

/* What a sweep over the list records: the places of the values at or
 * above lo, in order, and the magnitudes of those at or below hi. */
typedef struct {
    uint32_t *sample; /* BRACKET_SAMPLE */
    uint32_t *pos, *inside;
    size_t pos_cap, inside_cap;
    size_t npos, ninside, above; /* above: values above hi */
    int overflow;                /* a cap was passed: the rest is unknown */
} sweep_t;

static size_t sparse_bytes(size_t n)
{
    return SPARSE_HEADER + n * (sizeof(uint32_t) + sizeof(float));
}

/* Most values threshold keeps: 2k, at most the list. */
static size_t threshold_cap(double density, size_t total)
{
    size_t k = tacl__codec_kept(density, total);
    return 2 * k < total ? 2 * k : total;
}

static size_t topk_bound(const tacl_codec_params_t *params, int nbufs,
                         const size_t *counts)
{
    return sparse_bytes(
        tacl__codec_kept(params->density, tacl__codec_total(nbufs, counts)));
}

static size_t threshold_bound(const tacl_codec_params_t *params, int nbufs,
                              const size_t *counts)
{
    return sparse_bytes(
        threshold_cap(params->density, tacl__codec_total(nbufs, counts)));
}

/* A value's magnitude as ordered bits. */
static inline uint32_t mag(float x)
{
    uint32_t u;

    memcpy(&u, &x, sizeof(u));
    return u & 0x7fffffffu;
}

/* The residual buffer b's first pass sums into, or NULL. */
static float *pending(const list_t *l, int b)
{
    return !l->summed && l->e != NULL ? l->e[b] : NULL;
}

/* Where buffer b's encoded values are once summed. */
static const float *values(const list_t *l, int b)
{
    return l->e != NULL && l->e[b] != NULL ? l->e[b] : l->x[b];
}

/* The sum pass alone, for the paths that do not sweep. */
static void sum_all(list_t *l)
{
    for (int b = 0; b < l->nbufs; b++) {
        float *e = pending(l, b);
        const float *x = l->x[b];
        if (e != NULL)
            for (size_t i = 0; i < l->counts[b]; i++)
                e[i] = x[i] + e[i];
    }
    l->summed = 1;
}

/*
 * The passes go a block of values at a time: a test of the whole block
 * that the compiler vectorizes, and a value at a time only in the few
 * blocks that hold something to keep.
 */
#define BLOCK 16

/* Whether any of the block's magnitudes is at least t. */
static inline int block_any(const float *v, uint32_t t)
{
    int any = 0;

    for (int j = 0; j < BLOCK; j++)
        any |= mag(v[j]) >= t;
    return any;
}

/* How many of the block's magnitudes lie above t. */
static inline size_t block_above(const float *v, uint32_t t)
{
    uint32_t above = 0;

    for (int j = 0; j < BLOCK; j++)
        above += mag(v[j]) > t;
    return above;
}

/* e = x + e over a block. */
static inline void block_sum(float *e, const float *x)
{
    for (int j = 0; j < BLOCK; j++)
        e[j] = x[j] + e[j];
}

/* A reader of the list at increasing global indices. */
typedef struct {
    const list_t *l;
    int b;
    size_t base; /* global index of buffer b's first value */
} cursor_t;

/* The value at global index i, at or after the last one read. */
static float value_at(cursor_t *c, size_t i)
{
    const list_t *l = c->l;
    size_t j;

    while (i - c->base >= l->counts[c->b])
        c->base += l->counts[c->b++];
    j = i - c->base;
    if (pending(l, c->b) != NULL)
        return l->x[c->b][j] + l->e[c->b][j];
    return values(l, c->b)[j];
}

/* The k-th largest (1-based) of m magnitudes, reordering them (Hoare's
 * selection, descending). */
static uint32_t kth_largest(uint32_t *a, size_t m, size_t k)
{
    ptrdiff_t lo = 0, hi = (ptrdiff_t)m - 1, want = (ptrdiff_t)k - 1;

    while (lo < hi) {
        uint32_t pivot = a[lo + (hi - lo) / 2];
        ptrdiff_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] > pivot)
                i++;
            while (a[j] < pivot)
                j--;
            if (i <= j) {
                uint32_t t = a[i];
                a[i++] = a[j];
                a[j--] = t;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            break;
    }
    return a[want];
}

/*
 * The k-th largest magnitude of the (summed) list by its bits, eleven,
 * eleven and ten at a time: each pass counts the values that share the
 * digits found so far by their next digit.
 */
static uint32_t radix_kth(const list_t *l, size_t k)
{
    static const int shift[3] = {21, 10, 0};
    static const uint32_t digits[3] = {2048, 2048, 1024};
    uint32_t prefix = 0, known = 0;
    size_t want = k;

    for (int d = 0; d < 3; d++) {
        uint32_t hist[2048] = {0};
        uint32_t top = digits[d] - 1;
        for (int b = 0; b < l->nbufs; b++) {
            const float *v = values(l, b);
            for (size_t i = 0; i < l->counts[b]; i++) {
                uint32_t u = mag(v[i]);
                if ((u & known) == prefix)
                    hist[(u >> shift[d]) & top]++;
            }
        }
        for (uint32_t g = top;; g--) {
            if (hist[g] >= want || g == 0) {
                prefix |= g << shift[d];
                break;
            }
            want -= hist[g];
        }
        known |= top << shift[d];
    }
    return prefix;
}

/* Values of the (summed) list of magnitude above t. */
static size_t count_above(const list_t *l, uint32_t t)
{
    size_t above = 0;

    for (int b = 0; b < l->nbufs; b++) {
        const float *v = values(l, b);
        for (size_t i = 0; i < l->counts[b]; i++)
            above += mag(v[i]) > t;
    }
    return above;
}

/* Room for the magnitudes inside a bracket: twice what it holds on
 * average, and some. */
static size_t bracket_cap(size_t total, size_t k)
{
    double p = (double)k * BRACKET_SAMPLE / (double)total;
    double margin = 4.0 * sqrt(p) + 8.0;

    return (size_t)(4.0 * margin * (double)total / BRACKET_SAMPLE) + 1024;
}

/* Take the sweep's memory (before the residual is touched, so that error
 * feedback never fails halfway). */
static tacl_status_t sweep_take(int exact, double density, size_t total,
                                sweep_t *w)
{
    size_t k = tacl__codec_kept(density, total);

    *w = (sweep_t){0};
    if (total >= BRACKET_MIN) {
        w->inside_cap = bracket_cap(total, k);
        w->pos_cap = k + w->inside_cap;
    }
    if (!exact && w->pos_cap < threshold_cap(density, total))
        w->pos_cap = threshold_cap(density, total);
    if (w->pos_cap == 0)
        return TACL_OK;
    w->sample = malloc(BRACKET_SAMPLE * sizeof(uint32_t));
    w->pos = malloc(w->pos_cap * sizeof(uint32_t));
    w->inside = malloc((w->inside_cap ? w->inside_cap : 1) * sizeof(uint32_t));
    if (w->sample != NULL && w->pos != NULL && w->inside != NULL)
        return TACL_OK;
    free(w->sample);
    free(w->pos);
    free(w->inside);
    return tacl__error(TACL_ERR_NO_MEMORY, ALLOC,
                       "codec: no memory to select among %zu values", total);
}

static void sweep_free(sweep_t *w)
{
    free(w->sample);
    free(w->pos);
    free(w->inside);
}

/* Record one value of magnitude u at global index g; with inside, one
 * at or below hi is kept among the candidates, else counted above. */
static inline void sweep_one(sweep_t *w, uint32_t u, size_t g, uint32_t lo,
                             uint32_t hi, int inside)
{
    int in = inside && u <= hi;

    if (u < lo)
        return;
    if (w->npos == w->pos_cap || (in && w->ninside == w->inside_cap)) {
        w->overflow = 1;
        return;
    }
    w->pos[w->npos++] = (uint32_t)g;
    if (in)
        w->inside[w->ninside++] = u;
    else
        w->above++;
}

/*
 * One pass over the list: sum the residuals where they are pending, and
 * record the places of the values at or above lo, counting those above
 * hi (or, without inside, all of them) and keeping the others'
 * magnitudes.  Once a cap is passed only the sums go on.
 */
static void sweep(list_t *l, uint32_t lo, uint32_t hi, int inside,
                  sweep_t *w)
{
    size_t base = 0;

    w->npos = w->ninside = w->above = 0;
    w->overflow = 0;
    for (int b = 0; b < l->nbufs; b++) {
        float *e = pending(l, b);
        const float *x = l->x[b], *v = values(l, b);
        size_t cnt = l->counts[b], i = 0;
        if (w->overflow && e == NULL) {
            base += cnt;
            continue;
        }
        for (; i + BLOCK <= cnt; i += BLOCK) {
            if (e != NULL)
                block_sum(e + i, x + i);
            if (w->overflow || !block_any(v + i, lo))
                continue;
            for (int q = 0; q < BLOCK; q++)
                sweep_one(w, mag(v[i + q]), base + i + q, lo, hi, inside);
        }
        for (; i < cnt; i++) {
            if (e != NULL)
                e[i] = x[i] + e[i];
            if (!w->overflow)
                sweep_one(w, mag(v[i]), base + i, lo, hi, inside);
        }
        base += cnt;
    }
    l->summed = 1;
}

/*
 * The k-th largest magnitude through a sample's bracket [lo, hi], the
 * list swept (and summed) on the way: 1 with *t_p and the count above
 * it when the bracket holds it, w->pos the places of every candidate; 0
 * when it missed.
 */
static int bracket_kth(list_t *l, size_t k, sweep_t *w, uint32_t *t_p,
                       size_t *above_p)
{
    const size_t m = BRACKET_SAMPLE;
    double p = (double)k * (double)m / (double)l->total;
    double margin = 4.0 * sqrt(p) + 8.0;
    size_t r_hi = p > margin ? (size_t)(p - margin) : 0;
    size_t r_lo = (size_t)(p + margin) + 1, above;
    uint32_t hi = UINT32_MAX, lo, t;
    cursor_t c = {l, 0, 0};

    /* One value in each stretch of the list, at a hashed place in it, so
     * that a period in the list cannot line up with the sample. */
    for (size_t j = 0; j < m; j++) {
        size_t start = j * l->total / m, end = (j + 1) * l->total / m;
        uint64_t h = (j + 1) * 0x9e3779b97f4a7c15ull;
        w->sample[j] = mag(value_at(&c, start + (h >> 32) % (end - start)));
    }
    if (r_lo > m)
        r_lo = m;
    lo = kth_largest(w->sample, m, r_lo);
    if (r_hi > 0)
        hi = kth_largest(w->sample, m, r_hi);
    sweep(l, lo, hi, 1, w);
    if (w->overflow || w->above >= k || w->above + w->ninside < k)
        return 0;
    t = kth_largest(w->inside, w->ninside, k - w->above);
    above = w->above;
    for (size_t i = 0; i < w->ninside; i++)
        above += w->inside[i] > t;
    *t_p = t;
    *above_p = above;
    return 1;
}

/*
 * Write the sparse encoding: every value whose magnitude is above t
 * (there are above of them), then those equal to t, in index order,
 * until limit values are kept; taken from the places in pos (npos of
 * them, every value at or above t among them) or, with pos NULL, from
 * the whole list.
 */
static size_t sparse_emit(const list_t *l, const uint32_t *pos, size_t npos,
                          uint32_t t, size_t above, size_t limit, void *dst)
{
    uint64_t head[2] = {l->total, 0};
    size_t ties = limit - above, n = 0, base = 0;
    uint32_t *idx = (uint32_t *)((uint8_t *)dst + SPARSE_HEADER);
    float *val = (float *)(idx + limit);

    if (pos != NULL) {
        cursor_t c = {l, 0, 0};
        for (size_t i = 0; i < npos && n < limit; i++) {
            float f = value_at(&c, pos[i]);
            uint32_t u = mag(f);
            if (u > t || (u == t && ties > 0)) {
                ties -= u == t;
                idx[n] = pos[i];
                val[n++] = f;
            }
        }
    }
    for (int b = 0; pos == NULL && b < l->nbufs && n < limit; b++) {
        const float *v = values(l, b);
        size_t cnt = l->counts[b];
        for (size_t i = 0; i < cnt && n < limit;) {
            size_t end = i + BLOCK < cnt ? i + BLOCK : cnt;
            if (end - i == BLOCK && !block_any(v + i, t)) {
                i = end;
                continue;
            }
            for (; i < end && n < limit; i++) {
                uint32_t u = mag(v[i]);
                if (u > t || (u == t && ties > 0)) {
                    ties -= u == t;
                    idx[n] = (uint32_t)(base + i);
                    val[n++] = v[i];
                }
            }
        }
        base += cnt;
    }
    /* Values follow the n indices actually written. */
    memmove(idx + n, val, n * sizeof(float));
    head[1] = n;
    memcpy(dst, head, sizeof(head));
    return sparse_bytes(n);
}

/* The threshold codec's estimate: the sample's k-th largest magnitude,
 * every (total / m)-th value. */
static uint32_t threshold_estimate(const list_t *l, double density)
{
    size_t m = l->total < THRESHOLD_SAMPLE ? l->total : THRESHOLD_SAMPLE;
    size_t stride = l->total / m;
    uint32_t sample[THRESHOLD_SAMPLE];
    cursor_t c = {l, 0, 0};

    for (size_t i = 0; i < m; i++)
        sample[i] = mag(value_at(&c, i * stride));
    return kth_largest(sample, m, tacl__codec_kept(density, m));
}

static tacl_status_t too_long(int exact, size_t total)
{
    return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                       "codec %s: %zu values; sparse codecs take fewer "
                       "than 2^32 a group",
                       exact ? "topk" : "threshold", total);
}

/* Encode the list, its sweep's memory taken; cannot fail. */
static size_t sparse_select_emit(int exact, double density, list_t *l,
                                 sweep_t *w, void *dst)
{
    size_t k = tacl__codec_kept(density, l->total), above;
    uint32_t t;

    if (l->total == 0)
        return sparse_emit(l, NULL, 0, 0, 0, 0, dst);
    if (!exact) {
        /* Every value at or above the estimate, if at most 2k. */
        t = threshold_estimate(l, density);
        sweep(l, t, 0, 0, w);
        if (!w->overflow && w->npos <= threshold_cap(density, l->total))
            return sparse_emit(l, w->pos, w->npos, t, 0, w->npos, dst);
    }
    if (w->inside_cap > 0 && bracket_kth(l, k, w, &t, &above))
        return sparse_emit(l, w->pos, w->npos, t, above, k, dst);
    sum_all(l);
    t = radix_kth(l, k);
    return sparse_emit(l, NULL, 0, t, count_above(l, t), k, dst);
}

/*
 * Encode the list; with errs (error feedback fused with the encoding),
 * the first pass sums e += x where a buffer has a residual (that sum is
 * what is encoded), and then e = 0 where a value was kept, exactly what
 * e = x + e - decode(encode(x + e)) gives, since the kept values travel
 * exact.  Everything that can fail is done before the residual is
 * touched.
 */
static tacl_status_t sparse_encode(int exact, double density, int nbufs,
                                   const float *const *srcs,
                                   const size_t *counts, float *const *errs,
                                   void *dst, size_t *bytes_p)
{
    list_t l = {nbufs, srcs, errs, counts, tacl__codec_total(nbufs, counts),
                errs == NULL};
    const uint32_t *idx = (const uint32_t *)((uint8_t *)dst + SPARSE_HEADER);
    uint64_t head[2];
    size_t base = 0, i = 0;
    sweep_t w;
    tacl_status_t st;

    if (l.total > UINT32_MAX)
        return too_long(exact, l.total);
    st = sweep_take(exact, density, l.total, &w);
    if (st != TACL_OK)
        return st;
    *bytes_p = sparse_select_emit(exact, density, &l, &w, dst);
    sweep_free(&w);
    memcpy(head, dst, sizeof(head));
    for (int b = 0; errs != NULL && b < nbufs; b++) {
        size_t end = base + counts[b];
        for (; i < head[1] && idx[i] < end; i++)
            if (errs[b] != NULL)
                errs[b][idx[i] - base] = 0.0f;
        base = end;
    }
    return TACL_OK;
}

static tacl_status_t sparse_decode(const char *name, const void *src,
                                   size_t bytes, int nbufs,
                                   float *const *dsts, const size_t *counts,
                                   int accumulate)
{
    size_t total = tacl__codec_total(nbufs, counts);
    const uint32_t *idx = (const uint32_t *)((const uint8_t *)src +
                                             SPARSE_HEADER);
    uint64_t head[2];

    if (bytes < SPARSE_HEADER)
        return tacl__codec_mismatch(name, "bytes", bytes, SPARSE_HEADER,
                                    nbufs);
    memcpy(head, src, sizeof(head));
    if (head[0] != total)
        return tacl__codec_mismatch(name, "values", (size_t)head[0], total,
                                    nbufs);
    if (head[1] > total || bytes != sparse_bytes((size_t)head[1]))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "codec %s: %zu bytes do not hold %llu kept "
                           "values: the encoded data is damaged",
                           name, bytes, (unsigned long long)head[1]);
    for (uint64_t i = 0; i < head[1]; i++)
        if (idx[i] >= total || (i > 0 && idx[i] <= idx[i - 1]))
            return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                               "codec %s: index %u at %llu is out of order "
                               "or range: the encoded data is damaged",
                               name, idx[i], (unsigned long long)i);
    tacl__codec_scatter(nbufs, dsts, counts, idx,
                        (const float *)(idx + head[1]), (size_t)head[1],
                        accumulate);
    return TACL_OK;
}

/* One sparse codec: its two slots and its table. */
#define SPARSE_CODEC(name_, exact_)                                          \
    static tacl_status_t name_##_encode(const tacl_codec_params_t *params,   \
                                        int nbufs, const float *const *srcs, \
                                        const size_t *counts, void *dst,     \
                                        size_t *bytes_p)                     \
    {                                                                        \
        return sparse_encode(exact_, params->density, nbufs, srcs, counts,   \
                             NULL, dst, bytes_p);                            \
    }                                                                        \
    static tacl_status_t name_##_decode(const tacl_codec_params_t *params,   \
                                        const void *src, size_t bytes,       \
                                        int nbufs, float *const *dsts,       \
                                        const size_t *counts,                \
                                        int accumulate)                      \
    {                                                                        \
        return sparse_decode(#name_, src, bytes, nbufs, dsts, counts,        \
                             accumulate);                                    \
    }                                                                        \
    static tacl_status_t name_##_feedback(                                   \
        const tacl_codec_params_t *params, int nbufs,                        \
        const float *const *srcs, const size_t *counts, float *const *errs,  \
        void *dst, size_t *bytes_p)                                          \
    {                                                                        \
        return sparse_encode(exact_, params->density, nbufs, srcs, counts,   \
                             errs, dst, bytes_p);                            \
    }                                                                        \
    const tacl_codec_t tacl__codec_##name_ = {                               \
        .name = #name_,                                                      \
        .flags = 0,                                                          \
        .check = tacl__codec_check_density,                                  \
        .encoded_bound = name_##_bound,                                      \
        .encode = name_##_encode,                                            \
        .decode = name_##_decode,                                            \
    };

SPARSE_CODEC(topk, 1)
SPARSE_CODEC(threshold, 0)

tacl__codec_feedback_t tacl__codec_fused_feedback(const tacl_codec_t *codec)
{
    if (codec->encode == topk_encode)
        return topk_feedback;
    if (codec->encode == threshold_encode)
        return threshold_feedback;
    return NULL;
}
