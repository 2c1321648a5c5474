/*
 * Non-temporal copy (see copy.h).  The loop moves 64 bytes, one cache
 * line, per iteration with unaligned loads and 16-byte streaming stores
 * (SSE2, part of every x86-64 CPU, so no run-time dispatch is needed); the
 * head up to the first 16-byte boundary of dst and the tail shorter than a
 * line go through memcpy.  The closing sfence makes the streaming stores
 * visible before anything the caller writes afterwards, such as the flag
 * that tells a peer the data is there.
 */
#include <stdint.h>
#include <string.h>

#include "copy.h"

#if defined(__x86_64__)
#include <emmintrin.h>

void tacl__copy_stream(void *dst, const void *src, size_t bytes)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;

    if (bytes < 256) {
        memcpy(dst, src, bytes);
        return;
    }
    memcpy(d, s, head);
    d += head;
    s += head;
    bytes -= head;
    for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));

        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)(d + 16), b);
        _mm_stream_si128((__m128i *)(d + 32), c);
        _mm_stream_si128((__m128i *)(d + 48), e);
    }
    _mm_sfence();
    memcpy(d, s, bytes);
}
#else
void tacl__copy_stream(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
}
#endif
