/*
 * Hierarchy helpers shared by the hierarchical algorithms (MiCS section
 * 3.3, PaRO H-Ring and HO-Ring section 3.4, and the hierarchical
 * all-reduce): who is on which node, in which order, and the ring phases
 * those algorithms are made of.
 *
 * Ranks need not be numbered node by node.  Each node's member list is
 * sorted by rank, a rank's local index is its place in that list, and the
 * rail of local index l is the list of ranks with local index l, one per
 * node in node order.  The algorithms run only on regular layouts (every
 * node the same number of ranks, at least two nodes and two ranks per
 * node); elsewhere they fall back to the flat ring.
 *
 * Every hierarchical algorithm is a composition of ring phases over
 * "pieces": the operation's vector is cut into p = g * k pieces, piece
 * (m, l) belonging to the rank of node m and local index l.  A phase is a
 * ring (a rail across nodes, or the ranks of one node) whose block b is a
 * set of nseg pieces; all-gather phases forward pieces, reduce-scatter
 * phases combine them.  Chunk c of a piece depends only on chunk c of the
 * steps before it, so phases pipeline unless a join gates them.
 */
#ifndef TACL_ALGORITHMS_HIER_H
#define TACL_ALGORITHMS_HIER_H

#include "cost.h"
#include "toolbox.h"

/** Who is where: member lists per node, local index and node per rank. */
typedef struct {
    int nranks;
    int n_nodes;
    int k;            /* ranks per node when regular, else 0 */
    int regular;      /* every node has the same number of ranks */
    int *node_start;  /* n_nodes + 1 offsets into members */
    int *members;     /* nranks: ranks of node 0, node 1, ... by rank */
    int *local;       /* nranks: local index of each rank */
    const int *node_of;
} tacl__hier_t;

/**
 * Whether view is a layout the hierarchical algorithms serve: at least
 * two nodes, every node the same number (at least two) of ranks.
 * Allocates nothing.
 */
int tacl__hier_layout_ok(const tacl__topo_view_t *view);

/** Build the member lists of view; TACL_ERR_NO_MEMORY if out of memory. */
tacl_status_t tacl__hier_init(tacl__hier_t *h, const tacl__topo_view_t *view);
void tacl__hier_fini(tacl__hier_t *h);

/** Ranks on node m. */
static inline int tacl__hier_node_size(const tacl__hier_t *h, int m)
{
    return h->node_start[m + 1] - h->node_start[m];
}

/** The rank of local index l on node m. */
static inline int tacl__hier_rank(const tacl__hier_t *h, int m, int l)
{
    return h->members[h->node_start[m] + l];
}

/**
 * The rail of local index l (regular layouts): rail_p[m] is the rank of
 * local index l on node m, for every node m.
 */
void tacl__hier_rail(const tacl__hier_t *h, int l, int *rail_p);

/*
 * Ring phases.  A context holds an operation's pieces and, per piece and
 * chunk, the step that last made it ready and the step that last read the
 * input there; phases read and update them.
 */
typedef struct {
    tacl__sched_t *s;
    const tacl__coll_args_t *args;
    tacl__hier_t h;
    tacl__algo_io_t io;
    int g, k;             /* nodes, ranks per node */
    int m, l;             /* this rank's node and local index */
    size_t es;
    size_t *poff, *pcnt;  /* per piece: element offset in the vector and
                             element count */
    size_t maxpiece;      /* elements of the largest piece */
    size_t cs;            /* chunk grid, elements */
    uint32_t C;           /* chunks per piece */
    tacl__bref_t *loc;    /* per piece: where its current data lives */
    tacl__bref_t *dsts;   /* g destinations for reduce-scatter phases */
    int32_t *ready;       /* per piece and chunk: step that made it ready */
    int32_t *inread;      /* per piece and chunk: last read of the input */
    int32_t *work;        /* working rows for the phases */
    size_t work_len;
    uint64_t tag_next;    /* first free message number */
    int32_t *joined;      /* per phase ids, collected for a join */
    size_t njoined, joined_cap;
    int collect;          /* whether phases record their steps for a join */
} tacl__hier_ctx_t;

