/*
 * The choice of the network transport (netsel.h).  DESIGN.md,
 * "Transports": ucx (InfiniBand, RoCE, TCP) and ofi (libfabric: AWS EFA,
 * and its tcp provider) serve other nodes; a context uses one of them.
 *
 * TACL_NET=auto prefers ofi where an EFA device is present, since EFA
 * is reached only through libfabric; elsewhere ucx, which is what tacl
 * has been measured on; and ofi over libfabric's tcp provider where ucx
 * is not built in.  Whether EFA is present is read from sysfs (a device
 * of /sys/class/infiniband bound to the efa driver), so a process that
 * ends up on ucx never loads libfabric's providers.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "netsel.h"
#ifdef TACL_HAVE_OFI
#include "ofi/ofi.h"
#endif

/* Whether an RDMA device here is bound to the efa driver. */
static int efa_present(void)
{
    DIR *dir = opendir("/sys/class/infiniband");
    struct dirent *ent;
    int found = 0;

    if (dir == NULL)
        return 0;
    while (!found && (ent = readdir(dir)) != NULL) {
        char path[PATH_MAX], target[PATH_MAX];
        ssize_t n;

        if (ent->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/driver",
                 ent->d_name);
        n = readlink(path, target, sizeof(target) - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        found = strcmp(strrchr(target, '/') ? strrchr(target, '/') + 1
                                            : target, "efa") == 0;
    }
    closedir(dir);
    return found;
}

const char *tacl__net_name(tacl__net_t net)
{
    return net == TACL__NET_UCX ? "ucx" : net == TACL__NET_OFI ? "ofi"
                                                                : "none";
}

const tacl__transport_ops_t *tacl__net_ops(tacl__net_t net)
{
    switch (net) {
#ifdef TACL_HAVE_UCX
    case TACL__NET_UCX:
        return &tacl__tl_ucx_ops;
#endif
#ifdef TACL_HAVE_OFI
    case TACL__NET_OFI:
        return &tacl__tl_ofi_ops;
#endif
    default:
        return NULL;
    }
}

static int built(tacl__net_t net)
{
    return tacl__net_ops(net) != NULL;
}

tacl_status_t tacl__net_choose(tacl__net_choice_t *choice_p)
{
    /* TACL_NET's words (config.c): auto, ucx, ofi, none. */
    static const tacl__net_t named[] = {TACL__NET_NONE, TACL__NET_UCX,
                                        TACL__NET_OFI, TACL__NET_NONE};
    int word = tacl__config_word(TACL_CFG_NET);
    tacl__net_choice_t c = {TACL__NET_NONE, ""};

    if (word > 0) {
        c.net = named[word];
        if (c.net != TACL__NET_NONE && !built(c.net))
            return tacl__error(TACL_ERR_UNSUPPORTED, INIT, "TACL_NET=%s, "
                               "but this tacl was built without %s; set "
                               "TACL_NET=auto or rebuild with it",
                               tacl__net_name(c.net),
                               c.net == TACL__NET_UCX ? "UCX" : "libfabric");
        snprintf(c.why, sizeof(c.why), "TACL_NET=%s", tacl__net_name(c.net));
    } else if (built(TACL__NET_OFI) && efa_present()) {
        c.net = TACL__NET_OFI;
        snprintf(c.why, sizeof(c.why), "TACL_NET=auto and an EFA device is "
                 "present");
    } else if (built(TACL__NET_OFI) &&
               tacl__config_is_set(TACL_CFG_OFI_PROVIDER)) {
        c.net = TACL__NET_OFI;
        snprintf(c.why, sizeof(c.why), "TACL_NET=auto and "
                 "TACL_OFI_PROVIDER is set");
    } else if (built(TACL__NET_UCX)) {
        c.net = TACL__NET_UCX;
        snprintf(c.why, sizeof(c.why), "TACL_NET=auto, no EFA device: UCX");
    } else if (built(TACL__NET_OFI)) {
        c.net = TACL__NET_OFI;
        snprintf(c.why, sizeof(c.why), "TACL_NET=auto, no EFA device and "
                 "no UCX in this build: libfabric");
    } else {
        snprintf(c.why, sizeof(c.why), "no network transport in this "
                 "build: one node only");
    }
    *choice_p = c;
    return TACL_OK;
}

void tacl__net_describe(const tacl__net_choice_t *choice, char *buf,
                        size_t len)
{
    switch (choice->net) {
#ifdef TACL_HAVE_OFI
    case TACL__NET_OFI: {
        tacl__ofi_choice_t c;
        char rails[384];

        if (tacl__ofi_choose(NULL, &c) != TACL_OK) {
            snprintf(buf, len, "refused: %s", tacl__last_error());
            return;
        }
        tacl__ofi_describe_rails(rails, sizeof(rails));
        snprintf(buf, len, "provider %s, fabric %s, domain %s (%s); %s; "
                 "%s", c.provider, c.fabric, c.domain, c.why, rails,
                 c.memory);
        return;
    }
#endif
    case TACL__NET_UCX:
        snprintf(buf, len, "UCX's choice of devices (UCX_TLS, "
                 "UCX_NET_DEVICES)");
        return;
    default:
        snprintf(buf, len, "none");
        return;
    }
}
