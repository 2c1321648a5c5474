/*
 * Direct algorithms: every rank exchanges with every other rank at once.
 *
 * All-to-all (the "every rank posts every message at once" scheme of
 * Thakur, Rabenseifner and Gropp, IJHPCA 2005, section 4.3, used for
 * medium messages): rank r sends block j of its input to rank j and
 * receives rank j's block r into block j of its output, for every j at
 * once.  Peers are visited in the order r + 1, r + 2, ... so that no rank
 * is everyone's first target.  In place (sendbuf == recvbuf) a block
 * cannot be overwritten before it has been sent, so incoming blocks land
 * in scratch and are copied into place once the outgoing block of the
 * same index has left.
 *
 * All-gather, reduce-scatter and all-reduce on one node (the "two-shot"
 * scheme of NVLink all-reduces): the vector is cut into n blocks and each
 * block into chunks.  Reduce-scatter: every rank sends block j of its
 * input to rank j, and rank r reduces the n - 1 copies of block r it
 * receives, chunk by chunk, into its output.  All-gather: every rank sends
 * its block to every other rank, which receives it in place.  All-reduce
 * is the one then the other, in the output.  Nothing is forwarded, so
 * there is no pipeline to fill, and a receive lands in a small pool of
 * chunk-sized scratch slots that the reduction reads at once: over shared
 * memory the incoming bytes are reduced while they are still in cache
 * instead of passing through memory as a ring's partial sums do.  A
 * reduce-scatter receive waits only for the local reduction that last
 * read its slot, so no rank waits for another rank's progress to post
 * one.  An all-gather keeps its ranks within two chunks of one another
 * (a receive of chunk c waits until every peer has taken chunk c - 2 of
 * this rank's block, which their own receives of chunk c - 2 allow, and
 * so on down to the first two chunks, which wait for nothing) and copies
 * its own block in step, so that each chunk of a block comes from memory
 * once and every other read finds it in the last-level cache.  Neither
 * exchange can deadlock.  Across nodes every rank would send to every
 * remote rank through its node's uplink, so the tuner keeps these to one
 * node.
 */
#include "toolbox.h"
#include "cost.h"
#include "log.h"

#include <stdlib.h>

static tacl_status_t direct_alltoall(tacl__sched_t *s,
                                     const tacl__coll_args_t *args)
{
    int n = s->nranks, r = s->rank, i;
    size_t es = tacl_dtype_size(args->dtype);
    uint64_t blk = (uint64_t)args->count * es, tag = tacl__algo_tag(args, 0);
    int32_t *sends, *recvs, tmp = -1;
    tacl__algo_io_t io;
    tacl_status_t status;

    status = tacl__algo_io(s, args, blk * (uint64_t)n, blk * (uint64_t)n,
                           &io);
    if (status != TACL_OK)
        return status;
    if (!io.in_place)
        tacl__sched_copy(s, tacl__bref_add(io.out, blk * (uint64_t)r),
                         tacl__bref_add(io.in, blk * (uint64_t)r), blk,
                         TACL__NO_DEPS);
    if (n == 1)
        return tacl__sched_status(s);
    sends = malloc(2 * (size_t)n * sizeof(*sends));
    if (sends == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "cannot allocate an all-to-all schedule of %d "
                           "ranks", n);
    recvs = sends + n;
    if (io.in_place)
        tmp = tacl__sched_scratch(s, blk * (uint64_t)n, args->memtype);
    for (i = 1; i < n; i++) {
        int to = (r + i) % n, from = (r - i + n) % n;
        tacl__bref_t dst = io.in_place
                               ? tacl__bref(tmp, blk * (uint64_t)from)
                               : tacl__bref_add(io.out,
                                                blk * (uint64_t)from);

        sends[to] = tacl__sched_send(
            s, to, tacl__bref_add(io.in, blk * (uint64_t)to), blk, tag,
            TACL__NO_DEPS);
        recvs[from] = tacl__sched_recv(s, from, dst, blk, tag,
                                       TACL__NO_DEPS);
    }
    for (i = 1; io.in_place && i < n; i++) {
        int from = (r - i + n) % n;

        tacl__sched_copy(s, tacl__bref_add(io.out, blk * (uint64_t)from),
                         tacl__bref(tmp, blk * (uint64_t)from), blk,
                         TACL__DEPS(recvs[from], sends[from]));
    }
    free(sends);
    return tacl__sched_status(s);
}

