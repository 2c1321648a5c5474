/*
 * Tests of the CPU block quantization kernels (kernels/cpu/quant.h).
 *
 * The references are independent of the kernels: 16-bit floats are decoded
 * with ldexp and encoded by scaling to an integer and rounding with
 * nearbyint, quantized values are recomputed in double as
 * nearbyint(x / scale), and the payload is decoded here nibble by nibble.
 *
 * Round-trip bound.  With scale = max|x| / qmax and q = x / scale rounded
 * to nearest-even and clamped, the exact product q * scale is within
 * scale / 2 of x (the clamp only bites at the block maximum, where the
 * float32 rounding of the scale moves the quotient by less than
 * qmax * 2^-24 < 1/2).  The kernel then rounds q * scale once to the
 * output type, which adds at most half an ulp of the result, x'.  So
 *
 *     |x' - x| <= scale / 2 + ulp(x') / 2
 *
 * with the ulp of float32, float16 or bfloat16 as the output type is.
 *
 * Sum bound.  For inputs x_k quantized with scales s_k, the float32 sum of
 * the dequantized terms has, besides sum_k s_k / 2, one rounding per
 * product and one per addition, each at most 2^-24 of a partial sum no
 * larger than A = sum_k (|x_k| + s_k / 2) (plus |d| when accumulating
 * onto d), so at most 2 * nsrc * 2^-24 * A in all; then one more rounding
 * to the output type.  Requantizing the sum adds its own s_out / 2.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "rng.h"

static tt_rng_t rng = {0x9e3779b97f4a7c15ull};

/* Uniform in [-1, 1). */
static double rng_unit(void)
{
    return (double)(int64_t)tt_rng_next(&rng) * 0x1p-63;
}

static const tacl_dtype_t dtypes[] = {TACL_FLOAT32, TACL_FLOAT16,
                                      TACL_BFLOAT16};

/* Precision (bits with the implicit one) and least normal exponent. */
static void dtype_format(tacl_dtype_t t, int *prec, int *emin)
{
    *prec = t == TACL_FLOAT32 ? 24 : t == TACL_FLOAT16 ? 11 : 8;
    *emin = t == TACL_FLOAT16 ? -14 : -126;
}

/* The ulp of v in type t (the subnormal spacing below the normals). */
static double ulp_of(double v, tacl_dtype_t t)
{
    int prec, emin, e;
    dtype_format(t, &prec, &emin);
    frexp(v, &e);
    int exp = v == 0.0 ? emin : e - 1;
    if (exp < emin)
        exp = emin;
    return ldexp(1.0, exp - prec + 1);
}

/* v rounded to nearest-even in type t (no overflow in these tests). */
static double round_to(double v, tacl_dtype_t t)
{
    double u = ulp_of(v, t);
    return nearbyint(v / u) * u;
}

