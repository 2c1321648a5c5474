/*
 * CUDA block quantization kernels of ZeRO++ (qwZ, section 3.1; qgZ,
 * section 3.3; the fused kernels of section 4.2): the device side of
 * kernels/cpu/quant.h, giving the same bytes.
 *
 * Quantizing kernels run one thread block per quantization block: the
 * threads stride over the block for its largest magnitude (an unsigned
 * max over the float bits, reduced with __reduce_max_sync in each warp
 * and then across warps in shared memory), thread 0 stores the scale, and
 * the threads stride again to quantize, the second read mostly hitting
 * the cache.  What a block quantizes comes from a loader: elements of a
 * tensor, through a slice map for the fused tensor slice reordering, or
 * the float32 sum of dequantized inputs for the fused
 * dequantize-reduce-quantize step, so no intermediate buffer exists.
 *
 * With int4 and an odd block size, two blocks share the byte at their
 * border.  Rather than race on it, that case runs the kernel for the
 * scales only, then a second kernel that builds each payload byte from its
 * two elements and their scales.
 *
 * The common 8-bit case runs faster kernels when the layout allows 16-byte
 * loads (float32 or 16-bit input 16-byte aligned, the element count and
 * the block size multiples of 8, an even number of blocks so the payload
 * stays 8-byte aligned): quantizing, one warp per quantization block, each
 * lane taking groups of 8 elements as vectors, the block's maximum from
 * one __reduce_max_sync (no shared memory, no barrier), and the 8 payload
 * bytes of a group stored as one uint2; dequantizing, 8 elements per
 * thread from one uint2 of payload and one scale, stored as vectors, with
 * no per-element division.  They compute every element exactly as the
 * general kernels do (the block maximum is an unsigned max, independent
 * of order), so the bytes are the same; other layouts take the general
 * kernels.
 *
 * Element rules come from quant.h and float_bits.h, shared with the CPU
 * kernels; sums use __fmul_rn and __fadd_rn so that no multiply-add is
 * fused, as on the host.  The scale arrays of reordered slices need not be
 * 4-byte aligned, so scales are loaded and stored bytewise when they are
 * not.
 */
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "log.h"
}
#include "cuda_launch.h"
#include "elem.h"
#include "float_bits.h"
#include "quant.h"
#include "quant_checks.h"
#include "quant_cuda.h"

