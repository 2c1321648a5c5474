/*
 * The sparsifiers' selection on lists long enough for its quick paths
 * (kernels/cpu/codec_sparse.c: a sample's bracket, a radix selection when
 * the bracket misses): topk's kept indices equal a reference computed by
 * sorting every magnitude, on inputs chosen to make the bracket miss
 * (ties, a period, a few huge values, NaN and infinity, empty buffers);
 * threshold keeps a top set of at most 2k; fused error feedback leaves
 * exactly x + e - decode, a buffer without a residual included.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "tacl.h"

#define NB 4

static tt_rng_t rng = {0x6a09e667f3bcc909ull};
/* An empty buffer between the others, and one of 7. */
static const size_t counts[NB] = {300000, 0, 7, 700001};
static const size_t total = 1000008;

typedef enum {
    UNIFORM,   /* distinct values in [-1, 1) */
    FEW,       /* nine magnitudes: ties fill the bracket (radix path) */
    GRID,      /* a thousand magnitudes: ties at the k-th, in a bracket */
    PERIODIC,  /* large values every 4096th place, small ones between */
    SPIKES,    /* a few huge values, the rest small */
    NONFINITE, /* uniform with NaN and infinities sprinkled in */
    CONSTANT,  /* every value 0.25 */
    KINDS
} kind_t;

static const char *const kind_names[KINDS] = {
    "uniform", "few", "grid", "periodic", "spikes", "nonfinite", "constant",
};

static float value(kind_t kind, size_t i)
{
    uint64_t r = tt_rng_next(&rng);
    float u = (float)((double)(r >> 11) / 0x1p52 - 1.0);

    switch (kind) {
    case FEW:
        return (float)((int)(r % 17) - 8) * 0.1f;
    case GRID:
        return (float)((int)(r % 2001) - 1000) * 0.001f;
    case PERIODIC:
        return i % 4096 == 0 ? 100.0f + u : u * 1e-3f;
    case SPIKES:
        return r % 50000 == 0 ? 1e6f * u : u;
    case NONFINITE:
        return r % 40000 == 0   ? NAN
               : r % 40000 == 1 ? -INFINITY
                                : u;
    case CONSTANT:
        return 0.25f;
    default:
        return u;
    }
}

typedef struct {
    float *x[NB];
    uint32_t *bits; /* every magnitude, in list order */
} list_t;

static uint32_t mag_bits(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u & 0x7fffffffu;
}

static void list_make(kind_t kind, list_t *l)
{
    size_t g = 0;

    l->bits = malloc(total * sizeof(uint32_t));
    for (int b = 0; b < NB; b++) {
        l->x[b] = malloc((counts[b] ? counts[b] : 1) * sizeof(float));
        for (size_t i = 0; i < counts[b]; i++, g++) {
            l->x[b][i] = value(kind, g);
            l->bits[g] = mag_bits(l->x[b][i]);
        }
    }
}

static void list_free(list_t *l)
{
    for (int b = 0; b < NB; b++)
        free(l->x[b]);
    free(l->bits);
}

static int descending(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? 1 : x > y ? -1 : 0;
}

/* The k-th largest magnitude, by sorting them all. */
static uint32_t kth_by_sorting(const list_t *l, size_t k)
{
    uint32_t *s = malloc(total * sizeof(uint32_t)), t;

    memcpy(s, l->bits, total * sizeof(uint32_t));
    qsort(s, total, sizeof(uint32_t), descending);
    t = s[k - 1];
    free(s);
    return t;
}

static const tacl_codec_t *find(const char *name)
{
    const tacl_codec_t *c = NULL;

    cr_assert_eq(tacl_codec_find(name, &c), TACL_OK, "%s", name);
    return c;
}

/* Encode the list (errs optional) into a new buffer; its kept count and
 * indices through n_p and idx_p. */
static void *encode(const char *codec, double density, const list_t *l,
                    float *const *errs, uint64_t *n_p,
                    const uint32_t **idx_p)
{
    const tacl_codec_t *c = find(codec);
    tacl_codec_params_t p = {.density = density};
    uint64_t head[2];
    size_t cap, bytes;
    void *enc;

    cr_assert_eq(tacl_codec_encoded_bound(c, &p, NB, counts, &cap), TACL_OK);
    enc = malloc(cap);
    cr_assert_eq(tacl_codec_encode(c, &p, NB, (const float *const *)l->x,
                                   counts, errs, enc, cap, &bytes),
                 TACL_OK, "%s: %s", codec, tacl_last_error());
    memcpy(head, enc, sizeof(head));
    cr_assert_eq(head[0], total);
    cr_assert_eq(bytes, 16 + head[1] * 8, "%s: %zu bytes for %llu kept",
                 codec, bytes, (unsigned long long)head[1]);
    *n_p = head[1];
    *idx_p = (const uint32_t *)((const uint8_t *)enc + 16);
    return enc;
}

