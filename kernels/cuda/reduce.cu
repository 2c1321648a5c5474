/*
 * CUDA reduction kernels: dst[i] = a[i] op b[i] and dst[i] = src[i] / d on
 * device memory, for every dtype of tacl.h, and a device copy.
 *
 * One element-wise kernel template (map_kernel) serves the binary ops,
 * the division and the copy, instantiated with a small functor per
 * (dtype, op).  It moves 16 bytes per load and store (uint4) when every
 * buffer of the call sits at the same offset modulo 16: the elements
 * before the first 16-byte boundary (the head) and after the last one
 * (the tail) are done one by one, the rest as vectors, kUnroll vectors
 * per thread per iteration, all loaded before any is stored so that
 * several loads are in flight per thread.  Buffers at different offsets
 * modulo 16 take the element-wise loop (still kUnroll elements per thread
 * per iteration).  The grid is sized to the device: enough blocks to fill
 * every multiprocessor (the count is asked once per device and cached),
 * fewer for small inputs, and the threads stride over the rest.
 *
 * The element rules are those of the CPU kernels and share their code:
 * the float16 / bfloat16 conversions, the NaN-propagating MAX and MIN and
 * the round-to-odd division come from kernels/cpu/float_bits.h, compiled
 * here for the device, so the GPU gives the CPU's bits.  Integer SUM and
 * PROD wrap in the unsigned type of the same width; the bitwise ops exist
 * for the integer types only (other types get TACL_ERR_INVALID_ARG, as on
 * the CPU).
 *
 * The host wrappers validate their arguments like tacl__reduce_cpu, launch
 * on the given stream, and turn a failing CUDA call into TACL_ERR_SYSTEM
 * with the CUDA error string.  A NULL stream means the default stream, and
 * then the wrapper waits for the kernel before it returns.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <type_traits>

extern "C" {
#include "dtype.h"
#include "log.h"
}
#include "cuda_launch.h"
#include "float_bits.h"
#include "reduce_checks.h"
#include "reduce_cuda.h"

namespace {

const int kThreads = 256;
/* Vectors (or elements) per thread per loop iteration. */
const int kUnroll = 4;
/* Resident blocks of kThreads per multiprocessor the grid aims at. */
const int kBlocksPerSm = 8;
/* Devices whose multiprocessor count is cached. */
const int kMaxDevices = 64;
/* When the count cannot be asked: about an A100's or H100's. */
const int kDefaultSms = 132;

/* Multiprocessors of the current device, asked once per device. */
int sm_count(void)
{
    static int cached[kMaxDevices];
    int dev = 0, n = 0;

    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 ||
        dev >= kMaxDevices) {
        (void)cudaGetLastError();
        return kDefaultSms;
    }
    n = __atomic_load_n(&cached[dev], __ATOMIC_RELAXED);
    if (n > 0)
        return n;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) !=
            cudaSuccess ||
        n <= 0) {
        (void)cudaGetLastError();
        return kDefaultSms;
    }
    __atomic_store_n(&cached[dev], n, __ATOMIC_RELAXED);
    return n;
}

/* Blocks for items units of work, kUnroll per thread: fill the device. */
unsigned grid_for(size_t items)
{
    size_t per_block = (size_t)kThreads * kUnroll;
    size_t blocks = (items + per_block - 1) / per_block;
    size_t cap = (size_t)sm_count() * kBlocksPerSm;

    if (blocks < 1)
        blocks = 1;
    return (unsigned)(blocks < cap ? blocks : cap);
}

template <typename T, int OP> struct IntOp {
    __device__ T operator()(T x, T y) const
    {
        typedef typename std::make_unsigned<T>::type U;
        if (OP == TACL_SUM)
            return (T)(U)((U)x + (U)y);
        if (OP == TACL_PROD)
            return (T)(U)((U)x * (U)y);
        if (OP == TACL_MAX)
            return x > y ? x : y;
        if (OP == TACL_BAND)
            return (T)(x & y);
        if (OP == TACL_BOR)
            return (T)(x | y);
        if (OP == TACL_BXOR)
            return (T)(x ^ y);
        return x < y ? x : y;
    }
};

template <typename T, int OP> __device__ T float_op(T x, T y)
{
    if (OP == TACL_SUM)
        return x + y;
    if (OP == TACL_PROD)
        return x * y;
    if (OP == TACL_MAX)
        return TACL_FMAX(x, y);
    return TACL_FMIN(x, y);
}

template <typename T, int OP> struct FloatOp {
    __device__ T operator()(T x, T y) const { return float_op<T, OP>(x, y); }
};