/* Receive slots per peer in the reduce-scatter pool. */
#define DIRECT_POOL_PER_PEER 2
/* Chunks per block at most (two messages per chunk and peer). */
#define DIRECT_MAX_CHUNKS 256
/*
 * Chunks an all-gather rank receives ahead of the last one every peer has
 * taken from it.  Pulling peers never wait for one another, so without a
 * bound ranks that share cores drift apart by whole time slices and each
 * reads every block from memory; kept within two chunks, the ranks read a
 * chunk of a block while another's read has left it in the last-level
 * cache.  Measurements: docs/bench/README.md, "Direct algorithms".
 */
#define DIRECT_AG_LEAD 2

typedef struct {
    tacl__sched_t *s;
    const tacl__coll_args_t *args;
    tacl__algo_io_t io;
    int n, r;
    size_t es;
    size_t total;    /* elements of the n-block vector */
    size_t cs;       /* chunk grid, elements */
    uint32_t nchunks;
    int32_t *rs_send; /* reduce-scatter send of chunk c of block j */
    int32_t *fin;     /* step that finished chunk c of block r; for an
                         all-gather, the receive of chunk c from r - 1 */
    int32_t *taken;   /* all-gather: the join of chunk c's sends */
    int32_t *sends;   /* all-gather: one chunk's sends, n entries */
    int stream;       /* all-gather: write the output past the cache */
    int staged;       /* all-gather: peers read the block from stage */
    tacl__bref_t stage; /* shared scratch holding this rank's block */
} direct_t;

static size_t direct_blk(const direct_t *d, int b, size_t *off_p)
{
    size_t off, cnt;

    tacl__block_range(d->total, d->n, b, &off, &cnt);
    if (off_p != NULL)
        *off_p = off;
    return cnt;
}

/* Byte offset of chunk c of block b in the n-block vector. */
static uint64_t direct_at(const direct_t *d, int b, uint32_t c)
{
    size_t off;

    direct_blk(d, b, &off);
    return (uint64_t)(off + (size_t)c * d->cs) * d->es;
}

/*
 * Reduce-scatter of the n-block vector at io.in into dst (block r's place
 * in the output); d->fin gets the last step of each chunk.
 */
static void direct_rs(direct_t *d, tacl__bref_t dst)
{
    tacl__sched_t *s = d->s;
    const tacl__coll_args_t *args = d->args;
    uint32_t C = d->nchunks, c;
    int n = d->n, r = d->r, npool = DIRECT_POOL_PER_PEER * (n - 1);
    size_t cnt_r = direct_blk(d, r, NULL);
    uint64_t slot_bytes = (uint64_t)d->cs * d->es, seq = 0;
    int32_t pool = tacl__sched_scratch(s, slot_bytes * (uint64_t)npool,
                                       args->memtype);
    int32_t *reader = d->fin + C; /* last reduction of each pool slot */
    tacl_op_t op = tacl__algo_step_op(args->op);

    for (int i = 0; i < npool; i++)
        reader[i] = -1;
    for (int i = 1; i < n; i++) {
        int to = (r + i) % n;
        size_t cnt = direct_blk(d, to, NULL);

        for (c = 0; c < C; c++) {
            size_t len = tacl__chunk_len(cnt, d->cs, c);

            d->rs_send[(size_t)to * C + c] =
                len == 0 ? -1
                         : tacl__sched_send(
                               s, to,
                               tacl__bref_add(d->io.in, direct_at(d, to, c)),
                               len * d->es, tacl__algo_tag(args, c),
                               TACL__NO_DEPS);
        }
    }
    for (c = 0; c < C; c++) {
        size_t len = tacl__chunk_len(cnt_r, d->cs, c);
        tacl__bref_t out = tacl__bref_add(dst, (uint64_t)c * slot_bytes);
        tacl__bref_t in = tacl__bref_add(d->io.in, direct_at(d, r, c));
        /* The chunk's n - 1 slots are consecutive: npool is a multiple
         * of n - 1. */
        int first = (int)(seq % (uint64_t)npool);
        tacl__bref_t slots = tacl__bref(pool, (uint64_t)first * slot_bytes);
        int32_t *got = d->fin + C + npool; /* this chunk's receives */
        int avg = args->op == TACL_AVG, ndeps;
        int32_t last;

        d->fin[c] = -1;
        if (len == 0)
            continue;
        for (int i = 1; i < n; i++, seq++) {
            int from = (r - i + n) % n, p = first + i - 1;

            got[i - 1] = tacl__sched_recv(
                s, from, tacl__bref(pool, (uint64_t)p * slot_bytes),
                len * d->es, tacl__algo_tag(args, c), TACL__DEPS(reader[p]));
        }
        /* One pass folds every copy into the output, in a fixed order
         * (the same bits on every run); for AVG the sum stays in the first
         * slot and the division writes the output, so every output byte
         * is written once. */
        ndeps = tacl__sched_fold(s, got, n - 1);
        last = tacl__sched_reduce_n(s, avg ? slots : out, in, slots, n - 1,
                                    slot_bytes, len, args->dtype, op, got,
                                    ndeps);
        if (avg)
            last = tacl__sched_div(s, out, slots, len, args->dtype,
                                   (uint32_t)n, TACL__DEPS(last));
        for (int i = 0; i < n - 1; i++)
            reader[first + i] = last;
        d->fin[c] = last;
    }
}

