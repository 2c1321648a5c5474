/*
 * CUDA reduction kernels: dst[i] = a[i] op b[i] and dst[i] = src[i] / d on
 * device memory, for every dtype of tacl.h.
 *
 * One grid-stride kernel template per shape (binary op, division),
 * instantiated with a small functor per (dtype, op).  The element rules are
 * those of the CPU kernels and share their code: the float16 / bfloat16
 * conversions, the NaN-propagating MAX and MIN and the round-to-odd
 * division come from kernels/cpu/float_bits.h, compiled here for the
 * device, so the GPU gives the CPU's bits.  Integer SUM and PROD wrap in
 * the unsigned type of the same width; the bitwise ops exist for the
 * integer types only.
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
#include "float_bits.h"
#include "reduce_cuda.h"

namespace {

const int kThreads = 256;
const unsigned kMaxBlocks = 8192;

/* Enough blocks to cover count once, capped; the loop strides the rest. */
unsigned grid_for(size_t count)
{
    size_t blocks = (count + kThreads - 1) / kThreads;
    return blocks < kMaxBlocks ? (unsigned)blocks : kMaxBlocks;
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

/* dst may be a or b: each element is read before it is written. */
template <typename T, typename F>
__global__ void reduce_kernel(T *dst, const T *a, const T *b, size_t count,
                              F f)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
         i < count; i += stride)
        dst[i] = f(a[i], b[i]);
}

template <typename T, template <typename, int> class F, int OP>
void launch_op(void *dst, const void *a, const void *b, size_t count,
               cudaStream_t s)
{
    reduce_kernel<<<grid_for(count), kThreads, 0, s>>>(
        (T *)dst, (const T *)a, (const T *)b, count, F<T, OP>());
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
__global__ void div_kernel(T *dst, const T *src, size_t count, F f)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
         i < count; i += stride)
        dst[i] = f(src[i]);
}

template <typename T, typename F>
void launch_div(void *dst, const void *src, size_t count, F f,
                cudaStream_t s)
{
    div_kernel<<<grid_for(count), kThreads, 0, s>>>(
        (T *)dst, (const T *)src, count, f);
}

/* The launch's status, and with the default stream its completion. */
tacl_status_t finish_launch(const char *what, cudaStream_t s)
{
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess && s == NULL)
        err = cudaStreamSynchronize(s);
    if (err != cudaSuccess)
        return tacl__error(TACL_ERR_SYSTEM, COLL, "cuda %s kernel failed: "
                           "%s", what, cudaGetErrorString(err));
    return TACL_OK;
}

} /* namespace */

extern "C" tacl_status_t tacl__reduce_cuda(void *dst, const void *a,
                                           const void *b, size_t count,
                                           tacl_dtype_t dtype, tacl_op_t op,
                                           void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;

    if ((unsigned)dtype >= TACL_NUM_DTYPES)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "cuda reduce: invalid dtype %d", (int)dtype);
    if (op == TACL_AVG)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "cuda reduce: avg is not an element op; reduce "
                           "with sum and finish with a division");
    if ((unsigned)op >= TACL_NUM_OPS)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "cuda reduce: invalid op %d", (int)op);
    if (tacl__op_is_bitwise(op) && !tacl__dtype_is_integer(dtype))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "cuda reduce: op %s takes integer dtypes only, "
                           "not %s", tacl_op_name(op),
                           tacl_dtype_name(dtype));
    if (count == 0)
        return TACL_OK;
    if (dst == NULL || a == NULL || b == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "cuda reduce: NULL buffer for %zu elements",
                           count);

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
    return finish_launch("reduce", s);
}

extern "C" tacl_status_t tacl__div_cuda(void *dst, const void *src,
                                        size_t count, tacl_dtype_t dtype,
                                        uint32_t divisor, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    double dd = (double)divisor;

    if ((unsigned)dtype >= TACL_NUM_DTYPES)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "cuda div: invalid dtype %d", (int)dtype);
    if (divisor == 0)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "cuda div: division by zero");
    if (count == 0)
        return TACL_OK;
    if (dst == NULL || src == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "cuda div: NULL buffer for %zu elements", count);

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
    return finish_launch("div", s);
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