template <typename T, int OP> struct HalfOp {
    __device__ uint16_t operator()(uint16_t x, uint16_t y) const
    {
        float r = float_op<float, OP>(tacl__half_to_float_inl(x),
                                      tacl__half_to_float_inl(y));
        return tacl__float_to_half_inl(r);
    }
};

template <typename T, int OP> struct Bf16Op {
    __device__ uint16_t operator()(uint16_t x, uint16_t y) const
    {
        float r = float_op<float, OP>(tacl__bf16_to_float_inl(x),
                                      tacl__bf16_to_float_inl(y));
        return tacl__float_to_bf16_inl(r);
    }
};

/*
 * A functor of one or two operands applied to elements of type T.  Pack
 * holds the elements of one 16-byte vector.
 */
template <typename T> union Pack {
    uint4 u;
    T e[16 / sizeof(T)];
};

template <int NIN, typename T, typename F>
__device__ __forceinline__ T apply(const F &f, T x, T y)
{
    if constexpr (NIN == 2)
        return f(x, y);
    else
        return f(x);
}

/*
 * dst[i] = f(a[i], b[i]) (or f(a[i])) with 16-byte vectors: elements
 * [0, head) and [head + nvec * N, count) one by one, the nvec vectors
 * between as uint4.  dst may be a or b: each thread reads its elements
 * before it writes them, and no two threads share one.
 */
template <typename T, int NIN, typename F>
__global__ void __launch_bounds__(kThreads)
map_vec_kernel(T *dst, const T *a, const T *b, size_t head, size_t nvec,
               size_t count, F f)
{
    const int N = 16 / sizeof(T);
    size_t gid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t nthreads = (size_t)gridDim.x * blockDim.x;
    size_t tail = head + nvec * N;

    if (gid < head)
        dst[gid] = apply<NIN>(f, a[gid], NIN == 2 ? b[gid] : a[gid]);
    if (gid < count - tail) {
        size_t i = tail + gid;
        dst[i] = apply<NIN>(f, a[i], NIN == 2 ? b[i] : a[i]);
    }
    const uint4 *va = (const uint4 *)(a + head);
    const uint4 *vb = (const uint4 *)(b + head);
    uint4 *vd = (uint4 *)(dst + head);
    for (size_t base = gid; base < nvec; base += nthreads * kUnroll) {
        Pack<T> x[kUnroll], y[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; k++) {
            size_t v = base + (size_t)k * nthreads;
            if (v < nvec) {
                x[k].u = va[v];
                if constexpr (NIN == 2)
                    y[k].u = vb[v];
            }
        }
#pragma unroll
        for (int k = 0; k < kUnroll; k++) {
            size_t v = base + (size_t)k * nthreads;
            if (v < nvec) {
                Pack<T> r;
#pragma unroll
                for (int j = 0; j < N; j++)
                    r.e[j] = apply<NIN>(f, x[k].e[j],
                                        NIN == 2 ? y[k].e[j] : x[k].e[j]);
                vd[v] = r.u;
            }
        }
    }
}

/* The same element by element, for buffers at different 16-byte offsets. */
template <typename T, int NIN, typename F>
__global__ void __launch_bounds__(kThreads)
map_kernel(T *dst, const T *a, const T *b, size_t count, F f)
{
    size_t gid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t nthreads = (size_t)gridDim.x * blockDim.x;

    for (size_t base = gid; base < count; base += nthreads * kUnroll) {
        T x[kUnroll], y[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; k++) {
            size_t i = base + (size_t)k * nthreads;
            if (i < count) {
                x[k] = a[i];
                y[k] = NIN == 2 ? b[i] : x[k];
            }
        }
#pragma unroll
        for (int k = 0; k < kUnroll; k++) {
            size_t i = base + (size_t)k * nthreads;
            if (i < count)
                dst[i] = apply<NIN>(f, x[k], y[k]);
        }
    }
}

/*
 * Launch dst = f(a, b) (NIN 2) or f(a) (NIN 1; b is ignored) over count
 * elements: the vector kernel when the buffers share their offset modulo
 * 16, the element kernel otherwise.
 */
template <typename T, int NIN, typename F>
void launch_map(void *dst, const void *a, const void *b, size_t count,
                const F &f, cudaStream_t s)
{
    const size_t N = 16 / sizeof(T);
    uintptr_t off = (uintptr_t)dst & 15;
    int same = ((uintptr_t)a & 15) == off &&
               (NIN == 1 || ((uintptr_t)b & 15) == off);

    if (NIN == 1)
        b = a;
    if (same && off % sizeof(T) == 0) {
        size_t head = ((16 - off) & 15) / sizeof(T);
        if (head > count)
            head = count;
        size_t nvec = (count - head) / N;
        map_vec_kernel<T, NIN><<<grid_for(nvec), kThreads, 0, s>>>(
            (T *)dst, (const T *)a, (const T *)b, head, nvec, count, f);
        return;
    }
    map_kernel<T, NIN><<<grid_for(count), kThreads, 0, s>>>(
        (T *)dst, (const T *)a, (const T *)b, count, f);
}

