/*
 * The sparse all-reduce's schemes on a modelled cluster (design in
 * sparse_sim.h).  Each phase is one collective whose per-rank sizes come
 * from the rows; the variable-count phases run with every rank's own
 * counts (a table with the whole matrix), so an owner that gets more
 * rows than the others (the skew of even ranges) is the slow link it
 * would be.
 * Sizes are lib/sparse.c's: a block of c rows is its indices padded to 8
 * bytes, then its values, padded to 8.
 */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sparse.h"
#include "sparse_sim.h"

static const char *const names[TACL__SSIM_COUNT] = {
    "dense", "agsparse", "ps", "omni", "sparcml", "zen", "zen_hier",
    "dense_zen",
};

const char *tacl__ssim_name(tacl__ssim_scheme_t scheme)
{
    return (unsigned)scheme < TACL__SSIM_COUNT ? names[scheme] : "invalid";
}

/* OmniReduce's block: 256 values, sent with a 4-byte id. */
#define OMNI_BLOCK 256

static size_t pad8(size_t x)
{
    return (x + 7) & ~(size_t)7;
}

/* ---- Bitsets of rows. ---- */

typedef struct {
    uint64_t nbits;
    uint64_t *w;
} bits_t;

static int bits_new(bits_t *b, uint64_t nbits)
{
    b->nbits = nbits;
    b->w = calloc((size_t)((nbits + 63) / 64) + 1, sizeof(uint64_t));
    return b->w != NULL;
}

static void bits_set(bits_t *b, uint64_t i)
{
    b->w[i / 64] |= 1ull << (i % 64);
}

static uint64_t bits_count(const bits_t *b)
{
    uint64_t n = 0;

    for (uint64_t k = 0; k < (b->nbits + 63) / 64; k++)
        n += (uint64_t)__builtin_popcountll(b->w[k]);
    return n;
}

/* a |= b. */
static void bits_or(bits_t *a, const bits_t *b)
{
    for (uint64_t k = 0; k < (a->nbits + 63) / 64; k++)
        a->w[k] |= b->w[k];
}

/* ---- Phases. ---- */

typedef struct {
    const tacl__sim_cluster_t *c;
    tacl__ssim_result_t *res;
} run_t;

static tacl_status_t add(run_t *r, const tacl__sim_result_t *one)
{
    r->res->seconds += one->seconds;
    for (int k = 0; k < TACL_NUM_LINK_CLASSES; k++)
        r->res->bytes[k] += one->bytes[k];
    r->res->phases++;
    return TACL_OK;
}

/* A fixed-size collective every rank calls alike. */
static tacl_status_t phase_fixed(run_t *r, tacl_coll_t type, size_t count,
                                 tacl_dtype_t dtype)
{
    tacl__coll_args_t a = {.type = type, .count = count, .dtype = dtype,
                           .op = TACL_SUM, .memtype = TACL_MEM_HOST};
    tacl__sim_result_t one;
    tacl_status_t st = tacl__sim_run(r->c, &a, NULL, 0, &one);

    return st == TACL_OK ? add(r, &one) : st;
}

/*
 * An all-to-all-v of m[i * n + j] bytes from rank i to rank j, or (gv)
 * an all-gather-v of m[j] bytes from each rank j: one table holding
 * every rank's counts (its matrix), from which the simulator builds each
 * rank with its own row and column.  direct: the direct all-to-all-v,
 * as a node's or a rail's communicator runs it (the decider would route
 * the whole cluster's through node leaders).
 */
static tacl_status_t phase_v(run_t *r, const uint64_t *m, int gv, int direct)
{
    int n = r->c->nranks;
    uint64_t *rows = malloc((size_t)n * n * sizeof(*rows)), total = 0;
    size_t *zero = calloc((size_t)n, sizeof(size_t));
    tacl__vcounts_t *base = NULL, *v = NULL;
    tacl__sim_result_t one;
    tacl_status_t st = TACL_ERR_NO_MEMORY;

    if (rows == NULL || zero == NULL)
        goto out;
    for (int i = 0; i < n; i++) {
        total += gv ? m[i] : 0;
        for (int j = 0; j < n; j++)
            rows[(size_t)i * n + j] = gv ? m[i] : m[(size_t)i * n + j];
    }
    base = gv ? tacl__vcounts_new(n, NULL, NULL, 0, zero, zero)
              : tacl__vcounts_new(n, zero, zero, 0, zero, zero);
    v = base != NULL ? tacl__vcounts_with(base, rows) : NULL;
    if (v != NULL) {
        tacl__coll_args_t a = {
            .type = gv ? TACL_COLL_ALLGATHERV : TACL_COLL_ALLTOALLV,
            .count = gv ? (size_t)(total / (uint64_t)n) : 0, .v = v,
            .dtype = TACL_UINT8, .memtype = TACL_MEM_HOST};

        tacl__algo_force_t one_row;

        tacl__algo_force_one(&one_row, tacl__algo_row(TACL__ALGO_DIRECT,
                                                      TACL_COLL_ALLTOALLV));
        st = tacl__sim_run(r->c, &a, direct ? &one_row : NULL, 0, &one);
        if (st == TACL_OK)
            add(r, &one);
    }
out:
    tacl__vcounts_free(base);
    tacl__vcounts_free(v);
    free(rows);
    free(zero);
    return st;
}