/** The piece of node m and local index l. */
static inline int tacl__hier_piece(const tacl__hier_ctx_t *x, int m, int l)
{
    return m * x->k + l;
}

/** How an operation's vector is cut into pieces. */
typedef enum {
    TACL__HIER_PIECE_RANK = 0, /* piece (m, l) is the block of its rank:
                                  offset rank * count, count elements */
    TACL__HIER_PIECE_SHARD     /* piece (m, l) is block l * g + m of a
                                  count-element vector */
} tacl__hier_pieces_t;

/**
 * Set up a context for args on a regular layout: io registered with
 * in_bytes/out_bytes, pieces cut as layout says, chunks for
 * msgs_per_chunk messages per chunk to one peer.  On failure nothing is
 * left to free.
 */
tacl_status_t tacl__hier_ctx_init(tacl__hier_ctx_t *x, tacl__sched_t *s,
                                  const tacl__coll_args_t *args,
                                  const tacl__topo_view_t *view,
                                  uint64_t in_bytes, uint64_t out_bytes,
                                  tacl__hier_pieces_t layout,
                                  uint64_t msgs_per_chunk);
/**
 * Set x up for a hierarchical all-gather or reduce-scatter of args: the
 * input and output sizes follow from the collective, pieces are per rank.
 */
tacl_status_t tacl__hier_begin(tacl__hier_ctx_t *x, tacl__sched_t *s,
                               const tacl__coll_args_t *args,
                               const tacl__topo_view_t *view);
/** The phases of a hierarchical build on a context set up for it. */
typedef tacl_status_t (*tacl__hier_body_t)(tacl__hier_ctx_t *x, int arg);

/**
 * Build args with body(x, arg) on a context from tacl__hier_begin: nothing
 * when count is 0, the flat ring on a layout the hierarchical algorithms
 * do not serve.
 */
tacl_status_t tacl__hier_run(tacl__sched_t *s, const tacl__coll_args_t *args,
                             const tacl__topo_view_t *view,
                             tacl__hier_body_t body, int arg);
/** The build shared by MiCS (joined 0) and H-Ring (joined 1). */
tacl_status_t tacl__hier_staged_build(tacl__sched_t *s,
                                      const tacl__coll_args_t *args,
                                      const tacl__topo_view_t *view,
                                      int joined);
void tacl__hier_ctx_fini(tacl__hier_ctx_t *x);

/** A ring phase: members, this rank's position, and its blocks' pieces. */
typedef struct {
    int n;              /* ring size */
    int pos;            /* this rank's position */
    const int *ring;    /* n ranks in ring order */
    int nseg;           /* pieces per block */
    const int *piece;   /* n * nseg: piece of segment j of block b */
    int32_t gate;       /* step the first sends wait for, or -1 */
} tacl__hier_phase_t;

/**
 * All-gather phase: block pos is ready (x->ready), each other block is
 * received into the output at its piece's place and forwarded.  war
 * (per piece and chunk, or NULL) are steps each receive must follow.
 */
void tacl__hier_ag(tacl__hier_ctx_t *x, const tacl__hier_phase_t *ph,
                   const int32_t *war);

/**
 * Reduce-scatter phase: each piece's partial sums live at x->loc and are
 * ready at x->ready; afterwards the pieces of block pos are reduced over
 * the ring into dst[j] (for segment j), divided by divisor when it is
 * not 0, and x->loc/x->ready describe them there.
 */
void tacl__hier_rs(tacl__hier_ctx_t *x, const tacl__hier_phase_t *ph,
                   const tacl__bref_t *dst, uint32_t divisor);

/** A phase with its own arrays, made by the constructors below. */
typedef struct {
    tacl__hier_phase_t ph;
    int *ring;
    int *piece;
} tacl__hier_ring_t;

