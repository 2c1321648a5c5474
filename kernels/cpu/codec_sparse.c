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
 * a margin of four standard deviations; one pass counts the values above
 * the bracket and copies the magnitudes inside it, and a selection among
 * those few gives the exact answer.  When the bracket misses (a rare
 * sample, or many equal values), or the list is small, a radix selection
 * on the magnitudes' bits (three passes, no memory) gives it instead.
 * Nothing here copies the list: a fused group is read where it lies, and
 * error feedback (tacl__codec_fused_feedback) sums into the caller's
 * residual and zeroes the kept places, which is what decoding and
 * subtracting would leave, in two passes instead of six.
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

/* A buffer list read in place: nbufs buffers, counts[b] values each. */
typedef struct {
    int nbufs;
    const float *const *v;
    const size_t *counts;
    size_t total;
} list_t;

/* Where a selection starts: the bracket's scratch, taken beforehand so
 * that error feedback never fails after it has touched the residual. */
typedef struct {
    uint32_t *sample; /* BRACKET_SAMPLE */
    uint32_t *inside; /* cap */
    size_t cap;
} scratch_t;

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

/*
 * The passes go a block of values at a time: a test of the whole block
 * that the compiler vectorizes, and a value at a time only in the few
 * blocks that hold something to keep.
 */
#define BLOCK 16

