/*
 * Tests of the CPU reduction kernels against plain references.
 *
 * The references are written independently of the kernels: 16-bit floats
 * are decoded with ldexp and encoded by scaling to an integer and rounding
 * with nearbyint (nearest-even in the default mode); element ops are done
 * in double or in 64-bit integers and then narrowed.  Rounding a double
 * result of one +, * or / of two narrower values to the narrow type gives
 * the correctly rounded result, which is what the kernels promise.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reduce.h"
#include "reduce_isa.h"
#include "rng.h"

static tt_rng_t rng = {0x9e3779b97f4a7c15ull};

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/*
 * Reference decoding of a binary format with mbits mantissa bits and
 * ebits exponent bits (half: 10, 5; bfloat16: 7, 8).
 */
static double ref_decode(uint32_t bits, int mbits, int ebits)
{
    int bias = (1 << (ebits - 1)) - 1;
    uint32_t mant = bits & ((1u << mbits) - 1);
    uint32_t exp = (bits >> mbits) & ((1u << ebits) - 1);
    int neg = (bits >> (mbits + ebits)) & 1;
    double v;
    if (exp == 0)
        v = ldexp((double)mant, 1 - bias - mbits);
    else if (exp == (1u << ebits) - 1)
        v = mant ? NAN : INFINITY;
    else
        v = ldexp((double)(mant + (1u << mbits)), (int)exp - bias - mbits);
    return neg ? -v : v;
}

/* Reference rounding of a double to the format, nearest-even. */
static uint32_t ref_encode(double v, int mbits, int ebits)
{
    int bias = (1 << (ebits - 1)) - 1;
    uint32_t sign = signbit(v) ? 1u << (mbits + ebits) : 0;
    uint32_t inf = ((1u << ebits) - 1) << mbits;
    if (isnan(v))
        return inf | (1u << (mbits - 1));
    double a = fabs(v);
    if (isinf(a))
        return sign | inf;
    if (a == 0.0)
        return sign;
    int e;
    frexp(a, &e);
    int unbiased = e - 1;
    if (unbiased < 1 - bias)
        unbiased = 1 - bias;
    /* Scale so that one unit in the last place is 1, then round. */
    double r = nearbyint(ldexp(a, mbits - unbiased));
    uint32_t out;
    if (r < ldexp(1.0, mbits) && unbiased == 1 - bias)
        out = (uint32_t)r; /* subnormal or zero */
    else
        out = ((uint32_t)(unbiased + bias) << mbits) +
              ((uint32_t)r - (1u << mbits));
    if (out >= inf)
        out = inf;
    return sign | out;
}

static double ref_half(uint16_t h)
{
    return ref_decode(h, 10, 5);
}

static double ref_bf16(uint16_t h)
{
    return ref_decode(h, 7, 8);
}

/* A 16-bit float format and the kernels' conversions of it. */
typedef struct {
    const char *name;
    int mbits, ebits;
    float (*to_float)(uint16_t h);
    uint16_t (*from_float)(float f);
} format16_t;

static const format16_t half_format = {"half", 10, 5, tacl__half_to_float,
                                       tacl__float_to_half};
static const format16_t bf16_format = {"bf16", 7, 8, tacl__bf16_to_float,
                                       tacl__float_to_bf16};

/*
 * Every pattern of the format decodes to the reference value and encodes
 * back to itself; a NaN decodes quiet, with its sign and payload kept,
 * and comes back as the quiet NaN.
 */
static void check_all_patterns(const format16_t *t)
{
    uint32_t mant = (1u << t->mbits) - 1, quiet16 = 1u << (t->mbits - 1);

    for (uint32_t h = 0; h < 65536; h++) {
        float f = t->to_float((uint16_t)h);
        double want = ref_decode(h, t->mbits, t->ebits);
        if (isnan(want)) {
            uint32_t quiet = (h >> 15) << 31 | 0x7fc00000u |
                             (h & mant) << (23 - t->mbits);

            cr_assert(isnan(f), "%s %#x must decode to NaN", t->name, h);
            cr_assert_eq(f32_bits(f), quiet, "%s NaN %#x decodes to %#x",
                         t->name, h, f32_bits(f));
            cr_assert_eq(t->from_float(f), h | quiet16,
                         "%s NaN %#x must round-trip as a quiet NaN",
                         t->name, h);
            continue;
        }
        cr_assert_eq(f32_bits(f), f32_bits((float)want),
                     "%s %#x decodes to %a, want %a", t->name, h, f, want);
        cr_assert_eq(t->from_float(f), h, "%s %#x round trip", t->name, h);
    }
}

