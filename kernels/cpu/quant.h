/*
 * Block quantization kernels of ZeRO++ (qwZ, section 3.1; qgZ, section
 * 3.3; the fused kernels of section 4.2), on the CPU.
 *
 * Quantized buffer layout, for n elements, block size B (elements per
 * block) and b bits per value (8 or 4):
 *
 *     float32 scale[ceil(n / B)]      one per block, native byte order
 *     payload                         int8: n bytes;
 *                                     int4: ceil(n / 2) bytes, element i
 *                                     in byte i / 2, low nibble for even i
 *
 * Element indices are global, so with an odd B an int4 block may start in
 * the high nibble of a byte.  tacl__quant_bytes() gives the total size;
 * the buffer has no alignment padding, and scales are read and written
 * with memcpy, so any byte address works.
 *
 * Symmetric quantization per block: scale = max|x| / qmax in float32
 * (qmax = 127 for int8, 7 for int4), q = x / scale rounded to
 * nearest-even (the exact quotient's rounding) and clamped to
 * [-qmax, qmax].  Dequantized x' = q * scale, rounded once to the output
 * type (nearest-even).  A block of zeros has scale 0 and q = 0.  A block
 * whose max|x| is so small (below qmax * 2^-150) that the scale
 * underflows to 0 quantizes to zeros.  A block holding an infinity or NaN
 * gets a NaN scale and zero payload, so every value of it dequantizes to
 * NaN: overflow is never silent.
 *
 * Inputs and outputs are float32, float16 or bfloat16 (tacl_dtype_t).
 * Sums of dequantized values are accumulated in float32, in source order,
 * one rounded multiply and one rounded add per term; the CUDA kernels
 * (kernels/cuda/quant_cuda.h) compute the very same bits.
 *
 * Every function validates its arguments: bits other than 4 and 8, a
 * block of 0, an unsupported dtype or a NULL buffer with n > 0 give
 * TACL_ERR_INVALID_ARG with a message.  n = 0 is valid and does nothing.
 */
#ifndef TACL_KERNELS_CPU_QUANT_H
#define TACL_KERNELS_CPU_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "float_bits.h"
#include "tacl.h"
#include "quant_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Largest value of a quantized element for a bit width (127 or 7). */
#define TACL_QUANT_QMAX(bits) ((bits) == 8 ? 127 : 7)

/* tacl__quant_bytes() comes from quant_layout.h. */


/** Quantize n elements of src (dtype) into dst (scales then payload). */
tacl_status_t tacl__quantize(const void *src, size_t n, tacl_dtype_t dtype,
                             uint32_t block, int bits, void *dst);

/** Dequantize n elements of src_q into dst, of type dtype. */
tacl_status_t tacl__dequantize(const void *src_q, size_t n, uint32_t block,
                               int bits, tacl_dtype_t dtype, void *dst);

/**
 * dst = sum of the nsrc dequantized inputs (accumulate == 0), or dst +=
 * that sum (accumulate != 0).  The sum is taken in float32: starting from
 * 0 (or dst converted to float32), each input's q * scale is added in
 * order; the result is rounded once to dtype.
 */
tacl_status_t tacl__dequant_reduce(const void *const *srcs_q, int nsrc,
                                   size_t n, uint32_t block, int bits,
                                   tacl_dtype_t dtype, void *dst,
                                   int accumulate);

/**
 * The fused middle step of qgZ: dequantize nsrc inputs, sum them in
 * float32 (as tacl__dequant_reduce does), and quantize the sum into dst_q
 * with the same block and bits.  Works block by block on the stack; no
 * full-precision buffer is allocated.
 */
tacl_status_t tacl__dequant_reduce_quant(const void *const *srcs_q,
                                         int nsrc, size_t n, uint32_t block,
                                         int bits, void *dst_q);

/**
 * Quantize nslices slices of n_per_slice elements each, writing input
 * slice order[i] as the i-th quantized slice of dst.  Each slice is
 * quantized on its own (its own scales and payload) and the output slices
 * lie tacl__quant_bytes(n_per_slice, block, bits) bytes apart.  This is
 * the fused quantization and tensor slice reordering of ZeRO++ (Algorithm
 * 2, Figure 9): there is no separate copy pass.  Every order[i] must lie
 * in [0, nslices).
 */
tacl_status_t tacl__quantize_reorder(const void *src, size_t n_per_slice,
                                     int nslices, const int *order,
                                     tacl_dtype_t dtype, uint32_t block,
                                     int bits, void *dst);

/*
 * Element rules shared with the CUDA kernels, so both give the same bits.
 */

/**
 * The scale of a block from the bits of its largest magnitude (the sign
 * bit cleared): max|x| / qmax rounded to float32, or NaN when the block
 * holds an infinity or NaN.
 */