static double decode(const void *buf, size_t i, tacl_dtype_t t)
{
    if (t == TACL_FLOAT32)
        return ((const float *)buf)[i];
    uint16_t h = ((const uint16_t *)buf)[i];
    if (t == TACL_BFLOAT16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, sizeof(f));
        return f;
    }
    int e = (h >> 10) & 0x1f;
    double m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : ldexp(m + 1024.0, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Store a finite v, already representable in t, at buf[i]. */
static void encode(void *buf, size_t i, tacl_dtype_t t, double v)
{
    if (t == TACL_FLOAT32) {
        ((float *)buf)[i] = (float)v;
        return;
    }
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    if (t == TACL_BFLOAT16) {
        ((uint16_t *)buf)[i] = (uint16_t)(u >> 16);
        return;
    }
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    double a = fabs(v);
    uint16_t h;
    if (a < 0x1p-14) {
        h = (uint16_t)(a * 0x1p24);
    } else {
        int e;
        double m = frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
        h = (uint16_t)(((e + 14) << 10) | ((uint16_t)(m * 2048.0) & 0x3ff));
    }
    ((uint16_t *)buf)[i] = (uint16_t)(h | sign);
}

enum { PAT_RANDOM, PAT_OUTLIERS, PAT_ZEROS, PAT_COUNT };

/* Fill n values of type t with a pattern; blocks of B share a magnitude. */
static void fill(void *buf, size_t n, tacl_dtype_t t, uint32_t block,
                 int pat)
{
    double mag = 1.0;
    for (size_t i = 0; i < n; i++) {
        if (i % block == 0)
            mag = ldexp(1.0, (int)(tt_rng_next(&rng) % 13) - 8);
        double v = rng_unit() * mag;
        if (pat == PAT_OUTLIERS && tt_rng_next(&rng) % 37 == 0)
            v *= 1000.0;
        if (pat == PAT_ZEROS && (i / block) % 3 != 1)
            v = (i & 1) ? -0.0 : 0.0;
        encode(buf, i, t, round_to(v, t));
    }
}

static float scale_at(const void *q, size_t b)
{
    float s;
    memcpy(&s, (const uint8_t *)q + 4 * b, sizeof(s));
    return s;
}

/* Element i of a quantized buffer, decoded here. */
static int q_at(const void *q, size_t n, uint32_t block, int bits, size_t i)
{
    size_t nblocks = (n + block - 1) / block;
    const uint8_t *p = (const uint8_t *)q + 4 * nblocks;
    if (bits == 8)
        return (int8_t)p[i];
    int v = (i & 1) ? p[i / 2] >> 4 : p[i / 2] & 0xf;
    return v >= 8 ? v - 16 : v;
}

static const size_t counts[] = {0, 1, 2, 3, 7, 63, 64, 65, 255, 257, 1001,
                                4099, 12001};
static const uint32_t blocks[] = {1, 7, 64, 256, 5000};

#define CANARY 0xa5

/* Quantize and dequantize one case; check scales, q and the bound. */
static void check_round_trip(tacl_dtype_t t, int bits, uint32_t block,
                             size_t n, int pat)
{
    size_t es = tacl_dtype_size(t);
    size_t qb = tacl__quant_bytes(n, block, bits);
    size_t nblocks = (n + block - 1) / block;
    int qmax = bits == 8 ? 127 : 7;
    uint8_t *x = malloc(n * es + 1);
    uint8_t *q = malloc(qb + 16);
    uint8_t *y = malloc(n * es + 16);
    cr_assert(x && q && y);

    fill(x, n, t, block, pat);
    memset(q, CANARY, qb + 16);
    memset(y, CANARY, n * es + 16);
    cr_assert_eq(tacl__quantize(x, n, t, block, bits, q), TACL_OK);
    cr_assert_eq(tacl__dequantize(q, n, block, bits, t, y), TACL_OK);
    for (size_t i = 0; i < 16; i++) {
        cr_assert_eq(q[qb + i], CANARY, "quantize wrote past its %zu bytes",
                     qb);
        cr_assert_eq(y[n * es + i], CANARY, "dequantize wrote past the end");
    }
    for (size_t b = 0; b < nblocks; b++) {
        size_t start = b * block;
        size_t m = n - start < block ? n - start : block;
        float amax = 0.0f;
        for (size_t i = start; i < start + m; i++)
            amax = fmaxf(amax, fabsf((float)decode(x, i, t)));
        float scale = scale_at(q, b);
        cr_assert(scale == amax / (float)qmax,
                  "%s bits %d block %u: scale %a of block %zu is not "
                  "%a / %d", tacl_dtype_name(t), bits, block, scale, b,
                  amax, qmax);
        for (size_t i = start; i < start + m; i++) {
            double xv = decode(x, i, t);
            double yv = decode(y, i, t);
            int qi = q_at(q, n, block, bits, i);
            if (scale == 0.0f) {
                cr_assert(qi == 0 && yv == 0.0, "zero block not zero");
                continue;
            }
            double qr = nearbyint(xv / (double)scale);
            qr = fmin(fmax(qr, -qmax), qmax);
            cr_assert_eq(qi, (int)qr,
                         "%s bits %d block %u n %zu: q[%zu] = %d, want %d "
                         "(x %a scale %a)", tacl_dtype_name(t), bits, block,
                         n, i, qi, (int)qr, xv, scale);
            double yr = round_to((double)qi * (double)scale, t);
            cr_assert(yv == yr, "%s: x'[%zu] = %a, want %a",
                      tacl_dtype_name(t), i, yv, yr);
            double bound = (double)scale / 2 + ulp_of(yv, t) / 2;
            cr_assert(fabs(yv - xv) <= bound,
                      "%s bits %d block %u: |%a - %a| > %a",
                      tacl_dtype_name(t), bits, block, yv, xv, bound);
        }
    }
    free(x);
    free(q);
    free(y);
}

Test(quant, round_trip_within_half_step)
{
    for (size_t d = 0; d < 3; d++)
        for (int bits = 4; bits <= 8; bits += 4)
            for (size_t b = 0; b < sizeof(blocks) / sizeof(*blocks); b++)
                for (size_t c = 0; c < sizeof(counts) / sizeof(*counts); c++)
                    for (int pat = 0; pat < PAT_COUNT; pat++)
                        check_round_trip(dtypes[d], bits, blocks[b],
                                         counts[c], pat);
}

Test(quant, quant_bytes)
{
    cr_assert_eq(tacl__quant_bytes(0, 64, 8), 0);
    cr_assert_eq(tacl__quant_bytes(1, 64, 8), 5);
    cr_assert_eq(tacl__quant_bytes(1, 64, 4), 5);
    cr_assert_eq(tacl__quant_bytes(3, 2, 4), 2 * 4 + 2);
    cr_assert_eq(tacl__quant_bytes(130, 64, 8), 3 * 4 + 130);
    cr_assert_eq(tacl__quant_bytes(130, 64, 4), 3 * 4 + 65);
    cr_assert_eq(tacl__quant_bytes(7, 1, 4), 7 * 4 + 4);
    cr_assert_eq(tacl__quant_bytes(10, 0, 8), 0);
    cr_assert_eq(tacl__quant_bytes(10, 64, 3), 0);
    cr_assert_eq(tacl__quant_bytes(SIZE_MAX / 2, 64, 8), 0);
}

/* Every int4 value pair in both nibble positions survives exactly. */
Test(quant, int4_pack_unpack_exact)
{
    enum { N = 2 * 225 };
    float x[N], y[N];
    for (int lo = -7; lo <= 7; lo++)
        for (int hi = -7; hi <= 7; hi++) {
            int k = (lo + 7) * 15 + (hi + 7);
            x[2 * k] = (float)lo;
            x[2 * k + 1] = (float)hi;
        }
    /* Blocks of 7 start in either nibble; every block's max is 7. */
    static const uint32_t bs[] = {N, 7, 2, 1};
    for (size_t j = 0; j < sizeof(bs) / sizeof(*bs); j++) {
        uint32_t block = bs[j];
        float xb[N];
        memcpy(xb, x, sizeof(x));
        for (size_t start = 0; start < N; start += block)
            xb[start] = 7.0f; /* scale exactly 1 */
        uint8_t q[N * 4 + N / 2];
        cr_assert_eq(tacl__quantize(xb, N, TACL_FLOAT32, block, 4, q),
                     TACL_OK);
        size_t nblocks = (N + block - 1) / block;
        for (size_t b = 0; b < nblocks; b++)
            cr_assert(scale_at(q, b) == 1.0f);
        for (size_t i = 0; i < N; i++)
            cr_assert_eq(q_at(q, N, block, 4, i), (int)xb[i],
                         "block %u: nibble %zu", block, i);
        cr_assert_eq(tacl__dequantize(q, N, block, 4, TACL_FLOAT32, y),
                     TACL_OK);
        cr_assert(memcmp(xb, y, sizeof(y)) == 0, "block %u", block);
    }
    /* And a payload written by hand decodes to its nibbles. */
    uint8_t hand[4 + N / 2];
    float one = 1.0f;
    memcpy(hand, &one, 4);
    for (int k = 0; k < N / 2; k++)
        hand[4 + k] = (uint8_t)(((int)x[2 * k] & 0xf) |
                                (((int)x[2 * k + 1] & 0xf) << 4));
    cr_assert_eq(tacl__dequantize(hand, N, N, 4, TACL_FLOAT32, y), TACL_OK);
    cr_assert(memcmp(x, y, sizeof(y)) == 0);
}

Test(quant, zeros_and_scales)
{
    float x[300] = {0};
    uint8_t q[1024];
    float y[300];
    x[5] = -0.0f;
    for (int i = 100; i < 200; i++)
        x[i] = (float)(i - 150) * 0.25f; /* max |x| = 12.5 at i = 100 */
    for (int bits = 4; bits <= 8; bits += 4) {
        memset(y, 0xff, sizeof(y));
        cr_assert_eq(tacl__quantize(x, 300, TACL_FLOAT32, 100, bits, q),
                     TACL_OK);
        cr_assert(scale_at(q, 0) == 0.0f && scale_at(q, 2) == 0.0f);
        cr_assert(scale_at(q, 1) == 12.5f / (bits == 8 ? 127.0f : 7.0f));
        cr_assert_eq(tacl__dequantize(q, 300, 100, bits, TACL_FLOAT32, y),
                     TACL_OK);
        for (int i = 0; i < 300; i++)
            if (i < 100 || i >= 200)
                cr_assert(y[i] == 0.0f && !signbit(y[i]));
        cr_assert(y[100] == -12.5f && y[150] == 0.0f);
    }
}

/*
 * Exact ties round to even.  With scale 3, 10.5 / 3 = 3.5 goes to 4; a
 * kernel multiplying by a rounded 1/3 would see 3.4999... and give 3.
 */
Test(quant, ties_round_to_even)
{
    static const float ties[] = {7.5f, 10.5f, -7.5f, -10.5f, 1.5f, 4.5f};
    static const int want[] = {2, 4, -2, -4, 0, 2};
    for (int bits = 4; bits <= 8; bits += 4) {
        float x[7];
        uint8_t q[64];
        x[0] = 3.0f * (float)(bits == 8 ? 127 : 7);
        memcpy(x + 1, ties, sizeof(ties));
        cr_assert_eq(tacl__quantize(x, 7, TACL_FLOAT32, 7, bits, q),
                     TACL_OK);
        cr_assert(scale_at(q, 0) == 3.0f);
        for (int i = 0; i < 6; i++)
            cr_assert_eq(q_at(q, 7, 7, bits, (size_t)i + 1), want[i],
                         "bits %d: %g / 3 gave %d", bits, ties[i],
                         q_at(q, 7, 7, bits, (size_t)i + 1));
    }
}

/*
 * The CUDA kernels quantize with tacl__quant_value_rcp (a reciprocal per
 * block, no division per element); it must give tacl__quant_value's bits
 * for every value: random blocks over the whole exponent range (scales
 * down to subnormal ones, which divide), random values in each block,
 * exact ties and their neighbours, zeros, and both int8 and int4.
 */
Test(quant, reciprocal_rule_matches_division)
{
    long checked = 0;

    for (int blk = 0; blk < 20000; blk++) {
        int qmax = blk % 2 ? 127 : 7;
        int e = (int)(tt_rng_next(&rng) % 280) - 150;
        float mx = fabsf((float)ldexp(1.0 + fabs(rng_unit()), e));
        float scale, recip;
        double divisor;

        if (!(mx > 0.0f) || isinf(mx))
            continue;
        scale = tacl__quant_scale(tacl__f32_bits(mx), qmax);
        recip = tacl__quant_recip(scale);
        divisor = tacl__quant_divisor(scale);
        for (int i = 0; i < 200; i++) {
            float x;
            int32_t want, got;

            if (i == 0)
                x = mx;
            else if (i == 1)
                x = -mx;
            else if (i == 2)
                x = 0.0f;
            else if (i < 100)
                x = (float)(rng_unit() * mx);
            else {
                /* (k + 1/2) scale and the floats beside it. */
                int k = (int)(tt_rng_next(&rng) % (uint64_t)(2 * qmax)) -
                        qmax;
                x = (float)(((double)k + 0.5) * scale);
                if (i % 3 == 1)
                    x = nextafterf(x, INFINITY);
                else if (i % 3 == 2)
                    x = nextafterf(x, -INFINITY);
            }
            want = tacl__quant_value(x, divisor, qmax);
            got = tacl__quant_value_rcp(x, scale, recip, qmax);
            cr_assert_eq(got, want, "x %a, scale %a (qmax %d): %d, not %d",
                         (double)x, (double)scale, qmax, got, want);
            checked++;
        }
    }
    cr_assert_gt(checked, 1000000);
    /* The ties of ties_round_to_even, which a plain rounded reciprocal
     * gets wrong. */
    cr_assert_eq(tacl__quant_value_rcp(10.5f, 3.0f, tacl__quant_recip(3.0f),
                                       127),
                 4);
    /* A zero or NaN scale quantizes everything to 0. */
    cr_assert_eq(tacl__quant_value_rcp(1.0f, 0.0f, tacl__quant_recip(0.0f),
                                       127),
                 0);
    cr_assert_eq(tacl__quant_recip(NAN), 0.0f);
}

/* A block holding an infinity or NaN dequantizes to NaN; others do not. */
Test(quant, non_finite_block_is_nan)
{
    float x[24];
    float y[24];
    uint8_t q[256];
    for (int i = 0; i < 24; i++)
        x[i] = (float)i;
    x[9] = INFINITY;
    x[17] = NAN;
    for (int bits = 4; bits <= 8; bits += 4) {
        cr_assert_eq(tacl__quantize(x, 24, TACL_FLOAT32, 8, bits, q),
                     TACL_OK);
        cr_assert_eq(tacl__dequantize(q, 24, 8, bits, TACL_FLOAT32, y),
                     TACL_OK);
        for (int i = 0; i < 24; i++) {
            if (i >= 8)
                cr_assert(isnan(y[i]), "y[%d] = %a", i, y[i]);
            else
                cr_assert(fabsf(y[i] - x[i]) <= 7.0f / (bits == 8 ? 127 : 7)
                                                     / 2 * 1.0001f);
        }
    }
}

/* nsrc random inputs of type t quantized; their sum and A of the bound. */
static void make_inputs(int nsrc, size_t n, uint32_t block, int bits,
                        double **xs_p, uint8_t ***qs_p)
{
    size_t qb = tacl__quant_bytes(n, block, bits);
    double *xs = malloc(sizeof(double) * n * (size_t)nsrc + 1);
    uint8_t **qs = malloc(sizeof(*qs) * (size_t)nsrc);
    float *tmp = malloc(sizeof(float) * n + 1);
    cr_assert(xs && qs && tmp);
    for (int k = 0; k < nsrc; k++) {
        fill(tmp, n, TACL_FLOAT32, block, k % PAT_COUNT);
        for (size_t i = 0; i < n; i++)
            xs[(size_t)k * n + i] = tmp[i];
        qs[k] = malloc(qb + 1);
        cr_assert(qs[k]);
        cr_assert_eq(tacl__quantize(tmp, n, TACL_FLOAT32, block, bits,
                                    qs[k]), TACL_OK);
    }
    free(tmp);
    *xs_p = xs;
    *qs_p = qs;
}

static void free_inputs(int nsrc, double *xs, uint8_t **qs)
{
    for (int k = 0; k < nsrc; k++)
        free(qs[k]);
    free(qs);
    free(xs);
}

/* sum_k s_k / 2 and the float32 accumulation error bound at element i. */
static double sum_bound(int nsrc, size_t n, uint32_t block, double *xs,
                        uint8_t **qs, size_t i, double dval)
{
    double half = 0.0;
    double a = fabs(dval);
    for (int k = 0; k < nsrc; k++) {
        double s = scale_at(qs[k], i / block);
        half += s / 2;
        a += fabs(xs[(size_t)k * n + i]) + s / 2;
    }
    return half + 2.0 * nsrc * 0x1p-24 * a;
}

Test(quant, dequant_reduce_against_double)
{
    static const int nsrcs[] = {1, 2, 3, 5};
    static const size_t ns[] = {1, 7, 300, 5001};
    for (size_t a = 0; a < 4; a++)
        for (size_t c = 0; c < 4; c++)
            for (int bits = 4; bits <= 8; bits += 4)
                for (size_t d = 0; d < 3; d++)
                    for (int acc = 0; acc <= 1; acc++) {
        int nsrc = nsrcs[a];
        size_t n = ns[c];
        uint32_t block = c % 2 ? 7 : 256;
        tacl_dtype_t t = dtypes[d];
        double *xs;
        uint8_t **qs;
        make_inputs(nsrc, n, block, bits, &xs, &qs);
        uint8_t *dst = malloc(n * 4);
        double *d0 = malloc(n * sizeof(double));
        cr_assert(dst && d0);
        fill(dst, n, t, 64, PAT_RANDOM);
        for (size_t i = 0; i < n; i++)
            d0[i] = acc ? decode(dst, i, t) : 0.0;
        cr_assert_eq(tacl__dequant_reduce((const void *const *)qs, nsrc, n,
                                          block, bits, t, dst, acc),
                     TACL_OK);
        for (size_t i = 0; i < n; i++) {
            double ref = d0[i];
            for (int k = 0; k < nsrc; k++)
                ref += xs[(size_t)k * n + i];
            double got = decode(dst, i, t);
            double bound = sum_bound(nsrc, n, block, xs, qs, i, d0[i]) +
                           ulp_of(got, t) / 2;
            cr_assert(fabs(got - ref) <= bound,
                      "%s nsrc %d n %zu bits %d acc %d: [%zu] %a vs %a "
                      "(bound %a)", tacl_dtype_name(t), nsrc, n, bits, acc,
                      i, got, ref, bound);
        }
        free(dst);
        free(d0);
        free_inputs(nsrc, xs, qs);
    }
}

Test(quant, dequant_reduce_quant_against_double)
{
    static const int nsrcs[] = {1, 2, 4, 7};
    static const size_t ns[] = {1, 9, 1000, 12001};
    static const uint32_t bs[] = {1, 7, 256, 5000};
    for (size_t a = 0; a < 4; a++)
        for (size_t c = 0; c < 4; c++)
            for (int bits = 4; bits <= 8; bits += 4) {
        int nsrc = nsrcs[a];
        size_t n = ns[c];
        uint32_t block = bs[(a + c) % 4];
        size_t qb = tacl__quant_bytes(n, block, bits);
        double *xs;
        uint8_t **qs;
        make_inputs(nsrc, n, block, bits, &xs, &qs);
        uint8_t *out = malloc(qb);
        uint8_t *ref_q = malloc(qb);
        float *sum = malloc(n * sizeof(float));
        float *y = malloc(n * sizeof(float));
        cr_assert(out && ref_q && sum && y);
        cr_assert_eq(tacl__dequant_reduce_quant((const void *const *)qs,
                                                nsrc, n, block, bits, out),
                     TACL_OK);
        /* The fused kernel is exactly the unfused composition. */
        cr_assert_eq(tacl__dequant_reduce((const void *const *)qs, nsrc, n,
                                          block, bits, TACL_FLOAT32, sum,
                                          0), TACL_OK);
        cr_assert_eq(tacl__quantize(sum, n, TACL_FLOAT32, block, bits,
                                    ref_q), TACL_OK);
        cr_assert(memcmp(out, ref_q, qb) == 0,
                  "nsrc %d n %zu block %u bits %d: fused != unfused", nsrc,
                  n, block, bits);
        cr_assert_eq(tacl__dequantize(out, n, block, bits, TACL_FLOAT32, y),
                     TACL_OK);
        for (size_t i = 0; i < n; i++) {
            double ref = 0.0;
            for (int k = 0; k < nsrc; k++)
                ref += xs[(size_t)k * n + i];
            double bound = sum_bound(nsrc, n, block, xs, qs, i, 0.0) +
                           (double)scale_at(out, i / block) / 2 +
                           ulp_of(y[i], TACL_FLOAT32) / 2;
            cr_assert(fabs((double)y[i] - ref) <= bound,
                      "nsrc %d n %zu bits %d: [%zu] %a vs %a (bound %a)",
                      nsrc, n, bits, i, y[i], ref, bound);
        }
        free(out);
        free(ref_q);
        free(sum);
        free(y);
        free_inputs(nsrc, xs, qs);
    }
}

static void check_reorder(int nslices, size_t nps, uint32_t block, int bits,
                          tacl_dtype_t t, int identity)
{
    size_t es = tacl_dtype_size(t);
    size_t qb = tacl__quant_bytes(nps, block, bits);
    int order[16];
    uint8_t *x = malloc(nps * (size_t)nslices * es);
    uint8_t *got = malloc(qb * (size_t)nslices + 1);
    uint8_t *want = malloc(qb * (size_t)nslices + 1);
    cr_assert(x && got && want && nslices <= 16);
    fill(x, nps * (size_t)nslices, t, block, PAT_OUTLIERS);
    for (int i = 0; i < nslices; i++)
        order[i] = i;
    for (int i = nslices - 1; i > 0 && !identity; i--) {
        int j = (int)(tt_rng_next(&rng) % (uint64_t)(i + 1));
        int tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    memset(got, 0x5a, qb * (size_t)nslices);
    memset(want, 0xa5, qb * (size_t)nslices);
    cr_assert_eq(tacl__quantize_reorder(x, nps, nslices, order, t, block,
                                        bits, got), TACL_OK);
    for (int i = 0; i < nslices; i++)
        cr_assert_eq(tacl__quantize(x + (size_t)order[i] * nps * es, nps, t,
                                    block, bits, want + (size_t)i * qb),
                     TACL_OK);
    cr_assert(memcmp(got, want, qb * (size_t)nslices) == 0,
              "%d slices of %zu, block %u, bits %d, %s", nslices, nps,
              block, bits, tacl_dtype_name(t));
    free(x);
    free(got);
    free(want);
}

Test(quant, quantize_reorder_matches_separate)
{
    static const int nsl[] = {1, 2, 3, 5, 8, 16};
    static const size_t nps[] = {1, 7, 130, 1001};
    for (size_t a = 0; a < 6; a++)
        for (size_t c = 0; c < 4; c++)
            for (int bits = 4; bits <= 8; bits += 4)
                for (size_t d = 0; d < 3; d++) {
                    check_reorder(nsl[a], nps[c], c % 2 ? 7 : 64, bits,
                                  dtypes[d], 0);
                    check_reorder(nsl[a], nps[c], 64, bits, dtypes[d], 1);
                }
}

Test(quant, bad_args_rejected)
{
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t q[256];
    float y[8];
    const void *srcs[2] = {q, NULL};
    int order[2] = {0, 2};
    tacl_status_t e = TACL_ERR_INVALID_ARG;

    cr_assert_eq(tacl__quantize(x, 8, TACL_FLOAT32, 4, 3, q), e);
    cr_assert_eq(tacl__quantize(x, 8, TACL_FLOAT32, 4, 16, q), e);
    cr_assert_eq(tacl__quantize(x, 8, TACL_FLOAT32, 0, 8, q), e);
    cr_assert_eq(tacl__quantize(x, 8, TACL_INT32, 4, 8, q), e);
    cr_assert_eq(tacl__quantize(x, 8, TACL_FLOAT64, 4, 8, q), e);
    cr_assert_eq(tacl__quantize(x, 8, (tacl_dtype_t)99, 4, 8, q), e);
    cr_assert_eq(tacl__quantize(NULL, 8, TACL_FLOAT32, 4, 8, q), e);
    cr_assert_eq(tacl__quantize(x, 8, TACL_FLOAT32, 4, 8, NULL), e);
    cr_assert_eq(tacl__quantize(NULL, 0, TACL_FLOAT32, 4, 8, NULL),
                 TACL_OK);
    cr_assert_eq(tacl__quantize(x, 8, TACL_FLOAT32, 4, 8, q), TACL_OK);

    cr_assert_eq(tacl__dequantize(q, 8, 4, 5, TACL_FLOAT32, y), e);
    cr_assert_eq(tacl__dequantize(q, 8, 0, 8, TACL_FLOAT32, y), e);
    cr_assert_eq(tacl__dequantize(q, 8, 4, 8, TACL_INT8, y), e);
    cr_assert_eq(tacl__dequantize(NULL, 8, 4, 8, TACL_FLOAT32, y), e);
    cr_assert_eq(tacl__dequantize(q, 8, 4, 8, TACL_FLOAT32, NULL), e);

    cr_assert_eq(tacl__dequant_reduce(srcs, 0, 8, 4, 8, TACL_FLOAT32, y, 0),
                 e);
    cr_assert_eq(tacl__dequant_reduce(srcs, 2, 8, 4, 8, TACL_FLOAT32, y, 0),
                 e);
    cr_assert_eq(tacl__dequant_reduce(NULL, 1, 8, 4, 8, TACL_FLOAT32, y, 0),
                 e);
    cr_assert_eq(tacl__dequant_reduce(srcs, 1, 8, 4, 8, TACL_UINT8, y, 0),
                 e);
    cr_assert_eq(tacl__dequant_reduce(srcs, 1, 8, 4, 8, TACL_FLOAT32, NULL,
                                      0), e);
    cr_assert_eq(tacl__dequant_reduce(srcs, 1, 8, 4, 2, TACL_FLOAT32, y, 0),
                 e);

    cr_assert_eq(tacl__dequant_reduce_quant(srcs, 2, 8, 4, 8, q + 128), e);
    cr_assert_eq(tacl__dequant_reduce_quant(srcs, -1, 8, 4, 8, q + 128), e);
    cr_assert_eq(tacl__dequant_reduce_quant(srcs, 1, 8, 0, 8, q + 128), e);
    cr_assert_eq(tacl__dequant_reduce_quant(srcs, 1, 8, 4, 7, q + 128), e);
    cr_assert_eq(tacl__dequant_reduce_quant(srcs, 1, 8, 4, 8, NULL), e);

    cr_assert_eq(tacl__quantize_reorder(x, 4, 2, order, TACL_FLOAT32, 4, 8,
                                        q), e);
    order[1] = -1;
    cr_assert_eq(tacl__quantize_reorder(x, 4, 2, order, TACL_FLOAT32, 4, 8,
                                        q), e);
    order[1] = 0;
    cr_assert_eq(tacl__quantize_reorder(x, 4, 2, NULL, TACL_FLOAT32, 4, 8,
                                        q), e);
    cr_assert_eq(tacl__quantize_reorder(x, 4, -2, order, TACL_FLOAT32, 4, 8,
                                        q), e);
    cr_assert_eq(tacl__quantize_reorder(x, 4, 2, order, TACL_FLOAT64, 4, 8,
                                        q), e);
    cr_assert_eq(tacl__quantize_reorder(x, 4, 2, order, TACL_FLOAT32, 4, 1,
                                        q), e);
    cr_assert_eq(tacl__quantize_reorder(x, 4, 2, order, TACL_FLOAT32, 4, 8,
                                        q), TACL_OK);
}