namespace {

const int kThreads = 256;
const unsigned kMaxGrid = 1u << 20;
const int kSliceGroup = 64;

unsigned grid_for(size_t items, size_t per_block)
{
    size_t g = (items + per_block - 1) / per_block;
    return g < kMaxGrid ? (unsigned)g : kMaxGrid;
}

__device__ float load_scale(const uint8_t *q, size_t b)
{
    const uint8_t *p = q + b * 4;
    if (((uintptr_t)p & 3) == 0)
        return *(const float *)p;
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 |
                 (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return tacl__f32_from_bits(u);
}

__device__ void store_scale(uint8_t *q, size_t b, float s)
{
    uint8_t *p = q + b * 4;
    if (((uintptr_t)p & 3) == 0) {
        *(float *)p = s;
        return;
    }
    uint32_t u = tacl__f32_bits(s);
    for (int k = 0; k < 4; k++)
        p[k] = (uint8_t)(u >> (8 * k));
}

__device__ int32_t get_q(const uint8_t *payload, int bits, size_t i)
{
    if (bits == 8)
        return (int8_t)payload[i];
    uint32_t v = payload[i / 2];
    return tacl__quant_nibble((i & 1) ? v >> 4 : v);
}

/* Elements of a tensor; slice s of the output reads input slice map[s]. */
struct TensorLoader {
    const void *src;
    tacl_dtype_t dtype;
    size_t n;
    int map[kSliceGroup];

    __device__ float operator()(int s, size_t i) const
    {
        return tacl__elem_load_float(dtype, src, (size_t)map[s] * n + i);
    }
};

/* The float32 sum of dequantized inputs, in input order, unfused. */
struct SumLoader {
    const uint8_t *srcs[TACL_QUANT_CUDA_MAX_SRCS];
    int nsrc;
    size_t nblocks;
    uint32_t block;
    int bits;

    __device__ float operator()(int, size_t i) const
    {
        float acc = 0.0f;
        size_t b = i / block;
        for (int k = 0; k < nsrc; k++) {
            float t = __fmul_rn((float)get_q(srcs[k] + nblocks * 4, bits, i),
                                load_scale(srcs[k], b));
            acc = __fadd_rn(acc, t);
        }
        return acc;
    }
};

/* Largest value over the thread block; every thread gets it. */
__device__ uint32_t block_max(uint32_t v)
{
    __shared__ uint32_t warp_max[32];
    __shared__ uint32_t result;
    int lane = threadIdx.x & 31;
    int warp = threadIdx.x >> 5;
    v = __reduce_max_sync(0xffffffffu, v);
    if (lane == 0)
        warp_max[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int nwarps = (blockDim.x + 31) >> 5;
        uint32_t w = lane < nwarps ? warp_max[lane] : 0u;
        w = __reduce_max_sync(0xffffffffu, w);
        if (lane == 0)
            result = w;
    }
    __syncthreads();
    v = result;
    __syncthreads(); /* warp_max and result are reused by the next block */
    return v;
}

/*
 * One thread block per quantization block of nslices slices of n
 * elements, output slices slice_bytes apart.  With scales_only the payload
 * is left to pack_kernel (int4 with an odd block).
 */
template <typename L>
__global__ void quant_kernel(L ld, size_t n, uint32_t block, int bits,
                             int nslices, uint8_t *dst, size_t slice_bytes,
                             int scales_only)
{
    size_t nblocks = (n + block - 1) / block;
    size_t total = nblocks * (size_t)nslices;
    int qmax = TACL_QUANT_QMAX(bits);

    for (size_t gb = blockIdx.x; gb < total; gb += gridDim.x) {
        int s = (int)(gb / nblocks);
        size_t b = gb % nblocks;
        uint8_t *q = dst + (size_t)s * slice_bytes;
        uint8_t *payload = q + nblocks * 4;
        size_t start = b * block;
        size_t m = n - start < block ? n - start : block;

        uint32_t mx = 0;
        for (size_t i = threadIdx.x; i < m; i += blockDim.x) {
            uint32_t v = tacl__f32_bits(ld(s, start + i)) & 0x7fffffffu;
            mx = v > mx ? v : mx;
        }
        mx = block_max(mx);
        float scale = tacl__quant_scale(mx, qmax);
        if (threadIdx.x == 0)
            store_scale(q, b, scale);
        if (scales_only)
            continue;
        int bad = mx >= 0x7f800000u;
        float recip = tacl__quant_recip(scale);
        if (bits == 8) {
            for (size_t i = threadIdx.x; i < m; i += blockDim.x) {
                float x = ld(s, start + i);
                int32_t v = bad ? 0 : tacl__quant_value_rcp(x, scale, recip,
                                                            qmax);
                payload[start + i] = (uint8_t)v;
            }
            continue;
        }
        /* int4 with an even block: this block owns whole bytes. */
        for (size_t p = threadIdx.x; 2 * p < m; p += blockDim.x) {
            int32_t lo = 0, hi = 0;
            if (!bad) {
                lo = tacl__quant_value_rcp(ld(s, start + 2 * p), scale,
                                           recip, qmax);
                if (2 * p + 1 < m)
                    hi = tacl__quant_value_rcp(ld(s, start + 2 * p + 1),
                                               scale, recip, qmax);
            }
            payload[start / 2 + p] =
                (uint8_t)((lo & 0xf) | ((uint32_t)(hi & 0xf) << 4));
        }
    }
}

/* int4 payload bytes built from their elements and the stored scales. */
template <typename L>
__global__ void pack_kernel(L ld, size_t n, uint32_t block, int nslices,
                            uint8_t *dst, size_t slice_bytes)
{
    size_t nblocks = (n + block - 1) / block;
    size_t nbytes = (n + 1) / 2;
    size_t total = nbytes * (size_t)nslices;
    size_t stride = (size_t)gridDim.x * blockDim.x;

    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
         j < total; j += stride) {
        int s = (int)(j / nbytes);
        size_t jj = j % nbytes;
        uint8_t *q = dst + (size_t)s * slice_bytes;
        uint32_t byte = 0;
        for (int h = 0; h < 2; h++) {
            size_t e = 2 * jj + h;
            if (e >= n)
                break;
            float scale = load_scale(q, e / block);
            if (isnan(scale))
                continue;
            int32_t v = tacl__quant_value_rcp(ld(s, e), scale,
                                              tacl__quant_recip(scale), 7.0);
            byte |= (uint32_t)(v & 0xf) << (4 * h);
        }
        q[nblocks * 4 + jj] = (uint8_t)byte;
    }
}

template <typename L>
void launch_quant(const L &ld, size_t n, uint32_t block, int bits,
                  int nslices, uint8_t *dst, size_t slice_bytes,
                  cudaStream_t st)
{
    size_t nblocks = (n + block - 1) / block;
    int threads = block >= kThreads ? kThreads : (int)((block + 31) / 32 * 32);
    int split = bits == 4 && (block & 1);
    quant_kernel<<<grid_for(nblocks * (size_t)nslices, 1), threads, 0, st>>>(
        ld, n, block, bits, nslices, dst, slice_bytes, split);
    if (split)
        pack_kernel<<<grid_for((n + 1) / 2 * (size_t)nslices, kThreads),
                      kThreads, 0, st>>>(ld, n, block, nslices, dst,
                                         slice_bytes);
}

__global__ void dequant_kernel(const uint8_t *q, size_t n, uint32_t block,
                               int bits, tacl_dtype_t dtype, void *dst)
{
    size_t nblocks = (n + block - 1) / block;
    const uint8_t *payload = q + nblocks * 4;
    size_t stride = (size_t)gridDim.x * blockDim.x;

    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        int32_t v = get_q(payload, bits, i);
        float s = load_scale(q, i / block);
        if (dtype == TACL_FLOAT32) {
            ((float *)dst)[i] = __fmul_rn((float)v, s);
            continue;
        }
        float f = tacl__quant_mul_odd((float)v, s);
        tacl__elem_store_float(dtype, dst, i, f);
    }
}