Test(conversion, half_all_patterns)
{
    check_all_patterns(&half_format);
}

/*
 * Around every half value: the value itself, the midpoint to the next one
 * and the floats just below and above that midpoint.
 */
Test(conversion, half_rounding_near_every_midpoint)
{
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double lo = ref_half((uint16_t)h);
        double hi = h + 1 == 0x7c00 ? 65536.0 : ref_half((uint16_t)(h + 1));
        float mid = (float)((lo + hi) / 2); /* exact in float */
        float probes[3] = {mid, nextafterf(mid, 0.0f),
                           nextafterf(mid, INFINITY)};
        for (int k = 0; k < 3; k++) {
            for (int s = 0; s < 2; s++) {
                float f = s ? -probes[k] : probes[k];
                uint16_t want = (uint16_t)ref_encode(f, 10, 5);
                cr_assert_eq(tacl__float_to_half(f), want,
                             "float %a -> half %#x, want %#x", f,
                             tacl__float_to_half(f), want);
            }
        }
    }
}

Test(conversion, half_random_floats)
{
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = (uint32_t)tt_rng_next(&rng);
        /* Keep most samples in or near the half range. */
        if (i & 1)
            u = (u & 0x87ffffffu) | 0x30000000u;
        float f = f32_from_bits(u);
        uint16_t got = tacl__float_to_half(f);
        if (isnan(f)) {
            cr_assert_eq(got & 0x7e00u, 0x7e00u, "NaN %#x", u);
            cr_assert_eq(got >> 15, u >> 31);
            continue;
        }
        cr_assert_eq(got, (uint16_t)ref_encode(f, 10, 5),
                     "float %#x -> half %#x", u, got);
    }
}

Test(conversion, bf16_all_patterns)
{
    check_all_patterns(&bf16_format);
}

Test(conversion, bf16_rounding_cases)
{
    static const struct {
        uint32_t in;
        uint16_t out;
    } cases[] = {
        {0x3f808000u, 0x3f80}, /* 1 + half ulp: tie to even, down */
        {0x3f818000u, 0x3f82}, /* odd + half ulp: tie to even, up */
        {0x3f808001u, 0x3f81}, /* just above the tie */
        {0x3f807fffu, 0x3f80}, /* just below the tie */
        {0xbf818000u, 0xbf82}, /* negative tie */
        {0x7f7fffffu, 0x7f80}, /* FLT_MAX overflows to inf */
        {0xff7fffffu, 0xff80}, /* -FLT_MAX overflows to -inf */
        {0x7f7f7fffu, 0x7f7f}, /* largest that stays finite */
        {0x7f7f8000u, 0x7f80}, /* tie at the top goes to even: inf */
        {0x7f800000u, 0x7f80}, /* inf */
        {0x7fc00001u, 0x7fc0}, /* quiet NaN */
        {0x7f800001u, 0x7fc0}, /* signalling NaN: must not become inf */
        {0xff800001u, 0xffc0}, /* negative NaN keeps its sign */
        {0x7fffffffu, 0x7fff}, /* NaN with all payload bits */
        {0x00008000u, 0x0000}, /* subnormal tie, down to zero */
        {0x00018000u, 0x0002}, /* subnormal tie, up to even */
        {0x80000000u, 0x8000}, /* -0 */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint16_t got = tacl__float_to_bf16(f32_from_bits(cases[i].in));
        cr_assert_eq(got, cases[i].out, "float %#x -> bf16 %#x, want %#x",
                     cases[i].in, got, cases[i].out);
    }
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = (uint32_t)tt_rng_next(&rng);
        float f = f32_from_bits(u);
        if (isnan(f))
            continue;
        cr_assert_eq(tacl__float_to_bf16(f), (uint16_t)ref_encode(f, 7, 8),
                     "float %#x", u);
    }
}

