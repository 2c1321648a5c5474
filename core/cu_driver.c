/*
 * The CUDA driver API opened at run time; see cu_driver.h.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

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

/* One query of what the driver knows of ptr. */
typedef struct {
    unsigned int type;         /* CUmemorytype, 0 when unknown */
    int device;
    unsigned char managed[8];  /* bools the driver writes */
    unsigned char mapped[8];
} cu_ptr_info_t;

static CUresult ptr_query(const tacl__cu_t *cu, const void *ptr,
                          cu_ptr_info_t *info)
{
    CUpointer_attribute attrs[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_MAPPED};
    void *data[] = {&info->type, &info->device, info->managed, info->mapped};

    memset(info, 0, sizeof(*info));
    info->device = -1;
    return cu->cuPointerGetAttributes(4, attrs, data,
                                      (CUdeviceptr)(uintptr_t)ptr);
}

/*
 * The query again with each device's active primary context current, for
 * a driver that wanted a context: never one that does not exist yet.
 */
static CUresult ptr_query_in_contexts(const tacl__cu_t *cu, const void *ptr,
                                      cu_ptr_info_t *info)
{
    CUresult res = CUDA_ERROR_INVALID_CONTEXT;
    int n = 0;

    if (cu->cuDeviceGetCount(&n) != CUDA_SUCCESS)
        return res;
    for (int d = 0; d < n && d < CU_MAX_DEVICES &&
                    res == CUDA_ERROR_INVALID_CONTEXT; d++) {
        unsigned int flags = 0;
        int active = 0;
        CUdevice dev;

        if (cu->cuDeviceGet(&dev, d) != CUDA_SUCCESS ||
            cu->cuDevicePrimaryCtxGetState(dev, &flags, &active) !=
                CUDA_SUCCESS ||
            !active || tacl__cu_push(d) != 0)
            continue;
        res = ptr_query(cu, ptr, info);
        tacl__cu_pop();
    }
    return res;
}

/* The device of a cuMem mapping whose memory type the driver left out. */
static int vmm_device(const tacl__cu_t *cu, const void *ptr)
{
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp prop;
    int device = -1;

    if (cu->cuMemRetainAllocationHandle(&h, (void *)ptr) != CUDA_SUCCESS)
        return -1;
    memset(&prop, 0, sizeof(prop));
    if (cu->cuMemGetAllocationPropertiesFromHandle(&prop, h) ==
            CUDA_SUCCESS &&
        prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE)
        device = prop.location.id;
    cu->cuMemRelease(h);
    return device;
}

int tacl__cu_device_of(const void *ptr, int *result_p)
{
    const tacl__cu_t *cu = tacl__cu();
    cu_ptr_info_t info;
    CUresult res;
    int dev = -1;

    if (result_p)
        *result_p = cu == NULL ? CUDA_ERROR_NOT_INITIALIZED : 0;
    if (cu == NULL || ptr == NULL)
        return -1;
    res = ptr_query(cu, ptr, &info);
    if (res == CUDA_ERROR_INVALID_CONTEXT)
        res = ptr_query_in_contexts(cu, ptr, &info);
    if (res == CUDA_SUCCESS) {
        if (info.type == CU_MEMORYTYPE_DEVICE || info.managed[0])
            dev = info.device;
        else if (info.type == 0 && info.mapped[0])
            dev = vmm_device(cu, ptr);
    }
    /* Host memory the driver does not know answers INVALID_VALUE on some
     * drivers, as does freed device memory: both are "not device
     * memory". */
    if (result_p && res != CUDA_SUCCESS && res != CUDA_ERROR_INVALID_VALUE)
        *result_p = (int)res;
    return dev;
}

/* Stops dl_iterate_phdr at the first object, keeping its adds count. */
static int first_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_adds) +
                    sizeof(info->dlpi_adds))
        *(unsigned long long *)arg = info->dlpi_adds;
    return 1;
}

int tacl__cu_loaded(void)
{
    static int seen;                  /* 1 once the driver was found */
    static unsigned long long looked; /* the adds count of the last look */
    unsigned long long adds = 0;
    void *h;

    if (__atomic_load_n(&seen, __ATOMIC_ACQUIRE))
        return 1;
    dl_iterate_phdr(first_object, &adds);
    if (adds != 0 && adds == __atomic_load_n(&looked, __ATOMIC_RELAXED))
        return 0; /* nothing was loaded since the driver was missing */
    h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h != NULL) {
        dlclose(h);
        __atomic_store_n(&seen, 1, __ATOMIC_RELEASE);
        return 1;
    }
    __atomic_store_n(&looked, adds, __ATOMIC_RELAXED);
    return 0;
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

int tacl__cu_loaded(void)
{
    return 0;
}
#endif