__global__ void dequant_reduce_kernel(SumLoader ld, size_t n,
                                      tacl_dtype_t dtype, void *dst,
                                      int accumulate)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;

    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        float acc = accumulate ? tacl__elem_load_float(dtype, dst, i) : 0.0f;
        size_t b = i / ld.block;
        for (int k = 0; k < ld.nsrc; k++) {
            float t = __fmul_rn(
                (float)get_q(ld.srcs[k] + ld.nblocks * 4, ld.bits, i),
                load_scale(ld.srcs[k], b));
            acc = __fadd_rn(acc, t);
        }
        tacl__elem_store_float(dtype, dst, i, acc);
    }
}

/* Elements per vector group of the 8-bit fast paths. */
const int kGroup = 8;

/* Eight elements from 16-byte aligned p: two float4, or one uint4. */
__device__ __forceinline__ void load8(const void *p, tacl_dtype_t t,
                                     float v[kGroup])
{
    if (t == TACL_FLOAT32) {
        float4 a = ((const float4 *)p)[0], b = ((const float4 *)p)[1];
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
        v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
        return;
    }
    union {
        uint4 u;
        uint16_t h[kGroup];
    } x;
    x.u = *(const uint4 *)p;
#pragma unroll
    for (int k = 0; k < kGroup; k++)
        v[k] = t == TACL_FLOAT16 ? tacl__half_to_float_inl(x.h[k])
                                 : tacl__bf16_to_float_inl(x.h[k]);
}