/* Element access by dtype for the generic reduce checks. */
static int is_signed_int(tacl_dtype_t t)
{
    return t == TACL_INT8 || t == TACL_INT32 || t == TACL_INT64;
}

static int is_float(tacl_dtype_t t)
{
    return t >= TACL_FLOAT16;
}

static uint64_t load_bits(const void *p, size_t i, size_t size)
{
    uint64_t v = 0;
    memcpy(&v, (const char *)p + i * size, size);
    return v;
}

static int64_t sign_extend(uint64_t v, size_t size)
{
    int shift = 64 - 8 * (int)size;
    return (int64_t)(v << shift) >> shift;
}

static double load_float(const void *p, size_t i, tacl_dtype_t t)
{
    switch (t) {
    case TACL_FLOAT16:
        return ref_half((uint16_t)load_bits(p, i, 2));
    case TACL_BFLOAT16:
        return ref_bf16((uint16_t)load_bits(p, i, 2));
    case TACL_FLOAT32: {
        float f;
        memcpy(&f, (const char *)p + 4 * i, 4);
        return f;
    }
    default: {
        double d;
        memcpy(&d, (const char *)p + 8 * i, 8);
        return d;
    }
    }
}

/* The expected bits of a floating-point element computed as double r. */
static uint64_t float_bits_of(double r, tacl_dtype_t t)
{
    switch (t) {
    case TACL_FLOAT16:
        return ref_encode(r, 10, 5);
    case TACL_BFLOAT16:
        return ref_encode(r, 7, 8);
    case TACL_FLOAT32:
        return f32_bits((float)r);
    default: {
        uint64_t u;
        memcpy(&u, &r, 8);
        return u;
    }
    }
}

/* The documented rule: NaN propagates, equal operands give b. */
static double ref_fop(double x, double y, tacl_op_t op)
{
    switch (op) {
    case TACL_SUM:
        return x + y;
    case TACL_PROD:
        return x * y;
    case TACL_MAX:
        return isnan(x) ? x : isnan(y) ? y : x > y ? x : y;
    default:
        return isnan(x) ? x : isnan(y) ? y : x < y ? x : y;
    }
}

static uint64_t ref_iop(uint64_t x, uint64_t y, tacl_op_t op, int sgn,
                        size_t size)
{
    int64_t sx = sign_extend(x, size);
    int64_t sy = sign_extend(y, size);
    switch (op) {
    case TACL_SUM:
        return x + y;
    case TACL_PROD:
        return x * y;
    case TACL_MAX:
        return sgn ? (sx > sy ? x : y) : (x > y ? x : y);
    case TACL_BAND:
        return x & y;
    case TACL_BOR:
        return x | y;
    case TACL_BXOR:
        return x ^ y;
    default:
        return sgn ? (sx < sy ? x : y) : (x < y ? x : y);
    }
}

static void fill_random(void *p, size_t count, tacl_dtype_t t)
{
    size_t size = tacl_dtype_size(t);
    for (size_t i = 0; i < count; i++) {
        uint64_t v = tt_rng_next(&rng);
        if (t == TACL_FLOAT32 && (i % 4) != 0) {
            /* Mostly ordinary values, sometimes any bit pattern. */
            float f = (float)((double)(int64_t)v / 9.2e16);
            memcpy(&v, &f, 4);
        } else if (t == TACL_FLOAT64 && (i % 4) != 0) {
            double d = (double)(int64_t)v / 9.2e16;
            memcpy(&v, &d, 8);
        } else if (i % 97 == 5) {
            v = 0; /* +0 meets -0 and itself */
        }
        memcpy((char *)p + i * size, &v, size);
    }
}

