/*
 * CRC32C (Castagnoli, polynomial 0x1EDC6F41, reflected), the checksum of
 * iSCSI, ext4 and SSE4.2's crc32 instruction: what the snapshot store
 * keeps per chunk to catch a flipped byte before it is restored.
 */
#ifndef TACL_KERNELS_CPU_CRC32C_H
#define TACL_KERNELS_CPU_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/**
 * Extend crc (0 to start) over bytes [p, p + len): the standard CRC32C,
 * so tacl__crc32c(0, "123456789", 9) == 0xE3069283.  Uses the SSE4.2
 * instruction when the CPU has it, a table otherwise; both give the same
 * value.
 */
uint32_t tacl__crc32c(uint32_t crc, const void *p, size_t len);

/**
 * Copy [src, src + len) to dst and return tacl__crc32c(crc, dst, len),
 * in one pass: each word summed is the word stored.  The buffers must not
 * overlap; any alignment works.  Same paths (and values) as tacl__crc32c.
 */
uint32_t tacl__crc32c_copy(uint32_t crc, void *dst, const void *src,
                           size_t len);

/** Make the CRC take the table path (nonzero) or choose by CPU (zero). */
void tacl__crc32c_force_table(int table);

/** Whether the SSE4.2 path runs now. */
int tacl__crc32c_hw(void);

#endif /* TACL_KERNELS_CPU_CRC32C_H */