/*
 * All-gather into the n-block vector at io.out: block r is read from src
 * (after d->fin when after_rs), the others are received in place.  A
 * plain all-gather (not after_rs) leaves in d->fin[c] the receive of
 * chunk c from rank r - 1.
 */
static void direct_ag(direct_t *d, tacl__bref_t src, int after_rs)
{
    tacl__sched_t *s = d->s;
    const tacl__coll_args_t *args = d->args;
    uint32_t C = d->nchunks, c;
    int n = d->n, r = d->r;
    size_t cnt_r = direct_blk(d, r, NULL);

    for (c = 0; c < C; c++) {
        size_t ls = tacl__chunk_len(cnt_r, d->cs, c);
        uint64_t tag = tacl__algo_tag(args, (uint64_t)C + c);
        uint64_t at = (uint64_t)c * d->cs * d->es;
        tacl__bref_t from_c = tacl__bref_add(src, at);
        int32_t ready = after_rs ? d->fin[c] : -1;
        int nsent = 0;

        /* Staged: the chunk goes to shared scratch first, in step with
         * the receives from r - 1 like the own block's copy. */
        if (!after_rs && d->staged && ls > 0) {
            from_c = tacl__bref_add(d->stage, at);
            ready = tacl__sched_copy(s, from_c, tacl__bref_add(src, at),
                                     ls * d->es,
                                     TACL__DEPS(c > 0 ? d->fin[c - 1] : -1));
        }

        for (int i = 1; i < n; i++) {
            int to = (r + i) % n, from = (r - i + n) % n;
            size_t lr = tacl__chunk_len(direct_blk(d, from, NULL), d->cs, c);
            int32_t after = -1, got = -1;

            if (ls > 0)
                d->sends[nsent++] = tacl__sched_send(s, to, from_c,
                                                     ls * d->es, tag,
                                                     TACL__DEPS(ready));
            /* In place, block from was sent from this buffer by the
             * reduce-scatter: overwrite it once that send is done. */
            if (after_rs && d->io.in_place)
                after = d->rs_send[(size_t)from * C + c];
            else if (!after_rs && c >= DIRECT_AG_LEAD)
                after = d->taken[c - DIRECT_AG_LEAD];
            if (lr > 0)
                got = tacl__sched_recv_stream(
                    s, from, tacl__bref_add(d->io.out, direct_at(d, from, c)),
                    lr * d->es, tag, !after_rs && d->stream,
                    TACL__DEPS(after));
            /* The own block's copy keeps pace with rank r - 1. */
            if (!after_rs && i == 1)
                d->fin[c] = got;
        }
        if (!after_rs) {
            nsent = tacl__sched_fold(s, d->sends, nsent);
            d->taken[c] = nsent > 0 ? tacl__sched_nop(s, d->sends, nsent)
                                    : -1;
        }
    }
}