/* ---- Schemes. ---- */

static size_t coo_bytes(const tacl__ssim_case_t *k, uint64_t rows)
{
    return pad8(pad8((size_t)rows * k->index_bytes) +
                (size_t)rows * k->row_len * k->elem);
}

static tacl_status_t run_agsparse(run_t *r, const tacl__ssim_case_t *k)
{
    int n = k->nranks;
    uint64_t *m = malloc((size_t)n * sizeof(*m));
    tacl_status_t st;

    if (m == NULL)
        return TACL_ERR_NO_MEMORY;
    for (int j = 0; j < n; j++)
        m[j] = coo_bytes(k, k->nnz[j]);
    st = phase_fixed(r, TACL_COLL_ALLGATHER, 1, TACL_UINT64);
    if (st == TACL_OK)
        st = phase_v(r, m, 1, 0);
    free(m);
    return st;
}

/* An owner's pulled block of rows: its index list or (dsize > 0, by
 * the byte rule) a bitmap over its domain of dsize rows, then values. */
static uint64_t pull_bytes(uint64_t rows, uint64_t dsize, size_t index_bytes,
                           size_t unit_bytes)
{
    int bm = dsize > 0 &&
             tacl__sparse_pull_bitmap((size_t)rows, (size_t)dsize,
                                      index_bytes);

    return pad8((bm ? pad8(tacl__sparse_bitmap_bytes((size_t)dsize))
                    : pad8((size_t)rows * index_bytes)) +
                rows * unit_bytes);
}

/*
 * Push to owners and pull their sums (PS, ZEN, OMNI): units are rows or
 * (OMNI) blocks; unit u of rank i is in set[i], the owners' function o;
 * push and pull units cost unit_bytes each plus, for COO, an index.
 */
static tacl_status_t run_owners(run_t *r, const tacl__ssim_case_t *k,
                                const bits_t *set, const tacl__owner_t *o,
                                int bitmap, size_t unit_bytes,
                                size_t index_bytes)
{
    int n = k->nranks;
    uint64_t *push = calloc((size_t)n * n, sizeof(uint64_t));
    uint64_t *pull = calloc((size_t)n, sizeof(uint64_t));
    uint64_t *dsize = calloc((size_t)n, sizeof(uint64_t));
    bits_t all;
    tacl_status_t st = TACL_OK;

    if (!push || !pull || !dsize || !bits_new(&all, set[0].nbits)) {
        free(push);
        free(pull);
        free(dsize);
        return TACL_ERR_NO_MEMORY;
    }
    for (int i = 0; i < n; i++) {
        for (uint64_t w = 0; w < (set[i].nbits + 63) / 64; w++) {
            for (uint64_t x = set[i].w[w]; x; x &= x - 1) {
                uint64_t u = w * 64 + (uint64_t)__builtin_ctzll(x);

                push[(size_t)i * n + tacl__owner_of(o, u)]++;
            }
        }
        bits_or(&all, &set[i]);
    }
    for (uint64_t w = 0; w < (all.nbits + 63) / 64; w++)
        for (uint64_t x = all.w[w]; x; x &= x - 1)
            pull[tacl__owner_of(o, w * 64 + (uint64_t)__builtin_ctzll(x))]++;
    if (bitmap)
        for (uint64_t u = 0; u < all.nbits; u++)
            dsize[tacl__owner_of(o, u)]++;
    for (size_t e = 0; e < (size_t)n * n; e++)
        push[e] = pad8(pad8((size_t)push[e] * index_bytes) +
                       push[e] * unit_bytes);
    for (int j = 0; j < n; j++)
        pull[j] = pull_bytes(pull[j], bitmap ? dsize[j] : 0, index_bytes,
                             unit_bytes);
    st = phase_fixed(r, TACL_COLL_ALLTOALL, 1, TACL_UINT64);
    if (st == TACL_OK)
        st = phase_v(r, push, 0, 0);
    if (st == TACL_OK)
        st = phase_fixed(r, TACL_COLL_ALLGATHER, 1, TACL_UINT64);
    if (st == TACL_OK)
        st = phase_v(r, pull, 1, 0);
    free(all.w);
    free(push);
    free(pull);
    free(dsize);
    return st;
}

