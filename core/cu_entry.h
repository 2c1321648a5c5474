/*
 * A CUDA driver entry point found through the CUDA runtime, so that
 * nothing links libcuda: the executor's stream joins and
 * tools/gpu_probe.cu, which nvcc builds alone, share it.  NULL when the
 * driver lacks the call (the runtime's error is cleared).
 */
#ifndef TACL_CORE_CU_ENTRY_H
#define TACL_CORE_CU_ENTRY_H

#include <cuda_runtime_api.h>

static inline void *tacl__cu_entry(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;

#if CUDART_VERSION >= 12050
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        fn = NULL;
#elif CUDART_VERSION >= 12000
    if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        fn = NULL;
#else
    (void)q;
    if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault) != cudaSuccess)
        fn = NULL;
#endif
    (void)cudaGetLastError();
    return fn;
}

#endif /* TACL_CORE_CU_ENTRY_H */