/*
 * This rank's block copied from src into its place in the output, chunk
 * by chunk, chunk c after d->fin[c - lag] (from chunk lag on), streamed
 * past the cache when d->stream.
 *
 * An out-of-place all-gather copies from the input with lag 1, each
 * chunk after the previous one from rank r - 1 has arrived.  The peers
 * read the same input chunks while they receive at the same pace, so the
 * copy and their reads of a chunk find it in cache and memory serves it
 * once; past the cache (TACL_STREAM_MIN) the copy writes with
 * non-temporal stores, which neither read the output first nor evict
 * what the peers are about to read (measurements: docs/bench/README.md,
 * "Direct algorithms").  A staged all-reduce copies from the stage with
 * lag 0, each chunk once reduced.
 */
static void direct_copy_own(direct_t *d, tacl__bref_t src, uint32_t lag)
{
    size_t cnt = direct_blk(d, d->r, NULL);
    tacl__bref_t own = tacl__bref_add(d->io.out, direct_at(d, d->r, 0));

    for (uint32_t c = 0; c < d->nchunks; c++) {
        size_t len = tacl__chunk_len(cnt, d->cs, c);
        uint64_t at = (uint64_t)c * d->cs * d->es;

        if (len > 0)
            tacl__sched_copy_stream(d->s, tacl__bref_add(own, at),
                                    tacl__bref_add(src, at), len * d->es,
                                    d->stream,
                                    TACL__DEPS(c >= lag ? d->fin[c - lag]
                                                        : -1));
    }
}

/*
 * Whether the peers on this node should read this rank's block (an
 * all-gather's input, an all-reduce's reduced block) from shared
 * scratch: when it is host memory they cannot map (not from
 * tacl_mem_alloc: args->send_mapped), the operation is large (streamed)
 * and it has at least two peers on the node, one extra copy of the block
 * into memory they map saves each of them a cross-memory copy, which
 * pins pages and runs through the kernel; with one peer it saves one
 * copy for one, which measured no clear gain (docs/bench/README.md,
 * "Direct algorithms").
 * Staging needs the node's processes to map shared scratch at all
 * (args->shm_map).
 */
static void direct_stage(direct_t *d, const tacl__topo_view_t *view)
{
    uint64_t bytes = (uint64_t)direct_blk(d, d->r, NULL) * d->es;
    int32_t b;

    if (!d->stream || view->local_size < 3 || bytes == 0 ||
        d->args->memtype != TACL_MEM_HOST || !d->args->shm_map ||
        d->args->send_mapped)
        return;
    b = tacl__sched_scratch_shared(d->s, bytes);
    if (b < 0)
        return;
    d->staged = 1;
    d->stage = tacl__bref(b, 0);
}

static tacl_status_t direct_blocks(tacl__sched_t *s,
                                   const tacl__coll_args_t *args,
                                   const tacl__topo_view_t *view)
{
    direct_t d = {0};
    int ag = args->type == TACL_COLL_ALLGATHER;
    int ar = args->type == TACL_COLL_ALLREDUCE;
    size_t maxblk;
    tacl_status_t status;
    int done;

    d.s = s;
    d.args = args;
    d.n = s->nranks;
    d.r = s->rank;
    d.es = tacl_dtype_size(args->dtype);
    status = tacl__algo_blocks_io(s, args, &d.io, &d.total, &done);
    if (status != TACL_OK || done)
        return status;
    maxblk = TACL_DIV_UP(d.total, (size_t)d.n);
    d.nchunks = tacl__algo_nchunks_max(args, maxblk, d.es, 2,
                                       DIRECT_MAX_CHUNKS);
    d.cs = TACL_MAX(TACL_DIV_UP(maxblk, (size_t)d.nchunks), (size_t)1);
    d.nchunks = (uint32_t)TACL_MAX(TACL_DIV_UP(maxblk, d.cs), (size_t)1);
    /* rs_send (n per chunk), fin (one per chunk), pool readers, the
     * receives of one chunk; then taken (one per chunk) and sends. */
    d.rs_send = malloc(((size_t)d.nchunks * (size_t)(d.n + 2) +
                        (DIRECT_POOL_PER_PEER + 2) * (size_t)d.n) *
                       sizeof(*d.rs_send));
    if (d.rs_send == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "cannot allocate a direct schedule of %u chunks",
                           d.nchunks);
    d.fin = d.rs_send + (size_t)d.nchunks * (size_t)d.n;
    d.taken = d.fin + d.nchunks + (DIRECT_POOL_PER_PEER + 1) * (size_t)d.n;
    d.sends = d.taken + d.nchunks;
    if (ag) {
        d.stream = tacl__algo_stream(view, (uint64_t)d.total * d.es);
        direct_stage(&d, view);
        /* Peers read the input itself. */
        for (uint32_t c = 0; c < d.nchunks; c++)
            d.fin[c] = -1;
        direct_ag(&d, d.io.in, 0);
        if (!d.io.in_place)
            direct_copy_own(&d, d.io.in, 1);
    } else if (ar) {
        tacl__bref_t own = tacl__bref_add(d.io.out, direct_at(&d, d.r, 0));

        /* Staged, the reduced block goes to shared scratch, the peers
         * read it there and this rank copies it to its output. */
        d.stream = tacl__algo_stream(view, (uint64_t)d.total * d.es);
        direct_stage(&d, view);
        direct_rs(&d, d.staged ? d.stage : own);
        direct_ag(&d, d.staged ? d.stage : own, 1);
        if (d.staged)
            direct_copy_own(&d, d.stage, 0);
    } else {
        direct_rs(&d, d.io.out);
    }
    free(d.rs_send);
    return tacl__sched_status(s);
}