/* One SparCML message of a partial sum's rows: COO or the dense table,
 * whichever is fewer bytes. */
static uint64_t msg_bytes(const tacl__ssim_case_t *k, const bits_t *rows)
{
    uint64_t coo = coo_bytes(k, bits_count(rows));
    uint64_t dense = k->nrows * k->row_len * k->elem;

    return coo < dense ? coo : dense;
}

/* SparCML's recursive doubling; each message its rows' COO or, when
 * fewer bytes, the dense table. */
static tacl_status_t run_sparcml(run_t *r, const tacl__ssim_case_t *k,
                                 bits_t *set)
{
    int n = k->nranks, p = 1;
    uint64_t *m = calloc((size_t)n * n, sizeof(uint64_t));
    tacl_status_t st = TACL_OK;

    if (m == NULL)
        return TACL_ERR_NO_MEMORY;
    while (p * 2 <= n)
        p *= 2;
    if (n > p) {
        for (int a = p; a < n; a++)
            m[(size_t)(a) * n + (a - p)] = msg_bytes(k, &set[a]);
        st = phase_v(r, m, 0, 0);
        for (int a = p; a < n; a++)
            bits_or(&set[a - p], &set[a]);
    }
    for (int dist = 1; dist < p && st == TACL_OK; dist *= 2) {
        memset(m, 0, (size_t)n * n * sizeof(*m));
        for (int a = 0; a < p; a++)
            m[(size_t)(a) * n + (a ^ dist)] = msg_bytes(k, &set[a]);
        st = phase_v(r, m, 0, 0);
        for (int a = 0; a < p; a++)
            if (a < (a ^ dist))
                bits_or(&set[a], &set[a ^ dist]);
        for (int a = 0; a < p; a++)
            if (a > (a ^ dist))
                memcpy(set[a].w, set[a ^ dist].w,
                       (size_t)((set[a].nbits + 63) / 64) * 8);
    }
    if (n > p && st == TACL_OK) {
        memset(m, 0, (size_t)n * n * sizeof(*m));
        for (int a = p; a < n; a++)
            m[(size_t)(a - p) * n + (a)] = msg_bytes(k, &set[a - p]);
        st = phase_v(r, m, 0, 0);
    }
    free(m);
    return st;
}

/* ---- The hierarchical schemes: nodes and rails. ---- */

/* Where each rank sits: node_rank[node * L + l] is local rank l of a
 * node, rail_rank[l * N + q] place q of rail l (by rank, as
 * tacl_comm_get_rail orders it), place[r] rank r's place on its rail. */
typedef struct {
    int L, N;
    int *node_rank, *rail_rank, *place;
} grid_t;

static void grid_fini(grid_t *g)
{
    free(g->node_rank);
    free(g->rail_rank);
    free(g->place);
}

static tacl_status_t grid_init(const tacl__sim_cluster_t *c, grid_t *g)
{
    int n = c->nranks, *seen;

    memset(g, 0, sizeof(*g));
    g->N = c->n_nodes;
    g->L = n / g->N;
    for (int j = 0; j < g->N; j++)
        if (c->local_size[j] != g->L)
            return tacl__error(TACL_ERR_UNSUPPORTED, TUNE,
                               "sparse simulation: a hierarchical scheme "
                               "needs the same number of ranks on every "
                               "node (%d ranks on %d nodes)",
                               n, g->N);
    g->node_rank = malloc((size_t)n * sizeof(int));
    g->rail_rank = malloc((size_t)n * sizeof(int));
    g->place = malloc((size_t)n * sizeof(int));
    seen = calloc((size_t)g->L, sizeof(int));
    if (!g->node_rank || !g->rail_rank || !g->place || !seen) {
        free(seen);
        grid_fini(g);
        return TACL_ERR_NO_MEMORY;
    }
    for (int r = 0; r < n; r++) {
        int l = c->local_of[r];

        g->node_rank[c->node_of[r] * g->L + l] = r;
        g->place[r] = seen[l];
        g->rail_rank[l * g->N + seen[l]++] = r;
    }
    free(seen);
    return TACL_OK;
}

