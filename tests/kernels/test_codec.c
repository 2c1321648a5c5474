/*
 * The gradient codecs through tacl.h's codec interface: each built-in's
 * round trip within its stated bound (docs/design/compression.md), error
 * feedback leaving the residual, the summable codecs summing exactly, a
 * codec of the test's own registered and found, and every bad input an
 * error whose message names it.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reduce.h"
#include "rng.h"
#include "tacl.h"

#define NB 3

static tt_rng_t rng = {0x2545f4914f6cdd1dull};
static const size_t list_counts[NB] = {1000, 7, 3001};

/* A value in [-1, 1). */
static float draw(void)
{
    return (float)((double)(tt_rng_next(&rng) >> 11) / 0x1p52 - 1.0);
}

typedef struct {
    float *x[NB], *y[NB];
    void *enc;
    size_t cap, bytes;
} trip_t;

static const tacl_codec_t *find(const char *name)
{
    const tacl_codec_t *c = NULL;
    cr_assert_eq(tacl_codec_find(name, &c), TACL_OK, "%s: %s", name,
                 tacl_last_error());
    cr_assert_str_eq(c->name, name);
    return c;
}

/* Fill x with draws, encode it (errs optional), decode into y. */
static void trip(const tacl_codec_t *c, const tacl_codec_params_t *p,
                 trip_t *t, float *const *errs)
{
    for (int b = 0; b < NB; b++) {
        t->x[b] = malloc(list_counts[b] * sizeof(float));
        t->y[b] = malloc(list_counts[b] * sizeof(float));
        for (size_t i = 0; i < list_counts[b]; i++)
            t->x[b][i] = draw();
    }
    cr_assert_eq(tacl_codec_encoded_bound(c, p, NB, list_counts, &t->cap),
                 TACL_OK);
    t->enc = malloc(t->cap);
    cr_assert_eq(tacl_codec_encode(c, p, NB, (const float *const *)t->x,
                                   list_counts, errs, t->enc, t->cap,
                                   &t->bytes),
                 TACL_OK, "%s: %s", c->name, tacl_last_error());
    cr_assert_leq(t->bytes, t->cap);
    if (c->flags & TACL_CODEC_FIXED_SIZE)
        cr_assert_eq(t->bytes, t->cap, "%s: fixed size", c->name);
    cr_assert_eq(tacl_codec_decode(c, p, t->enc, t->bytes, NB, t->y,
                                   list_counts),
                 TACL_OK, "%s: %s", c->name, tacl_last_error());
}

static void trip_free(trip_t *t)
{
    for (int b = 0; b < NB; b++) {
        free(t->x[b]);
        free(t->y[b]);
    }
    free(t->enc);
}

Test(codec, cast_within_half_an_ulp)
{
    const char *names[] = {"fp16", "bf16"};
    const double rel[] = {0x1p-11, 0x1p-8};
    tacl_codec_params_t p = {0};

    for (int n = 0; n < 2; n++) {
        trip_t t;
        trip(find(names[n]), &p, &t, NULL);
        cr_assert_eq(t.bytes, 4008 * 2);
        for (int b = 0; b < NB; b++)
            for (size_t i = 0; i < list_counts[b]; i++)
                cr_assert_leq(fabs(t.y[b][i] - t.x[b][i]),
                              fabs(t.x[b][i]) * rel[n] + 0x1p-24,
                              "%s buffer %d [%zu]", names[n], b, i);
        trip_free(&t);
    }
}