template <typename T, template <typename, int> class F, int OP>
void launch_op(void *dst, const void *a, const void *b, size_t count,
               cudaStream_t s)
{
    launch_map<T, 2>(dst, a, b, count, F<T, OP>(), s);
}

/* kBitwise: the type has the bitwise ops (the integer types). */
template <typename T, template <typename, int> class F, bool kBitwise>
void launch_reduce(void *dst, const void *a, const void *b, size_t count,
                   tacl_op_t op, cudaStream_t s)
{
    switch (op) {
    case TACL_SUM:
        launch_op<T, F, TACL_SUM>(dst, a, b, count, s);
        break;
    case TACL_PROD:
        launch_op<T, F, TACL_PROD>(dst, a, b, count, s);
        break;
    case TACL_MAX:
        launch_op<T, F, TACL_MAX>(dst, a, b, count, s);
        break;
    case TACL_BAND:
    case TACL_BOR:
    case TACL_BXOR:
        /* Validated: only the integer types get here with these. */
        if constexpr (kBitwise) {
            if (op == TACL_BAND)
                launch_op<T, F, TACL_BAND>(dst, a, b, count, s);
            else if (op == TACL_BOR)
                launch_op<T, F, TACL_BOR>(dst, a, b, count, s);
            else
                launch_op<T, F, TACL_BXOR>(dst, a, b, count, s);
        }
        break;
    default:
        launch_op<T, F, TACL_MIN>(dst, a, b, count, s);
        break;
    }
}

/* Division functors; WT is the wider type integer division runs in. */
template <typename T, typename WT> struct IntDiv {
    WT d;
    __device__ T operator()(T x) const { return (T)((WT)x / d); }
};

struct F64Div {
    double d;
    __device__ double operator()(double x) const { return x / d; }
};

struct F32Div {
    double d;
    __device__ float operator()(float x) const
    {
        /* A divisor up to 2^24 is exact in float: one IEEE division. */
        if (d <= 16777216.0)
            return x / (float)d;
        return (float)tacl__div_round_odd((double)x, d);
    }
};

struct HalfDiv {
    double d;
    __device__ uint16_t operator()(uint16_t x) const
    {
        double q = tacl__div_round_odd((double)tacl__half_to_float_inl(x), d);
        return tacl__float_to_half_inl(tacl__double_to_float_odd(q));
    }
};

struct Bf16Div {
    double d;
    __device__ uint16_t operator()(uint16_t x) const
    {
        double q = tacl__div_round_odd((double)tacl__bf16_to_float_inl(x), d);
        return tacl__float_to_bf16_inl(tacl__double_to_float_odd(q));
    }
};

template <typename T, typename F>
void launch_div(void *dst, const void *src, size_t count, F f,
                cudaStream_t s)
{
    launch_map<T, 1>(dst, src, src, count, f, s);
}

/* The copy: any element type, moved as is. */
struct Ident {
    template <typename T> __device__ T operator()(T x) const { return x; }
};

/*
 * Whether p is aligned to its elements of size bytes.  A misaligned access
 * is a sticky error that ends the process's CUDA context, so such a buffer
 * is refused before the launch rather than faulted on.
 */
int aligned(const void *p, size_t size)
{
    return ((uintptr_t)p & (size - 1)) == 0;
}

} /* namespace */

