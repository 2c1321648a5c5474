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
    "dense", "agsparse", "ps", "omni", "sparcml", "zen",
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
 * rank with its own row and column.
 */
static tacl_status_t phase_v(run_t *r, const uint64_t *m, int gv)
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

        st = tacl__sim_run(r->c, &a, NULL, 0, &one);
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
        st = phase_v(r, m, 1);
    free(m);
    return st;
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
    for (int j = 0; j < n; j++) {
        uint64_t rows = pull[j];
        int bm = bitmap && tacl__sparse_pull_bitmap((size_t)rows,
                                                    (size_t)dsize[j],
                                                    index_bytes);

        pull[j] = pad8((bm ? pad8(tacl__sparse_bitmap_bytes((size_t)dsize[j]))
                           : pad8((size_t)rows * index_bytes)) +
                       rows * unit_bytes);
    }
    st = phase_fixed(r, TACL_COLL_ALLTOALL, 1, TACL_UINT64);
    if (st == TACL_OK)
        st = phase_v(r, push, 0);
    if (st == TACL_OK)
        st = phase_fixed(r, TACL_COLL_ALLGATHER, 1, TACL_UINT64);
    if (st == TACL_OK)
        st = phase_v(r, pull, 1);
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
        st = phase_v(r, m, 0);
        for (int a = p; a < n; a++)
            bits_or(&set[a - p], &set[a]);
    }
    for (int dist = 1; dist < p && st == TACL_OK; dist *= 2) {
        memset(m, 0, (size_t)n * n * sizeof(*m));
        for (int a = 0; a < p; a++)
            m[(size_t)(a) * n + (a ^ dist)] = msg_bytes(k, &set[a]);
        st = phase_v(r, m, 0);
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
        st = phase_v(r, m, 0);
    }
    free(m);
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