Test(codec, quantizers_within_half_a_step)
{
    const char *names[] = {"int8", "int4"};
    const int bits[] = {8, 4};

    for (int n = 0; n < 2; n++) {
        tacl_codec_params_t p = {.bits = bits[n], .block = 64};
        double qmax = bits[n] == 8 ? 127 : 7;
        trip_t t;
        trip(find(names[n]), &p, &t, NULL);
        for (int b = 0; b < NB; b++)
            for (size_t s = 0; s < list_counts[b]; s += 64) {
                size_t e = s + 64 < list_counts[b] ? s + 64 : list_counts[b];
                double amax = 0;
                for (size_t i = s; i < e; i++)
                    amax = fmax(amax, fabs(t.x[b][i]));
                for (size_t i = s; i < e; i++)
                    cr_assert_leq(fabs(t.y[b][i] - t.x[b][i]),
                                  amax / qmax / 2 * (1 + 1e-6),
                                  "%s buffer %d [%zu]", names[n], b, i);
            }
        trip_free(&t);
    }
}

/* Nonzeros of y, each equal to x there; the smallest kept magnitude. */
static size_t kept_exact(const trip_t *t, float *min_kept_p)
{
    size_t kept = 0;
    float mk = INFINITY;

    for (int b = 0; b < NB; b++)
        for (size_t i = 0; i < list_counts[b]; i++)
            if (t->y[b][i] != 0.0f) {
                cr_assert_eq(t->y[b][i], t->x[b][i]);
                mk = fminf(mk, fabsf(t->y[b][i]));
                kept++;
            }
    *min_kept_p = mk;
    return kept;
}

/* Every value dropped is no larger than every value kept. */
static void dropped_smaller(const trip_t *t, float min_kept)
{
    for (int b = 0; b < NB; b++)
        for (size_t i = 0; i < list_counts[b]; i++)
            if (t->y[b][i] == 0.0f)
                cr_assert_leq(fabsf(t->x[b][i]), min_kept);
}

Test(codec, topk_keeps_the_largest_exactly)
{
    tacl_codec_params_t p = {.density = 0.01};
    float mk;
    trip_t t;

    trip(find("topk"), &p, &t, NULL);
    cr_assert_eq(kept_exact(&t, &mk), 41); /* ceil(0.01 * 4008) */
    dropped_smaller(&t, mk);
    trip_free(&t);
}

Test(codec, threshold_keeps_the_largest_within_twice_k)
{
    tacl_codec_params_t p = {.density = 0.05};
    float mk;
    trip_t t;
    size_t kept;

    trip(find("threshold"), &p, &t, NULL);
    kept = kept_exact(&t, &mk);
    cr_assert(kept >= 1 && kept <= 2 * 201, "kept %zu", kept);
    dropped_smaller(&t, mk);
    trip_free(&t);
}

Test(codec, randk_regenerates_its_indices_from_the_seed)
{
    tacl_codec_params_t p = {.density = 0.1, .seed = 77};
    float mk;
    trip_t t, u;

    trip(find("randk"), &p, &t, NULL);
    cr_assert_eq(t.bytes, 401 * sizeof(float)); /* values only */
    cr_assert_eq(kept_exact(&t, &mk), 401);
    trip(find("randk"), &p, &u, NULL);
    for (int b = 0; b < NB; b++) /* same seed, same positions */
        for (size_t i = 0; i < list_counts[b]; i++)
            cr_assert_eq(t.y[b][i] != 0.0f, u.y[b][i] != 0.0f);
    trip_free(&t);
    trip_free(&u);
}

Test(codec, sign_keeps_signs_and_the_mean_magnitude)
{
    tacl_codec_params_t p = {0};
    trip_t t;

    trip(find("sign"), &p, &t, NULL);
    cr_assert_eq(t.bytes, NB * 4 + 501);
    for (int b = 0; b < NB; b++) {
        double mean = 0;
        for (size_t i = 0; i < list_counts[b]; i++)
            mean += fabs(t.x[b][i]) / (double)list_counts[b];
        for (size_t i = 0; i < list_counts[b]; i++) {
            cr_assert_float_eq(fabs(t.y[b][i]), mean, 1e-6);
            cr_assert_eq(t.y[b][i] < 0, t.x[b][i] < 0);
        }
    }
    trip_free(&t);
}

