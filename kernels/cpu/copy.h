/*
 * Local copies that bypass the cache.  A collective that writes more than
 * the last-level cache holds gains nothing from keeping what it writes in
 * cache: ordinary stores read every destination line before writing it
 * and evict the lines that peers are about to read.  Non-temporal stores
 * write whole lines straight to memory instead.
 */
#ifndef TACL_KERNELS_CPU_COPY_H
#define TACL_KERNELS_CPU_COPY_H

#include <stddef.h>

/**
 * memcpy(dst, src, bytes) with non-temporal stores where the CPU has them
 * (x86-64), a plain memcpy elsewhere.  The buffers must not overlap; any
 * alignment works.  The stores are ordered (fenced) before it returns, so
 * another process may read dst once it learns the copy is done.
 */
void tacl__copy_stream(void *dst, const void *src, size_t bytes);

#endif /* TACL_KERNELS_CPU_COPY_H */
