/*
 * The ofi transport's floor: choosing a libfabric provider.  DESIGN.md,
 * "Transports": ofi serves other nodes where libfabric is the way to the
 * network (AWS EFA), and its tcp provider lets it be tested anywhere.
 *
 * tacl needs of a provider: an FI_EP_RDM endpoint (reliable datagrams,
 * no connections to manage), FI_TAGGED messages (tacl matches by source
 * and tag, the source folded into the tag), FI_MSG for its small control
 * messages (ofi_peer.c), and FI_ORDER_SAS, so that two messages of one
 * source and tag match in the order they were sent.  It accepts the
 * memory-registration modes EFA asks for (FI_MR_LOCAL, FI_MR_VIRT_ADDR,
 * FI_MR_ALLOCATED, FI_MR_PROV_KEY) and the FI_CONTEXT mode (every
 * request starts with its fi_context).
 *
 * TACL_OFI_PROVIDER names the provider (libfabric's name, such as efa,
 * tcp or shm; a utility provider layered on it, such as ofi_rxm for tcp,
 * is chosen by libfabric); auto takes efa when present, else tcp.  A
 * provider that offers none of what tacl needs is refused with a message
 * naming the first thing it lacks, found by asking again without hints.
 * FI_PROVIDER and the providers' own variables (FI_TCP_IFACE,
 * FI_EFA_*) are libfabric's and are read by it as they are, with a
 * few defaults changed (see provider_defaults).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"
#include "config.h"
#include "cu_driver.h"
#include "log.h"
#include "ofi.h"

/* The libfabric API version tacl is written against. */
#define TACL_OFI_VERSION FI_VERSION(1, 9)

/*
 * ofi_rxm (the reliable-datagram layer over tcp, verbs) lets the tcp
 * provider write an eager message straight into the posted receive
 * ("dynamic receive buffers"), and in libfabric 1.17 a message longer
 * than that receive then breaks the connection: the receive ends
 * truncated, every later message between the two ranks is lost and
 * their sends fail.  tacl must report a length mismatch as the error of
 * that one receive (transport.h), so it turns the feature off (rxm then
 * copies eager messages out of its own buffers, which bounds what it
 * writes) unless FI_OFI_RXM_ENABLE_DYN_RBUF says otherwise.  libfabric
 * reads its variables when it first loads its providers, so this must
 * come before any call into it, and can only be said through the
 * environment.
 *
 * Above its eager size rxm sends a message by segments (SAR, up to
 * FI_OFI_RXM_SAR_LIMIT, 128 KB by default) or by rendezvous.  Neither
 * serves tacl in libfabric 1.17:
 * - a peer that dies while a message of segments is half received
 *   leaves rxm looping forever as it closes the connection (its list of
 *   such messages is unlinked through the wrong entry), so tacl sets the
 *   limit to 0 unless FI_OFI_RXM_SAR_LIMIT says otherwise;
 * - the rendezvous is a read by the receiver, and the tcp provider
 *   queues each read's response ahead of everything else the endpoint
 *   sends, its own rendezvous headers and read requests among them: on
 *   a connection busy both ways the two directions take turns, so two
 *   rails moved a ring all-gather at 1.6x one rail, and a 2x2 MiCS
 *   all-gather ran at 0.74x of UCX (docs/bench/ofi.md).
 * So over rxm tacl sends nothing above the eager size: a longer message
 * goes as pieces of at most that (ofi.c's piece_setting).  The eager
 * size stays libfabric's 16 KB unless FI_OFI_RXM_BUFFER_SIZE says
 * otherwise: with 64 KB four rails moved a ring all-gather at 3.2-3.3x
 * one rail, with 16 KB at 3.7-3.9x (docs/bench/ofi.md).
 *
 * The tcp provider reads a socket through a small prefetch buffer, and
 * a rendezvous then moved at 57% of a 1 Gbit/s link where UCX moved at
 * 94% (a 64 MB ring all-gather between two emulated nodes: 573 ms
 * against 281 ms); without the buffer (FI_TCP_PREFETCH_RBUF_SIZE=0) the
 * same run took 291 ms.  tacl turns it off unless the user set it.
 */
