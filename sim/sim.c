/*
 * The discrete-event simulator of sim.h.
 *
 * Steps of all ranks are numbered globally (gid: rank's offset plus the
 * step's index).  A step whose dependencies are done becomes runnable:
 * a NOP or free kernel completes at once, a kernel becomes a flow on its
 * rank's engine, a send or receive waits for its partner and the pair
 * becomes a message flow after the start-up delay.  A flow's rate is
 * recomputed only when the number of flows on one of its links changes,
 * once per instant however many changes that instant brings (settle());
 * each rate change pushes a new finish event and outdates the old one
 * (events carry the flow's version).  Sends and receives are paired by
 * core's tacl__sched_match, as the tests' schedule runner pairs them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "log.h"
#include "quant_layout.h"
#include "sim.h"

#define SIM_MAX_LINKS 5

/* ------------------------------------------------------------------ */
/* Clusters                                                            */

static double node_nic_bw(const tacl__node_desc_t *d, const tacl__topo_t *t)
{
    return d->nics > 0 && d->nic_gbps > 0 ? d->nic_gbps / 8.0
                                          : t->link[TACL_LINK_NET].bw;
}

tacl_status_t tacl__sim_cluster_init(tacl__sim_cluster_t *c,
                                     const tacl__topo_t *topo, int nranks,
                                     const int *node_id, const int *desc_of)
{
    int *first = NULL, r, n = 0, ids = 0;

    memset(c, 0, sizeof(*c));
    if (nranks < 1 || topo->n_nodes < 1)
        return tacl__error(TACL_ERR_INVALID_ARG, TOPO,
                           "simulator: a cluster needs ranks (%d) and a "
                           "described node (%d)", nranks, topo->n_nodes);
    if (topo->link[TACL_LINK_HOST].bw <= 0 ||
        topo->link[TACL_LINK_NET].bw <= 0)
        return tacl__error(TACL_ERR_INVALID_ARG, TOPO,
                           "simulator: the topology gives no bandwidth for "
                           "the %s link; add a \"link %s bw=...\" line",
                           topo->link[TACL_LINK_HOST].bw <= 0 ? "host"
                                                              : "net",
                           topo->link[TACL_LINK_HOST].bw <= 0 ? "host"
                                                              : "net");
    for (r = 0; r < nranks; r++) {
        if (node_id[r] < 0 || node_id[r] >= (1 << 24) || desc_of[r] < 0 ||
            desc_of[r] >= topo->n_nodes)
            return tacl__error(TACL_ERR_INVALID_ARG, TOPO,
                               "simulator: rank %d has node %d, "
                               "description %d (of %d)", r, node_id[r],
                               desc_of[r], topo->n_nodes);
        ids = TACL_MAX(ids, node_id[r] + 1);
    }
    c->nranks = nranks;
    c->node_of = calloc((size_t)nranks, sizeof(int));
    c->local_of = calloc((size_t)nranks, sizeof(int));
    first = malloc((size_t)ids * sizeof(int));
    c->local_size = calloc((size_t)nranks, sizeof(int));
    c->nics = calloc((size_t)nranks, sizeof(int));
    c->nic_bw = calloc((size_t)nranks, sizeof(double));
    c->desc = calloc((size_t)nranks, sizeof(*c->desc));
    c->gpu_peer = calloc((size_t)nranks, sizeof(int));
    if (!c->node_of || !c->local_of || !first || !c->local_size ||
        !c->nics || !c->nic_bw || !c->desc || !c->gpu_peer) {
        free(first);
        tacl__sim_cluster_fini(c);
        return tacl__error(TACL_ERR_NO_MEMORY, TOPO, "out of memory");
    }
    for (int id = 0; id < ids; id++)
        first[id] = -1;
    for (r = 0; r < nranks; r++) {
        const tacl__node_desc_t *d;
        int id = node_id[r], m;

        if (first[id] < 0) {
            first[id] = n++;
            d = &topo->nodes[desc_of[r]];
            m = first[id];
            c->nics[m] = d->nics > 0 && d->nic_gbps > 0 ? d->nics : 1;
            c->nic_bw[m] = node_nic_bw(d, topo);
            c->desc[m] = *d;
            c->gpu_peer[m] = d->gpus > 0 && d->gpu_peer &&
                             topo->link[TACL_LINK_GPU].bw > 0;
        }
        m = first[id];
        c->node_of[r] = m;
        c->local_of[r] = c->local_size[m]++;
    }
    free(first);
    c->n_nodes = n;
    memcpy(c->link, topo->link, sizeof(c->link));
    c->oversub = topo->fabric_oversub >= 1 ? topo->fabric_oversub : 1;
    c->overhead = topo->msg_overhead;
    c->host_bw = topo->host_bw;
    for (int k = 0; k < TACL__TOPO_KERNELS; k++)
        c->kernel_bw[k] = topo->kernel_bw[k];
    return TACL_OK;
}