/*
 * 8-bit quantization, one warp per quantization block, for the layouts
 * fast_quant() accepts: the bytes of quant_kernel.
 */
__global__ void __launch_bounds__(kThreads)
quant8_warp_kernel(TensorLoader ld, size_t n, uint32_t block, int nslices,
                   uint8_t *dst, size_t slice_bytes)
{
    const int lane = threadIdx.x & 31;
    size_t nblocks = (n + block - 1) / block;
    size_t total = nblocks * (size_t)nslices;
    size_t warps = (size_t)gridDim.x * (blockDim.x >> 5);
    size_t es = ld.dtype == TACL_FLOAT32 ? 4 : 2;

    for (size_t gb = (size_t)blockIdx.x * (blockDim.x >> 5) +
                     (threadIdx.x >> 5);
         gb < total; gb += warps) {
        int s = (int)(gb / nblocks);
        size_t b = gb % nblocks;
        uint8_t *q = dst + (size_t)s * slice_bytes;
        uint8_t *payload = q + nblocks * 4 + b * block;
        size_t start = b * block;
        size_t m = n - start < block ? n - start : block;
        const uint8_t *in = (const uint8_t *)ld.src +
                            ((size_t)ld.map[s] * n + start) * es;
        float first[kGroup];
        uint32_t mx = 0;

        /* The first group stays in registers for the second pass. */
        for (size_t g = lane; g * kGroup < m; g += 32) {
            float v[kGroup];
            load8(in + g * kGroup * es, ld.dtype, v);
#pragma unroll
            for (int k = 0; k < kGroup; k++) {
                uint32_t a = tacl__f32_bits(v[k]) & 0x7fffffffu;
                mx = a > mx ? a : mx;
                if (g == (size_t)lane)
                    first[k] = v[k];
            }
        }
        mx = __reduce_max_sync(0xffffffffu, mx);
        float scale = tacl__quant_scale(mx, 127);
        if (lane == 0)
            store_scale(q, b, scale);
        int bad = mx >= 0x7f800000u;
        float recip = tacl__quant_recip(scale);
        for (size_t g = lane; g * kGroup < m; g += 32) {
            float v[kGroup];
            uint32_t lo = 0, hi = 0;
            if (g == (size_t)lane) {
#pragma unroll
                for (int k = 0; k < kGroup; k++)
                    v[k] = first[k];
            } else {
                load8(in + g * kGroup * es, ld.dtype, v);
            }
#pragma unroll
            for (int k = 0; k < kGroup; k++) {
                int32_t x =
                    bad ? 0 : tacl__quant_value_rcp(v[k], scale, recip, 127);
                uint32_t byte = (uint32_t)(uint8_t)x;
                if (k < 4)
                    lo |= byte << (8 * k);
                else
                    hi |= byte << (8 * (k - 4));
            }
            ((uint2 *)payload)[g] = make_uint2(lo, hi);
        }
    }
}

/*
 * 8-bit dequantization, 8 elements per thread, for the layouts
 * fast_dequant() accepts: the values of dequant_kernel.
 */
