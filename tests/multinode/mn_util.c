/*
 * Shared helpers of mn_check: failure reports, guarded buffers, the exact
 * test values and the byte-counter invariants.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mn.h"

void mn_fail(mn_t *mn, const char *fmt, ...)
{
    va_list ap;

    /* Past a screenful the summary line gives the count. */
    if (mn->failures++ >= MN_MAX_REPORTS)
        return;
    va_start(ap, fmt);
    if (mn->label != NULL)
        fprintf(stderr, "mn_check %s: FAIL: ", mn->label);
    else
        fprintf(stderr, "mn_check rank %d: FAIL: ", mn->rank);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (mn->failures == MN_MAX_REPORTS)
        fprintf(stderr, "mn_check: more failures are counted, not shown\n");
}

void mn_die(const mn_t *mn, tacl_status_t status, const char *what)
{
    char who[128];

    if (mn->label != NULL)
        snprintf(who, sizeof(who), "%s", mn->label);
    else
        snprintf(who, sizeof(who), "rank %d", mn->rank);
    fprintf(stderr, "mn_check %s: FAIL: %s returned %s: %s\n", who, what,
            tacl_status_string(status), tacl_comm_last_error(mn->comm));
    exit(1);
}

void mn_place(const mn_t *mn, mn_place_t *p)
{
    mn_ok(mn, tacl_comm_rank(mn->comm, &p->rank), "tacl_comm_rank");
    mn_ok(mn, tacl_comm_size(mn->comm, &p->size), "tacl_comm_size");
    mn_ok(mn, tacl_comm_node(mn->comm, &p->node), "tacl_comm_node");
    mn_ok(mn, tacl_comm_n_nodes(mn->comm, &p->n_nodes), "tacl_comm_n_nodes");
    mn_ok(mn, tacl_comm_local_rank(mn->comm, &p->local_rank),
          "tacl_comm_local_rank");
    mn_ok(mn, tacl_comm_local_size(mn->comm, &p->local_size),
          "tacl_comm_local_size");
}