/* bytes[i] from every rank i to every rank of its group (its node, or
 * its rail), itself too: every group's all-gather-v (or, with the same
 * bytes everywhere, all-to-all) at once. */
static tacl_status_t phase_groups(run_t *r, const grid_t *g,
                                  const uint64_t *bytes, int rails)
{
    int n = r->c->nranks;
    uint64_t *m = calloc((size_t)n * n, sizeof(*m));
    tacl_status_t st;

    if (m == NULL)
        return TACL_ERR_NO_MEMORY;
    for (int i = 0; i < n; i++)
        for (int x = 0; x < (rails ? g->N : g->L); x++) {
            int l = r->c->local_of[i], node = r->c->node_of[i];
            int j = rails ? g->rail_rank[l * g->N + x]
                          : g->node_rank[node * g->L + x];

            m[(size_t)i * n + j] = bytes[i];
        }
    st = phase_v(r, m, 0, 1);
    free(m);
    return st;
}

/* The same bytes from every rank to every rank of its group. */
static tacl_status_t phase_groups_even(run_t *r, const grid_t *g,
                                       uint64_t bytes, int rails)
{
    int n = r->c->nranks;
    uint64_t *b = malloc((size_t)n * sizeof(*b));
    tacl_status_t st;

    if (b == NULL)
        return TACL_ERR_NO_MEMORY;
    for (int i = 0; i < n; i++)
        b[i] = bytes;
    st = phase_groups(r, g, b, rails);
    free(b);
    return st;
}

/*
 * Zen on every rail at once: rank i's rows part[i] (a bitset over its
 * rail's class, renumbered from 0) to their owners on the rail (h0 over
 * the rail's N ranks), the owners' sums pulled by the rail.  ucount[l]
 * gets the rows of rail l's union.
 */
static tacl_status_t rail_zen(run_t *r, const tacl__ssim_case_t *k,
                              const grid_t *g, const bits_t *part,
                              uint64_t *ucount)
{
    int n = k->nranks, N = g->N;
    size_t rb = k->row_len * k->elem, ib = k->index_bytes;
    uint64_t *push = calloc((size_t)n * n, sizeof(uint64_t));
    uint64_t *pull = calloc((size_t)n, sizeof(uint64_t));
    uint64_t *dsize = calloc((size_t)N, sizeof(uint64_t));
    uint64_t *counts = calloc((size_t)n, sizeof(uint64_t));
    tacl_status_t st = TACL_OK;

    if (!push || !pull || !dsize || !counts) {
        st = TACL_ERR_NO_MEMORY;
        goto out;
    }
    for (int l = 0; l < g->L && st == TACL_OK; l++) {
        uint64_t nbits = part[g->rail_rank[l * N]].nbits;
        tacl__owner_t o;
        bits_t all;

        ucount[l] = 0;
        if (nbits == 0)
            continue;
        if (!bits_new(&all, nbits)) {
            st = TACL_ERR_NO_MEMORY;
            break;
        }
        tacl__owner_init(&o, TACL__OWNER_HASH, N, nbits,
                         TACL__SPARSE_OWNER_SEED);
        memset(dsize, 0, (size_t)N * sizeof(*dsize));
        for (uint64_t u = 0; u < nbits; u++)
            dsize[tacl__owner_of(&o, u)]++;
        for (int q = 0; q < N; q++) {
            int i = g->rail_rank[l * N + q];

            for (uint64_t w = 0; w < (nbits + 63) / 64; w++)
                for (uint64_t x = part[i].w[w]; x; x &= x - 1) {
                    uint64_t u = w * 64 + (uint64_t)__builtin_ctzll(x);

                    push[(size_t)i * n +
                         g->rail_rank[l * N + tacl__owner_of(&o, u)]]++;
                }
            bits_or(&all, &part[i]);
        }
        for (uint64_t w = 0; w < (nbits + 63) / 64; w++) {
            for (uint64_t x = all.w[w]; x; x &= x - 1) {
                uint64_t u = w * 64 + (uint64_t)__builtin_ctzll(x);

                pull[g->rail_rank[l * N + tacl__owner_of(&o, u)]]++;
            }
        }
        ucount[l] = bits_count(&all);
        for (int q = 0; q < N; q++) {
            int i = g->rail_rank[l * N + q];

            pull[i] = pull_bytes(pull[i], dsize[q], ib, rb);
        }
        free(all.w);
    }
    for (size_t e = 0; e < (size_t)n * n; e++)
        push[e] = pull_bytes(push[e], 0, ib, rb);
    /* Counts to owners, the push, the owners' counts, the pull; a rail
     * whose class is empty sends nothing, its counts neither. */
    for (int i = 0; i < n && st == TACL_OK; i++)
        counts[i] = part[i].nbits > 0 ? 8 : 0;
    if (st == TACL_OK)
        st = phase_groups(r, g, counts, 1);
    if (st == TACL_OK)
        st = phase_v(r, push, 0, 1);
    if (st == TACL_OK)
        st = phase_groups(r, g, counts, 1);
    if (st == TACL_OK)
        st = phase_groups(r, g, pull, 1);
out:
    free(push);
    free(pull);
    free(dsize);
    free(counts);
    return st;
}