static void provider_defaults(void)
{
    if (tacl__config_env("FI_OFI_RXM_ENABLE_DYN_RBUF") == NULL)
        setenv("FI_OFI_RXM_ENABLE_DYN_RBUF", "0", 0);
    if (tacl__config_env("FI_OFI_RXM_SAR_LIMIT") == NULL)
        setenv("FI_OFI_RXM_SAR_LIMIT", "0", 0);
    if (tacl__config_env("FI_TCP_PREFETCH_RBUF_SIZE") == NULL)
        setenv("FI_TCP_PREFETCH_RBUF_SIZE", "0", 0);
}

/* What a query asks for beyond what tacl always needs (TACL_OFI_ASK_*
 * in ofi.h). */
static struct fi_info *make_hints(const char *name, int ask)
{
    struct fi_info *hints = fi_allocinfo();

    if (hints == NULL)
        return NULL;
    hints->caps = TACL_OFI_CAPS | ((ask & TACL_OFI_ASK_HMEM) ? FI_HMEM : 0);
    hints->mode = FI_CONTEXT;
    hints->ep_attr->type = FI_EP_RDM;
    hints->tx_attr->msg_order = TACL_OFI_ORDER;
    hints->rx_attr->msg_order = TACL_OFI_ORDER;
    hints->domain_attr->mr_mode =
        FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
        ((ask & TACL_OFI_ASK_MR_LOCAL) ? FI_MR_LOCAL : 0) |
        ((ask & TACL_OFI_ASK_HMEM) ? FI_MR_HMEM : 0);
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    if (name != NULL) {
        hints->fabric_attr->prov_name = strdup(name);
        if (hints->fabric_attr->prov_name == NULL) {
            fi_freeinfo(hints);
            return NULL;
        }
    }
    return hints;
}

/*
 * Whether to ask for FI_HMEM: TACL_OFI_HMEM is not off and a CUDA device
 * is usable here.
 */
static int hmem_wanted(void)
{
#if TACL_HAVE_CUDA
    const tacl__cu_t *cu;
    int n = 0;

    if (tacl__config_word(TACL_CFG_OFI_HMEM) == TACL_OFI_HMEM_OFF)
        return 0;
    cu = tacl__cu();
    return cu != NULL && cu->cuDeviceGetCount(&n) == CUDA_SUCCESS && n > 0;
#else
    return 0;
#endif
}

int tacl__ofi_asks(int ask[4])
{
    int always = tacl__config_word(TACL_CFG_OFI_REGISTER) ==
                 TACL_OFI_REGISTER_ALWAYS;
    int hmem = hmem_wanted(), n = 0;

    /* Device memory straight to the NIC first, then staged; within
     * each, the provider's registrations (its cache) before tacl's. */
    for (int h = hmem ? 0 : 1; h < 2; ++h) {
        int base = h == 0 ? TACL_OFI_ASK_HMEM : 0;

        if (h == 1 && tacl__config_word(TACL_CFG_OFI_HMEM) ==
                          TACL_OFI_HMEM_ON)
            break;
        if (!always)
            ask[n++] = base;
        ask[n++] = base | TACL_OFI_ASK_MR_LOCAL;
    }
    return n;
}

/* Whether prov_name ("tcp;ofi_rxm") names provider name ("tcp"). */
static int names(const char *prov_name, const char *name)
{
    size_t n = strlen(name);

    return prov_name != NULL && strncasecmp(prov_name, name, n) == 0 &&
           (prov_name[n] == '\0' || prov_name[n] == ';');
}

