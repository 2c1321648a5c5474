/*
 * Memory type detection.  When tacl is built with CUDA, the CUDA runtime
 * is opened at run time (so the library still loads on machines without
 * it) and asked whether a pointer is device memory; any failure, such as a
 * missing driver, means host memory.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>

#include "comm.h"
#include "tacl_build_config.h"

#if TACL_HAVE_CUDA
/* The leading fields of cudaPointerAttributes (CUDA 11 and later). */
typedef struct {
    int type;          /* 2: device, 3: managed */
    int device;
    void *device_pointer;
    void *host_pointer;
    char reserved[64];
} cuda_ptr_attr_t;

typedef int (*cuda_ptr_attr_fn)(cuda_ptr_attr_t *, const void *);

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static cuda_ptr_attr_fn cuda_get_attr;

static void cuda_open(void)
{
    void *h = dlopen("libcudart.so", RTLD_NOW | RTLD_LOCAL);

    if (h == NULL)
        h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        h = dlopen("libcudart.so.12", RTLD_NOW | RTLD_LOCAL);
    if (h != NULL)
        cuda_get_attr = (cuda_ptr_attr_fn)dlsym(h, "cudaPointerGetAttributes");
}
#endif

tacl_memtype_t tacl__memtype_detect(const void *ptr)
{
#if TACL_HAVE_CUDA
    cuda_ptr_attr_t attr;

    pthread_once(&cuda_once, cuda_open);
    if (ptr != NULL && cuda_get_attr != NULL &&
        cuda_get_attr(&attr, ptr) == 0 && (attr.type == 2))
        return TACL_MEM_CUDA;
#endif
    (void)ptr;
    return TACL_MEM_HOST;
}
