/*
 * CPU block quantization kernels of ZeRO++: qwZ block quantization
 * (section 3.1), the fused dequantize-reduce-quantize step of qgZ and the
 * fused quantization with tensor slice reordering (sections 3.3 and 4.2).
 * The layout and the element rules are described in quant.h.
 *
 * Every kernel walks the data one quantization block at a time.  A block
 * of up to QUANT_CHUNK elements is brought once into a float32 array on
 * the stack (converted from 16 bits, or summed from the dequantized
 * inputs), its largest magnitude found and its values quantized from
 * there.  A larger block is walked twice in QUANT_CHUNK pieces: once for
 * the maximum, once to quantize, recomputing the piece, so that no
 * full-precision buffer is ever allocated.
 *
 * The inner loops are plain loops over arrays that GCC vectorizes: the
 * largest magnitude is an integer max over the float bits with the sign
 * cleared (an unsigned compare orders non-negative floats), q is the
 * double quotient x / scale rounded with the add-and-subtract-1.5*2^52
 * trick, and the 16-bit conversions are the branch-free helpers of
 * float_bits.h (with a round-to-odd product before narrowing).
 */
#include "quant.h"
#include "reduce.h"

#include <string.h>

#include "common.h"
#include "float_bits.h"
#include "log.h"
#include "quant_checks.h"

/* Elements of a block handled at once on the stack. */
#define QUANT_CHUNK 2048

/* Fills out[0..m) with the float32 values of elements off.. of a stream. */
typedef const float *(*quant_load_fn)(const void *ctx, size_t off, size_t m,
                                      float *out);

/* A plain input: elements of one dtype. */
typedef struct {
    const void *src;
    tacl_dtype_t dtype;
} quant_src_t;

/* A sum of quantized inputs, all of the same n, block and bits. */
typedef struct {
    const void *const *srcs;
    int nsrc;
    size_t n;
    uint32_t block;
    int bits;
} quant_sum_t;

static float load_scale(const uint8_t *q, size_t b)
{
    float s;
    memcpy(&s, q + b * sizeof(float), sizeof(s));
    return s;
}

static void store_scale(uint8_t *q, size_t b, float s)
{
    memcpy(q + b * sizeof(float), &s, sizeof(s));
}

/* The bits of max |x[i]|, sign cleared; NaN compares above infinity. */
static uint32_t amax_bits(const float *x, size_t m)
{
    uint32_t mx = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t b = tacl__f32_bits(x[i]) & 0x7fffffffu;
        mx = b > mx ? b : mx;
    }
    return mx;
}

static void quant_values(int8_t *restrict q, const float *restrict x,
                         size_t m, double divisor, double qmax)
{
    for (size_t i = 0; i < m; i++)
        q[i] = (int8_t)tacl__quant_value(x[i], divisor, qmax);
}

/*
 * Pack m int4 values, the first being global element first, into the
 * payload.  A block that starts at an odd element fills the high nibble of
 * a byte whose low nibble the previous block wrote (with a zero high
 * nibble); a block that ends at an odd count leaves a zero high nibble.
 */
static void pack_int4(uint8_t *restrict payload, size_t first,
                      const int8_t *restrict q, size_t m)
{
    uint8_t *p = payload + first / 2;
    size_t i = 0;
    if (m == 0)
        return;
    if (first & 1) {
        *p = (uint8_t)((*p & 0x0fu) | ((uint8_t)q[0] << 4));
        p++;
        i = 1;
    }
    size_t pairs = (m - i) / 2;
    const int8_t *s = q + i;
    for (size_t k = 0; k < pairs; k++)
        p[k] = (uint8_t)(((uint8_t)s[2 * k] & 0x0fu) |
                         ((uint8_t)s[2 * k + 1] << 4));
    if (i + 2 * pairs < m)
        p[pairs] = (uint8_t)((uint8_t)q[m - 1] & 0x0fu);
}