__global__ void __launch_bounds__(kThreads)
dequant8_vec_kernel(const uint8_t *q, size_t n, uint32_t block,
                    tacl_dtype_t dtype, void *dst)
{
    size_t nblocks = (n + block - 1) / block;
    const uint2 *payload = (const uint2 *)(q + nblocks * 4);
    size_t ngroups = n / kGroup;
    size_t stride = (size_t)gridDim.x * blockDim.x;

    for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
         g < ngroups; g += stride) {
        uint2 p = payload[g];
        float s = load_scale(q, g * kGroup / block);
        float f[kGroup];
#pragma unroll
        for (int k = 0; k < kGroup; k++) {
            uint32_t w = k < 4 ? p.x : p.y;
            float v = (float)(int8_t)(uint8_t)(w >> (8 * (k & 3)));
            f[k] = dtype == TACL_FLOAT32 ? __fmul_rn(v, s)
                                         : tacl__quant_mul_odd(v, s);
        }
        if (dtype == TACL_FLOAT32) {
            float4 *o = (float4 *)dst + 2 * g;
            o[0] = make_float4(f[0], f[1], f[2], f[3]);
            o[1] = make_float4(f[4], f[5], f[6], f[7]);
            continue;
        }
        union {
            uint4 u;
            uint16_t h[kGroup];
        } x;
#pragma unroll
        for (int k = 0; k < kGroup; k++)
            x.h[k] = dtype == TACL_FLOAT16 ? tacl__float_to_half_inl(f[k])
                                           : tacl__float_to_bf16_inl(f[k]);
        ((uint4 *)dst)[g] = x.u;
    }
}

/* Whether the 8-bit layout suits the vector kernels (see the top). */
int fast_layout(size_t n, uint32_t block, int bits, const void *data,
                const void *q)
{
    size_t nblocks = (n + block - 1) / block;
    return bits == 8 && n % kGroup == 0 && block % kGroup == 0 &&
           nblocks % 2 == 0 && ((uintptr_t)data & 15) == 0 &&
           ((uintptr_t)q & 7) == 0;
}

/* The loader that reads the nsrc inputs of a sum (checked). */
void fill_sum(const void *const *srcs_q, int nsrc, size_t n, uint32_t block,
              int bits, SumLoader *ld)
{
    for (int k = 0; k < nsrc; k++)
        ld->srcs[k] = (const uint8_t *)srcs_q[k];
    ld->nsrc = nsrc;
    ld->nblocks = (n + block - 1) / block;
    ld->block = block;
    ld->bits = bits;
}

/*
 * The checks of the kernels that sum nsrc quantized inputs: parameters,
 * the full-precision type unless there is none (TACL_NUM_DTYPES), then
 * (when there are elements) the inputs, read by *ld, and the output.
 */
tacl_status_t check_sum(const char *what, const void *const *srcs_q,
                        int nsrc, size_t n, uint32_t block, int bits,
                        tacl_dtype_t dtype, const void *dst, SumLoader *ld)
{
    tacl_status_t status = tacl__quant_check("cuda ", what, n, block, bits);
    if (status == TACL_OK && dtype != TACL_NUM_DTYPES)
        status = tacl__quant_check_dtype("cuda ", what, dtype);
    if (status != TACL_OK || n == 0)
        return status;
    status = tacl__quant_check_sum("cuda ", what, srcs_q, nsrc,
                                   TACL_QUANT_CUDA_MAX_SRCS, n, dst);
    if (status == TACL_OK)
        fill_sum(srcs_q, nsrc, n, block, bits, ld);
    return status;
}

} /* namespace */

extern "C" tacl_status_t tacl__quantize_cuda(const void *src, size_t n,
                                             tacl_dtype_t dtype,
                                             uint32_t block, int bits,
                                             void *dst, void *stream)
{
    int order = 0;
    return tacl__quantize_reorder_cuda(src, n, 1, &order, dtype, block, bits,
                                       dst, stream);
}

