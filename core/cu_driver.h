/*
 * The CUDA driver API, opened at run time.
 *
 * tacl links neither libcuda nor libcudart (lib/memtype.c): a build with
 * CUDA still loads on a machine without a driver.  What needs the driver
 * (tacl_mem_alloc's device memory, the cuda_ipc transport) asks
 * tacl__cu() for its entry points, found once with dlopen("libcuda.so.1")
 * and dlsym under the versioned names cuda.h maps each call to; NULL when
 * there is no driver, a symbol is missing or cuInit fails, and then
 * tacl__cu_why() says which.
 *
 * Driver calls need a current context; the one every CUDA runtime user
 * shares is a device's primary context, so tacl__cu_push(dev) retains it
 * (once per device, kept until exit) and makes it current for the caller,
 * and tacl__cu_pop() restores what was current before.
 *
 * Built without CUDA this header still compiles: tacl__cu() is NULL.
 */
#ifndef TACL_CORE_CU_DRIVER_H
#define TACL_CORE_CU_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "tacl.h"
#include "tacl_build_config.h"

#if TACL_HAVE_CUDA
#include <cuda.h>

/* One field per entry point, typed from cuda.h's own prototype. */
#define TACL__CU_FUNCS(X)                                                    \
    X(cuInit)                                                                \
    X(cuGetErrorString)                                                      \
    X(cuDeviceGet)                                                           \
    X(cuDeviceGetCount)                                                      \
    X(cuDeviceGetAttribute)                                                  \
    X(cuDevicePrimaryCtxRetain)                                              \
    X(cuDevicePrimaryCtxGetState)                                            \
    X(cuCtxPushCurrent)                                                      \
    X(cuCtxPopCurrent)                                                       \
    X(cuCtxGetDevice)                                                        \
    X(cuPointerGetAttribute)                                                 \
    X(cuPointerGetAttributes)                                                \
    X(cuMemGetAddressRange)                                                  \
    X(cuIpcGetMemHandle)                                                     \
    X(cuIpcOpenMemHandle)                                                    \
    X(cuIpcCloseMemHandle)                                                   \
    X(cuMemGetAllocationGranularity)                                         \
    X(cuMemCreate)                                                           \
    X(cuMemRelease)                                                          \
    X(cuMemRetainAllocationHandle)                                           \
    X(cuMemGetAllocationPropertiesFromHandle)                                \
    X(cuMemAddressReserve)                                                   \
    X(cuMemAddressFree)                                                      \
    X(cuMemMap)                                                              \
    X(cuMemUnmap)                                                            \
    X(cuMemSetAccess)                                                        \
    X(cuMemExportToShareableHandle)                                          \
    X(cuMemImportFromShareableHandle)                                        \
    X(cuStreamCreate)                                                        \
    X(cuStreamDestroy)                                                       \
    X(cuStreamSynchronize)                                                   \
    X(cuEventCreate)                                                         \
    X(cuEventRecord)                                                         \
    X(cuEventQuery)                                                          \
    X(cuEventDestroy)                                                        \
    X(cuMemcpyAsync)

typedef struct {
#define TACL__CU_FIELD(name) __typeof__(&name) name;
    TACL__CU_FUNCS(TACL__CU_FIELD)
#undef TACL__CU_FIELD
} tacl__cu_t;
#else
typedef struct tacl__cu tacl__cu_t;
#endif

/** The driver's entry points, or NULL when the driver cannot be used. */
const tacl__cu_t *tacl__cu(void);

/** Why tacl__cu() is NULL, in a phrase ("" when it is not). */
const char *tacl__cu_why(void);

/** The driver's text for a result code (never NULL). */
const char *tacl__cu_str(int result);

/**
 * Make device dev's primary context current for the calling thread
 * (retained on first use).  Returns the driver's result code (0 success);
 * on success the caller must call tacl__cu_pop().
 */
int tacl__cu_push(int dev);

/** Restore the context current before the matching tacl__cu_push(). */
void tacl__cu_pop(void);

/**
 * The device holding ptr, or -1 when the driver does not know ptr as
 * device memory (host memory, registered or not, freed memory, no
 * driver); then *result_p, if not NULL, is the driver's result code (0
 * when it merely is not device memory).  Device memory is cudaMalloc
 * memory, managed memory and cuMem (VMM) mappings.
 *
 * One driver query (cuPointerGetAttributes: memory type, device and
 * whether the range is mapped), which needs no current context on the
 * drivers tacl supports.  A driver that wants one anyway
 * (CUDA_ERROR_INVALID_CONTEXT) is asked again with the primary context of
 * each device whose primary context is already active current: the
 * memory's device is one of them, and no context is ever created here.
 */
int tacl__cu_device_of(const void *ptr, int *result_p);

/**
 * Whether this process has loaded the CUDA driver (libcuda.so.1), which
 * anything that made CUDA memory or a context did.  Until then no pointer
 * is device memory, and nothing here initialises CUDA to find that out.
 * After the first call, one check of the dynamic linker's count of loaded
 * objects (a lock and a load, no search) until the driver appears; then
 * one load.
 */
int tacl__cu_loaded(void);

#endif /* TACL_CORE_CU_DRIVER_H */