/* Unpack m int4 values starting at global element first. */
static void unpack_int4(int8_t *restrict q, const uint8_t *restrict payload,
                        size_t first, size_t m)
{
    const uint8_t *p = payload + first / 2;
    size_t i = 0;
    if (m == 0)
        return;
    if (first & 1) {
        q[0] = (int8_t)tacl__quant_nibble((uint32_t)*p >> 4);
        p++;
        i = 1;
    }
    size_t pairs = (m - i) / 2;
    int8_t *d = q + i;
    for (size_t k = 0; k < pairs; k++) {
        d[2 * k] = (int8_t)tacl__quant_nibble(p[k]);
        d[2 * k + 1] = (int8_t)tacl__quant_nibble((uint32_t)p[k] >> 4);
    }
    if (i + 2 * pairs < m)
        q[m - 1] = (int8_t)tacl__quant_nibble(p[pairs]);
}

/* The int8 values of elements first.. of a quantized payload. */
static const int8_t *get_q(const uint8_t *payload, int bits, size_t first,
                           size_t m, int8_t *buf)
{
    if (bits == 8)
        return (const int8_t *)payload + first;
    unpack_int4(buf, payload, first, m);
    return buf;
}

/*
 * Quantize the n-element stream that load() produces into dst.  See the
 * file comment for the one- and two-pass shapes.
 */
static void quantize_stream(quant_load_fn load, const void *ctx, size_t n,
                            uint32_t block, int bits, uint8_t *dst)
{
    float xbuf[QUANT_CHUNK];
    int8_t qbuf[QUANT_CHUNK];
    size_t nblocks = n / block + (n % block != 0);
    uint8_t *payload = dst + nblocks * sizeof(float);
    int qmax = TACL_QUANT_QMAX(bits);

    for (size_t b = 0; b < nblocks; b++) {
        size_t start = b * block;
        size_t m = TACL_MIN((size_t)block, n - start);
        const float *x = NULL;
        uint32_t mx = 0;

        if (m <= QUANT_CHUNK) {
            x = load(ctx, start, m, xbuf);
            mx = amax_bits(x, m);
        } else {
            for (size_t off = 0; off < m; off += QUANT_CHUNK) {
                size_t c = TACL_MIN((size_t)QUANT_CHUNK, m - off);
                uint32_t cm = amax_bits(load(ctx, start + off, c, xbuf), c);
                mx = cm > mx ? cm : mx;
            }
        }
        float scale = tacl__quant_scale(mx, qmax);
        store_scale(dst, b, scale);
        if (mx >= 0x7f800000u) {
            /* An infinity or NaN: NaN scale, zero payload. */
            if (bits == 8) {
                memset(payload + start, 0, m);
            } else {
                memset(qbuf, 0, TACL_MIN(m, (size_t)QUANT_CHUNK));
                for (size_t off = 0; off < m; off += QUANT_CHUNK)
                    pack_int4(payload, start + off, qbuf,
                              TACL_MIN((size_t)QUANT_CHUNK, m - off));
            }
            continue;
        }
        double divisor = tacl__quant_divisor(scale);
        for (size_t off = 0; off < m; off += QUANT_CHUNK) {
            size_t c = TACL_MIN((size_t)QUANT_CHUNK, m - off);
            if (m > QUANT_CHUNK)
                x = load(ctx, start + off, c, xbuf);
            if (bits == 8) {
                quant_values((int8_t *)payload + start + off, x, c, divisor,
                             (double)qmax);
            } else {
                quant_values(qbuf, x, c, divisor, (double)qmax);
                pack_int4(payload, start + off, qbuf, c);
            }
        }
    }
}

/* A plain input's elements as float32: in place for float32. */
static const float *load_src(const void *ctx, size_t off, size_t m,
                             float *out)
{
    const quant_src_t *s = ctx;
    if (s->dtype == TACL_FLOAT32)
        return (const float *)s->src + off;
    if (s->dtype == TACL_FLOAT16)
        tacl__half_to_float_n(out, (const uint16_t *)s->src + off, m);
    else
        tacl__bf16_to_float_n(out, (const uint16_t *)s->src + off, m);
    return out;
}

/*
 * Add the dequantized values of one input to acc: acc[i] + q[i] * scale,
 * one rounded product and one rounded sum (no fused multiply-add, so the
 * CUDA kernels can match).
 */
static void add_dequant(float *restrict acc, const int8_t *restrict q,
                        float scale, size_t m)
{
    for (size_t i = 0; i < m; i++) {
        float t = (float)q[i] * scale;
        acc[i] = acc[i] + t;
    }
}