/** Which nodes' pieces a node ring carries. */
typedef enum {
    TACL__HIER_NODES_ALL = 0, /* every node's: g segments per block */
    TACL__HIER_NODES_OWN,     /* this node's only: 1 segment */
    TACL__HIER_NODES_OTHERS   /* every other node's: g - 1 segments */
} tacl__hier_nodes_t;

/** This rank's rail: g ranks, block m is piece (m, l). */
tacl_status_t tacl__hier_rail_ring(tacl__hier_ctx_t *x, tacl__hier_ring_t *r);

/**
 * This rank's node: k ranks by local index, block b holding the pieces
 * (m', b) of the nodes m' that which selects, in node order.
 */
tacl_status_t tacl__hier_node_ring(tacl__hier_ctx_t *x,
                                   tacl__hier_nodes_t which,
                                   tacl__hier_ring_t *r);
void tacl__hier_ring_free(tacl__hier_ring_t *r);

/**
 * Reduce-scatter phase over a node ring whose results, the node's partial
 * sums of pieces (m', l), go to slot m' of the scratch np.
 */
void tacl__hier_rs_partials(tacl__hier_ctx_t *x, const tacl__hier_ring_t *r,
                            tacl__bref_t np);

/**
 * An all-gather's own block copied from its input to its place in the
 * output, when the operation is an out-of-place all-gather.
 */
void tacl__hier_copy_own(tacl__hier_ctx_t *x);

/**
 * All-gather of the pieces: the rail ring, then the node ring of every
 * node's pieces; the node ring forwards each piece as it arrives, or with
 * joined starts only once the rail ring is done (H-Ring).  In place, each
 * receive waits for the last read of the input bytes it overwrites.
 */
tacl_status_t tacl__hier_allgather(tacl__hier_ctx_t *x, int joined);

/**
 * Reduce-scatter: the node ring leaves the node's partial sums of the
 * pieces (m', l) in scratch, then the rail ring finishes piece (m, l)
 * into the output (its place in the vector for all-reduce), divided for
 * AVG; joined makes the rail wait for the whole node ring (H-Ring).
 */
tacl_status_t tacl__hier_reduce_scatter(tacl__hier_ctx_t *x, int joined);

/**
 * Terms of the cost model of the hierarchical algorithms: piece size,
 * and the time of the rail and node rings, with per-link alpha and beta.
 */
typedef struct {
    double p, g, k;
    double b;        /* bytes of one piece: M / p */
    double chunks;   /* pipeline chunks per piece */
    double a_net, b_net;
    double a_host, b_host; /* inside a node: tacl__cost_intra_class */
    double inter;    /* one rail ring: (g-1)(a_net / chunks + b / flow
                        bw) */
    double intra;    /* one node ring of g pieces per block */
    double tail;     /* one chunk forwarded around a node ring */
} tacl__hier_model_t;

/**
 * Fill the model for args on view; alpha and beta are the tuner's
 * fallback for the network when the view gives no link figures.
 */
void tacl__hier_model(const tacl__coll_args_t *args,
                      const tacl__topo_view_t *view, double alpha,
                      double beta, tacl__hier_model_t *mod_p);

/** A NOP after every step the phases built since collect was set. */
int32_t tacl__hier_join(tacl__hier_ctx_t *x);

/** Scratch for n pieces: slot i at the returned bref + i * maxpiece. */
tacl__bref_t tacl__hier_scratch(tacl__hier_ctx_t *x, int n);

/**
 * The entry points of the hierarchical algorithm files.  H-Ring and
 * HO-Ring run where MiCS does: their rows use tacl__mics_supports.
 */
TACL__ALGO_DECLARE_(mics)
TACL__ALGO_DECLARE_COST_BUILD_(hring)
TACL__ALGO_DECLARE_COST_BUILD_(horing)
TACL__ALGO_DECLARE_(hier)

/* The hierarchical all-to-all-v (hier_v.c). */
TACL__ALGO_DECLARE_(hierv)

#endif /* TACL_ALGORITHMS_HIER_H */