/* Rows of the table in class (or slice) l, and row's place in its class:
 * ZEN_HIER's classes are h0's over the node's ranks, DENSE_ZEN's slices
 * even ranges of share rows. */
typedef struct {
    int dense;
    uint64_t share;
    tacl__owner_t o;
    size_t *dsize;
    uint32_t *pos;
} classes_t;

static uint64_t class_size(const classes_t *cl, uint64_t nrows, int l)
{
    uint64_t lo = (uint64_t)l * cl->share;

    if (!cl->dense)
        return cl->dsize[l];
    return lo >= nrows ? 0 : nrows - lo < cl->share ? nrows - lo : cl->share;
}

static int class_of(const classes_t *cl, uint64_t row, uint64_t *place)
{
    int l = cl->dense ? (int)(row / cl->share) : tacl__owner_of(&cl->o, row);

    *place = cl->dense ? row - (uint64_t)l * cl->share : cl->pos[row];
    return l;
}

/*
 * ZEN_HIER (dense 0) and DENSE_ZEN (dense 1): inside each node a rank's
 * rows to the local rank of their class (COO, or the dense table's
 * slices and a row mask), the node's rows of each class Zen on its rail,
 * the rails' results all-gathered inside the node (COO, or the slices).
 */
static tacl_status_t run_hier(run_t *r, const tacl__ssim_case_t *k, int dense)
{
    int n = k->nranks;
    size_t rb = k->row_len * k->elem;
    uint64_t *push = NULL, *ucount = NULL, *gather = NULL;
    bits_t *part = NULL;
    classes_t cl = {.dense = dense};
    grid_t g;
    tacl_status_t st = grid_init(r->c, &g);

    if (st != TACL_OK)
        return st;
    cl.share = (k->nrows + (uint64_t)g.L - 1) / (uint64_t)g.L;
    push = calloc((size_t)n * n, sizeof(*push));
    ucount = calloc((size_t)g.L, sizeof(*ucount));
    gather = calloc((size_t)n, sizeof(*gather));
    part = calloc((size_t)n, sizeof(*part));
    cl.dsize = calloc((size_t)g.L, sizeof(*cl.dsize));
    cl.pos = dense ? NULL : malloc((size_t)k->nrows * sizeof(*cl.pos));
    if (!push || !ucount || !gather || !part || !cl.dsize ||
        (!dense && !cl.pos)) {
        st = TACL_ERR_NO_MEMORY;
        goto out;
    }
    if (!dense) {
        tacl__owner_init(&cl.o, TACL__OWNER_HASH, g.L, k->nrows,
                         TACL__SPARSE_OWNER_SEED);
        tacl__sparse_domains(&cl.o, cl.dsize, cl.pos);
    }
    for (int i = 0; i < n && st == TACL_OK; i++)
        if (!bits_new(&part[i], class_size(&cl, k->nrows, r->c->local_of[i])))
            st = TACL_ERR_NO_MEMORY;
    /* (1) Each row to its class's local rank, which unites the node's. */
    for (int i = 0; i < n && st == TACL_OK; i++) {
        for (size_t e = 0; e < k->nnz[i]; e++) {
            uint64_t place;
            int l = class_of(&cl, (uint64_t)k->idx[i][e], &place);
            int j = g.node_rank[r->c->node_of[i] * g.L + l];

            push[(size_t)i * n + j]++;
            bits_set(&part[j], place);
        }
    }
    if (st != TACL_OK)
        goto out;
    if (dense) {
        st = phase_groups_even(r, &g, cl.share * rb, 0);
        if (st == TACL_OK)
            st = phase_groups_even(r, &g, cl.share, 0);
    } else {
        for (size_t e = 0; e < (size_t)n * n; e++)
            push[e] = pull_bytes(push[e], 0, k->index_bytes, rb);
        st = phase_groups_even(r, &g, 8, 0);
        if (st == TACL_OK)
            st = phase_v(r, push, 0, 1);
    }
    /* (2) Zen on the rails; (3) their results inside the node. */
    if (st == TACL_OK)
        st = rail_zen(r, k, &g, part, ucount);
    if (st == TACL_OK && dense)
        st = phase_groups_even(r, &g, cl.share * rb, 0);
    if (st == TACL_OK && !dense) {
        for (int i = 0; i < n; i++)
            gather[i] = coo_bytes(k, ucount[r->c->local_of[i]]);
        st = phase_groups_even(r, &g, 8, 0);
        if (st == TACL_OK)
            st = phase_groups(r, &g, gather, 0);
    }
out:
    for (int i = 0; part != NULL && i < n; i++)
        free(part[i].w);
    free(part);
    free(push);
    free(ucount);
    free(gather);
    free(cl.dsize);
    free(cl.pos);
    grid_fini(&g);
    return st;
}

