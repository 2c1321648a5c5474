/*
 * The size of a block-quantized buffer (ZeRO++ qwZ/qgZ layout): for n
 * elements in blocks of `block` elements at `bits` bits, ceil(n / block)
 * float32 scales followed by the packed payload (int8: n bytes; int4:
 * ceil(n / 2) bytes).  Schedules size their buffers with it and the
 * kernels lay data out by it, so it lives here, below both.
 */
#ifndef TACL_CORE_QUANT_LAYOUT_H
#define TACL_CORE_QUANT_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

/** Bytes of the quantized buffer; 0 for n = 0 or invalid bits/block. */
static inline size_t tacl__quant_bytes(size_t n, uint32_t block, int bits)
{
    size_t nblocks, payload;

    if ((bits != 8 && bits != 4) || block == 0 || n > SIZE_MAX / 8)
        return 0;
    nblocks = n / block + (n % block != 0);
    payload = bits == 8 ? n : n / 2 + (n & 1);
    return nblocks * sizeof(float) + payload;
}

#endif /* TACL_CORE_QUANT_LAYOUT_H */