/* Whether any of the block's magnitudes lies in [lo, hi]. */
static inline int block_any_in(const float *v, uint32_t lo, uint32_t hi)
{
    int any = 0;

    for (int j = 0; j < BLOCK; j++) {
        uint32_t u = mag(v[j]);
        any |= (u >= lo) & (u <= hi);
    }
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

/* A reader of the list at increasing global indices. */
typedef struct {
    const list_t *l;
    int b;
    size_t base; /* global index of buffer b's first value */
} cursor_t;

/* The magnitude at global index i, at or after the last one read. */
static uint32_t mag_at(cursor_t *c, size_t i)
{
    while (i - c->base >= c->l->counts[c->b])
        c->base += c->l->counts[c->b++];
    return mag(c->l->v[c->b][i - c->base]);
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
 * The k-th largest magnitude of the list by its bits, eleven, eleven and
 * ten at a time: each pass counts the values that share the digits found
 * so far by their next digit.
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
        for (int b = 0; b < l->nbufs; b++)
            for (size_t i = 0; i < l->counts[b]; i++) {
                uint32_t u = mag(l->v[b][i]);
                if ((u & known) == prefix)
                    hist[(u >> shift[d]) & top]++;
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

/* Values of magnitude above t and equal to it. */
static void count_around(const list_t *l, uint32_t t, size_t *above_p,
                         size_t *equal_p)
{
    size_t above = 0, equal = 0;

    for (int b = 0; b < l->nbufs; b++)
        for (size_t i = 0; i < l->counts[b]; i++) {
            uint32_t u = mag(l->v[b][i]);
            above += u > t;
            equal += u == t;
        }
    *above_p = above;
    *equal_p = equal;
}

/* Room for the magnitudes inside a bracket: twice what it holds on
 * average, and some. */
static size_t bracket_cap(size_t total, size_t k)
{
    double p = (double)k * BRACKET_SAMPLE / (double)total;
    double margin = 4.0 * sqrt(p) + 8.0;

    return (size_t)(4.0 * margin * (double)total / BRACKET_SAMPLE) + 1024;
}

static tacl_status_t scratch_take(size_t total, size_t k, scratch_t *s)
{
    *s = (scratch_t){0};
    if (total < BRACKET_MIN)
        return TACL_OK;
    s->cap = bracket_cap(total, k);
    s->sample = malloc(BRACKET_SAMPLE * sizeof(uint32_t));
    s->inside = malloc(s->cap * sizeof(uint32_t));
    if (s->sample != NULL && s->inside != NULL)
        return TACL_OK;
    free(s->sample);
    free(s->inside);
    return tacl__error(TACL_ERR_NO_MEMORY, ALLOC,
                       "codec: no memory to select among %zu values", total);
}

static void scratch_free(scratch_t *s)
{
    free(s->sample);
    free(s->inside);
}

/*
 * The k-th largest magnitude through a sample's bracket [lo, hi]: 1 with
 * *t_p and the count above it when the bracket holds it, 0 when it
 * missed.
 */
static int bracket_kth(const list_t *l, size_t k, scratch_t *s,
                       uint32_t *t_p, size_t *above_p)
{
    const size_t m = BRACKET_SAMPLE;
    double p = (double)k * (double)m / (double)l->total;
    double margin = 4.0 * sqrt(p) + 8.0;
    size_t r_hi = p > margin ? (size_t)(p - margin) : 0;
    size_t r_lo = (size_t)(p + margin) + 1;
    uint32_t hi = UINT32_MAX, lo, t;
    size_t above = 0, n = 0;
    cursor_t c = {l, 0, 0};

    /* One value in each stretch of the list, at a hashed place in it, so
     * that a period in the list cannot line up with the sample. */
    for (size_t j = 0; j < m; j++) {
        size_t start = j * l->total / m, end = (j + 1) * l->total / m;
        uint64_t h = (j + 1) * 0x9e3779b97f4a7c15ull;
        s->sample[j] = mag_at(&c, start + (h >> 32) % (end - start));
    }
    if (r_lo > m)
        r_lo = m;
    lo = kth_largest(s->sample, m, r_lo);
    if (r_hi > 0)
        hi = kth_largest(s->sample, m, r_hi);
    for (int b = 0; b < l->nbufs; b++) {
        const float *v = l->v[b];
        size_t cnt = l->counts[b], j = 0;
        for (; j + BLOCK <= cnt; j += BLOCK) {
            above += block_above(v + j, hi);
            if (!block_any_in(v + j, lo, hi))
                continue;
            for (int q = 0; q < BLOCK; q++) {
                uint32_t u = mag(v[j + q]);
                if (u >= lo && u <= hi && n++ < s->cap)
                    s->inside[n - 1] = u;
            }
            if (n > s->cap)
                return 0;
        }
        for (; j < cnt; j++) {
            uint32_t u = mag(v[j]);
            above += u > hi;
            if (u >= lo && u <= hi && n++ < s->cap)
                s->inside[n - 1] = u;
        }
    }
    if (n > s->cap || above >= k || above + n < k)
        return 0;
    t = kth_largest(s->inside, n, k - above);
    for (size_t i = 0; i < n; i++)
        above += s->inside[i] > t;
    *t_p = t;
    *above_p = above;
    return 1;
}

/* The k-th largest magnitude of the list and how many lie above it. */
static void exact_kth(const list_t *l, size_t k, scratch_t *s, uint32_t *t_p,
                      size_t *above_p)
{
    size_t equal;

    if (s->sample != NULL && bracket_kth(l, k, s, t_p, above_p))
        return;
    *t_p = radix_kth(l, k);
    count_around(l, *t_p, above_p, &equal);
}

/*
 * Write the sparse encoding of the list: every value whose magnitude is
 * above t (there are above of them), then those equal to t, in index
 * order, until limit values are kept.
 */
static size_t sparse_emit(const list_t *l, uint32_t t, size_t above,
                          size_t limit, void *dst)
{
    uint64_t head[2] = {l->total, 0};
    size_t ties = limit - above, n = 0, base = 0;
    uint32_t *idx = (uint32_t *)((uint8_t *)dst + SPARSE_HEADER);
    float *val = (float *)(idx + limit);

    for (int b = 0; b < l->nbufs && n < limit; b++) {
        const float *v = l->v[b];
        size_t cnt = l->counts[b];
        for (size_t i = 0; i < cnt && n < limit;) {
            size_t end = i + BLOCK < cnt ? i + BLOCK : cnt;
            if (end - i == BLOCK && !block_any_in(v + i, t, UINT32_MAX)) {
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
static uint32_t threshold_estimate(const list_t *l, double density,
                                   uint32_t *sample)
{
    size_t m = l->total < THRESHOLD_SAMPLE ? l->total : THRESHOLD_SAMPLE;
    size_t stride = l->total / m;
    cursor_t c = {l, 0, 0};

    for (size_t i = 0; i < m; i++)
        sample[i] = mag_at(&c, i * stride);
    return kth_largest(sample, m, tacl__codec_kept(density, m));
}

static tacl_status_t too_long(int exact, size_t total)
{
    return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                       "codec %s: %zu values; sparse codecs take fewer "
                       "than 2^32 a group",
                       exact ? "topk" : "threshold", total);
}

/* Encode the list (scratch taken for it); cannot fail. */
static size_t sparse_select_emit(int exact, double density, const list_t *l,
                                 scratch_t *s, void *dst)
{
    size_t k = tacl__codec_kept(density, l->total), above = 0, equal;
    uint32_t t = 0, sample[THRESHOLD_SAMPLE];

    if (l->total == 0)
        return sparse_emit(l, 0, 0, 0, dst);
    if (!exact) {
        t = threshold_estimate(l, density, sample);
        count_around(l, t, &above, &equal);
        if (above + equal <= threshold_cap(density, l->total))
            return sparse_emit(l, t, above, above + equal, dst);
    }
    exact_kth(l, k, s, &t, &above);
    return sparse_emit(l, t, above, k, dst);
}

static tacl_status_t sparse_encode(int exact, double density, int nbufs,
                                   const float *const *srcs,
                                   const size_t *counts, void *dst,
                                   size_t *bytes_p)
{
    list_t l = {nbufs, srcs, counts, tacl__codec_total(nbufs, counts)};
    scratch_t s;
    tacl_status_t st;

    if (l.total > UINT32_MAX)
        return too_long(exact, l.total);
    st = scratch_take(l.total, tacl__codec_kept(density, l.total), &s);
    if (st != TACL_OK)
        return st;
    *bytes_p = sparse_select_emit(exact, density, &l, &s, dst);
    scratch_free(&s);
    return TACL_OK;
}

/*
 * Error feedback fused with the encoding: e += x where a buffer has a
 * residual (its sum is what is encoded), then e = 0 where a value was
 * kept, exactly what e = x + e - decode(encode(x + e)) gives, since the
 * kept values travel exact.  Everything that can fail is done before the
 * residual is touched.
 */
static tacl_status_t sparse_feedback(int exact, double density, int nbufs,
                                     const float *const *srcs,
                                     const size_t *counts,
                                     float *const *errs, void *dst,
                                     size_t *bytes_p)
{
    list_t l = {nbufs, NULL, counts, tacl__codec_total(nbufs, counts)};
    const float **view;
    const uint32_t *idx = (const uint32_t *)((uint8_t *)dst + SPARSE_HEADER);
    uint64_t head[2];
    size_t base = 0, i = 0;
    scratch_t s;
    tacl_status_t st;

    if (l.total > UINT32_MAX)
        return too_long(exact, l.total);
    view = malloc((size_t)(nbufs > 0 ? nbufs : 1) * sizeof(*view));
    if (view == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, ALLOC,
                           "codec: no memory for %d buffers", nbufs);
    st = scratch_take(l.total, tacl__codec_kept(density, l.total), &s);
    if (st != TACL_OK) {
        free(view);
        return st;
    }
    for (int b = 0; b < nbufs; b++) {
        float *e = errs[b];
        const float *x = srcs[b];
        if (e != NULL)
            for (size_t j = 0; j < counts[b]; j++)
                e[j] = x[j] + e[j];
        view[b] = e != NULL ? e : x;
    }
    l.v = view;
    *bytes_p = sparse_select_emit(exact, density, &l, &s, dst);
    memcpy(head, dst, sizeof(head));
    for (int b = 0; b < nbufs; b++) {
        size_t end = base + counts[b];
        for (; i < head[1] && idx[i] < end; i++)
            if (errs[b] != NULL)
                errs[b][idx[i] - base] = 0.0f;
        base = end;
    }
    scratch_free(&s);
    free(view);
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
                             dst, bytes_p);                                  \
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
        return sparse_feedback(exact_, params->density, nbufs, srcs, counts, \
                               errs, dst, bytes_p);                          \
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