void *mn_alloc(size_t n, size_t es)
{
    size_t bytes = n * es + MN_GUARD;
    void *buf = malloc(bytes);

    if (buf == NULL) {
        fprintf(stderr, "mn_check: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    memset(buf, MN_SENTINEL, bytes);
    return buf;
}

int32_t mn_val(int rank, size_t i, int salt)
{
    uint64_t x = (uint64_t)rank * 131u + (uint64_t)i * 7u +
                 (uint64_t)salt * 29u;

    return (int32_t)(x % 101u) - 50;
}

void mn_store(void *buf, tacl_dtype_t dtype, size_t i, int64_t v)
{
    if (dtype == TACL_FLOAT32)
        ((float *)buf)[i] = (float)v * 0.25f;
    else
        ((int32_t *)buf)[i] = (int32_t)v;
}

void mn_fmt(const void *buf, tacl_dtype_t dtype, size_t i, char *text,
            size_t len)
{
    if (dtype == TACL_FLOAT32)
        snprintf(text, len, "%.9g", (double)((const float *)buf)[i]);
    else
        snprintf(text, len, "%" PRId32, ((const int32_t *)buf)[i]);
}

void mn_fill(void *buf, tacl_dtype_t dtype, size_t n, int rank, size_t off,
             int salt)
{
    for (size_t k = 0; k < n; k++)
        mn_store(buf, dtype, k, mn_val(rank, off + k, salt));
}

int mn_compare(mn_t *mn, const char *what, const void *want, const void *got,
               size_t n, tacl_dtype_t dtype)
{
    size_t es = tacl_dtype_size(dtype);
    const unsigned char *w = want, *g = got;
    size_t wrong = 0, first = 0;
    char a[32], b[32];

    if (memcmp(want, got, n * es + MN_GUARD) == 0)
        return 1;
    for (size_t i = n; i-- > 0;) {
        if (memcmp(w + i * es, g + i * es, es) != 0) {
            wrong++;
            first = i;
        }
    }
    if (wrong == 0) {
        mn_fail(mn, "%s: wrote past the end of the buffer (%zu elements)",
                what, n);
        return 0;
    }
    mn_fmt(want, dtype, first, a, sizeof(a));
    mn_fmt(got, dtype, first, b, sizeof(b));
    mn_fail(mn, "%s: %zu of %zu elements wrong, first [%zu] = %s, "
            "expected %s", what, wrong, n, first, b, a);
    return 0;
}

void mn_counters(const mn_t *mn, tacl_counters_t *c)
{
    mn_ok(mn, tacl_comm_get_counters(mn->comm, c), "tacl_comm_get_counters");
}

int mn_link_class(const mn_t *mn, int a, int b)
{
    if (a == b)
        return TACL_LINK_SELF;
    return mn->node_of[a] == mn->node_of[b] ? TACL_LINK_HOST : TACL_LINK_NET;
}

void mn_delta_check(mn_t *mn, const char *what, const tacl_counters_t *before,
                    mn_delta_t *delta_p)
{
    tacl_counters_t now;
    mn_delta_t d;
    int node = mn->node_of[mn->rank];
    uint64_t shm_msgs = 0, nettl_msgs = 0, host_msgs, net_msgs;

    memset(&d, 0, sizeof(d));
    mn_counters(mn, &now);
    for (int c = 0; c < TACL_NUM_LINK_CLASSES; c++)
        d.link[c] = now.links[c].bytes - before->links[c].bytes;
    for (int t = 0; t < now.n_transports; t++) {
        uint64_t b = now.transports[t].bytes - before->transports[t].bytes;
        uint64_t m = now.transports[t].messages -
                     before->transports[t].messages;
        const char *name = now.transports[t].name;
        if (strcmp(name, "self") == 0)
            d.self += b;
        else if (strcmp(name, "shm") == 0)
            d.shm += b, shm_msgs += m;
        else if (strcmp(name, "ucx") == 0 || strcmp(name, "ofi") == 0)
            d.nettl += b, nettl_msgs += m;
        else
            d.other += b;
    }
    host_msgs = now.links[TACL_LINK_HOST].messages -
                before->links[TACL_LINK_HOST].messages;
    net_msgs = now.links[TACL_LINK_NET].messages -
               before->links[TACL_LINK_NET].messages;
    if (host_msgs != shm_msgs || net_msgs != nettl_msgs)
        mn_fail(mn, "%s: messages: %" PRIu64 " host and %" PRIu64 " net, "
                "but %" PRIu64 " shm and %" PRIu64 " ucx/ofi", what,
                host_msgs, net_msgs, shm_msgs, nettl_msgs);
    if (d.link[TACL_LINK_HOST] != d.shm)
        mn_fail(mn, "%s: %" PRIu64 " bytes on link class host but %" PRIu64
                " on transport shm", what, d.link[TACL_LINK_HOST], d.shm);
    if (d.link[TACL_LINK_NET] != d.nettl)
        mn_fail(mn, "%s: %" PRIu64 " bytes on link class net but %" PRIu64
                " on transport ucx/ofi", what, d.link[TACL_LINK_NET],
                d.nettl);
    if (d.link[TACL_LINK_SELF] != d.self)
        mn_fail(mn, "%s: %" PRIu64 " bytes on link class self but %" PRIu64
                " on transport self", what, d.link[TACL_LINK_SELF], d.self);
    if (d.link[TACL_LINK_GPU] != 0 || d.other != 0)
        mn_fail(mn, "%s: %" PRIu64 " bytes on link class gpu and %" PRIu64
                " on other transports, expected none on host memory", what,
                d.link[TACL_LINK_GPU], d.other);
    if (mn->rpn[node] == 1 && d.shm != 0)
        mn_fail(mn, "%s: %" PRIu64 " shm bytes from a rank alone on its "
                "node", what, d.shm);
    if (mn->n_nodes == 1 && d.nettl != 0)
        mn_fail(mn, "%s: %" PRIu64 " network bytes on a single node", what,
                d.nettl);
    *delta_p = d;
}
