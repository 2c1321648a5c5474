/*
 * What the CUDA kernel files of this folder share after their launches.
 * C++: included by the .cu files only.
 */
#ifndef TACL_KERNELS_CUDA_LAUNCH_H
#define TACL_KERNELS_CUDA_LAUNCH_H

#include <cuda_runtime.h>

extern "C" {
#include "log.h"
}

/* The launches' status, and with the default stream their completion. */
static inline tacl_status_t tacl__cuda_finish_launch(const char *what,
                                                     cudaStream_t s)
{
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess && s == NULL)
        err = cudaStreamSynchronize(s);
    if (err != cudaSuccess)
        return tacl__error(TACL_ERR_SYSTEM, COLL, "cuda %s kernel failed: "
                           "%s", what, cudaGetErrorString(err));
    return TACL_OK;
}

#endif /* TACL_KERNELS_CUDA_LAUNCH_H */