int tacl__direct_supports(const tacl__coll_args_t *args,
                          const tacl__topo_view_t *view)
{
    switch (args->type) {
    case TACL_COLL_ALLTOALL:
    case TACL_COLL_ALLGATHER:
    case TACL_COLL_REDUCE_SCATTER:
    case TACL_COLL_ALLREDUCE:
        return 1;
    default:
        return 0;
    }
}

/*
 * All-to-all: n - 1 messages of one block.  The block algorithms run one
 * phase (all-gather, reduce-scatter) or two (all-reduce) in which each
 * rank moves n - 1 blocks; all are posted at once, so on one node a phase
 * costs one latency, plus the per-message cost of the n - 2 further
 * messages (cost.h), and no pipeline fill.  On several nodes an
 * all-to-all is such a phase of one block per peer: all ranks of a node
 * send to every remote rank at once through the NIC ports of their
 * rails, each message a network latency, the port's ranks' flows
 * sharing it, and every flow beyond the first stretching the port's time
 * (tacl__cost_contention), which is what a flat exchange's many flows
 * pay on a slow network and a hierarchical one's few do not.
 */
double tacl__direct_cost(const tacl__coll_args_t *args,
                         const tacl__topo_view_t *view, double alpha,
                         double beta)
{
    double p = view->nranks, m, blk, phases, peers = p - 1;

    m = (double)args->count * (double)tacl_dtype_size(args->dtype);
    phases = args->type == TACL_COLL_ALLREDUCE ? 2 : 1;
    blk = args->type == TACL_COLL_ALLREDUCE ? m / p : m;
    if (view->n_nodes > 1) {
        int local = view->local_size > 0 ? view->local_size : 1;
        int on_port = tacl__cost_port_ranks(view, local);
        double an = tacl__link_alpha(view, TACL_LINK_NET, alpha);
        double bh = tacl__cost_intra_beta(args, view);
        /* Every rank's p - local flows out share its NIC port with the
         * port's other ranks'. */
        double out = (p - local) * blk * on_port /
                     tacl__cost_port_bw(view, beta, local) *
                     tacl__cost_contention((p - local) * on_port);

        return phases * (peers * an + TACL_MAX(out, (local - 1) * blk * bh));
    }
    alpha = tacl__link_alpha(view, TACL_LINK_HOST, alpha);
    beta = tacl__link_beta(view, TACL_LINK_HOST, beta);
    return phases * (alpha + (peers - 1) * tacl__cost_host_msg(view) +
                     peers * blk * beta) +
           tacl__cost_reduced(args, peers * blk) * TACL__COST_GAMMA_HOST;
}

tacl_status_t tacl__direct_build(tacl__sched_t *s,
                                 const tacl__coll_args_t *args,
                                 const tacl__topo_view_t *view)
{
    if (!tacl__direct_supports(args, view))
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                           "direct does not run %s",
                           tacl_coll_name(args->type));
    if (args->count == 0)
        return TACL_OK;
    if (args->type == TACL_COLL_ALLTOALL)
        return direct_alltoall(s, args);
    return direct_blocks(s, args, view);
}