uint64_t tacl__ofi_rxm_eager(const char *prov_name)
{
    const char *size = tacl__config_env("FI_OFI_RXM_BUFFER_SIZE");
    const char *layer = strchr(prov_name, ';');
    long n;

    /* "tcp;ofi_rxm": the utility provider is a layer after the core. */
    while (layer != NULL && !names(layer + 1, "ofi_rxm"))
        layer = strchr(layer + 1, ';');
    if (layer == NULL)
        return 0;
    if (size == NULL)
        return TACL_OFI_RXM_EAGER;
    /* Read as libfabric reads it. */
    n = strtol(size, NULL, 0);
    return n > 0 ? (uint64_t)n : 0;
}

/*
 * fi_getinfo for provider name with what tacl needs, the first entry
 * whose domain is domain (NULL: any), asked as ask[0..nask) say in turn,
 * the first answer kept and its ask into *ask_p; NULL if none.
 */
static struct fi_info *query_domain(const char *name, const char *domain,
                                    const int *ask, int nask, int *ask_p)
{
    struct fi_info *keep = NULL;

    provider_defaults();
    for (int a = 0; a < nask && keep == NULL; ++a) {
        struct fi_info *hints = make_hints(name, ask[a]), *info = NULL;
        /* FI_HMEM and fi_mr_attr's iface came with API 1.10. */
        uint32_t version = (ask[a] & TACL_OFI_ASK_HMEM) ? FI_VERSION(1, 10)
                                                       : TACL_OFI_VERSION;

        if (hints == NULL)
            return NULL;
        if (fi_getinfo(version, NULL, NULL, 0, hints, &info) != 0)
            info = NULL;
        fi_freeinfo(hints);
        /* libfabric matches prov_name loosely; keep the one asked for. */
        for (struct fi_info *i = info; i != NULL && keep == NULL;
             i = i->next)
            if (names(i->fabric_attr->prov_name, name) &&
                (domain == NULL ||
                 (i->domain_attr->name != NULL &&
                  strcmp(i->domain_attr->name, domain) == 0))) {
                keep = fi_dupinfo(i);
                if (ask_p != NULL)
                    *ask_p = ask[a];
            }
        fi_freeinfo(info);
    }
    return keep;
}

/* Whether provider name serves tacl at all, device memory aside. */
static struct fi_info *query(const char *name)
{
    static const int plain[] = {0, TACL_OFI_ASK_MR_LOCAL};

    return query_domain(name, NULL, plain, 2, NULL);
}

int tacl__ofi_provider_present(const char *name)
{
    struct fi_info *info = query(name);

    fi_freeinfo(info);
    return info != NULL;
}

const char *tacl__ofi_missing(const struct fi_info *list)
{
    const char *missing = "FI_EP_RDM";
    int rank, best = 0;

    /* The entry that comes closest names what is missing. */
    for (const struct fi_info *i = list; i != NULL; i = i->next) {
        const char *lack;

        if (i->ep_attr == NULL || i->ep_attr->type != FI_EP_RDM) {
            lack = "FI_EP_RDM", rank = 1;
        } else if (!(i->caps & FI_TAGGED)) {
            lack = "FI_TAGGED", rank = 2;
        } else if (!(i->caps & FI_MSG)) {
            lack = "FI_MSG", rank = 3;
        } else if (i->tx_attr == NULL || i->rx_attr == NULL ||
                   !(i->tx_attr->msg_order & TACL_OFI_ORDER) ||
                   !(i->rx_attr->msg_order & TACL_OFI_ORDER)) {
            lack = "FI_ORDER_SAS", rank = 4;
        } else {
            return NULL;
        }
        if (rank > best) {
            best = rank;
            missing = lack;
        }
    }
    return missing;
}

