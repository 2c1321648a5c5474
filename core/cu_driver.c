/*
 * The CUDA driver API opened at run time; see cu_driver.h.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "cu_driver.h"

#if TACL_HAVE_CUDA
/* The exported name of an entry point: cuda.h's macro, expanded. */
#define CU_NAME_(name) #name
#define CU_NAME(name) CU_NAME_(name)

/* Primary contexts retained so far, by device ordinal. */
#define CU_MAX_DEVICES 64

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t cu_lock = PTHREAD_MUTEX_INITIALIZER;
static tacl__cu_t cu_table;
static const tacl__cu_t *cu_ready;
static char cu_reason[160] = "not opened yet";
static CUcontext cu_primary[CU_MAX_DEVICES];

static void cu_open(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CUresult res;

    if (h == NULL) {
        snprintf(cu_reason, sizeof(cu_reason),
                 "no CUDA driver (libcuda.so.1 cannot be opened)");
        return;
    }
#define CU_LOAD(name)                                                        \
    cu_table.name = (__typeof__(cu_table.name))dlsym(h, CU_NAME(name));      \
    if (cu_table.name == NULL) {                                             \
        snprintf(cu_reason, sizeof(cu_reason),                               \
                 "the CUDA driver lacks %s; it is older than this build's "  \
                 "CUDA %d.%d", CU_NAME(name), CUDA_VERSION / 1000,           \
                 CUDA_VERSION % 1000 / 10);                                  \
        return;                                                              \
    }
    TACL__CU_FUNCS(CU_LOAD)
#undef CU_LOAD
    res = cu_table.cuInit(0);
    if (res != CUDA_SUCCESS) {
        const char *text = NULL;

        cu_table.cuGetErrorString(res, &text);
        snprintf(cu_reason, sizeof(cu_reason), "cuInit failed: %s",
                 text ? text : "unknown error");
        return;
    }
    cu_reason[0] = '\0';
    cu_ready = &cu_table;
}

const tacl__cu_t *tacl__cu(void)
{
    pthread_once(&cu_once, cu_open);
    return cu_ready;
}

const char *tacl__cu_why(void)
{
    pthread_once(&cu_once, cu_open);
    return cu_reason;
}

const char *tacl__cu_str(int result)
{
    const char *text = NULL;

    if (tacl__cu() == NULL)
        return tacl__cu_why();
    if (cu_ready->cuGetErrorString((CUresult)result, &text) != CUDA_SUCCESS ||
        text == NULL)
        return "unknown CUDA error";
    return text;
}

int tacl__cu_push(int dev)
{
    const tacl__cu_t *cu = tacl__cu();
    CUcontext ctx;
    CUresult res = CUDA_SUCCESS;

    if (cu == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= CU_MAX_DEVICES)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&cu_lock);
    ctx = cu_primary[dev];
    if (ctx == NULL) {
        CUdevice d;

        res = cu->cuDeviceGet(&d, dev);
        if (res == CUDA_SUCCESS)
            res = cu->cuDevicePrimaryCtxRetain(&ctx, d);
        if (res == CUDA_SUCCESS)
            cu_primary[dev] = ctx;
    }
    pthread_mutex_unlock(&cu_lock);
    if (res != CUDA_SUCCESS)
        return (int)res;
    return (int)cu->cuCtxPushCurrent(ctx);
}

void tacl__cu_pop(void)
{
    CUcontext ctx;

    if (tacl__cu() != NULL)
        cu_ready->cuCtxPopCurrent(&ctx);
}

int tacl__cu_device_of(const void *ptr, int *result_p)
{
    const tacl__cu_t *cu = tacl__cu();
    unsigned int type = 0;
    int dev = -1;
    CUresult res;

    if (result_p)
        *result_p = cu == NULL ? CUDA_ERROR_NOT_INITIALIZED : 0;
    if (cu == NULL || ptr == NULL)
        return -1;
    res = cu->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    (CUdeviceptr)(uintptr_t)ptr);
    if (res == CUDA_ERROR_INVALID_CONTEXT && tacl__cu_push(0) == 0) {
        /* Some drivers want a current context even for this question. */
        res = cu->cuPointerGetAttribute(&type,
                                        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                        (CUdeviceptr)(uintptr_t)ptr);
        if (res == CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE)
            res = cu->cuPointerGetAttribute(
                &dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                (CUdeviceptr)(uintptr_t)ptr);
        tacl__cu_pop();
    } else if (res == CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE) {
        res = cu->cuPointerGetAttribute(&dev,
                                        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                        (CUdeviceptr)(uintptr_t)ptr);
    }
    /* Host memory the driver does not know answers INVALID_VALUE, as
     * does freed device memory: both are "not device memory". */
    if (result_p && res != CUDA_SUCCESS && res != CUDA_ERROR_INVALID_VALUE)
        *result_p = (int)res;
    if (res != CUDA_SUCCESS || type != CU_MEMORYTYPE_DEVICE)
        return -1;
    return dev;
}

#else /* !TACL_HAVE_CUDA */

const tacl__cu_t *tacl__cu(void)
{
    return NULL;
}

const char *tacl__cu_why(void)
{
    return "tacl was built without CUDA";
}

const char *tacl__cu_str(int result)
{
    (void)result;
    return tacl__cu_why();
}

int tacl__cu_push(int dev)
{
    (void)dev;
    return 3;   /* CUDA_ERROR_NOT_INITIALIZED */
}

void tacl__cu_pop(void)
{
}

int tacl__cu_device_of(const void *ptr, int *result_p)
{
    (void)ptr;
    if (result_p)
        *result_p = 3;
    return -1;
}
#endif