TACL_HD static inline float tacl__quant_scale(uint32_t amax_bits, int qmax)
{
    if (amax_bits >= 0x7f800000u)
        return tacl__f32_from_bits(0x7fc00000u);
    return tacl__f32_from_bits(amax_bits) / (float)qmax;
}

/**
 * The divisor that maps a value to q: the scale in double, or infinity
 * for a zero, underflowed or NaN scale, so that every q of such a block
 * is 0.  Dividing in double is what makes q the rounding of the exact
 * quotient: a quotient of two floats that is not a tie lies at least
 * 2^-25 away from the nearest half-integer, far more than the double
 * rounding error, and a tie is exact in double.  (A multiplication by a
 * rounded 1 / scale can turn an exact tie into a near-tie, and float32
 * division is not precise enough.)
 */
TACL_HD static inline double tacl__quant_divisor(float scale)
{
    return (scale > 0.0f && scale <= 3.4028234663852886e38f)
               ? (double)scale
               : (double)INFINITY;
}

/**
 * q = x / divisor clamped to [-qmax, qmax] and rounded to nearest-even.
 * The clamp comes first (qmax is an integer, so the order does not
 * matter), then adding and subtracting 1.5 * 2^52 rounds in the current
 * mode, which is nearest-even: branch-free, and it vectorizes.  x must be
 * finite.
 */
TACL_HD static inline int32_t tacl__quant_value(float x, double divisor,
                                                double qmax)
{
    double v = (double)x / divisor;
    v = v > qmax ? qmax : v;
    v = v < -qmax ? -qmax : v;
    v = (v + 0x1.8p52) - 0x1.8p52;
    return (int32_t)v;
}

/**
 * What tacl__quant_value_rcp needs of a block besides its scale, computed
 * once per block: 1 / scale in float32; 0 when the divisor is infinite
 * (every q is 0); -1 when 1 / scale overflows (a subnormal scale: the
 * block divides, as tacl__quant_value does).
 */
TACL_HD static inline float tacl__quant_recip(float scale)
{
    float r;

    if (!(scale > 0.0f && scale <= 3.4028234663852886e38f))
        return 0.0f;
    r = 1.0f / scale;
    return r <= 3.4028234663852886e38f ? r : -1.0f;
}

/**
 * tacl__quant_value(x, tacl__quant_divisor(scale), qmax), bit for bit,
 * without a division per element (the GPU's double division is a long
 * sequence): q0 = rint(x * recip) is within one of the answer (its
 * relative error is 2^-23 and |x / scale| <= qmax + 1), the remainder
 * x - q0 * scale is exact in double (a product of 8 and 24 significant
 * bits, then a difference below 1.5 scale), and it moves q0 to the
 * nearest integer of the exact quotient, ties to even, which is what the
 * divided value rounds to (tacl__quant_divisor explains why).
 */
TACL_HD static inline int32_t tacl__quant_value_rcp(float x, float scale,
                                                    float recip, double qmax)
{
    float q;
    double d, h;

    if (recip <= 0.0f)
        return recip == 0.0f ? 0 : tacl__quant_value(x, (double)scale, qmax);
    q = rintf(x * recip);
    d = fma(-(double)q, (double)scale, (double)x);
    h = 0.5 * (double)scale;
    if (d > h || (d == h && ((int32_t)q & 1)))
        q += 1.0f;
    else if (d < -h || (d == -h && ((int32_t)q & 1)))
        q -= 1.0f;
    q = q > (float)qmax ? (float)qmax : q;
    q = q < -(float)qmax ? -(float)qmax : q;
    return (int32_t)q;
}

/**
 * q * scale rounded to float32 with round-to-odd (the truncation, with
 * the last bit set when inexact), so that a later rounding to 16 bits is
 * the correct rounding of the exact product.  All in float32, for vector
 * loops: scale splits into a high part of 12 significant bits and the
 * rest, so that both partial products of q (at most 8 bits) are exact;
 * their sum is rounded once and its error found exactly (Fast2Sum, the
 * high product being the larger).
 */
TACL_HD static inline float tacl__quant_mul_odd(float q, float scale)
{
    float shi = tacl__f32_from_bits(tacl__f32_bits(scale) & 0xfffff000u);
    float slo = scale - shi;
    float a = q * shi;
    float b = q * slo;
    float f = a + b;
    float err = b - (f - a);
    uint32_t bits = tacl__f32_bits(f);
    uint32_t inexact = tacl__mask_if(err != 0.0f) & 1u;
    uint32_t over = tacl__mask_if((err < 0.0f) != (f < 0.0f)) & inexact;
    return tacl__f32_from_bits((bits - over) | inexact);
}

/** Sign-extend the int4 value in the low nibble of v. */
TACL_HD static inline int32_t tacl__quant_nibble(uint32_t v)
{
    return (int32_t)((v & 0xfu) ^ 0x8u) - 8;
}

#ifdef __cplusplus
}
#endif

#endif /* TACL_KERNELS_CPU_QUANT_H */