/* Refuse provider name, naming what it lacks. */
static tacl_status_t refuse(const char *name)
{
    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    const char *missing = NULL;
    int found;

    provider_defaults();
    if (hints == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, NET, "out of memory");
    hints->fabric_attr->prov_name = strdup(name);
    found = hints->fabric_attr->prov_name != NULL &&
            fi_getinfo(TACL_OFI_VERSION, NULL, NULL, 0, hints, &info) == 0;
    fi_freeinfo(hints);
    if (found)
        missing = tacl__ofi_missing(info);
    fi_freeinfo(info);
    if (!found)
        return tacl__error(TACL_ERR_UNSUPPORTED, NET, "libfabric provider "
                           "\"%s\" is not available here (fi_info -p %s "
                           "lists nothing); set TACL_OFI_PROVIDER to one "
                           "fi_info lists, or TACL_NET=ucx", name, name);
    return tacl__error(TACL_ERR_UNSUPPORTED, NET, "libfabric provider "
                       "\"%s\" cannot serve tacl: it lacks %s (tacl needs "
                       "tagged messages on a reliable-datagram endpoint, "
                       "FI_EP_RDM with FI_TAGGED, FI_MSG and FI_ORDER_SAS)",
                       name, missing ? missing : "a mode tacl does not "
                       "support (see fi_info -v)");
}

int tacl__ofi_registers(const struct fi_info *info)
{
    return (info->domain_attr->mr_mode & FI_MR_LOCAL) != 0 ||
           (info->mode & FI_LOCAL_MR) != 0 ||
           tacl__config_word(TACL_CFG_OFI_REGISTER) ==
               TACL_OFI_REGISTER_ALWAYS;
}

static void describe(const struct fi_info *info, int ask,
                     tacl__ofi_choice_t *c)
{
    int cache = tacl__config_int(TACL_CFG_OFI_MR_CACHE);

    c->ask = ask;
    snprintf(c->memory, sizeof(c->memory), "%s; device memory %s",
             !tacl__ofi_registers(info)
                 ? "the provider registers buffers (its cache)"
             : cache > 0
                 ? "tacl registers buffers: tacl_mem_alloc and device "
                   "memory cached, others per message"
                 : "tacl registers each buffer per message",
             (ask & TACL_OFI_ASK_HMEM) ? "straight to the NIC (FI_HMEM)"
                                       : "staged through pinned host "
                                         "chunks");

    snprintf(c->provider, sizeof(c->provider), "%s",
             info->fabric_attr->prov_name);
    snprintf(c->fabric, sizeof(c->fabric), "%s",
             info->fabric_attr->name ? info->fabric_attr->name : "?");
    snprintf(c->domain, sizeof(c->domain), "%s",
             info->domain_attr->name ? info->domain_attr->name : "?");
}

tacl_status_t tacl__ofi_choose_rail(const char *iface,
                                    struct fi_info **info_p,
                                    tacl__ofi_choice_t *choice_p)
{
    const char *want = tacl__config_str(TACL_CFG_OFI_PROVIDER);
    tacl__ofi_choice_t c;
    struct fi_info *info = NULL;
    int asks[4], nask = tacl__ofi_asks(asks), ask = 0;

    memset(&c, 0, sizeof(c));
    if (strcasecmp(want, "auto") == 0) {
        info = query("efa");
        if (info != NULL) {
            snprintf(c.why, sizeof(c.why), "TACL_OFI_PROVIDER=auto and an "
                     "EFA device is present");
            want = "efa";
        } else {
            snprintf(c.why, sizeof(c.why), "TACL_OFI_PROVIDER=auto and no "
                     "EFA device: libfabric's tcp provider");
            want = "tcp";
        }
        fi_freeinfo(info);
    } else {
        snprintf(c.why, sizeof(c.why), "TACL_OFI_PROVIDER=%s", want);
    }
    info = query_domain(want, iface, asks, nask, &ask);
    if (info == NULL && tacl__config_word(TACL_CFG_OFI_HMEM) ==
                            TACL_OFI_HMEM_ON) {
        if (!hmem_wanted())
            return tacl__error(TACL_ERR_UNSUPPORTED, NET, "TACL_OFI_HMEM="
                               "on, but no CUDA device is usable here (%s)",
                               tacl__cu_why()[0] ? tacl__cu_why()
                                                 : "no device");
        if (tacl__ofi_provider_present(want))
            return tacl__error(TACL_ERR_UNSUPPORTED, NET, "TACL_OFI_HMEM="
                               "on, but libfabric provider %s does not "
                               "offer FI_HMEM (device memory) with what "
                               "tacl needs; set TACL_OFI_HMEM=auto to "
                               "stage device memory", want);
    }
    if (info == NULL && iface != NULL && tacl__ofi_provider_present(want))
        return tacl__error(TACL_ERR_INVALID_ARG, NET, "TACL_NICS names "
                           "rail '%s', but libfabric provider %s has no "
                           "domain of that name (fi_info -p %s lists its "
                           "domains); name interfaces it lists%s", iface,
                           want, want,
                           tacl__config_env("FI_TCP_IFACE") != NULL
                               ? ", and unset FI_TCP_IFACE, which holds tcp "
                                 "to one interface"
                               : "");
    if (info == NULL)
        return refuse(want);
    describe(info, ask, &c);
    if (info_p != NULL)
        *info_p = info;
    else
        fi_freeinfo(info);
    *choice_p = c;
    return TACL_OK;
}

