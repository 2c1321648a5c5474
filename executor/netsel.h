/*
 * The choice of the network transport (TACL_NET): one decider, asked by
 * a context's creation and by tacl-info alike.
 */
#ifndef TACL_EXECUTOR_NETSEL_H
#define TACL_EXECUTOR_NETSEL_H

#include "tacl.h"
#include "transport.h"

/** The network transports a build may have. */
typedef enum {
    TACL__NET_NONE = 0,        /* one node only */
    TACL__NET_UCX,
    TACL__NET_OFI
} tacl__net_t;

/** The choice and why, in words. */
typedef struct {
    tacl__net_t net;
    char why[200];
} tacl__net_choice_t;

/**
 * Choose the network transport by TACL_NET: auto takes ofi when an EFA
 * device is present (and tacl has ofi), else ucx when built in, else ofi
 * (libfabric's tcp provider) when built in, else none; a transport named
 * but not built in is TACL_ERR_UNSUPPORTED with a message.
 */
tacl_status_t tacl__net_choose(tacl__net_choice_t *choice_p);

/** The ops of a network transport; NULL for none. */
const tacl__transport_ops_t *tacl__net_ops(tacl__net_t net);

/**
 * What the network transport of choice would use here, in words, for
 * tacl-info: for ofi the provider, fabric and domain and why (or why
 * the provider is refused); for ucx, UCX's own variables.
 */
void tacl__net_describe(const tacl__net_choice_t *choice, char *buf,
                        size_t len);

/** "none", "ucx" or "ofi". */
const char *tacl__net_name(tacl__net_t net);

#endif /* TACL_EXECUTOR_NETSEL_H */