/* The indices topk must keep: above t, then ties in index order. */
static void check_topk(const list_t *l, size_t k, const char *what)
{
    uint32_t t = kth_by_sorting(l, k);
    size_t above = 0, ties, n = 0;
    const uint32_t *idx;
    uint64_t kept;
    void *enc = encode("topk", (double)k / (double)total, l, NULL, &kept,
                       &idx);

    cr_assert_eq(kept, k, "%s: kept %llu of k %zu", what,
                 (unsigned long long)kept, k);
    for (size_t g = 0; g < total; g++)
        above += l->bits[g] > t;
    ties = k - above;
    for (size_t g = 0; g < total; g++) {
        uint32_t u = l->bits[g];
        if (u > t || (u == t && ties > 0)) {
            ties -= u == t;
            cr_assert_eq(idx[n], g, "%s, k %zu: kept index %zu is %u, the "
                         "reference's %zu", what, k, n, idx[n], g);
            n++;
        }
    }
    cr_assert_eq(n, k);
    free(enc);
}

Test(codec_select, topk_keeps_the_exact_top_k_on_long_lists)
{
    const size_t ks[] = {1, 37, 10001, 100000, 500004, total};

    for (int kind = 0; kind < KINDS; kind++) {
        list_t l;
        list_make(kind, &l);
        for (size_t j = 0; j < sizeof(ks) / sizeof(ks[0]); j++)
            check_topk(&l, ks[j], kind_names[kind]);
        list_free(&l);
    }
}

Test(codec_select, threshold_keeps_a_top_set_of_at_most_2k)
{
    for (int kind = 0; kind < KINDS; kind++) {
        size_t k = 10001;
        const uint32_t *idx;
        uint64_t kept;
        uint32_t min_kept = UINT32_MAX, max_dropped = 0;
        char *is_kept = calloc(total, 1);
        list_t l;
        void *enc;

        list_make(kind, &l);
        enc = encode("threshold", (double)k / (double)total, &l, NULL, &kept,
                     &idx);
        cr_assert(kept >= 1 && kept <= 2 * k, "%s: kept %llu",
                  kind_names[kind], (unsigned long long)kept);
        for (uint64_t i = 0; i < kept; i++)
            is_kept[idx[i]] = 1;
        for (size_t g = 0; g < total; g++) {
            if (is_kept[g] && l.bits[g] < min_kept)
                min_kept = l.bits[g];
            if (!is_kept[g] && l.bits[g] > max_dropped)
                max_dropped = l.bits[g];
        }
        cr_assert_leq(max_dropped, min_kept, "%s: a dropped value is "
                      "larger than a kept one", kind_names[kind]);
        free(is_kept);
        free(enc);
        list_free(&l);
    }
}

/*
 * e' = x + e - decode(encode(x + e)) as tacl.h defines it, where the
 * kept values travel exact: x + e where dropped, zero where kept; the
 * buffer without a residual (NULL) encodes x alone.
 */
Test(codec_select, fused_feedback_leaves_the_residual)
{
    const char *codecs[] = {"topk", "threshold"};

    for (int c = 0; c < 2; c++) {
        float *e[NB], *e0[NB];
        char *is_kept = calloc(total, 1);
        const uint32_t *idx;
        const float *val;
        uint64_t kept;
        size_t g = 0;
        list_t l;
        void *enc;

        list_make(UNIFORM, &l);
        for (int b = 0; b < NB; b++) {
            size_t n = counts[b] ? counts[b] : 1;
            e[b] = b == 3 ? NULL : malloc(n * sizeof(float));
            e0[b] = malloc(n * sizeof(float));
            for (size_t i = 0; i < counts[b]; i++) {
                e0[b][i] = value(UNIFORM, 0) * 0.5f;
                if (e[b] != NULL)
                    e[b][i] = e0[b][i];
            }
        }
        enc = encode(codecs[c], 0.01, &l, e, &kept, &idx);
        val = (const float *)(idx + kept);
        for (uint64_t i = 0; i < kept; i++)
            is_kept[idx[i]] = 1;
        for (int b = 0; b < NB; b++) {
            for (size_t i = 0; i < counts[b]; i++, g++) {
                float sum = b == 3 ? l.x[b][i] : l.x[b][i] + e0[b][i];
                if (b != 3)
                    cr_assert_eq(e[b][i], is_kept[g] ? 0.0f : sum,
                                 "%s buffer %d [%zu]", codecs[c], b, i);
                if (is_kept[g])
                    cr_assert_eq(val[0], sum, "%s: kept value of [%zu]",
                                 codecs[c], g);
                val += is_kept[g];
            }
            free(e[b]);
            free(e0[b]);
        }
        free(is_kept);
        free(enc);
        list_free(&l);
    }
}