tacl_status_t tacl__sim_sparse(const tacl__sim_cluster_t *c,
                               const tacl__ssim_case_t *k,
                               tacl__ssim_scheme_t scheme,
                               tacl__ssim_result_t *res)
{
    int n = k->nranks, omni = scheme == TACL__SSIM_OMNI;
    size_t rb = k->row_len * k->elem;
    uint64_t units = omni ? (k->nrows * k->row_len + OMNI_BLOCK - 1) /
                                OMNI_BLOCK
                          : k->nrows;
    run_t r = {c, res};
    bits_t *set = NULL;
    tacl__owner_t o;
    tacl_status_t st = TACL_OK;

    memset(res, 0, sizeof(*res));
    if (n != c->nranks)
        return tacl__error(TACL_ERR_INVALID_ARG, TUNE, "sparse simulation: "
                           "%d ranks of rows on a cluster of %d", n,
                           c->nranks);
    if (scheme == TACL__SSIM_DENSE)
        return phase_fixed(&r, TACL_COLL_ALLREDUCE,
                           (size_t)k->nrows * k->row_len, TACL_FLOAT32);
    if (scheme == TACL__SSIM_AGSPARSE)
        return run_agsparse(&r, k);
    if (scheme == TACL__SSIM_ZEN_HIER || scheme == TACL__SSIM_DENSE_ZEN)
        return run_hier(&r, k, scheme == TACL__SSIM_DENSE_ZEN);
    set = calloc((size_t)n, sizeof(*set));
    if (set == NULL)
        return TACL_ERR_NO_MEMORY;
    for (int i = 0; i < n && st == TACL_OK; i++) {
        if (!bits_new(&set[i], units)) {
            st = TACL_ERR_NO_MEMORY;
            break;
        }
        for (size_t e = 0; e < k->nnz[i]; e++) {
            uint64_t row = (uint64_t)k->idx[i][e];

            if (!omni) {
                bits_set(&set[i], row);
                continue;
            }
            for (uint64_t b = row * k->row_len / OMNI_BLOCK;
                 b <= ((row + 1) * k->row_len - 1) / OMNI_BLOCK; b++)
                bits_set(&set[i], b);
        }
    }
    if (st == TACL_OK) {
        switch (scheme) {
        case TACL__SSIM_SPARCML:
            st = run_sparcml(&r, k, set);
            break;
        case TACL__SSIM_OMNI:
            tacl__owner_init(&o, TACL__OWNER_RANGE, n, units, 0);
            st = run_owners(&r, k, set, &o, 0, OMNI_BLOCK * k->elem, 4);
            break;
        default:
            tacl__owner_init(&o, scheme == TACL__SSIM_ZEN ? TACL__OWNER_HASH
                                                          : TACL__OWNER_RANGE,
                             n, k->nrows, TACL__SPARSE_OWNER_SEED);
            st = run_owners(&r, k, set, &o, scheme == TACL__SSIM_ZEN, rb,
                            k->index_bytes);
        }
    }
    for (int i = 0; i < n; i++)
        free(set[i].w);
    free(set);
    return st;
}