extern "C" tacl_status_t tacl__quantize_reorder_cuda(
    const void *src, size_t n_per_slice, int nslices, const int *order,
    tacl_dtype_t dtype, uint32_t block, int bits, void *dst, void *stream)
{
    const char *what = nslices == 1 ? "quantize" : "quantize_reorder";
    cudaStream_t st = (cudaStream_t)stream;
    tacl_status_t status = tacl__quant_check("cuda ", what, n_per_slice,
                                             block, bits);
    if (status == TACL_OK)
        status = tacl__quant_check_dtype("cuda ", what, dtype);
    if (status == TACL_OK)
        status = tacl__quant_check_order("cuda ", what, n_per_slice, nslices,
                                         src, dst, order);
    if (status != TACL_OK || n_per_slice == 0 || nslices == 0)
        return status;

    size_t qbytes = tacl__quant_bytes(n_per_slice, block, bits);
    for (int g = 0; g < nslices; g += kSliceGroup) {
        int cnt = nslices - g < kSliceGroup ? nslices - g : kSliceGroup;
        TensorLoader ld;
        ld.src = src;
        ld.dtype = dtype;
        ld.n = n_per_slice;
        for (int i = 0; i < kSliceGroup; i++)
            ld.map[i] = i < cnt ? order[g + i] : 0;
        uint8_t *out = (uint8_t *)dst + (size_t)g * qbytes;
        if (fast_layout(n_per_slice, block, bits, src, out)) {
            size_t nblocks = (n_per_slice + block - 1) / block;
            quant8_warp_kernel<<<grid_for(nblocks * (size_t)cnt,
                                          kThreads / 32),
                                 kThreads, 0, st>>>(ld, n_per_slice, block,
                                                    cnt, out, qbytes);
            continue;
        }
        launch_quant(ld, n_per_slice, block, bits, cnt, out, qbytes, st);
    }
    return tacl__cuda_finish_launch(what, st);
}

extern "C" tacl_status_t tacl__dequantize_cuda(const void *src_q, size_t n,
                                               uint32_t block, int bits,
                                               tacl_dtype_t dtype, void *dst,
                                               void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    tacl_status_t status = tacl__quant_check("cuda ", "dequantize", n, block,
                                             bits);
    if (status == TACL_OK)
        status = tacl__quant_check_dtype("cuda ", "dequantize", dtype);
    if (status != TACL_OK)
        return status;
    if (n == 0)
        return TACL_OK;
    if (src_q == NULL || dst == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "cuda dequantize: NULL buffer for %zu elements",
                           n);
    if (fast_layout(n, block, bits, dst, src_q))
        dequant8_vec_kernel<<<grid_for(n / kGroup, kThreads), kThreads, 0,
                              st>>>((const uint8_t *)src_q, n, block, dtype,
                                    dst);
    else
        dequant_kernel<<<grid_for(n, kThreads), kThreads, 0, st>>>(
            (const uint8_t *)src_q, n, block, bits, dtype, dst);
    return tacl__cuda_finish_launch("dequantize", st);
}

extern "C" tacl_status_t tacl__dequant_reduce_cuda(
    const void *const *srcs_q, int nsrc, size_t n, uint32_t block, int bits,
    tacl_dtype_t dtype, void *dst, int accumulate, void *stream)
{
    const char *what = "dequant_reduce";
    cudaStream_t st = (cudaStream_t)stream;
    SumLoader ld;
    tacl_status_t status = check_sum(what, srcs_q, nsrc, n, block, bits,
                                     dtype, dst, &ld);
    if (status != TACL_OK || n == 0)
        return status;
    dequant_reduce_kernel<<<grid_for(n, kThreads), kThreads, 0, st>>>(
        ld, n, dtype, dst, accumulate);
    return tacl__cuda_finish_launch(what, st);
}

extern "C" tacl_status_t tacl__dequant_reduce_quant_cuda(
    const void *const *srcs_q, int nsrc, size_t n, uint32_t block, int bits,
    void *dst_q, void *stream)
{
    const char *what = "dequant_reduce_quant";
    cudaStream_t st = (cudaStream_t)stream;
    SumLoader ld;
    tacl_status_t status = check_sum(what, srcs_q, nsrc, n, block, bits,
                                     TACL_NUM_DTYPES, dst_q, &ld);
    if (status != TACL_OK || n == 0)
        return status;
    launch_quant(ld, n, block, bits, 1, (uint8_t *)dst_q,
                 tacl__quant_bytes(n, block, bits), st);
    return tacl__cuda_finish_launch(what, st);
}