tacl_status_t tacl__sim_cluster_replicate(tacl__sim_cluster_t *c,
                                          const tacl__topo_t *topo,
                                          int nodes, int rpn)
{
    int *node_id, *desc_of, r, n;
    tacl_status_t status;

    if (topo->n_nodes < 1)
        return tacl__error(TACL_ERR_INVALID_ARG, TOPO,
                           "simulator: the topology describes no node");
    if (rpn <= 0)
        rpn = topo->nodes[0].gpus > 0 ? topo->nodes[0].gpus
                                      : topo->nodes[0].cores;
    if (nodes < 1 || rpn < 1 || (long)nodes * rpn > (1L << 20))
        return tacl__error(TACL_ERR_INVALID_ARG, TOPO,
                           "simulator: %d nodes of %d ranks is not a "
                           "cluster it can model (1 to 2^20 ranks)", nodes,
                           rpn);
    n = nodes * rpn;
    node_id = malloc((size_t)n * sizeof(int));
    desc_of = malloc((size_t)n * sizeof(int));
    if (node_id == NULL || desc_of == NULL) {
        free(node_id);
        free(desc_of);
        return tacl__error(TACL_ERR_NO_MEMORY, TOPO, "out of memory");
    }
    for (r = 0; r < n; r++) {
        node_id[r] = r / rpn;
        desc_of[r] = (r / rpn) % topo->n_nodes;
    }
    status = tacl__sim_cluster_init(c, topo, n, node_id, desc_of);
    free(node_id);
    free(desc_of);
    return status;
}

void tacl__sim_cluster_fini(tacl__sim_cluster_t *c)
{
    free(c->node_of);
    free(c->local_of);
    free(c->local_size);
    free(c->nics);
    free(c->nic_bw);
    free(c->desc);
    free(c->gpu_peer);
    memset(c, 0, sizeof(*c));
}

tacl__topo_view_t tacl__sim_view(const tacl__sim_cluster_t *c, int rank)
{
    tacl__topo_view_t v;

    tacl__topo_view_make(&v, rank, c->nranks, c->node_of, c->link,
                         &c->desc[c->node_of[rank]]);
    if (v.n_nodes == 1 && v.nranks >= 2 && v.nranks <= TACL__FAST_MAX_RANKS)
        v.fast_max = c->fast_max;
    return v;
}

/* ------------------------------------------------------------------ */
/* The engine                                                          */

enum { EV_START = 0, EV_BUNDLE };

typedef struct {
    double t;
    uint64_t seq;     /* order of creation: breaks ties */
    uint32_t id;      /* EV_START: the send's gid; EV_BUNDLE: the bundle */
    uint32_t ver;     /* EV_BUNDLE: the bundle's version when pushed */
    uint8_t kind;
} ev_t;

/* A flow of a bundle: done when the bundle's progress reaches end. */
typedef struct {
    double end;
    uint64_t seq;
    uint32_t gid;
} item_t;

/*
 * A bundle: the flows with one path (one sender and receiver, or one
 * rank's engine), served in the order they started, as a connection
 * sends its messages: the bundle is one flow on its links, and its
 * progress (what it has moved since it last started) reaches each
 * flow's end in turn.  A rate change is one update per bundle, however
 * many flows wait in it.
 */
typedef struct {
    double prog;      /* bytes (messages) or seconds of work (kernels) */
    double tail;      /* the end of the last flow queued */
    double rate;      /* per flow, per second; 0 while empty */
    double last;      /* when prog was last brought up to date */
    double cap;       /* the most one flow moves per second alone */
    uint64_t key;     /* sender << 32 | receiver; kernels: rank << 32 |
                         UINT32_MAX */
    uint32_t ver, stamp, n, alloc;
    item_t *items;    /* heap by end */
    uint32_t link[SIM_MAX_LINKS];
    uint32_t slot[SIM_MAX_LINKS];
    uint8_t nl;
    uint8_t kernel;
    uint8_t pend;     /* its first flow changed: needs a finish event */
    uint8_t queued;   /* on the list of bundles to update */
} bundle_t;

typedef struct {
    double cap;       /* per second */
    uint32_t flows;   /* bundles with flows on the link */
    uint32_t n, alloc;
    uint32_t *bl;     /* bundles with flows on the link */
    uint8_t dirty;    /* flows changed since the last settle */
} link_t;

typedef struct {
    const tacl__sim_cluster_t *c;
    tacl__sched_t *sched;     /* per rank */
    uint32_t *off;            /* first gid of each rank, nranks + 1 */
    uint32_t *rank_of;        /* per gid */
    uint32_t *pending;        /* per gid: dependencies not done */
    uint32_t *partner;        /* per gid: the matching send or receive */
    uint8_t *ready;
    uint32_t *dstart, *dlist; /* dependents, CSR over gids */
    uint32_t *work;           /* steps completed now, to release */
    uint32_t nwork;
    uint64_t total, done;
    ev_t *heap;
    size_t nheap, heap_cap, compact_at;
    uint64_t seq;
    bundle_t *bundles;
    size_t nbundles, bundles_cap;
    uint32_t *table;          /* open addressing: key -> bundle + 1 */
    size_t table_cap;
    link_t *links;
    uint32_t nlinks, *nic_base, fabric_base, host_link;
    uint32_t stamp;
    uint32_t *dlinks;         /* links whose flows changed at now */
    size_t ndlinks, dlinks_cap;
    uint32_t *dbundles;       /* bundles whose first flow changed */
    size_t ndbundles, dbundles_cap;
    uint64_t updates;         /* bundle_update calls, against budget */
    int device;               /* device memory: gpu class inside nodes */
    int fast;                 /* the fast engine runs it: no schedule */
    double now;
    int oom;
    tacl__sim_result_t *res;
    double *marks;            /* with c->trace: TACL__TRACE_MARKS times
                                 per gid, else NULL */
} sim_t;

/* Step gid reached mark (TACL__TRACE_*) now, when tracing. */
static inline void trace_mark(sim_t *s, uint32_t gid, int mark)
{
    if (s->marks != NULL)
        s->marks[(size_t)gid * TACL__TRACE_MARKS + (size_t)mark] = s->now;
}

