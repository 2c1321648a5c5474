/*
 * libfabric, loaded on first use (ofi.h says why it is not linked): the
 * five functions tacl calls directly, found with dlsym in the library
 * dlopen gives.  Where it cannot be loaded, each says so: fi_getinfo
 * fails with -FI_ENOSYS (the transport then names the reason), the
 * others return what means "nothing".
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "log.h"
#include "ofi.h"

/* The library's SONAME: the ABI the headers describe. */
#define OFI_LIBRARY "libfabric.so.1"

static struct {
    int (*getinfo)(uint32_t, const char *, const char *, uint64_t,
                   const struct fi_info *, struct fi_info **);
    void (*freeinfo)(struct fi_info *);
    struct fi_info *(*dupinfo)(const struct fi_info *);
    int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
    const char *(*strerror)(int);
    char why[256];
} api;

static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void api_load(void)
{
    void *lib = dlopen(OFI_LIBRARY, RTLD_NOW | RTLD_LOCAL);

    if (lib == NULL) {
        snprintf(api.why, sizeof(api.why), "%s", dlerror());
        return;
    }
    *(void **)&api.getinfo = dlsym(lib, "fi_getinfo");
    *(void **)&api.freeinfo = dlsym(lib, "fi_freeinfo");
    *(void **)&api.dupinfo = dlsym(lib, "fi_dupinfo");
    *(void **)&api.fabric = dlsym(lib, "fi_fabric");
    *(void **)&api.strerror = dlsym(lib, "fi_strerror");
    if (!api.getinfo || !api.freeinfo || !api.dupinfo || !api.fabric ||
        !api.strerror) {
        snprintf(api.why, sizeof(api.why), "%s lacks a function tacl "
                 "needs", OFI_LIBRARY);
        api.getinfo = NULL;
    }
}

/* Whether libfabric is there; its reason in why when it is not. */
static int api_ready(void)
{
    pthread_once(&api_once, api_load);
    return api.getinfo != NULL;
}

int tacl__fi_getinfo(uint32_t version, const char *node,
                      const char *service, uint64_t flags,
                      const struct fi_info *hints, struct fi_info **info)
{
    if (!api_ready()) {
        TACL_INFO(NET, "libfabric cannot be loaded: %s", api.why);
        return -FI_ENOSYS;
    }
    return api.getinfo(version, node, service, flags, hints, info);
}

void tacl__fi_freeinfo(struct fi_info *info)
{
    if (api_ready())
        api.freeinfo(info);
}

struct fi_info *tacl__fi_dupinfo(const struct fi_info *info)
{
    return api_ready() ? api.dupinfo(info) : NULL;
}

int tacl__fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
                     void *context)
{
    return api_ready() ? api.fabric(attr, fabric, context) : -FI_ENOSYS;
}

const char *tacl__fi_strerror(int errnum)
{
    return api_ready() ? api.strerror(errnum) : "libfabric is not loaded";
}

const char *tacl__ofi_strerror(ssize_t rc)
{
    return fi_strerror((int)(rc < 0 ? -rc : rc));
}