/*
 * Sum the dequantized elements off..off+m of every input into acc, which
 * the caller initialises.  The range lies within one block.
 */
static void sum_dequant(const quant_sum_t *s, size_t off, size_t m,
                        float *acc)
{
    int8_t qbuf[QUANT_CHUNK];
    size_t nblocks = s->n / s->block + (s->n % s->block != 0);
    size_t b = off / s->block;

    for (int k = 0; k < s->nsrc; k++) {
        const uint8_t *src = s->srcs[k];
        const uint8_t *payload = src + nblocks * sizeof(float);
        add_dequant(acc, get_q(payload, s->bits, off, m, qbuf),
                    load_scale(src, b), m);
    }
}

static const float *load_sum(const void *ctx, size_t off, size_t m,
                             float *out)
{
    memset(out, 0, m * sizeof(*out));
    sum_dequant(ctx, off, m, out);
    return out;
}

/* Block, bits and count, then the full-precision type unless there is
 * none (TACL_NUM_DTYPES: an input that is already quantized). */
static tacl_status_t check_params(const char *what, size_t n, uint32_t block,
                                  int bits, tacl_dtype_t dtype)
{
    tacl_status_t st = tacl__quant_check("", what, n, block, bits);

    if (st == TACL_OK && dtype != TACL_NUM_DTYPES)
        st = tacl__quant_check_dtype("", what, dtype);
    return st;
}

