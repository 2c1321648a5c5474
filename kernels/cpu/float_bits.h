/*
 * Bit-level helpers shared by the CPU and CUDA reduction kernels: float16
 * and bfloat16 conversions, branch-free selects, and the round-to-odd
 * division that makes a later narrowing the only rounding that counts.
 * Everything is static inline and marked __host__ __device__ under nvcc,
 * so both kernels compute the very same bits.
 *
 * The conversions compute every case and pick one with masks: GCC does not
 * if-convert the equivalent ternaries (one arm holds a float operation),
 * and a branch would stop the block loops from vectorizing.
 */
#ifndef TACL_KERNELS_CPU_FLOAT_BITS_H
#define TACL_KERNELS_CPU_FLOAT_BITS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TACL_HD __host__ __device__
#else
#define TACL_HD
#endif

/*
 * Bit casts both ways between a floating type F and the unsigned type U
 * of its size, as the functions bits(F) and from_bits(U).
 */
#define TACL_BIT_CASTS_(F, U, bits, from_bits)                               \
    TACL_HD static inline U bits(F f)                                        \
    {                                                                        \
        U u;                                                                 \
        memcpy(&u, &f, sizeof(u));                                           \
        return u;                                                            \
    }                                                                        \
    TACL_HD static inline F from_bits(U u)                                   \
    {                                                                        \
        F f;                                                                 \
        memcpy(&f, &u, sizeof(f));                                           \
        return f;                                                            \
    }

TACL_BIT_CASTS_(float, uint32_t, tacl__f32_bits, tacl__f32_from_bits)
TACL_BIT_CASTS_(double, uint64_t, tacl__f64_bits, tacl__f64_from_bits)

/* All-ones when cond holds, else zero; and a select by such a mask. */
TACL_HD static inline uint32_t tacl__mask_if(int cond)
{
    return (uint32_t)0 - (uint32_t)cond;
}

TACL_HD static inline uint32_t tacl__select_u32(uint32_t mask, uint32_t a,
                                                uint32_t b)
{
    return (a & mask) | (b & ~mask);
}

/*
 * half -> float.  Subnormal halves are m * 2^-24, computed through an
 * integer-to-float conversion, which is exact and does not depend on the
 * denormals-are-zero mode.  Normal halves move their exponent by 127 - 15.
 * Inf and NaN keep their payload; a NaN comes back quiet.
 */
TACL_HD static inline float tacl__half_to_float_inl(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t sub = tacl__f32_bits((float)(int32_t)em * 0x1p-24f);
    uint32_t norm = (em << 13) + (112u << 23);
    uint32_t special = (em << 13) | 0x7f800000u |
                       (tacl__mask_if(em > 0x7c00u) & 0x00400000u);
    uint32_t big = tacl__select_u32(tacl__mask_if(em >= 0x7c00u), special,
                                    norm);
    uint32_t mag = tacl__select_u32(tacl__mask_if(em < 0x0400u), sub, big);
    return tacl__f32_from_bits(mag | sign);
}

/*
 * float -> half, round to nearest-even.  Results below 2^-14 are subnormal:
 * adding 0.5 lets the FPU round the value to a multiple of 2^-24 (the unit
 * of 0.5's last place), whose low bits then are the half.  Normal results
 * round with the classic add-half-minus-one-plus-odd-bit trick; a carry out
 * of the mantissa bumps the exponent, up to infinity.  NaN stays NaN with
 * its sign and top payload bits, made quiet.
 */
TACL_HD static inline uint16_t tacl__float_to_half_inl(float f)
{
    uint32_t u = tacl__f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t x = u & 0x7fffffffu;
    uint32_t infnan = 0x7c00u | (tacl__mask_if(x > 0x7f800000u) &
                                 (0x0200u | ((x >> 13) & 0x3ffu)));
    uint32_t sub =
        tacl__f32_bits(tacl__f32_from_bits(x) + 0.5f) - 0x3f000000u;
    uint32_t norm = (x - (112u << 23) + 0xfffu + ((x >> 13) & 1u)) >> 13;
    uint32_t small = tacl__select_u32(tacl__mask_if(x < 0x38800000u), sub,
                                      norm);
    uint32_t mag =
        tacl__select_u32(tacl__mask_if(x >= 0x47800000u), infnan, small);
    return (uint16_t)(mag | sign);
}

/* bfloat16 is the top half of a float32; a NaN comes back quiet. */
TACL_HD static inline float tacl__bf16_to_float_inl(uint16_t h)
{
    uint32_t quiet = tacl__mask_if((h & 0x7fffu) > 0x7f80u) & 0x00400000u;
    return tacl__f32_from_bits(((uint32_t)h << 16) | quiet);
}

/* float -> bfloat16, round to nearest-even; overflow carries into inf. */
TACL_HD static inline uint16_t tacl__float_to_bf16_inl(float f)
{
    uint32_t u = tacl__f32_bits(f);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = (u >> 16) | 0x0040u;
    uint32_t is_nan = tacl__mask_if((u & 0x7fffffffu) > 0x7f800000u);
    return (uint16_t)tacl__select_u32(is_nan, nan, rounded);
}

/*
 * x / d rounded to odd: the quotient truncated toward zero, with its last
 * bit set when it is inexact.  A later rounding to fewer than 52 bits then
 * gives the correctly rounded quotient.  The remainder of a correctly
 * rounded quotient is exact in double, so fma tells whether q overshoots.
 */
TACL_HD static inline double tacl__div_round_odd(double x, double d)
{
    double q = x / d;
    double r = fma(-q, d, x);
    uint64_t bits = tacl__f64_bits(q);
    if (r != 0.0 && isfinite(q)) {
        /* r has the sign of x when |q| is short, the other one if over. */
        if ((r < 0.0) != (x < 0.0))
            bits -= 1;
        bits |= 1;
    }
    return tacl__f64_from_bits(bits);
}

/* A double rounded to float with round-to-odd (for a later 16-bit step). */
TACL_HD static inline float tacl__double_to_float_odd(double q)
{
    float f = (float)q;
    uint32_t bits = tacl__f32_bits(f);
    if ((double)f != q && isfinite(f) && !isnan(q)) {
        if (fabs((double)f) > fabs(q))
            bits -= 1;
        bits |= 1;
    }
    return tacl__f32_from_bits(bits);
}

/*
 * Floating-point MAX and MIN propagate NaN: a NaN in x wins, a NaN in y
 * wins through the failed comparison, and equal operands (+0 and -0) give
 * y.  Written with | so that GCC turns it into compares and a blend.
 */
#define TACL_FMAX(x, y) ((((x) > (y)) | ((x) != (x))) ? (x) : (y))
#define TACL_FMIN(x, y) ((((x) < (y)) | ((x) != (x))) ? (x) : (y))

#endif /* TACL_KERNELS_CPU_FLOAT_BITS_H */