Test(codec, error_feedback_carries_the_residual)
{
    const char *names[] = {"fp16", "bf16",      "int8",  "int4",
                           "topk", "threshold", "randk", "sign"};
    tacl_codec_params_t p = {.density = 0.05, .block = 32, .seed = 5};

    for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++) {
        float *e[NB], *e0[NB];
        trip_t t;
        p.bits = n == 3 ? 4 : 8;
        for (int b = 0; b < NB; b++) {
            e[b] = malloc(list_counts[b] * sizeof(float));
            e0[b] = malloc(list_counts[b] * sizeof(float));
            for (size_t i = 0; i < list_counts[b]; i++)
                e0[b][i] = e[b][i] = draw() * 0.1f;
        }
        trip(find(names[n]), &p, &t, e);
        /* e' = x + e - decode(encode(x + e)), as the float sums round. */
        for (int b = 0; b < NB; b++) {
            for (size_t i = 0; i < list_counts[b]; i++)
                cr_assert_eq(e[b][i], t.x[b][i] + e0[b][i] - t.y[b][i],
                             "%s buffer %d [%zu]", names[n], b, i);
            free(e[b]);
            free(e0[b]);
        }
        trip_free(&t);
    }
}

/*
 * Two inputs of small integers, whose sums are exact in the encoded
 * type: the elementwise sum of the two encodings (as an all-reduce SUM of
 * sum_dtype computes it) decodes to the sum of the decoded inputs, bit
 * for bit.
 */
Test(codec, summable_codecs_sum_exactly)
{
    const char *names[] = {"fp16", "bf16", "randk"};
    tacl_codec_params_t p = {.density = 0.3, .seed = 9};

    for (int n = 0; n < 3; n++) {
        const tacl_codec_t *c = find(names[n]);
        size_t cnt[1] = {512}, cap, ba, bb;
        float a[512], b[512], sum[512], da[512], db[512];
        float *pa[1] = {a}, *pb[1] = {b}, *ps[1] = {sum};
        float *pda[1] = {da}, *pdb[1] = {db};
        uint8_t ea[4096], eb[4096];

        cr_assert(c->flags & TACL_CODEC_SUMMABLE, "%s", names[n]);
        for (int i = 0; i < 512; i++) {
            a[i] = (float)((int)(tt_rng_next(&rng) % 64) - 32);
            b[i] = (float)((int)(tt_rng_next(&rng) % 64) - 32);
        }
        cr_assert_eq(tacl_codec_encoded_bound(c, &p, 1, cnt, &cap), TACL_OK);
        cr_assert_leq(cap, sizeof(ea));
        cr_assert_eq(tacl_codec_encode(c, &p, 1, (const float *const *)pa,
                                       cnt, NULL, ea, cap, &ba),
                     TACL_OK);
        cr_assert_eq(tacl_codec_encode(c, &p, 1, (const float *const *)pb,
                                       cnt, NULL, eb, cap, &bb),
                     TACL_OK);
        cr_assert_eq(ba, bb);
        /* What an all-reduce SUM of sum_dtype does to the encodings. */
        cr_assert_eq(tacl__reduce_cpu(ea, ea, eb,
                                      ba / tacl_dtype_size(c->sum_dtype),
                                      c->sum_dtype, TACL_SUM),
                     TACL_OK);
        cr_assert_eq(tacl_codec_decode(c, &p, ea, ba, 1, ps, cnt), TACL_OK);
        cr_assert_eq(tacl_codec_decode(c, &p, eb, bb, 1, pdb, cnt), 0);
        /* decode(a) + decode(b) through decode-accumulate */
        memcpy(da, db, sizeof(da));
        cr_assert_eq(tacl_codec_encode(c, &p, 1, (const float *const *)pa,
                                       cnt, NULL, eb, cap, &ba),
                     TACL_OK);
        cr_assert_eq(tacl_codec_decode_accumulate(c, &p, eb, ba, 1, pda, cnt),
                     TACL_OK);
        for (int i = 0; i < 512; i++)
            cr_assert_eq(sum[i], da[i], "%s [%d]: %g != %g", names[n], i,
                         sum[i], da[i]);
    }
}

