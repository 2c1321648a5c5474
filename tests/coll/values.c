/*
 * Deterministic test values: see values.h.
 *
 * Ranges: sums of 8 ranks stay within [-16, 32], products within [-8, 8]
 * (at most three factors of 2), averages use inputs that are multiples of
 * the rank count, so int8 never overflows and bfloat16 (8 significant
 * bits) is exact.  The bitwise ops (integer types only) take values in
 * [-64, 127].  Movement inputs stay within [-125, 250] for 8-bit and
 * 16-bit float types and spread wider for the others.  The 16-bit float
 * conversions are the kernels' own (float_bits.h), so the references
 * round exactly as the library does.
 */
#include "values.h"

#include <string.h>

#include "elem.h"
#include "float_bits.h"

uint16_t val_half_from_int(int v)
{
    return tacl__float_to_half_inl((float)v);
}

uint16_t val_bf16_from_int(int v)
{
    return tacl__float_to_bf16_inl((float)v);
}

void val_store(tacl_dtype_t dt, void *buf, size_t idx, long v)
{
    tacl__elem_store_int(dt, buf, idx, v);
}

double val_load(tacl_dtype_t dt, const void *buf, size_t idx)
{
    return tacl__elem_load(dt, buf, idx);
}

size_t val_size(tacl_dtype_t dt)
{
    static const size_t sizes[TACL_NUM_DTYPES] = {1, 1, 4, 4, 8, 8,
                                                  2, 2, 4, 8};

    return (unsigned)dt < TACL_NUM_DTYPES ? sizes[dt] : 0;
}

int val_is_unsigned(tacl_dtype_t dt)
{
    return dt == TACL_UINT8 || dt == TACL_UINT32 || dt == TACL_UINT64;
}

static int is_narrow(tacl_dtype_t dt)
{
    return dt == TACL_INT8 || dt == TACL_UINT8 || dt == TACL_FLOAT16 ||
           dt == TACL_BFLOAT16;
}

long val_move(tacl_dtype_t dt, int rank, size_t idx)
{
    unsigned long mod = is_narrow(dt) ? 251 : 65521;
    long v = (long)(((unsigned long)rank * 131 + idx * 7 + 3) % mod);

    if (val_is_unsigned(dt))
        return v;
    return v - (long)(mod / 2);
}

long val_red_input(tacl_dtype_t dt, tacl_op_t op, int rank, int nranks,
                   size_t idx)
{
    int u = val_is_unsigned(dt);
    unsigned long r = (unsigned long)rank;

    switch (op) {
    case TACL_SUM:
        return (long)((r * 3 + idx) % 5) - (u ? 0 : 2);
    case TACL_PROD: {
        static const long sgn[3] = {1, 2, -1}, uns[3] = {1, 2, 1};

        return (u ? uns : sgn)[(r + idx) % 3];
    }
    case TACL_MAX:
    case TACL_MIN:
        return (long)((r * 7 + idx * 3) % 11) - (u ? 0 : 5);
    case TACL_AVG:
        return (long)nranks * (long)((r + idx) % 2);
    case TACL_BAND:
        /* Seven bits set but one, a different one per rank. */
        return 0x7f & ~(1L << ((r * 3 + idx % 11) % 7));
    case TACL_BOR:
        return 1L << ((r * 3 + (idx % 5) * 2 + idx % 11) % 7);
    case TACL_BXOR:
        /* Negative for signed types, so the sign bits take part too. */
        return (long)(((r * 13 + (idx % 11) * 5 + (idx % 5) * 3) * 29) %
                      128) - (u ? 0 : 64);
    default:
        return 0;
    }
}

long val_red_result(tacl_dtype_t dt, tacl_op_t op, int nranks, size_t idx)
{
    long acc = val_red_input(dt, op, 0, nranks, idx);

    for (int r = 1; r < nranks; r++) {
        long v = val_red_input(dt, op, r, nranks, idx);

        switch (op) {
        case TACL_SUM:
        case TACL_AVG: acc += v; break;
        case TACL_PROD: acc *= v; break;
        case TACL_MAX: acc = v > acc ? v : acc; break;
        case TACL_MIN: acc = v < acc ? v : acc; break;
        case TACL_BAND: acc &= v; break;
        case TACL_BOR: acc |= v; break;
        case TACL_BXOR: acc ^= v; break;
        default: break;
        }
    }
    return op == TACL_AVG ? acc / nranks : acc;
}

/*
 * Every input depends on the index only modulo its period (5, 3, 11 and 2
 * for the reductions, 11 and 55 for the bitwise ones, so 330; the modulus for movement), so a fill computes
 * one period and replicates it with doubling copies.
 */
#define RED_PERIOD 330

static void replicate(void *buf, size_t es, size_t count, size_t period)
{
    char *b = buf;

    for (size_t k = period; k < count; k *= 2) {
        size_t n = k < count - k ? k : count - k;

        memcpy(b + k * es, b, n * es);
    }
}

void val_fill_move(tacl_dtype_t dt, void *buf, size_t count, int rank,
                   size_t first)
{
    size_t period = is_narrow(dt) ? 251 : 65521;
    size_t head = count < period ? count : period;

    for (size_t i = 0; i < head; i++)
        val_store(dt, buf, i, val_move(dt, rank, first + i));
    replicate(buf, val_size(dt), count, period);
}

void val_fill_red(tacl_dtype_t dt, tacl_op_t op, void *buf, size_t count,
                  int rank, int nranks, size_t first)
{
    size_t head = count < RED_PERIOD ? count : RED_PERIOD;

    for (size_t i = 0; i < head; i++)
        val_store(dt, buf, i, val_red_input(dt, op, rank, nranks, first + i));
    replicate(buf, val_size(dt), count, RED_PERIOD);
}

void val_fill_red_result(tacl_dtype_t dt, tacl_op_t op, void *buf,
                         size_t count, int nranks, size_t first)
{
    size_t head = count < RED_PERIOD ? count : RED_PERIOD;

    for (size_t i = 0; i < head; i++)
        val_store(dt, buf, i, val_red_result(dt, op, nranks, first + i));
    replicate(buf, val_size(dt), count, RED_PERIOD);
}

long val_first_diff(tacl_dtype_t dt, const void *got, const void *expect,
                    size_t count)
{
    size_t es = val_size(dt);

    if (count == 0 || memcmp(got, expect, count * es) == 0)
        return -1;
    for (size_t i = 0; i < count; i++)
        if (memcmp((const char *)got + i * es, (const char *)expect + i * es,
                   es) != 0)
            return (long)i;
    return -1;
}