extern "C" tacl_status_t tacl__reduce_cuda(void *dst, const void *a,
                                           const void *b, size_t count,
                                           tacl_dtype_t dtype, tacl_op_t op,
                                           void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;

    tacl_status_t status = tacl__reduce_check("cuda reduce", dst, a, b,
                                              count, dtype, op);
    if (status != TACL_OK || count == 0)
        return status;
    if (!aligned(dst, tacl_dtype_size(dtype)) ||
        !aligned(a, tacl_dtype_size(dtype)) ||
        !aligned(b, tacl_dtype_size(dtype)))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "cuda reduce: a buffer is not aligned to its "
                           "%zu-byte %s elements", tacl_dtype_size(dtype),
                           tacl_dtype_name(dtype));

    switch (dtype) {
    case TACL_INT8:
        launch_reduce<int8_t, IntOp, true>(dst, a, b, count, op, s);
        break;
    case TACL_UINT8:
        launch_reduce<uint8_t, IntOp, true>(dst, a, b, count, op, s);
        break;
    case TACL_INT32:
        launch_reduce<int32_t, IntOp, true>(dst, a, b, count, op, s);
        break;
    case TACL_UINT32:
        launch_reduce<uint32_t, IntOp, true>(dst, a, b, count, op, s);
        break;
    case TACL_INT64:
        launch_reduce<int64_t, IntOp, true>(dst, a, b, count, op, s);
        break;
    case TACL_UINT64:
        launch_reduce<uint64_t, IntOp, true>(dst, a, b, count, op, s);
        break;
    case TACL_FLOAT16:
        launch_reduce<uint16_t, HalfOp, false>(dst, a, b, count, op, s);
        break;
    case TACL_BFLOAT16:
        launch_reduce<uint16_t, Bf16Op, false>(dst, a, b, count, op, s);
        break;
    case TACL_FLOAT32:
        launch_reduce<float, FloatOp, false>(dst, a, b, count, op, s);
        break;
    default:
        launch_reduce<double, FloatOp, false>(dst, a, b, count, op, s);
        break;
    }
    return tacl__cuda_finish_launch("reduce", s);
}

extern "C" tacl_status_t tacl__div_cuda(void *dst, const void *src,
                                        size_t count, tacl_dtype_t dtype,
                                        uint32_t divisor, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    double dd = (double)divisor;

    tacl_status_t status = tacl__div_check("cuda div", dst, src, count,
                                           dtype, divisor);
    if (status != TACL_OK || count == 0)
        return status;
    if (!aligned(dst, tacl_dtype_size(dtype)) ||
        !aligned(src, tacl_dtype_size(dtype)))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "cuda div: a buffer is not aligned to its "
                           "%zu-byte %s elements", tacl_dtype_size(dtype),
                           tacl_dtype_name(dtype));

    switch (dtype) {
    case TACL_INT8:
        launch_div<int8_t>(dst, src, count, IntDiv<int8_t, int64_t>{
                                                (int64_t)divisor}, s);
        break;
    case TACL_UINT8:
        launch_div<uint8_t>(dst, src, count, IntDiv<uint8_t, uint32_t>{
                                                 divisor}, s);
        break;
    case TACL_INT32:
        launch_div<int32_t>(dst, src, count, IntDiv<int32_t, int64_t>{
                                                 (int64_t)divisor}, s);
        break;
    case TACL_UINT32:
        launch_div<uint32_t>(dst, src, count, IntDiv<uint32_t, uint32_t>{
                                                  divisor}, s);
        break;
    case TACL_INT64:
        launch_div<int64_t>(dst, src, count, IntDiv<int64_t, int64_t>{
                                                 (int64_t)divisor}, s);
        break;
    case TACL_UINT64:
        launch_div<uint64_t>(dst, src, count, IntDiv<uint64_t, uint64_t>{
                                                  divisor}, s);
        break;
    case TACL_FLOAT16:
        launch_div<uint16_t>(dst, src, count, HalfDiv{dd}, s);
        break;
    case TACL_BFLOAT16:
        launch_div<uint16_t>(dst, src, count, Bf16Div{dd}, s);
        break;
    case TACL_FLOAT32:
        launch_div<float>(dst, src, count, F32Div{dd}, s);
        break;
    default:
        launch_div<double>(dst, src, count, F64Div{dd}, s);
        break;
    }
    return tacl__cuda_finish_launch("div", s);
}

extern "C" tacl_status_t tacl__copy_cuda(void *dst, const void *src,
                                         size_t bytes, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    uintptr_t d = (uintptr_t)dst, r = (uintptr_t)src;

    if (bytes == 0)
        return TACL_OK;
    if (dst == NULL || src == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "cuda copy: NULL buffer for %zu bytes", bytes);
    if ((d < r && r - d < bytes) || (r <= d && d - r < bytes)) {
        if (d == r)
            return TACL_OK;
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "cuda copy: the %zu-byte buffers overlap", bytes);
    }
    /* Vectors when the two share their offset modulo 16; else words when
     * both are 4-byte aligned, else bytes. */
    if (((d ^ r) & 15) == 0 || ((d | r | bytes) & 3) != 0)
        launch_map<uint8_t, 1>(dst, src, src, bytes, Ident(), s);
    else
        launch_map<uint32_t, 1>(dst, src, src, bytes / 4, Ident(), s);
    return tacl__cuda_finish_launch("copy", s);
}

extern "C" int tacl__cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        /* No driver or no device: clear the error for later callers. */
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}