/* Checks one call of tacl__reduce_cpu; alias 1: dst = a, 2: dst = b. */
static void check_reduce(tacl_dtype_t t, tacl_op_t op, size_t count,
                         int alias)
{
    size_t size = tacl_dtype_size(t);
    size_t bytes = count * size + 1;
    unsigned char *a = malloc(bytes);
    unsigned char *b = malloc(bytes);
    unsigned char *d = malloc(bytes);
    unsigned char *a0 = malloc(bytes);
    unsigned char *b0 = malloc(bytes);
    cr_assert(a && b && d && a0 && b0);
    fill_random(a, count, t);
    fill_random(b, count, t);
    memset(d, 0xa5, bytes);
    memcpy(a0, a, bytes);
    memcpy(b0, b, bytes);
    void *dst = alias == 1 ? (void *)a : alias == 2 ? (void *)b : d;

    cr_assert_eq(tacl__reduce_cpu(dst, a, b, count, t, op), TACL_OK);
    for (size_t i = 0; i < count; i++) {
        uint64_t got = load_bits(dst, i, size);
        uint64_t want;
        if (is_float(t)) {
            double r = ref_fop(load_float(a0, i, t), load_float(b0, i, t),
                               op);
            if (isnan(r)) {
                cr_assert(isnan(load_float(dst, i, t)),
                          "%s %s count %zu alias %d [%zu]: want NaN",
                          tacl_dtype_name(t), tacl_op_name(op), count,
                          alias, i);
                continue;
            }
            want = float_bits_of(r, t);
        } else {
            want = ref_iop(load_bits(a0, i, size), load_bits(b0, i, size),
                           op, is_signed_int(t), size);
            if (size < 8)
                want &= (1ull << (8 * size)) - 1;
        }
        cr_assert_eq(got, want,
                     "%s %s count %zu alias %d [%zu]: got %#llx want %#llx",
                     tacl_dtype_name(t), tacl_op_name(op), count, alias, i,
                     (unsigned long long)got, (unsigned long long)want);
    }
    /* Nothing past the end is touched. */
    if (alias == 0)
        cr_assert_eq(d[count * size], 0xa5);
    free(a);
    free(b);
    free(d);
    free(a0);
    free(b0);
}

static void check_dtype(tacl_dtype_t t)
{
    static const size_t counts[] = {0, 1, 7, 1000, 4099};
    for (int op = TACL_SUM; op < TACL_NUM_OPS; op++) {
        /* AVG is no element op; the bitwise ones take integers only. */
        if (op == TACL_AVG ||
            (is_float(t) && (op == TACL_BAND || op == TACL_BOR ||
                             op == TACL_BXOR)))
            continue;
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
            for (int alias = 0; alias < 3; alias++)
                check_reduce(t, (tacl_op_t)op, counts[c], alias);
    }
}

Test(reduce, int8) { check_dtype(TACL_INT8); }
Test(reduce, uint8) { check_dtype(TACL_UINT8); }
Test(reduce, int32) { check_dtype(TACL_INT32); }
Test(reduce, uint32) { check_dtype(TACL_UINT32); }
Test(reduce, int64) { check_dtype(TACL_INT64); }
Test(reduce, uint64) { check_dtype(TACL_UINT64); }
Test(reduce, float16) { check_dtype(TACL_FLOAT16); }
Test(reduce, bfloat16) { check_dtype(TACL_BFLOAT16); }
Test(reduce, float32) { check_dtype(TACL_FLOAT32); }

/* The portable 16-bit loops, which CPUs without AVX2 and F16C run. */
Test(reduce, float16_portable)
{
    tacl__reduce_cpu_force_portable(1);
    cr_assert_eq(tacl__reduce_cpu_simd16(), 0);
    check_dtype(TACL_FLOAT16);
}

Test(reduce, bfloat16_portable)
{
    tacl__reduce_cpu_force_portable(1);
    check_dtype(TACL_BFLOAT16);
}

/*
 * The SIMD and portable 16-bit paths give the same bits, NaN payloads
 * included, for every pattern against a scrambled partner, every op.
 */