/* st is TACL_ERR_INVALID_ARG and the message holds every word given. */
static void refused_at(int line, tacl_status_t st, const char *w1,
                       const char *w2)
{
    cr_assert_eq(st, TACL_ERR_INVALID_ARG, "line %d: status %d", line, st);
    cr_assert(strstr(tacl_last_error(), w1) != NULL, "'%s' lacks '%s'",
              tacl_last_error(), w1);
    cr_assert(w2 == NULL || strstr(tacl_last_error(), w2) != NULL,
              "'%s' lacks '%s'", tacl_last_error(), w2);
}
#define refused(st, w1, w2) refused_at(__LINE__, st, w1, w2)

Test(codec, bad_input_is_an_error_naming_it)
{
    const tacl_codec_t *topk = find("topk"), *int8 = find("int8");
    const tacl_codec_t *nope = topk;
    tacl_codec_params_t p = {.density = 0.5, .bits = 8};
    float x[8] = {1, -2, 3, -4, 5, -6, 7, -8}, *xs[2] = {x, x};
    size_t c[2] = {8, 8}, wrong[2] = {8, 0}, bytes;
    uint8_t enc[256];

    refused(tacl_codec_find("zstd", &nope), "zstd", NULL);
    cr_assert_eq(nope, topk, "the output is set only on success");
    refused(tacl_codec_find(NULL, &nope), "NULL", NULL);
    p.density = 0;
    refused(tacl_codec_check(topk, &p), "density 0", "topk");
    p.density = 1.5;
    refused(tacl_codec_encode(find("randk"), &p, 2, (const float *const *)xs,
                              c, NULL, enc, sizeof(enc), &bytes),
            "density 1.5", "randk");
    p.density = 0.5;
    p.bits = 0;
    refused(tacl_codec_encoded_bound(int8, &p, 2, c, &bytes), "bits 0",
            "int8");
    p.bits = 8;
    refused(tacl_codec_encode(NULL, &p, 2, (const float *const *)xs, c, NULL,
                              enc, sizeof(enc), &bytes),
            "NULL", NULL);
    refused(tacl_codec_encode(topk, NULL, 2, (const float *const *)xs, c,
                              NULL, enc, sizeof(enc), &bytes),
            "NULL", NULL);
    xs[1] = NULL;
    refused(tacl_codec_encode(topk, &p, 2, (const float *const *)xs, c, NULL,
                              enc, sizeof(enc), &bytes),
            "buffer 1 is NULL", NULL);
    xs[1] = x;
    refused(tacl_codec_encode(topk, &p, 0, (const float *const *)xs, c, NULL,
                              enc, sizeof(enc), &bytes),
            "nbufs 0", NULL);
    refused(tacl_codec_encode(topk, &p, 2, (const float *const *)xs, c, NULL,
                              enc, 3, &bytes),
            "capacity 3", NULL);

    /* Decoding with a list that does not match what was encoded. */
    const char *names[] = {"fp16", "int8", "topk", "randk", "sign"};
    for (int n = 0; n < 5; n++) {
        const tacl_codec_t *cd = find(names[n]);
        cr_assert_eq(tacl_codec_encode(cd, &p, 2, (const float *const *)xs, c,
                                       NULL, enc, sizeof(enc), &bytes),
                     TACL_OK, "%s: %s", names[n], tacl_last_error());
        refused(tacl_codec_decode(cd, &p, enc, bytes, 2, xs, wrong), names[n],
                "expects");
    }
}

static size_t one_bound(const tacl_codec_params_t *p, int nbufs,
                        const size_t *cnt)
{
    return sizeof(float);
}

