/*
 * Which instruction-set path the CPU reduction kernels take.  On x86 with
 * AVX2 and F16C the float16 and bfloat16 loops use a faster path chosen at
 * run time; the portable loops remain for other CPUs.  Both must give the
 * same bits, and the tests check each by forcing the portable one.
 */
#ifndef TACL_KERNELS_CPU_REDUCE_ISA_H
#define TACL_KERNELS_CPU_REDUCE_ISA_H

/** Whether the AVX2/F16C path runs the 16-bit float loops now. */
int tacl__reduce_cpu_simd16(void);

/** Make the 16-bit float loops portable (nonzero) or automatic (zero). */
void tacl__reduce_cpu_force_portable(int portable);

#endif /* TACL_KERNELS_CPU_REDUCE_ISA_H */