/* check_params, then (when there are elements) the input and output. */
static tacl_status_t check_buffers(const char *what, size_t n,
                                   uint32_t block, int bits,
                                   tacl_dtype_t dtype, const void *in,
                                   const void *out)
{
    tacl_status_t st = check_params(what, n, block, bits, dtype);

    if (st != TACL_OK || n == 0)
        return st;
    if (in == NULL || out == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: NULL buffer for %zu elements", what, n);
    return TACL_OK;
}

tacl_status_t tacl__quantize(const void *src, size_t n, tacl_dtype_t dtype,
                             uint32_t block, int bits, void *dst)
{
    tacl_status_t st = check_buffers("quantize", n, block, bits, dtype, src,
                                     dst);
    if (st != TACL_OK || n == 0)
        return st;
    quant_src_t ctx = {src, dtype};
    quantize_stream(load_src, &ctx, n, block, bits, dst);
    return TACL_OK;
}

/*
 * Dequantized values into a 16-bit type: the product q * scale rounded to
 * odd into float32 and then to nearest-even, which is the correct
 * rounding of the exact product.
 */
static void dequant_to_half(uint16_t *restrict out, const int8_t *restrict q,
                            float scale, size_t m)
{
    for (size_t i = 0; i < m; i++)
        out[i] = tacl__float_to_half_inl(
            tacl__quant_mul_odd((float)q[i], scale));
}

static void dequant_to_bf16(uint16_t *restrict out, const int8_t *restrict q,
                            float scale, size_t m)
{
    for (size_t i = 0; i < m; i++)
        out[i] = tacl__float_to_bf16_inl(
            tacl__quant_mul_odd((float)q[i], scale));
}

static void dequant_to_float(float *restrict out, const int8_t *restrict q,
                             float scale, size_t m)
{
    for (size_t i = 0; i < m; i++)
        out[i] = (float)q[i] * scale;
}

tacl_status_t tacl__dequantize(const void *src_q, size_t n, uint32_t block,
                               int bits, tacl_dtype_t dtype, void *dst)
{
    tacl_status_t st = check_buffers("dequantize", n, block, bits, dtype,
                                     src_q, dst);
    if (st != TACL_OK || n == 0)
        return st;

    int8_t qbuf[QUANT_CHUNK];
    size_t nblocks = n / block + (n % block != 0);
    const uint8_t *payload = (const uint8_t *)src_q + nblocks * sizeof(float);
    for (size_t b = 0; b < nblocks; b++) {
        size_t start = b * block;
        size_t m = TACL_MIN((size_t)block, n - start);
        float scale = load_scale(src_q, b);
        for (size_t off = start; off < start + m; off += QUANT_CHUNK) {
            size_t c = TACL_MIN((size_t)QUANT_CHUNK, start + m - off);
            const int8_t *q = get_q(payload, bits, off, c, qbuf);
            if (dtype == TACL_FLOAT32)
                dequant_to_float((float *)dst + off, q, scale, c);
            else if (dtype == TACL_FLOAT16)
                dequant_to_half((uint16_t *)dst + off, q, scale, c);
            else
                dequant_to_bf16((uint16_t *)dst + off, q, scale, c);
        }
    }
    return TACL_OK;
}

/*
 * The checks of the kernels that sum nsrc quantized inputs: parameters,
 * then (when there are elements) the inputs and the output.
 */
static tacl_status_t check_sum_args(const char *what,
                                    const void *const *srcs_q, int nsrc,
                                    size_t n, uint32_t block, int bits,
                                    tacl_dtype_t dtype, const void *dst)
{
    tacl_status_t st = check_params(what, n, block, bits, dtype);

    if (st != TACL_OK || n == 0)
        return st;
    return tacl__quant_check_sum("", what, srcs_q, nsrc, INT_MAX, n, dst);
}

tacl_status_t tacl__dequant_reduce(const void *const *srcs_q, int nsrc,
                                   size_t n, uint32_t block, int bits,
                                   tacl_dtype_t dtype, void *dst,
                                   int accumulate)
{
    tacl_status_t st = check_sum_args("dequant_reduce", srcs_q, nsrc, n,
                                      block, bits, dtype, dst);
    if (st != TACL_OK || n == 0)
        return st;

    float acc[QUANT_CHUNK];
    quant_sum_t sum = {srcs_q, nsrc, n, block, bits};
    for (size_t start = 0; start < n; start += block) {
        size_t m = TACL_MIN((size_t)block, n - start);
        for (size_t off = start; off < start + m; off += QUANT_CHUNK) {
            size_t c = TACL_MIN((size_t)QUANT_CHUNK, start + m - off);
            if (!accumulate)
                memset(acc, 0, c * sizeof(*acc));
            else if (dtype == TACL_FLOAT32)
                memcpy(acc, (float *)dst + off, c * sizeof(*acc));
            else if (dtype == TACL_FLOAT16)
                tacl__half_to_float_n(acc, (uint16_t *)dst + off, c);
            else
                tacl__bf16_to_float_n(acc, (uint16_t *)dst + off, c);
            sum_dequant(&sum, off, c, acc);
            if (dtype == TACL_FLOAT32)
                memcpy((float *)dst + off, acc, c * sizeof(*acc));
            else if (dtype == TACL_FLOAT16)
                tacl__float_to_half_n((uint16_t *)dst + off, acc, c);
            else
                tacl__float_to_bf16_n((uint16_t *)dst + off, acc, c);
        }
    }
    return TACL_OK;
}

tacl_status_t tacl__dequant_reduce_quant(const void *const *srcs_q,
                                         int nsrc, size_t n, uint32_t block,
                                         int bits, void *dst_q)
{
    tacl_status_t st = check_sum_args("dequant_reduce_quant", srcs_q, nsrc,
                                      n, block, bits, TACL_NUM_DTYPES, dst_q);
    if (st != TACL_OK || n == 0)
        return st;
    quant_sum_t sum = {srcs_q, nsrc, n, block, bits};
    quantize_stream(load_sum, &sum, n, block, bits, dst_q);
    return TACL_OK;
}

tacl_status_t tacl__quantize_reorder(const void *src, size_t n_per_slice,
                                     int nslices, const int *order,
                                     tacl_dtype_t dtype, uint32_t block,
                                     int bits, void *dst)
{
    const char *what = "quantize_reorder";
    tacl_status_t st = check_params(what, n_per_slice, block, bits, dtype);
    if (st == TACL_OK)
        st = tacl__quant_check_order("", what, n_per_slice, nslices, src,
                                     dst, order);
    if (st != TACL_OK || n_per_slice == 0 || nslices == 0)
        return st;

    size_t esize = tacl_dtype_size(dtype);
    size_t qbytes = tacl__quant_bytes(n_per_slice, block, bits);
    for (int i = 0; i < nslices; i++) {
        quant_src_t ctx = {
            (const char *)src + (size_t)order[i] * n_per_slice * esize,
            dtype};
        quantize_stream(load_src, &ctx, n_per_slice, block, bits,
                        (uint8_t *)dst + (size_t)i * qbytes);
    }
    return TACL_OK;
}