/* A user's codec: sends the sum of the list, decodes it to element 0. */
static tacl_status_t one_encode(const tacl_codec_params_t *p, int nbufs,
                                const float *const *srcs, const size_t *cnt,
                                void *dst, size_t *bytes_p)
{
    float s = 0;
    for (int b = 0; b < nbufs; b++)
        for (size_t i = 0; i < cnt[b]; i++)
            s += srcs[b][i];
    memcpy(dst, &s, sizeof(s));
    *bytes_p = sizeof(s);
    return TACL_OK;
}

static tacl_status_t one_decode(const tacl_codec_params_t *p, const void *src,
                                size_t bytes, int nbufs, float *const *dsts,
                                const size_t *cnt, int accumulate)
{
    float s;
    memcpy(&s, src, sizeof(s));
    for (size_t i = 0; i < cnt[0]; i++)
        dsts[0][i] = (accumulate ? dsts[0][i] : 0.0f) + (i == 0 ? s : 0.0f);
    return TACL_OK;
}

Test(codec, a_registered_codec_is_found_and_run)
{
    tacl_codec_t mine = {.name = "sum1",
                         .encoded_bound = one_bound,
                         .encode = one_encode,
                         .decode = one_decode};
    tacl_codec_params_t p = {0};
    float x[4] = {1, 2, 3, 4}, y[4], *xs[1] = {x}, *ys[1] = {y};
    size_t c[1] = {4}, bytes;
    float enc;

    cr_assert_eq(tacl_codec_register(&mine), TACL_OK);
    refused(tacl_codec_register(&mine), "sum1", "exists");
    mine.name = "fp16";
    refused(tacl_codec_register(&mine), "fp16", "exists");
    mine.name = "nodecode";
    mine.decode = NULL;
    refused(tacl_codec_register(&mine), "nodecode", "decode");
    cr_assert_eq(tacl_codec_encode(find("sum1"), &p, 1,
                                   (const float *const *)xs, c, NULL, &enc,
                                   sizeof(enc), &bytes),
                 TACL_OK);
    cr_assert_eq(tacl_codec_decode(find("sum1"), &p, &enc, bytes, 1, ys, c),
                 TACL_OK);
    cr_assert_eq(y[0], 10.0f);
    cr_assert_eq(y[3], 0.0f);
}

/* An empty buffer in the list (NULL, count 0) is valid: every codec
 * encodes the others and decodes them back in place (exactly, but for
 * the quantizers' half step and sign's magnitudes). */
Test(codec, an_empty_buffer_in_the_list_is_skipped)
{
    const char *names[] = {"fp16", "bf16",      "int8",  "int4",
                           "topk", "threshold", "randk", "sign"};
    float x[5] = {0.5f, -1, 2, -4, 8}, y[5];
    float *xs[3] = {x, NULL, x + 2}, *ys[3] = {y, NULL, y + 2};
    size_t c[3] = {2, 0, 3}, bytes;
    uint8_t enc[256];

    for (int n = 0; n < 8; n++) {
        tacl_codec_params_t p = {.density = 1, .bits = n == 3 ? 4 : 8};
        const tacl_codec_t *cd = find(names[n]);
        memset(y, 0, sizeof(y));
        cr_assert_eq(tacl_codec_encode(cd, &p, 3, (const float *const *)xs, c,
                                       NULL, enc, sizeof(enc), &bytes),
                     TACL_OK, "%s: %s", names[n], tacl_last_error());
        cr_assert_eq(tacl_codec_decode(cd, &p, enc, bytes, 3, ys, c), TACL_OK,
                     "%s: %s", names[n], tacl_last_error());
        for (int i = 0; i < 5; i++) {
            double tol = n == 2 ? 8.0 / 127 / 2 : n == 3 ? 8.0 / 7 / 2 : 0;
            if (n == 7) /* sign keeps only the signs */
                cr_assert_eq(y[i] < 0, x[i] < 0, "sign [%d]", i);
            else
                cr_assert_leq(fabs(y[i] - x[i]), tol, "%s [%d]: %g for %g",
                              names[n], i, y[i], x[i]);
        }
    }
}