Test(reduce, simd16_matches_portable_every_pattern)
{
    if (!tacl__reduce_cpu_simd16())
        cr_skip_test("this CPU lacks AVX2 and F16C: only the portable "
                     "16-bit loops exist here");
    const size_t n = 65536 + 5; /* a tail that is not a multiple of 8 */
    uint16_t *a = malloc(n * 2), *b = malloc(n * 2);
    uint16_t *simd = malloc(n * 2), *port = malloc(n * 2);
    cr_assert(a && b && simd && port);
    for (size_t i = 0; i < n; i++) {
        a[i] = (uint16_t)i;
        b[i] = (uint16_t)(i * 7919u + 12345u);
    }
    for (int t = TACL_FLOAT16; t <= TACL_BFLOAT16; t++) {
        for (int op = TACL_SUM; op <= TACL_MIN; op++) {
            tacl__reduce_cpu_force_portable(0);
            cr_assert_eq(tacl__reduce_cpu(simd, a, b, n, (tacl_dtype_t)t,
                                          (tacl_op_t)op),
                         TACL_OK);
            tacl__reduce_cpu_force_portable(1);
            cr_assert_eq(tacl__reduce_cpu(port, a, b, n, (tacl_dtype_t)t,
                                          (tacl_op_t)op),
                         TACL_OK);
            for (size_t i = 0; i < n; i++)
                cr_assert_eq(simd[i], port[i],
                             "%s %s %#x, %#x: simd %#x portable %#x",
                             tacl_dtype_name((tacl_dtype_t)t),
                             tacl_op_name((tacl_op_t)op), a[i], b[i],
                             simd[i], port[i]);
        }
    }
    free(a);
    free(b);
    free(simd);
    free(port);
}

/* x max x is x for every non-NaN pattern, on whichever path runs. */
Test(reduce, max_with_itself_keeps_every_pattern)
{
    uint16_t *a = malloc(65536 * 2), *d = malloc(65536 * 2);
    cr_assert(a && d);
    for (uint32_t i = 0; i < 65536; i++)
        a[i] = (uint16_t)i;
    cr_assert_eq(tacl__reduce_cpu(d, a, a, 65536, TACL_FLOAT16, TACL_MAX),
                 TACL_OK);
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t want = (i & 0x7c00u) == 0x7c00u && (i & 0x3ffu)
                            ? (uint16_t)(i | 0x0200u) /* NaN made quiet */
                            : (uint16_t)i;
        cr_assert_eq(d[i], want, "half %#x max itself gave %#x", i, d[i]);
    }
    cr_assert_eq(tacl__reduce_cpu(d, a, a, 65536, TACL_BFLOAT16, TACL_MIN),
                 TACL_OK);
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t want = (i & 0x7f80u) == 0x7f80u && (i & 0x7fu)
                            ? (uint16_t)(i | 0x0040u)
                            : (uint16_t)i;
        cr_assert_eq(d[i], want, "bf16 %#x min itself gave %#x", i, d[i]);
    }
    free(a);
    free(d);
}
Test(reduce, float64) { check_dtype(TACL_FLOAT64); }

/* dst, a and b all one buffer: x op x. */
Test(reduce, all_three_aliased)
{
    for (int t = 0; t < TACL_NUM_DTYPES; t++) {
        size_t size = tacl_dtype_size((tacl_dtype_t)t);
        unsigned char buf[333 * 8];
        unsigned char orig[333 * 8];
        fill_random(buf, 333, (tacl_dtype_t)t);
        memcpy(orig, buf, sizeof(buf));
        cr_assert_eq(tacl__reduce_cpu(buf, buf, buf, 333, (tacl_dtype_t)t,
                                      TACL_SUM),
                     TACL_OK);
        unsigned char want[333 * 8];
        cr_assert_eq(tacl__reduce_cpu(want, orig, orig, 333,
                                      (tacl_dtype_t)t, TACL_SUM),
                     TACL_OK);
        cr_assert_eq(memcmp(buf, want, 333 * size), 0, "%s",
                     tacl_dtype_name((tacl_dtype_t)t));
    }
}