static void *grow(void *p, size_t *cap, size_t need, size_t elem, int *oom)
{
    /* Small first: a million connections hold one message or two. */
    size_t n = *cap ? *cap : 4;
    void *q;

    if (need <= *cap)
        return p;
    while (n < need)
        n *= 2;
    q = realloc(p, n * elem);
    if (q == NULL) {
        *oom = 1;
        return p;
    }
    *cap = n;
    return q;
}

static int ev_less(const ev_t *a, const ev_t *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static int item_less(const item_t *a, const item_t *b)
{
    return a->end < b->end || (a->end == b->end && a->seq < b->seq);
}

/*
 * One binary heap for both element types: T the type, LESS its order.
 * HEAP_PUSH(arr, n, x) with room for x; HEAP_POP(arr, n) removes the top
 * (arr[0], read it first).
 */
#define HEAP_PUSH(T, LESS, arr, n, x)                                        \
    do {                                                                     \
        size_t i_ = (n)++;                                                   \
        while (i_ > 0 && LESS(&(x), &(arr)[(i_ - 1) / 2])) {                 \
            (arr)[i_] = (arr)[(i_ - 1) / 2];                                 \
            i_ = (i_ - 1) / 2;                                               \
        }                                                                    \
        (arr)[i_] = (x);                                                     \
    } while (0)
#define HEAP_POP(T, LESS, arr, n)                                            \
    do {                                                                     \
        T last_ = (arr)[--(n)];                                              \
        size_t i_ = 0;                                                       \
        for (;;) {                                                           \
            size_t l_ = 2 * i_ + 1, m_ = i_;                                 \
            const T *pick_ = &last_;                                         \
            if (l_ < (n) && LESS(&(arr)[l_], pick_)) {                       \
                m_ = l_;                                                     \
                pick_ = &(arr)[l_];                                          \
            }                                                                \
            if (l_ + 1 < (n) && LESS(&(arr)[l_ + 1], pick_))                 \
                m_ = l_ + 1;                                                 \
            if (m_ == i_)                                                    \
                break;                                                       \
            (arr)[i_] = (arr)[m_];                                           \
            i_ = m_;                                                         \
        }                                                                    \
        if ((n) > 0)                                                         \
            (arr)[i_] = last_;                                               \
    } while (0)

static int ev_cmp(const void *x, const void *y)
{
    return ev_less(x, y) ? -1 : ev_less(y, x) ? 1 : 0;
}

/*
 * Drops outdated finish events once they crowd the heap (a rate change
 * outdates one per bundle), so memory follows the live events.  A
 * sorted array is a valid heap.
 */
static void heap_compact(sim_t *s)
{
    size_t n = 0;

    for (size_t i = 0; i < s->nheap; i++) {
        const ev_t *e = &s->heap[i];

        if (e->kind == EV_START || e->ver == s->bundles[e->id].ver)
            s->heap[n++] = *e;
    }
    qsort(s->heap, n, sizeof(ev_t), ev_cmp);
    s->nheap = n;
    s->compact_at = TACL_MAX(4 * n, (size_t)1 << 16);
}

static void heap_push(sim_t *s, double t, uint8_t kind, uint32_t id,
                      uint32_t ver)
{
    ev_t e = {t, s->seq++, id, ver, kind};

    if (s->nheap >= s->compact_at)
        heap_compact(s);
    s->heap = grow(s->heap, &s->heap_cap, s->nheap + 1, sizeof(ev_t),
                   &s->oom);
    if (s->oom)
        return;
    HEAP_PUSH(ev_t, ev_less, s->heap, s->nheap, e);
}

static ev_t heap_pop(sim_t *s)
{
    ev_t top = s->heap[0];

    HEAP_POP(ev_t, ev_less, s->heap, s->nheap);
    return top;
}

static const tacl__step_t *step_of(const sim_t *s, uint32_t gid)
{
    uint32_t r = s->rank_of[gid];

    return &s->sched[r].steps[gid - s->off[r]];
}

/*
 * Brings bundle b's progress up to now, gives it its current rate and,
 * when that or its first flow changed, a new finish event.
 */
static void bundle_update(sim_t *s, uint32_t id, int first_changed)
{
    bundle_t *b = &s->bundles[id];
    double rate = b->cap;

    s->updates++;
    for (int k = 0; k < b->nl; k++) {
        const link_t *l = &s->links[b->link[k]];

        rate = TACL_MIN(rate, l->cap / l->flows);
    }
    if (b->rate > 0)
        b->prog += b->rate * (s->now - b->last);
    b->last = s->now;
    if (rate == b->rate && !first_changed)
        return;
    b->rate = rate;
    b->ver++;
    heap_push(s, s->now + TACL_MAX(b->items[0].end - b->prog, 0.0) / rate,
              EV_BUNDLE, id, b->ver);
}

/*
 * Rates are settled once per instant: a flow that starts or ends marks
 * the links whose flow counts changed (and its bundle, when its first
 * flow changed), and before the clock moves on every bundle on a marked
 * link gets its new rate, once, however many flows came and went at
 * that instant.  Nothing moves in zero time, so this is the rate each
 * bundle would have had after updating at every change; when a thousand
 * connections on a NIC end together, it is one update per bundle instead
 * of one per bundle and ending.
 */
static void *push_id(sim_t *s, uint32_t *arr, size_t *n, size_t *cap,
                     uint32_t id)
{
    arr = grow(arr, cap, *n + 1, sizeof(uint32_t), &s->oom);
    if (!s->oom)
        arr[(*n)++] = id;
    return arr;
}

static void links_touched(sim_t *s, const bundle_t *b)
{
    for (int k = 0; k < b->nl; k++) {
        link_t *l = &s->links[b->link[k]];

        if (l->dirty)
            continue;
        l->dirty = 1;
        s->dlinks = push_id(s, s->dlinks, &s->ndlinks, &s->dlinks_cap,
                            b->link[k]);
    }
}

static void first_changed(sim_t *s, uint32_t id)
{
    bundle_t *b = &s->bundles[id];

    b->pend = 1;
    if (b->queued)
        return;
    b->queued = 1;
    s->dbundles = push_id(s, s->dbundles, &s->ndbundles, &s->dbundles_cap,
                          id);
}

static void settle_one(sim_t *s, uint32_t id)
{
    bundle_t *g = &s->bundles[id];

    if (g->stamp == s->stamp)
        return;
    g->stamp = s->stamp;
    if (g->n > 0)
        bundle_update(s, id, g->pend);
    g->pend = 0;
}

/* New rates for the bundles on the links marked at now. */
static void settle(sim_t *s)
{
    if (++s->stamp == 0)
        s->stamp = 1;
    for (size_t i = 0; i < s->ndlinks; i++) {
        link_t *l = &s->links[s->dlinks[i]];

        l->dirty = 0;
        for (uint32_t j = 0; j < l->n; j++)
            settle_one(s, l->bl[j]);
    }
    for (size_t i = 0; i < s->ndbundles; i++) {
        s->bundles[s->dbundles[i]].queued = 0;
        settle_one(s, s->dbundles[i]);
    }
    s->ndlinks = 0;
    s->ndbundles = 0;
}

/* The bundle of key, made (empty, on no link) when new. */
static uint32_t bundle_of(sim_t *s, uint64_t key)
{
    size_t mask, h;

    if ((s->nbundles + 1) * 2 > s->table_cap) {
        size_t cap = s->table_cap ? s->table_cap * 2 : 1024;
        uint32_t *t = calloc(cap, sizeof(uint32_t));

        if (t == NULL) {
            s->oom = 1;
            return 0;
        }
        for (size_t i = 0; i < s->nbundles; i++) {
            h = (s->bundles[i].key * 0x9e3779b97f4a7c15ull) >> 20;
            while (t[h & (cap - 1)] != 0)
                h++;
            t[h & (cap - 1)] = (uint32_t)i + 1;
        }
        free(s->table);
        s->table = t;
        s->table_cap = cap;
    }
    mask = s->table_cap - 1;
    for (h = (key * 0x9e3779b97f4a7c15ull) >> 20;; h++) {
        uint32_t at = s->table[h & mask];

        if (at == 0)
            break;
        if (s->bundles[at - 1].key == key)
            return at - 1;
    }
    s->bundles = grow(s->bundles, &s->bundles_cap, s->nbundles + 1,
                      sizeof(bundle_t), &s->oom);
    if (s->oom)
        return 0;
    memset(&s->bundles[s->nbundles], 0, sizeof(bundle_t));
    s->bundles[s->nbundles].key = key;
    s->table[h & mask] = (uint32_t)s->nbundles + 1;
    return (uint32_t)s->nbundles++;
}

static void complete(sim_t *s, uint32_t gid)
{
    trace_mark(s, gid, TACL__TRACE_DONE);
    s->work[s->nwork++] = gid;
}

/* A flow of amount (bytes or seconds) for step gid joins its bundle. */
static void flow_add(sim_t *s, uint64_t key, uint32_t gid, int kernel,
                     double amount, double cap, const uint32_t *links,
                     int nl)
{
    uint32_t id = bundle_of(s, key);
    bundle_t *b;
    item_t it;
    size_t a, n;
    int first;

    if (s->oom)
        return;
    b = &s->bundles[id];
    a = b->alloc;
    b->items = grow(b->items, &a, (size_t)b->n + 1, sizeof(item_t),
                    &s->oom);
    if (s->oom)
        return;
    b->alloc = (uint32_t)a;
    if (b->n == 0) {
        /* A new start: on its links, progress from zero. */
        b->prog = 0;
        b->tail = 0;
        b->rate = 0;
        b->last = s->now;
        b->cap = cap;
        b->kernel = (uint8_t)kernel;
        b->nl = (uint8_t)nl;
        for (int k = 0; k < nl; k++) {
            link_t *l = &s->links[links[k]];
            size_t la = l->alloc;

            l->bl = grow(l->bl, &la, (size_t)l->n + 1, sizeof(uint32_t),
                         &s->oom);
            if (s->oom)
                return;
            l->alloc = (uint32_t)la;
            b->link[k] = links[k];
            b->slot[k] = l->n;
            l->bl[l->n++] = id;
        }
    } else if (b->rate > 0) {
        b->prog += b->rate * (s->now - b->last);
        b->last = s->now;
    }
    it.end = TACL_MAX(b->tail, b->prog) + amount;
    b->tail = it.end;
    it.seq = s->seq++;
    it.gid = gid;
    first = b->n == 0 || item_less(&it, &b->items[0]);
    n = b->n;
    HEAP_PUSH(item_t, item_less, b->items, n, it);
    b->n = (uint32_t)n;
    if (n == 1) {
        for (int k = 0; k < b->nl; k++)
            s->links[b->link[k]].flows++;
        links_touched(s, b);
    }
    if (first)
        first_changed(s, id);
}

/* The first flow of bundle id is done: release it. */
static void flow_done(sim_t *s, uint32_t id)
{
    bundle_t *b = &s->bundles[id];
    item_t top = b->items[0];
    size_t n = b->n;

    HEAP_POP(item_t, item_less, b->items, n);
    b->n = (uint32_t)n;
    b->prog += b->rate * (s->now - b->last);
    b->last = s->now;
    b->prog = TACL_MAX(b->prog, top.end);
    complete(s, top.gid);
    if (!b->kernel)
        complete(s, s->partner[top.gid]);
    if (b->n == 0) {
        for (int k = 0; k < b->nl; k++) {
            link_t *l = &s->links[b->link[k]];

            l->flows--;
            uint32_t slot = b->slot[k], moved = l->bl[--l->n];

            l->bl[slot] = moved;
            if (moved != id) {
                bundle_t *g = &s->bundles[moved];

                for (int j = 0; j < g->nl; j++)
                    if (g->link[j] == b->link[k])
                        g->slot[j] = slot;
            }
        }
        b->ver++; /* outdate its pending finish event */
        b->rate = 0;
        b->pend = 0;
        links_touched(s, b);
        return;
    }
    /* The next flow is the first now: it needs its own finish event. */
    first_changed(s, id);
}

/* The kernel whose rate a compute step runs at, -1 for none. */
static int step_kernel(const tacl__step_t *st)
{
    switch (st->kind) {
    case TACL__STEP_COPY:
        return TACL__TOPO_KERNEL_COPY;
    case TACL__STEP_REDUCE:
    case TACL__STEP_DIV:
        return TACL__TOPO_KERNEL_REDUCE;
    case TACL__STEP_QUANT:
    case TACL__STEP_DEQUANT:
    case TACL__STEP_DQRQ:
        return TACL__TOPO_KERNEL_QUANT;
    default:
        return -1;
    }
}

/* Seconds of engine time a compute step takes, 0 for none. */
static double kernel_seconds(const sim_t *s, const tacl__step_t *st)
{
    int kernel = step_kernel(st), nsrc = st->nsrc ? st->nsrc : 1;
    double bytes, rate;

    if (kernel < 0)
        return 0;
    switch (st->kind) {
    case TACL__STEP_REDUCE:
    case TACL__STEP_DEQUANT:
        bytes = (double)st->bytes * nsrc;
        break;
    case TACL__STEP_QUANT:
        bytes = (double)st->count * tacl_dtype_size((tacl_dtype_t)st->dtype);
        break;
    case TACL__STEP_DQRQ:
        /* Rated by the quantized inputs plus the output it writes. */
        bytes = (double)tacl__quant_bytes(st->count, st->qblock, st->qbits) *
                (nsrc + 1);
        break;
    default: /* COPY, DIV */
        bytes = (double)st->bytes;
        break;
    }
    rate = s->c->kernel_bw[kernel];
    return rate > 0 ? bytes / (rate * 1e9) : 0;
}

/* The link class of a message a -> b. */
static tacl_link_class_t msg_class(const sim_t *s, int a, int b)
{
    const tacl__sim_cluster_t *c = s->c;

    if (a == b)
        return TACL_LINK_SELF;
    if (c->node_of[a] != c->node_of[b])
        return TACL_LINK_NET;
    return s->device && c->gpu_peer[c->node_of[a]] ? TACL_LINK_GPU
                                                   : TACL_LINK_HOST;
}

/* The NIC link (out; +1 in) rank r reaches the network through. */
static uint32_t nic_link(const sim_t *s, int r)
{
    const tacl__sim_cluster_t *c = s->c;
    int m = c->node_of[r], k = c->nics[m], g = c->local_size[m];
    int port = k >= g ? c->local_of[r]
                      : (int)((long)c->local_of[r] * k / g);

    return s->nic_base[m] + 2u * (uint32_t)port;
}

/* The message of send gid starts moving: a flow on its path. */
static void msg_start(sim_t *s, uint32_t sgid)
{
    const tacl__step_t *st = step_of(s, sgid);
    int a = (int)s->rank_of[sgid], b = st->peer;
    tacl_link_class_t cls = msg_class(s, a, b);
    double bw = s->c->link[cls].bw * 1e9;
    uint32_t links[SIM_MAX_LINKS];
    int nl = 0;

    trace_mark(s, sgid, TACL__TRACE_START);
    trace_mark(s, s->partner[sgid], TACL__TRACE_START);
    if (st->bytes == 0 || bw <= 0) {
        complete(s, sgid);
        complete(s, s->partner[sgid]);
        return;
    }
    if (cls == TACL_LINK_HOST || cls == TACL_LINK_GPU) {
        links[nl++] = (uint32_t)a;
        links[nl++] = (uint32_t)(s->c->nranks + b);
    } else if (cls == TACL_LINK_NET) {
        links[nl++] = nic_link(s, a);
        links[nl++] = nic_link(s, b) + 1;
        if (s->c->oversub > 1) {
            links[nl++] = s->fabric_base + 2u * (uint32_t)s->c->node_of[a];
            links[nl++] =
                s->fabric_base + 2u * (uint32_t)s->c->node_of[b] + 1;
        }
        if (s->c->host_bw > 0)
            links[nl++] = s->host_link;
    }
    flow_add(s, (uint64_t)a << 32 | (uint32_t)b, sgid, 0,
             (double)st->bytes, bw, links, nl);
}

/* Step gid's dependencies are done at s->now. */
static void make_ready(sim_t *s, uint32_t gid)
{
    const tacl__step_t *st = step_of(s, gid);
    uint32_t p, sgid, r = s->rank_of[gid];
    tacl_link_class_t cls;
    double delay;

    trace_mark(s, gid, TACL__TRACE_READY);
    if (st->kind != TACL__STEP_SEND && st->kind != TACL__STEP_RECV) {
        double sec = kernel_seconds(s, st);
        uint32_t engine = 2u * (uint32_t)s->c->nranks + r;

        trace_mark(s, gid, TACL__TRACE_START);
        if (sec > 0)
            flow_add(s, (uint64_t)r << 32 | UINT32_MAX, gid, 1, sec, 1.0,
                     &engine, 1);
        else
            complete(s, gid);
        return;
    }
    s->ready[gid] = 1;
    p = s->partner[gid];
    if (!s->ready[p])
        return;
    sgid = st->kind == TACL__STEP_SEND ? gid : p;
    st = step_of(s, sgid);
    cls = msg_class(s, (int)s->rank_of[sgid], st->peer);
    s->res->bytes[cls] += st->bytes;
    s->res->msgs[cls]++;
    if (s->rank_of[sgid] == (uint32_t)s->c->watch) {
        s->res->watch_bytes[cls] += st->bytes;
        s->res->watch_msgs[cls]++;
    }
    delay = (s->c->link[cls].lat + (cls == TACL_LINK_SELF ? 0
                                                          : s->c->overhead)) *
            1e-6;
    if (delay > 0)
        heap_push(s, s->now + delay, EV_START, sgid, 0);
    else
        msg_start(s, sgid);
}

/* Release the dependents of every step completed now. */
static void drain(sim_t *s)
{
    while (s->nwork > 0 && !s->oom) {
        uint32_t gid = s->work[--s->nwork];

        s->done++;
        for (uint32_t i = s->dstart[gid]; i < s->dstart[gid + 1]; i++)
            if (--s->pending[s->dlist[i]] == 0)
                make_ready(s, s->dlist[i]);
    }
}

/* Pairs every send with its receive (core's matcher, as simrun's). */
static tacl_status_t match(sim_t *s)
{
    const tacl__sched_t **v = malloc(((size_t)s->c->nranks + 1) *
                                     sizeof(*v));
    tacl_status_t status;

    if (v == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, TUNE, "out of memory");
    for (int r = 0; r < s->c->nranks; r++)
        v[r] = &s->sched[r];
    status = tacl__sched_match(v, s->c->nranks, s->off, s->partner);
    free(v);
    return status;
}

/* Dependents lists and counts over gids; the links of the cluster. */
static tacl_status_t prepare(sim_t *s)
{
    const tacl__sim_cluster_t *c = s->c;
    uint64_t ndeps = 0;
    uint32_t *fill, g, m;

    for (int r = 0; r < c->nranks; r++)
        ndeps += s->sched[r].ndeps;
    s->rank_of = malloc((s->total + 1) * sizeof(uint32_t));
    s->pending = malloc((s->total + 1) * sizeof(uint32_t));
    s->partner = malloc((s->total + 1) * sizeof(uint32_t));
    s->ready = calloc(s->total + 1, 1);
    s->dstart = calloc(s->total + 2, sizeof(uint32_t));
    s->dlist = malloc((ndeps + 1) * sizeof(uint32_t));
    s->work = malloc((s->total + 1) * sizeof(uint32_t));
    s->nic_base = malloc((size_t)c->n_nodes * sizeof(uint32_t));
    fill = calloc(s->total + 1, sizeof(uint32_t));
    if (!s->rank_of || !s->pending || !s->partner || !s->ready ||
        !s->dstart || !s->dlist || !s->work || !s->nic_base || !fill) {
        free(fill);
        return tacl__error(TACL_ERR_NO_MEMORY, TUNE, "out of memory");
    }
    for (int r = 0; r < c->nranks; r++)
        for (g = s->off[r]; g < s->off[r + 1]; g++)
            s->rank_of[g] = (uint32_t)r;
    for (g = 0; g < s->total; g++) {
        uint32_t r = s->rank_of[g], j = g - s->off[r];
        const tacl__step_t *st = &s->sched[r].steps[j];

        s->pending[g] = st->ndeps;
        for (uint32_t d = 0; d < st->ndeps; d++)
            s->dstart[s->off[r] + tacl__sched_deps(&s->sched[r], j)[d] +
                      1]++;
    }
    for (g = 0; g < s->total; g++)
        s->dstart[g + 1] += s->dstart[g];
    for (g = 0; g < s->total; g++) {
        uint32_t r = s->rank_of[g], j = g - s->off[r];

        for (uint32_t d = 0; d < s->sched[r].steps[j].ndeps; d++) {
            uint32_t p = s->off[r] + tacl__sched_deps(&s->sched[r], j)[d];

            s->dlist[s->dstart[p] + fill[p]++] = g;
        }
    }
    free(fill);
    /* Ports and engines: 3 per rank; NICs out and in; fabric up, down. */
    s->nlinks = 3u * (uint32_t)c->nranks;
    for (m = 0; m < (uint32_t)c->n_nodes; m++) {
        int k = c->nics[m], gsz = c->local_size[m];

        s->nic_base[m] = s->nlinks;
        s->nlinks += 2u * (uint32_t)TACL_MIN(k, gsz);
    }
    s->fabric_base = s->nlinks;
    s->nlinks += 2u * (uint32_t)c->n_nodes;
    /* The emulation host: one link every network message crosses. */
    s->host_link = s->nlinks++;
    s->links = calloc(s->nlinks, sizeof(link_t));
    if (c->trace != NULL)
        s->marks = calloc((s->total + 1) * TACL__TRACE_MARKS,
                          sizeof(double));
    if (s->links == NULL || (c->trace != NULL && s->marks == NULL))
        return tacl__error(TACL_ERR_NO_MEMORY, TUNE, "out of memory");
    for (int r = 0; r < c->nranks; r++) {
        int m2 = c->node_of[r];
        tacl_link_class_t in =
            s->device && c->gpu_peer[m2] ? TACL_LINK_GPU : TACL_LINK_HOST;

        s->links[r].cap = c->link[in].bw * 1e9;
        s->links[c->nranks + r].cap = c->link[in].bw * 1e9;
        s->links[2 * c->nranks + r].cap = 1.0;
    }
    for (m = 0; m < (uint32_t)c->n_nodes; m++) {
        int k = c->nics[m], gsz = c->local_size[m];
        double port = k >= gsz ? c->nic_bw[m] * k / gsz : c->nic_bw[m];

        for (int p = 0; p < 2 * TACL_MIN(k, gsz); p++)
            s->links[s->nic_base[m] + (uint32_t)p].cap = port * 1e9;
        s->links[s->fabric_base + 2 * m].cap =
            s->links[s->fabric_base + 2 * m + 1].cap =
                c->nic_bw[m] * k / c->oversub * 1e9;
    }
    s->links[s->host_link].cap = c->host_bw * 1e9;
    return match(s);
}

static tacl_status_t simulate(sim_t *s)
{
    tacl_status_t status = prepare(s);

    if (status != TACL_OK)
        return status;
    for (uint32_t g = 0; g < s->total && !s->oom; g++)
        if (s->pending[g] == 0)
            make_ready(s, g);
    drain(s);
    while (!s->oom) {
        ev_t e;

        if ((s->ndlinks > 0 || s->ndbundles > 0) &&
            (s->nheap == 0 || s->heap[0].t > s->now)) {
            settle(s);
            continue;
        }
        if (s->nheap == 0)
            break;
        e = heap_pop(s);

        if (s->c->budget != 0 && s->updates > s->c->budget)
            return tacl__error(TACL_ERR_UNSUPPORTED, TUNE,
                               "simulator: more than %llu rate updates; "
                               "given up", (unsigned long long)
                                               s->c->budget);
        if (e.kind == EV_BUNDLE && e.ver != s->bundles[e.id].ver)
            continue;
        s->res->events++;
        s->now = e.t;
        if (e.kind == EV_START)
            msg_start(s, e.id);
        else
            flow_done(s, e.id);
        drain(s);
    }
    if (s->oom)
        return tacl__error(TACL_ERR_NO_MEMORY, TUNE,
                           "simulator: out of memory");
    if (s->done != s->total)
        return tacl__error(TACL_ERR_INTERNAL, TUNE,
                           "simulator: deadlock, %llu of %llu steps ran",
                           (unsigned long long)s->done,
                           (unsigned long long)s->total);
    s->res->seconds = s->now;
    return TACL_OK;
}

static void sim_free(sim_t *s)
{
    for (int r = 0; s->sched != NULL && r < s->c->nranks; r++)
        tacl__sched_fini(&s->sched[r]);
    for (uint32_t l = 0; s->links != NULL && l < s->nlinks; l++)
        free(s->links[l].bl);
    for (size_t b = 0; b < s->nbundles; b++)
        free(s->bundles[b].items);
    free(s->sched);
    free(s->off);
    free(s->rank_of);
    free(s->pending);
    free(s->partner);
    free(s->ready);
    free(s->dstart);
    free(s->dlist);
    free(s->work);
    free(s->heap);
    free(s->bundles);
    free(s->table);
    free(s->links);
    free(s->nic_base);
    free(s->dlinks);
    free(s->dbundles);
    free(s->marks);
}

/* Every rank's timeline of the simulation just run, to c->trace. */
static void trace_write(sim_t *s)
{
    const tacl__sim_cluster_t *c = s->c;
    uint64_t op = c->trace_ops != NULL ? (*c->trace_ops)++ : 0;

    for (size_t i = 0; i < (size_t)s->total * TACL__TRACE_MARKS; i++)
        s->marks[i] *= 1e6;
    for (int r = 0; r < c->nranks; r++)
        tacl__sched_trace_write(c->trace, op, &s->sched[r],
                                s->marks + (size_t)s->off[r] *
                                               TACL__TRACE_MARKS);
}

/* Build every rank's schedule of args into s->sched, each as the
 * decider chooses it there (a variable-count exchange whose table holds
 * every rank's counts: each rank with its own row and column). */
static tacl_status_t build_all(sim_t *s, const tacl__coll_args_t *args,
                               const tacl__algo_force_t *force,
                               unsigned flags)
{
    const tacl__sim_cluster_t *c = s->c;
    tacl__coll_args_t a = *args;
    tacl__vcounts_t *own = NULL;
    tacl_status_t status = TACL_OK;

    int in_place = args->sendbuf != NULL && args->sendbuf == args->recvbuf;
    uint64_t block = (uint64_t)args->count * tacl_dtype_size(args->dtype);
    char *base = (char *)(uintptr_t)(1ull << 40);

    /* Placeholders the builders register and never dereference. */
    a.sendbuf = base;
    a.recvbuf = base + (in_place ? 0 : (1ull << 40));
    s->sched = calloc((size_t)c->nranks, sizeof(tacl__sched_t));
    s->off = calloc((size_t)c->nranks + 1, sizeof(uint32_t));
    if (s->sched == NULL || s->off == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, TUNE, "out of memory");
    for (int r = 0; r < c->nranks && status == TACL_OK; r++) {
        tacl__topo_view_t v = tacl__sim_view(c, r);
        tacl__choice_t choice;

        tacl__sched_init(&s->sched[r], r, c->nranks);
        /* A variable-count exchange with every rank's counts: each rank
         * builds with its own row and column of them. */
        if (status == TACL_OK && args->v != NULL &&
            args->v->matrix != NULL) {
            tacl__vcounts_free(own);
            own = tacl__vcounts_of_rank(args->v, r);
            if (own == NULL)
                status = tacl__error(TACL_ERR_NO_MEMORY, TUNE,
                                     "out of memory");
            a.v = own;
        }
        /* In place by NCCL's rules: one buffer, the rank's block of it. */
        if (in_place && a.type == TACL_COLL_ALLGATHER)
            a.sendbuf = base + (uint64_t)r * block;
        else if (in_place && a.type == TACL_COLL_REDUCE_SCATTER)
            a.recvbuf = base + (uint64_t)r * block;
        status = tacl__algo_choose(&v, &a, force, NULL, flags, &choice);
        if (status == TACL_OK && r == 0) {
            s->res->choice = choice;
            s->res->algo = choice.algo;
        }
        if (status == TACL_OK && choice.engine == TACL__ENGINE_FAST) {
            /* Every rank of one call takes the same engine. */
            if (r != 0)
                continue;
            s->fast = 1;
            tacl__vcounts_free(own);
            return TACL_OK;
        }
        if (status == TACL_OK)
            status = tacl__algo_build(&s->sched[r], &a, &v, &choice);
        if (status == TACL_OK &&
            (uint64_t)s->off[r] + s->sched[r].nsteps >= UINT32_MAX)
            status = tacl__error(TACL_ERR_UNSUPPORTED, TUNE,
                                 "simulator: more than 2^32 steps");
        if (status == TACL_OK)
            s->off[r + 1] = s->off[r] + s->sched[r].nsteps;
    }
    tacl__vcounts_free(own);
    s->total = s->off[c->nranks];
    s->res->steps = s->total;
    return status;
}

/*
 * A call of the fast engine: its row's model gives the time; every rank
 * publishes its input once for each peer that reads it, on the host link
 * (the engine's counters say the same).
 */
static void fast_run(sim_t *s, const tacl__coll_args_t *args)
{
    const tacl__sim_cluster_t *c = s->c;
    tacl__topo_view_t v = tacl__sim_view(c, 0);
    const tacl__algo_t *row = s->res->choice.algo;

    s->res->seconds = row->cost(args, &v, 0, 0);
    for (int r = 0; r < c->nranks; r++) {
        uint64_t bytes;
        int readers;

        tacl__coll_shared_reads(args, r, c->nranks, &bytes, &readers);
        s->res->bytes[TACL_LINK_HOST] += bytes * (uint64_t)readers;
        s->res->msgs[TACL_LINK_HOST] += (uint64_t)readers;
        if (r == c->watch) {
            s->res->watch_bytes[TACL_LINK_HOST] = bytes * (uint64_t)readers;
            s->res->watch_msgs[TACL_LINK_HOST] = (uint64_t)readers;
        }
    }
}

tacl_status_t tacl__sim_run(const tacl__sim_cluster_t *c,
                            const tacl__coll_args_t *args,
                            const tacl__algo_force_t *force, unsigned flags,
                            tacl__sim_result_t *res)
{
    sim_t s;
    tacl_status_t status;

    memset(res, 0, sizeof(*res));
    memset(&s, 0, sizeof(s));
    s.c = c;
    s.res = res;
    s.device = args->memtype == TACL_MEM_CUDA;
    s.compact_at = (size_t)1 << 16;
    status = build_all(&s, args, force, flags);
    if (status == TACL_OK && s.fast)
        fast_run(&s, args);
    else if (status == TACL_OK)
        status = simulate(&s);
    if (status == TACL_OK && s.marks != NULL)
        trace_write(&s);
    sim_free(&s);
    return status;
}

tacl_status_t tacl__sim_best(const tacl__sim_cluster_t *c,
                             const tacl__coll_args_t *args,
                             const tacl__algo_t **best_p,
                             tacl__sim_result_t *res)
{
    tacl__topo_view_t v = tacl__sim_view(c, 0);
    const tacl__algo_t *a;
    tacl__sim_result_t r;
    tacl_status_t status;

    *best_p = NULL;
    if (args->qbits != 0) {
        status = tacl__sim_run(c, args, NULL, 0, res);
        if (status == TACL_OK)
            *best_p = res->algo;
        return status;
    }
    for (a = tacl__algos; a->name != NULL; a++) {
        tacl__algo_force_t one;

        if (a->coll != args->type ||
            (a->flags & (TACL__ALGO_FLAG_EXPLICIT | TACL__ALGO_FLAG_FAST)) ||
            !a->supports(args, &v))
            continue;
        tacl__algo_force_one(&one, a);
        status = tacl__sim_run(c, args, &one, 0, &r);
        if (status == TACL_ERR_UNSUPPORTED && c->budget != 0)
            continue; /* past the budget: not the fastest anyway */
        if (status != TACL_OK)
            return status;
        if (*best_p == NULL || r.seconds < res->seconds) {
            *best_p = a;
            *res = r;
        }
    }
    return TACL_OK;
}