tacl_status_t tacl__ofi_choose(struct fi_info **info_p,
                               tacl__ofi_choice_t *choice_p)
{
    return tacl__ofi_choose_rail(NULL, info_p, choice_p);
}

int tacl__ofi_rail_names(char names[TACL_OFI_MAX_RAILS][32])
{
    const char *list = tacl__config_str(TACL_CFG_NICS);
    char buf[512], *tok, *save = NULL;
    int n = 0;

    snprintf(buf, sizeof(buf), "%s", list);
    for (tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        /* The speed after '@' is the topology's (topo_detect.c). */
        tok[strcspn(tok, "@")] = '\0';
        if (tok[0] == '\0')
            continue;
        if (n == TACL_OFI_MAX_RAILS)
            return tacl__error(TACL_ERR_INVALID_ARG, NET, "TACL_NICS names "
                               "more than %d rails; ofi opens at most %d",
                               TACL_OFI_MAX_RAILS, TACL_OFI_MAX_RAILS);
        snprintf(names[n++], 32, "%s", tok);
    }
    return n;
}

void tacl__ofi_describe_rails(char *buf, size_t len)
{
    char names[TACL_OFI_MAX_RAILS][32];
    size_t used;
    int n = tacl__ofi_rail_names(names);

    if (n == 0) {
        snprintf(buf, len, "one rail (TACL_NICS unset)");
        return;
    }
    if (n < 0) {
        snprintf(buf, len, "rails refused: %s", tacl__last_error());
        return;
    }
    used = (size_t)snprintf(buf, len, "%d rail%s, striped from %llu bytes:",
                            n, n > 1 ? "s" : "",
                            tacl__config_size(TACL_CFG_OFI_STRIPE_MIN));
    for (int i = 0; i < n && used < len; ++i) {
        tacl__ofi_choice_t c;
        struct fi_info *info = NULL;

        if (tacl__ofi_choose_rail(names[i], &info, &c) == TACL_OK)
            used += (size_t)snprintf(buf + used, len - used, " %d=%s "
                                     "(fabric %s)", i, names[i], c.fabric);
        else
            used += (size_t)snprintf(buf + used, len - used, " %d=%s "
                                     "(refused)", i, names[i]);
        fi_freeinfo(info);
    }
}

void tacl__ofi_piece(uint64_t len, uint64_t n, uint64_t i, uint64_t *off_p,
                     uint64_t *len_p)
{
    /* The message's aligned units (the last may be partial) dealt out
     * evenly, the first pieces one more where they do not divide. */
    uint64_t units = TACL_DIV_UP(len, TACL_OFI_PIECE_ALIGN);
    uint64_t each = units / n, extra = units % n;
    uint64_t off = (each * i + TACL_MIN(i, extra)) * TACL_OFI_PIECE_ALIGN;
    uint64_t mine = (each + (i < extra)) * TACL_OFI_PIECE_ALIGN;

    off = TACL_MIN(off, len);
    *off_p = off;
    *len_p = TACL_MIN(mine, len - off);
}