Test(reduce, float_max_min_nan_and_zero)
{
    float a[4] = {NAN, 1.0f, 0.0f, -0.0f};
    float b[4] = {1.0f, NAN, -0.0f, 0.0f};
    float mx[4], mn[4];
    cr_assert_eq(tacl__reduce_cpu(mx, a, b, 4, TACL_FLOAT32, TACL_MAX),
                 TACL_OK);
    cr_assert_eq(tacl__reduce_cpu(mn, a, b, 4, TACL_FLOAT32, TACL_MIN),
                 TACL_OK);
    cr_assert(isnan(mx[0]) && isnan(mx[1]), "max propagates NaN");
    cr_assert(isnan(mn[0]) && isnan(mn[1]), "min propagates NaN");
    /* Equal operands: b is returned. */
    cr_assert(signbit(mx[2]) && !signbit(mx[3]));
    cr_assert(signbit(mn[2]) && !signbit(mn[3]));

    uint16_t ha[2] = {0x7e00, 0x3c00}; /* NaN, 1.0 */
    uint16_t hb[2] = {0x3c00, 0xfc00}; /* 1.0, -inf */
    uint16_t hd[2];
    cr_assert_eq(tacl__reduce_cpu(hd, ha, hb, 2, TACL_FLOAT16, TACL_MIN),
                 TACL_OK);
    cr_assert_eq(hd[0] & 0x7e00, 0x7e00, "half min propagates NaN");
    cr_assert_eq(hd[1], 0xfc00);
}

Test(reduce, integer_wraparound)
{
    int8_t a8[2] = {127, -128}, b8[2] = {1, -1}, d8[2];
    cr_assert_eq(tacl__reduce_cpu(d8, a8, b8, 2, TACL_INT8, TACL_SUM),
                 TACL_OK);
    cr_assert_eq(d8[0], -128);
    cr_assert_eq(d8[1], 127);
    int64_t a64 = INT64_MAX, b64 = 2, d64;
    cr_assert_eq(tacl__reduce_cpu(&d64, &a64, &b64, 1, TACL_INT64,
                                  TACL_PROD),
                 TACL_OK);
    cr_assert_eq(d64, -2);
}

Test(reduce, invalid_arguments)
{
    float a = 1, b = 2, d = 0;
    cr_assert_eq(tacl__reduce_cpu(&d, &a, &b, 1, TACL_FLOAT32, TACL_AVG),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__reduce_cpu(&d, &a, &b, 1, TACL_FLOAT32,
                                  TACL_NUM_OPS),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__reduce_cpu(&d, &a, &b, 1, TACL_FLOAT32,
                                  (tacl_op_t)-1),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__reduce_cpu(&d, &a, &b, 1, TACL_NUM_DTYPES,
                                  TACL_SUM),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__reduce_cpu(&d, &a, &b, 1, (tacl_dtype_t)-1,
                                  TACL_SUM),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__reduce_cpu(NULL, &a, &b, 1, TACL_FLOAT32, TACL_SUM),
                 TACL_ERR_INVALID_ARG);
    for (int op = TACL_BAND; op <= TACL_BXOR; op++)
        for (int t = TACL_FLOAT16; t <= TACL_FLOAT64; t++)
            cr_assert_eq(tacl__reduce_cpu(&d, &a, &b, 1, (tacl_dtype_t)t,
                                          (tacl_op_t)op),
                         TACL_ERR_INVALID_ARG, "%s on %s must be refused",
                         tacl_op_name((tacl_op_t)op),
                         tacl_dtype_name((tacl_dtype_t)t));
    cr_assert_eq(d, 0.0f, "a failed call must not write");
    cr_assert_eq(tacl__div_cpu(&d, &a, 1, TACL_NUM_DTYPES, 2),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__div_cpu(&d, &a, 1, TACL_FLOAT32, 0),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(d, 0.0f, "a failed call must not write");
}

/* The expected bits of x / dv for a floating dtype. */
static uint64_t ref_div_float(double x, uint32_t dv, tacl_dtype_t t)
{
    if (t == TACL_FLOAT32) {
        /*
         * Rounded to 64 bits first, the quotient stays on the same side of
         * every float midpoint, so the conversion rounds correctly.
         */
        long double q = (long double)x / (long double)dv;
        return f32_bits((float)q);
    }
    /* Halves and bfloat16: double has room enough for one rounding. */
    return float_bits_of(x / (double)dv, t);
}

static void check_div(tacl_dtype_t t, uint32_t dv, size_t count)
{
    size_t size = tacl_dtype_size(t);
    unsigned char *src = malloc(count * size);
    unsigned char *dst = malloc(count * size);
    cr_assert(src && dst);
    fill_random(src, count, t);
    cr_assert_eq(tacl__div_cpu(dst, src, count, t, dv), TACL_OK);
    for (size_t i = 0; i < count; i++) {
        uint64_t got = load_bits(dst, i, size);
        uint64_t want;
        if (is_float(t)) {
            double x = load_float(src, i, t);
            if (isnan(x)) {
                cr_assert(isnan(load_float(dst, i, t)));
                continue;
            }
            want = t == TACL_FLOAT64 ? float_bits_of(x / dv, t)
                                     : ref_div_float(x, dv, t);
        } else if (is_signed_int(t)) {
            int64_t x = sign_extend(load_bits(src, i, size), size);
            want = (uint64_t)(x / (int64_t)dv);
        } else {
            want = load_bits(src, i, size) / dv;
        }
        if (size < 8)
            want &= (1ull << (8 * size)) - 1;
        cr_assert_eq(got, want, "%s / %u [%zu]: got %#llx want %#llx",
                     tacl_dtype_name(t), dv, i, (unsigned long long)got,
                     (unsigned long long)want);
    }
    /* In place as well, with the same bits. */
    cr_assert_eq(tacl__div_cpu(src, src, count, t, dv), TACL_OK);
    cr_assert_eq(memcmp(src, dst, count * size), 0, "%s / %u in place",
                 tacl_dtype_name(t), dv);
    free(src);
    free(dst);
}

Test(div, every_dtype)
{
    static const uint32_t divisors[] = {1, 2, 3, 7, 8, 1000, 16777217u,
                                        0x80000001u, UINT32_MAX};
    cr_assert(LDBL_MANT_DIG >= 64, "the float32 reference needs x87 long "
                                   "double");
    for (int t = 0; t < TACL_NUM_DTYPES; t++)
        for (size_t k = 0; k < sizeof(divisors) / sizeof(divisors[0]); k++)
            check_div((tacl_dtype_t)t, divisors[k], 4099);
}

/* Every half and every bfloat16 divided by a few divisors. */
Test(div, all_16bit_patterns)
{
    static const uint32_t divisors[] = {3, 5, 7, 11, 1000, 0x80000001u};
    static const tacl_dtype_t types[] = {TACL_FLOAT16, TACL_BFLOAT16};
    uint16_t *src = malloc(65536 * 2);
    uint16_t *dst = malloc(65536 * 2);
    cr_assert(src && dst);
    for (uint32_t h = 0; h < 65536; h++)
        src[h] = (uint16_t)h;
    for (size_t t = 0; t < 2; t++) {
        for (size_t k = 0; k < sizeof(divisors) / sizeof(divisors[0]); k++) {
            cr_assert_eq(tacl__div_cpu(dst, src, 65536, types[t],
                                       divisors[k]),
                         TACL_OK);
            for (uint32_t h = 0; h < 65536; h++) {
                double x = load_float(src, h, types[t]);
                if (isnan(x)) {
                    cr_assert(isnan(load_float(dst, h, types[t])));
                    continue;
                }
                uint64_t want = ref_div_float(x, divisors[k], types[t]);
                cr_assert_eq(dst[h], want, "%s %#x / %u: got %#x want %#x",
                             tacl_dtype_name(types[t]), h, divisors[k],
                             dst[h], (unsigned)want);
            }
        }
    }
    free(src);
    free(dst);
}
