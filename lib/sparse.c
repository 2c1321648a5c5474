/*
 * The sparse all-reduce (tacl.h, tacl_sparse_allreduce): row-sparse
 * gradients summed over ranks, by one of the schemes the thesis "Zen,
 * Espresso, Cupcake, Gemini" compares in chapter 3 (Table 3.2).
 *
 * ZEN is its Balanced Parallelism (section 3.2.4, Theorem 3.1:
 * point-to-point, one-shot, parallel, balanced) as Zen builds it (section
 * 3.3): each row goes to the owner the shared hash h0 names
 * (algorithms/sparse.h), pushed as one all-to-all-v; each owner sums what
 * it got in rank order and every rank pulls every owner's sum with one
 * all-gather-v, as a list of indices or as a bitmap over the owner's
 * domain (the hash bitmap, section 3.3.4), whichever is fewer bytes.  PS
 * is the same with even row ranges as owners, the parameter server's
 * split whose skew Zen removes.  AGSPARSE all-gathers every rank's rows
 * and sums them everywhere; DENSE densifies and runs the dense
 * all-reduce.  ZEN_HIER and DENSE_ZEN run Zen on the rails between
 * nodes, after merging a node's rows (as rows, or as a dense table)
 * inside it.  AUTO prices the three real choices from the rows every
 * rank gives (one small all-reduce) with the byte counts of section
 * 3.2.4 and takes the cheapest.
 *
 * Sums are taken in rank order: rows are stably sorted by index with a
 * radix sort, source block by source block, and a row's first
 * contributor is copied, the next ones added.  The result is bit for bit
 * the rank-order sum of the densified inputs (x + 0 == x), whatever the
 * scheme but DENSE, whose order is the dense all-reduce's.
 *
 * The scheme is a sequence of tacl's own collectives, each a public call
 * on comm (holds nest), which is why a sparse all-reduce cannot sit in a
 * group.  The owners' domains (one table of nrows entries) are built on
 * the first call for a table size and kept with the communicator.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "deferred.h"
#include "log.h"
#include "reduce.h"
#include "sparse.h"

static const char *const scheme_names[TACL_NUM_SPARSE_SCHEMES] = {
    "auto", "zen", "agsparse", "ps", "dense", "sparcml", "omni", "agpadded",
    "zen_hier", "dense_zen",
};

TACL_EXPORT const char *tacl_sparse_scheme_name(tacl_sparse_scheme_t scheme)
{
    return (unsigned)scheme < TACL_NUM_SPARSE_SCHEMES ? scheme_names[scheme]
                                                      : "invalid";
}

/* Per communicator: the last scheme and the owners' domains. */
typedef struct {
    tacl__comm_ext_t ext;        /* comm->ext[TACL__EXT_SPARSE] */
    tacl_sparse_scheme_t last;
    uint64_t nrows;              /* the domains' table, 0 none */
    size_t *dstart;              /* n + 1: owner j's rows are
                                    members[dstart[j] .. dstart[j + 1]) */
    uint32_t *pos;               /* nrows: a row's place in its domain */
    uint32_t *members;           /* nrows: domains, ascending, by owner */
} sparse_ext_t;

static void ext_free(tacl__comm_ext_t *ext)
{
    sparse_ext_t *e = (sparse_ext_t *)ext;

    free(e->dstart);
    free(e->pos);
    free(e->members);
    free(e);
}

static sparse_ext_t *ext_of(tacl_comm_t comm)
{
    sparse_ext_t *e = tacl__comm_ext(comm, TACL__EXT_SPARSE);

    if (e == NULL) {
        e = calloc(1, sizeof(*e));
        if (e == NULL)
            return NULL;
        e->ext.free = ext_free;
        comm->ext[TACL__EXT_SPARSE] = &e->ext;
    }
    return e;
}

TACL_EXPORT tacl_sparse_scheme_t tacl_sparse_last_scheme(tacl_comm_t comm)
{
    sparse_ext_t *e;

    if (tacl__comm_check(comm) != TACL_OK)
        return TACL_SPARSE_AUTO;
    e = tacl__comm_ext(comm, TACL__EXT_SPARSE);
    return e != NULL ? e->last : TACL_SPARSE_AUTO;
}

/* The domains of the hash owners of an nrows table (cached). */
static tacl_status_t domains(sparse_ext_t *e, const tacl__owner_t *o)
{
    int n = o->n;
    size_t *next;

    if (e->nrows == o->nrows)
        return TACL_OK;
    free(e->dstart);
    free(e->pos);
    free(e->members);
    e->nrows = 0;
    e->dstart = calloc((size_t)n + 1, sizeof(*e->dstart));
    e->pos = malloc(o->nrows * sizeof(*e->pos));
    e->members = malloc(o->nrows * sizeof(*e->members));
    next = malloc((size_t)n * sizeof(*next));
    if (e->dstart == NULL || e->pos == NULL || e->members == NULL ||
        next == NULL) {
        free(next);
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "no memory for the "
                           "owners' domains of a %llu-row table",
                           (unsigned long long)o->nrows);
    }
    tacl__sparse_domains(o, next, e->pos);
    for (int j = 0; j < n; j++)
        e->dstart[j + 1] = e->dstart[j] + next[j];
    memcpy(next, e->dstart, (size_t)n * sizeof(*next));
    for (uint64_t i = 0; i < o->nrows; i++)
        e->members[next[tacl__owner_of(o, i)]++] = (uint32_t)i;
    free(next);
    e->nrows = o->nrows;
    return TACL_OK;
}

/*
 * ---- Rows: the shape of a call, and sorting by index. ----
 */

typedef struct {
    size_t nrows, row_len;
    int idx64;
    size_t ib, rb;            /* bytes per index, per row */
    tacl_dtype_t dtype;
    int n, rank;
} shape_t;

/* A row to sum: its index and where its values are. */
typedef struct {
    uint64_t idx;
    const uint8_t *row;
} entry_t;

/* Stable LSD radix sort of e[0..m) by idx (below limit), 16 bits a pass. */
static tacl_status_t sort_entries(entry_t *e, size_t m, uint64_t limit)
{
    entry_t *tmp;
    size_t *count;

    if (m < 2)
        return TACL_OK;
    tmp = malloc(m * sizeof(*tmp));
    count = malloc(65536 * sizeof(*count));
    if (tmp == NULL || count == NULL) {
        free(tmp);
        free(count);
        return TACL_ERR_NO_MEMORY;
    }
    for (unsigned shift = 0; shift < 64 && (limit - 1) >> shift; shift += 16) {
        size_t sum = 0;

        memset(count, 0, 65536 * sizeof(*count));
        for (size_t i = 0; i < m; i++)
            count[(e[i].idx >> shift) & 0xffff]++;
        for (size_t d = 0; d < 65536; d++) {
            size_t c = count[d];

            count[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < m; i++)
            tmp[count[(e[i].idx >> shift) & 0xffff]++] = e[i];
        memcpy(e, tmp, m * sizeof(*e));
    }
    free(tmp);
    free(count);
    return TACL_OK;
}

/* A block of cnt rows: indices, then (after pad8) values, padded to 8. */
static size_t pad8(size_t x)
{
    return (x + 7) & ~(size_t)7;
}

static size_t coo_bytes(const shape_t *s, size_t cnt)
{
    /* Padded at both ends, so blocks laid one after another stay
     * aligned for their indices and values. */
    return pad8(pad8(cnt * s->ib) + cnt * s->rb);
}

static void coo_entries(const shape_t *s, const uint8_t *block, size_t cnt,
                        entry_t *out)
{
    const uint8_t *rows = block + pad8(cnt * s->ib);

    for (size_t i = 0; i < cnt; i++) {
        out[i].idx = tacl__sparse_index(block, s->idx64, i);
        out[i].row = rows + i * s->rb;
    }
}

static void put_index(const shape_t *s, uint8_t *at, size_t i, uint64_t idx)
{
    if (s->idx64)
        ((int64_t *)at)[i] = (int64_t)idx;
    else
        ((int32_t *)at)[i] = (int32_t)idx;
}

/*
 * Sum sorted entries with equal indices in their order into a COO block
 * of *m_p unique rows (indices at idx_out, values at val_out; either may
 * be NULL to size it).  The first row of an index is copied, later ones
 * added.
 */
static tacl_status_t sum_sorted(const shape_t *s, const entry_t *e,
                                size_t m, uint8_t *idx_out,
                                uint8_t *val_out, size_t *m_p)
{
    size_t k = 0;

    for (size_t i = 0; i < m; i++) {
        if (i > 0 && e[i].idx == e[i - 1].idx) {
            if (val_out != NULL) {
                uint8_t *dst = val_out + (k - 1) * s->rb;
                tacl_status_t st = tacl__reduce_cpu(dst, dst, e[i].row,
                                                    s->row_len, s->dtype,
                                                    TACL_SUM);

                if (st != TACL_OK)
                    return st;
            }
            continue;
        }
        if (idx_out != NULL)
            put_index(s, idx_out, k, e[i].idx);
        if (val_out != NULL)
            memcpy(val_out + k * s->rb, e[i].row, s->rb);
        k++;
    }
    *m_p = k;
    return TACL_OK;
}

/*
 * ---- Checking one rank's rows. ----
 */

static tacl_status_t check_rows(const tacl_sparse_t *in, const shape_t *s)
{
    entry_t *e;
    tacl_status_t st = TACL_OK;

    if (in->nnz == 0)
        return TACL_OK;
    e = malloc(in->nnz * sizeof(*e));
    if (e == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "no memory to check "
                           "%zu sparse rows", in->nnz);
    for (size_t i = 0; i < in->nnz; i++) {
        int64_t v = s->idx64 ? ((const int64_t *)in->indices)[i]
                             : ((const int32_t *)in->indices)[i];

        if (v < 0 || (uint64_t)v >= s->nrows) {
            free(e);
            return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                               "sparse all-reduce: index %lld at position "
                               "%zu is outside the table's %zu rows",
                               (long long)v, i, s->nrows);
        }
        e[i].idx = (uint64_t)v;
        e[i].row = (const uint8_t *)(uintptr_t)i;
    }
    if (sort_entries(e, in->nnz, s->nrows) != TACL_OK) {
        free(e);
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "no memory to check "
                           "%zu sparse rows", in->nnz);
    }
    for (size_t i = 1; i < in->nnz; i++) {
        if (e[i].idx == e[i - 1].idx) {
            st = tacl__error(TACL_ERR_INVALID_ARG, COLL,
                             "sparse all-reduce: index %llu appears twice "
                             "(positions %zu and %zu); indices must be "
                             "distinct", (unsigned long long)e[i].idx,
                             (size_t)(uintptr_t)e[i - 1].row,
                             (size_t)(uintptr_t)e[i].row);
            break;
        }
    }
    free(e);
    return st;
}

static tacl_status_t check_args(const tacl_sparse_t *in, tacl_dtype_t dtype,
                                tacl_op_t op, void *dense_out,
                                tacl_sparse_result_t *sparse_out,
                                tacl_sparse_scheme_t scheme)
{
    if (in == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "sparse all-reduce: the input is NULL");
    if (dense_out == NULL && sparse_out == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "sparse all-reduce: neither a dense nor a "
                           "sparse output");
    if (in->index_type != TACL_INT32 && in->index_type != TACL_INT64)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "sparse all-reduce: index type %s is not "
                           "taken (int32 or int64)",
                           tacl_dtype_name(in->index_type));
    if (tacl_dtype_size(dtype) == 0)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "sparse all-reduce: invalid dtype %d",
                           (int)dtype);
    if (op != TACL_SUM)
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                           "sparse all-reduce: op %s; only sum (rows a "
                           "rank does not give are zeros)",
                           tacl_op_name(op));
    if ((unsigned)scheme >= TACL_NUM_SPARSE_SCHEMES)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "sparse all-reduce: invalid scheme %d",
                           (int)scheme);
    if (in->nrows == 0 || in->row_len == 0)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "sparse all-reduce: a table of %zu rows of %zu "
                           "elements", in->nrows, in->row_len);
    if (in->index_type == TACL_INT32 && in->nrows > (size_t)INT32_MAX + 1)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "sparse all-reduce: %zu rows need int64 "
                           "indices", in->nrows);
    if (in->nnz > in->nrows)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "sparse all-reduce: %zu distinct rows of a "
                           "%zu-row table", in->nnz, in->nrows);
    if (in->nnz > 0 && (in->indices == NULL || in->values == NULL))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "sparse all-reduce: %zu rows but a NULL %s "
                           "pointer", in->nnz,
                           in->indices == NULL ? "indices" : "values");
    if ((in->nnz > 0 &&
         (tacl__memtype_detect(in->values) != TACL_MEM_HOST ||
          tacl__memtype_detect(in->indices) != TACL_MEM_HOST)) ||
        (dense_out != NULL &&
         tacl__memtype_detect(dense_out) != TACL_MEM_HOST))
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                           "sparse all-reduce: device memory is not "
                           "taken yet; pass host buffers");
    return TACL_OK;
}

/*
 * ---- Delivering the summed rows. ----
 */

/* Write the union's rows e[0..m) (distinct indices) into the outputs;
 * sorted says whether e is already in index order. */
static tacl_status_t deliver(const shape_t *s, entry_t *e, size_t m,
                             int sorted, void *dense_out,
                             tacl_sparse_result_t *sparse_out)
{
    if (dense_out != NULL) {
        memset(dense_out, 0, s->nrows * s->rb);
        for (size_t i = 0; i < m; i++)
            memcpy((uint8_t *)dense_out + e[i].idx * s->rb, e[i].row,
                   s->rb);
    }
    if (sparse_out == NULL)
        return TACL_OK;
    memset(sparse_out, 0, sizeof(*sparse_out));
    if (!sorted && sort_entries(e, m, s->nrows) != TACL_OK)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "no memory to sort "
                           "%zu result rows", m);
    sparse_out->indices = malloc(m ? m * s->ib : 1);
    sparse_out->values = malloc(m ? m * s->rb : 1);
    if (sparse_out->indices == NULL || sparse_out->values == NULL) {
        tacl_sparse_result_free(sparse_out);
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "no memory for a "
                           "%zu-row sparse result", m);
    }
    for (size_t i = 0; i < m; i++) {
        put_index(s, sparse_out->indices, i, e[i].idx);
        memcpy((uint8_t *)sparse_out->values + i * s->rb, e[i].row, s->rb);
    }
    sparse_out->nnz = m;
    return TACL_OK;
}

/* Deliver the rows of a sorted COO block of m rows. */
static tacl_status_t deliver_block(const shape_t *s, const uint8_t *block,
                                   size_t m, void *dense_out,
                                   tacl_sparse_result_t *sparse_out)
{
    entry_t *e = malloc((m ? m : 1) * sizeof(*e));
    tacl_status_t st;

    if (e == NULL)
        return TACL_ERR_NO_MEMORY;
    coo_entries(s, block, m, e);
    st = deliver(s, e, m, 1, dense_out, sparse_out);
    free(e);
    return st;
}

/* Deliver the rows of a dense table whose set rows a mask names: a byte
 * per row, or (bits) a bit per row. */
static tacl_status_t deliver_table(const shape_t *s, const uint8_t *mask,
                                   int bits, const uint8_t *table,
                                   void *dense_out,
                                   tacl_sparse_result_t *sparse_out)
{
    size_t m = 0;
    entry_t *e;
    tacl_status_t st;

#define ROW_SET(i) (bits ? mask[(i) / 8] >> ((i) % 8) & 1 : mask[i] != 0)
    for (size_t i = 0; i < s->nrows; i++)
        m += ROW_SET(i);
    e = malloc((m ? m : 1) * sizeof(*e));
    if (e == NULL)
        return TACL_ERR_NO_MEMORY;
    m = 0;
    for (size_t i = 0; i < s->nrows; i++) {
        if (ROW_SET(i)) {
            e[m].idx = i;
            e[m++].row = table + i * s->rb;
        }
    }
#undef ROW_SET
    st = deliver(s, e, m, 1, dense_out, sparse_out);
    free(e);
    return st;
}

TACL_EXPORT void tacl_sparse_result_free(tacl_sparse_result_t *r)
{
    if (r == NULL)
        return;
    free(r->indices);
    free(r->values);
    memset(r, 0, sizeof(*r));
}

/* Each rank's rows in order: entries of nb COO blocks laid out one after
 * another from base with cnt[b] rows each. */
static entry_t *blocks_entries(const shape_t *s, const uint8_t *base,
                               const size_t *cnt, int nb, size_t *m_p)
{
    size_t m = 0, at = 0, off = 0;
    entry_t *e;

    for (int b = 0; b < nb; b++)
        m += cnt[b];
    e = malloc((m ? m : 1) * sizeof(*e));
    if (e == NULL)
        return NULL;
    for (int b = 0; b < nb; b++) {
        coo_entries(s, base + off, cnt[b], e + at);
        at += cnt[b];
        off += coo_bytes(s, cnt[b]);
    }
    *m_p = m;
    return e;
}

/* Sum blocks of rows in rank order into one COO block (malloc'ed at
 * *out_p, *m_p rows) and its entries (*e_p, index order). */
static tacl_status_t sum_blocks(const shape_t *s, const uint8_t *base,
                                const size_t *cnt, int nb, uint8_t **out_p,
                                size_t *m_p)
{
    size_t m, k;
    entry_t *e = blocks_entries(s, base, cnt, nb, &m);
    uint8_t *out = NULL;
    tacl_status_t st;

    if (e == NULL || sort_entries(e, m, s->nrows) != TACL_OK) {
        free(e);
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "no memory to sum "
                           "sparse rows");
    }
    sum_sorted(s, e, m, NULL, NULL, &k);
    out = malloc(coo_bytes(s, k) ? coo_bytes(s, k) : 1);
    if (out == NULL) {
        free(e);
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "no memory for %zu "
                           "summed rows", k);
    }
    st = sum_sorted(s, e, m, out, out + pad8(k * s->ib), &k);
    free(e);
    if (st != TACL_OK) {
        free(out);
        return st;
    }
    *out_p = out;
    *m_p = k;
    return TACL_OK;
}

/* The rank's own rows as one COO block, in the order of order[] (or as
 * given when order is NULL). */
static void pack_rows(const shape_t *s, const tacl_sparse_t *in,
                      const size_t *order, size_t first, size_t cnt,
                      uint8_t *block)
{
    uint8_t *rows = block + pad8(cnt * s->ib);

    for (size_t k = 0; k < cnt; k++) {
        size_t i = order != NULL ? order[first + k] : first + k;

        put_index(s, block, k, tacl__sparse_index(in->indices, s->idx64,
                                                  i));
        memcpy(rows + k * s->rb, (const uint8_t *)in->values + i * s->rb,
               s->rb);
    }
}

/*
 * ---- The schemes. ----
 */

/* All-gather every rank's rows, sum everywhere. */
static tacl_status_t run_agsparse(const shape_t *s, const tacl_sparse_t *in,
                                  void *dense_out,
                                  tacl_sparse_result_t *sparse_out,
                                  tacl_comm_t comm)
{
    int n = s->n;
    uint64_t mine = in->nnz, *cnt64 = malloc((size_t)n * sizeof(*cnt64));
    size_t *cnt = malloc((size_t)n * sizeof(*cnt));
    size_t *bytes = malloc((size_t)n * sizeof(*bytes));
    size_t *displs = malloc((size_t)n * sizeof(*displs));
    uint8_t *own = NULL, *all = NULL, *sum = NULL;
    size_t m;
    tacl_status_t st;

    st = cnt64 && cnt && bytes && displs ? TACL_OK : TACL_ERR_NO_MEMORY;
    if (st == TACL_OK)
        st = tacl_allgather(&mine, cnt64, 1, TACL_UINT64, comm, NULL);
    if (st != TACL_OK)
        goto out;
    for (int r = 0; r < n; r++) {
        cnt[r] = (size_t)cnt64[r];
        bytes[r] = coo_bytes(s, cnt[r]);
    }
    own = malloc(bytes[s->rank] ? bytes[s->rank] : 1);
    all = malloc(tacl__prefix_sums(bytes, n, displs) + 1);
    if (own == NULL || all == NULL) {
        st = TACL_ERR_NO_MEMORY;
        goto out;
    }
    pack_rows(s, in, NULL, 0, in->nnz, own);
    st = tacl_allgatherv(own, bytes[s->rank], all, bytes, displs,
                         TACL_UINT8, comm, NULL);
    if (st != TACL_OK)
        goto out;
    st = sum_blocks(s, all, cnt, n, &sum, &m);
    if (st == TACL_OK)
        st = deliver_block(s, sum, m, dense_out, sparse_out);
out:
    if (st == TACL_ERR_NO_MEMORY)
        tacl__error(st, COLL, "no memory for an all-gathered sparse "
                    "all-reduce");
    free(cnt64);
    free(cnt);
    free(bytes);
    free(displs);
    free(own);
    free(all);
    free(sum);
    return st;
}

/* Bytes of owner j's pulled block of m rows. */
static size_t pull_bytes(const shape_t *s, const sparse_ext_t *x, int bitmap,
                         int j, size_t m)
{
    if (bitmap) {
        size_t dsize = x->dstart[j + 1] - x->dstart[j];

        return pad8(pad8(tacl__sparse_bitmap_bytes(dsize)) + m * s->rb);
    }
    return coo_bytes(s, m);
}

/* Whether owner j's block of m rows travels as a bitmap (Zen only). */
static int pull_as_bitmap(const shape_t *s, const sparse_ext_t *x,
                          int hashed, int j, size_t m)
{
    return hashed && x != NULL &&
           tacl__sparse_pull_bitmap(m, x->dstart[j + 1] - x->dstart[j],
                                    s->ib);
}

/*
 * Push every row to its owner under o (the ranks of comm, one
 * all-to-all-v of COO blocks) and sum there in the order of comm's
 * ranks: the owner's sum as a sorted COO block (*mine_p, *m_p rows).
 */
static tacl_status_t owners_push(const shape_t *s, const tacl_sparse_t *in,
                                 const tacl__owner_t *o, tacl_comm_t comm,
                                 uint8_t **mine_p, size_t *m_p)
{
    int n = o->n;
    size_t *cnt_out = malloc((size_t)n * sizeof(size_t));
    size_t *order = malloc((in->nnz ? in->nnz : 1) * sizeof(size_t));
    uint64_t *c64 = malloc(2 * (size_t)n * sizeof(uint64_t));
    size_t *cnt_in = malloc((size_t)n * sizeof(size_t));
    size_t *sb = malloc((size_t)n * sizeof(size_t));
    size_t *sd = malloc((size_t)n * sizeof(size_t));
    size_t *rb = malloc((size_t)n * sizeof(size_t));
    size_t *rd = malloc((size_t)n * sizeof(size_t));
    uint8_t *sendbuf = NULL, *recvbuf = NULL;
    tacl_status_t st = TACL_OK;

    if (!cnt_out || !order || !c64 || !cnt_in || !sb || !sd || !rb || !rd) {
        st = TACL_ERR_NO_MEMORY;
        goto out;
    }
    st = tacl__sparse_partition(o, in->indices, s->idx64, in->nnz, cnt_out,
                                order);
    if (st != TACL_OK)
        goto out;
    /* How many rows to each owner, then the rows. */
    for (int j = 0; j < n; j++)
        c64[j] = cnt_out[j];
    st = tacl_alltoall(c64, c64 + n, 1, TACL_UINT64, comm, NULL);
    if (st != TACL_OK)
        goto out;
    for (int j = 0; j < n; j++) {
        cnt_in[j] = (size_t)c64[n + j];
        sb[j] = coo_bytes(s, cnt_out[j]);
        rb[j] = coo_bytes(s, cnt_in[j]);
    }
    sendbuf = malloc(tacl__prefix_sums(sb, n, sd) + 1);
    recvbuf = malloc(tacl__prefix_sums(rb, n, rd) + 1);
    if (sendbuf == NULL || recvbuf == NULL) {
        st = TACL_ERR_NO_MEMORY;
        goto out;
    }
    for (int j = 0, first = 0; j < n; first += (int)cnt_out[j], j++)
        pack_rows(s, in, order, (size_t)first, cnt_out[j], sendbuf + sd[j]);
    st = tacl_alltoallv(sendbuf, sb, sd, recvbuf, rb, rd, TACL_UINT8, comm,
                        NULL);
    if (st == TACL_OK)
        st = sum_blocks(s, recvbuf, cnt_in, n, mine_p, m_p);
out:
    free(cnt_out);
    free(order);
    free(c64);
    free(cnt_in);
    free(sb);
    free(sd);
    free(rb);
    free(rd);
    free(sendbuf);
    free(recvbuf);
    return st;
}

/* Owner rank's sum of m rows (COO, sorted) as it travels in the pull:
 * the same block, or a bitmap over its domain and the values. */
static void pull_block(const shape_t *s, const sparse_ext_t *x, int bitmap,
                       const uint8_t *mine, size_t m, uint8_t *block)
{
    uint32_t first;
    size_t bm;

    if (!bitmap) {
        memcpy(block, mine, coo_bytes(s, m));
        return;
    }
    first = (uint32_t)x->dstart[s->rank];
    bm = pad8(tacl__sparse_bitmap_bytes(x->dstart[s->rank + 1] - first));
    memset(block, 0, bm);
    for (size_t i = 0; i < m; i++) {
        uint32_t p = x->pos[tacl__sparse_index(mine, s->idx64, i)];

        block[p / 8] |= (uint8_t)(1u << (p % 8));
    }
    memcpy(block + bm, mine + pad8(m * s->ib), m * s->rb);
}

/* The entries of owner j's pulled block of cnt rows. */
static tacl_status_t pulled_entries(const shape_t *s, const sparse_ext_t *x,
                                    int bitmap, int j, const uint8_t *block,
                                    size_t cnt, entry_t *e)
{
    size_t dsize, k = 0;
    const uint8_t *rows;

    if (!bitmap) {
        coo_entries(s, block, cnt, e);
        return TACL_OK;
    }
    dsize = x->dstart[j + 1] - x->dstart[j];
    rows = block + pad8(tacl__sparse_bitmap_bytes(dsize));
    for (size_t p = 0; p < dsize && k < cnt; p++) {
        if (!(block[p / 8] >> (p % 8) & 1))
            continue;
        e[k].idx = x->members[x->dstart[j] + p];
        e[k].row = rows + k * s->rb;
        k++;
    }
    if (k != cnt)
        return tacl__error(TACL_ERR_INTERNAL, COLL, "sparse all-reduce: "
                           "owner %d's bitmap has %zu rows, its count %zu",
                           j, k, cnt);
    return TACL_OK;
}

/*
 * Pull every owner's sum (this rank's is mine, m rows) with one
 * all-gather-v on comm, Zen's by the byte rule (x holds the domains;
 * NULL: index lists), and deliver the union.
 */
static tacl_status_t owners_pull(const shape_t *s, const sparse_ext_t *x,
                                 int hashed, const uint8_t *mine, size_t m,
                                 tacl_comm_t comm, void *dense_out,
                                 tacl_sparse_result_t *sparse_out)
{
    int n = s->n;
    uint64_t m64 = m, *c64 = malloc((size_t)n * sizeof(uint64_t));
    size_t *cnt = malloc((size_t)n * sizeof(size_t));
    size_t *rb = malloc((size_t)n * sizeof(size_t));
    size_t *rd = malloc((size_t)n * sizeof(size_t));
    uint8_t *pulled = NULL, *own_block = NULL;
    entry_t *e = NULL;
    size_t total = 0, at = 0;
    tacl_status_t st = TACL_OK;

    if (c64 == NULL || cnt == NULL || rb == NULL || rd == NULL) {
        st = TACL_ERR_NO_MEMORY;
        goto out;
    }
    /* Every owner's row count, then its block. */
    st = tacl_allgather(&m64, c64, 1, TACL_UINT64, comm, NULL);
    if (st != TACL_OK)
        goto out;
    for (int j = 0; j < n; j++) {
        cnt[j] = (size_t)c64[j];
        rb[j] = pull_bytes(s, x, pull_as_bitmap(s, x, hashed, j, cnt[j]), j,
                           cnt[j]);
        total += cnt[j];
    }
    pulled = malloc(tacl__prefix_sums(rb, n, rd) + 1);
    own_block = malloc(rb[s->rank] + 1);
    e = malloc((total ? total : 1) * sizeof(*e));
    if (pulled == NULL || own_block == NULL || e == NULL) {
        st = TACL_ERR_NO_MEMORY;
        goto out;
    }
    pull_block(s, x, pull_as_bitmap(s, x, hashed, s->rank, m), mine, m,
               own_block);
    st = tacl_allgatherv(own_block, rb[s->rank], pulled, rb, rd,
                         TACL_UINT8, comm, NULL);
    /* Every owner's rows, owners' domains apart. */
    for (int j = 0; j < n && st == TACL_OK; at += cnt[j], j++)
        st = pulled_entries(s, x, pull_as_bitmap(s, x, hashed, j, cnt[j]),
                            j, pulled + rd[j], cnt[j], e + at);
    if (st == TACL_OK)
        st = deliver(s, e, total, 0, dense_out, sparse_out);
out:
    free(c64);
    free(cnt);
    free(rb);
    free(rd);
    free(pulled);
    free(own_block);
    free(e);
    return st;
}

/* The owner function of a flat scheme on s->n ranks, and (Zen) its
 * cached domains in x; *x_p is NULL where the pull has no bitmap. */
static tacl_status_t owners_init(const shape_t *s, int hashed,
                                 sparse_ext_t *x, tacl__owner_t *o,
                                 sparse_ext_t **x_p)
{
    tacl__owner_init(o, hashed ? TACL__OWNER_HASH : TACL__OWNER_RANGE, s->n,
                     s->nrows, TACL__SPARSE_OWNER_SEED);
    *x_p = NULL;
    if (!hashed || s->nrows > UINT32_MAX)
        return TACL_OK;
    *x_p = x;
    return domains(x, o);
}

/* Push to owners, sum at owners, pull every owner's sum. */
static tacl_status_t run_owners(const shape_t *s, const tacl_sparse_t *in,
                                int hashed, void *dense_out,
                                tacl_sparse_result_t *sparse_out,
                                tacl_comm_t comm, sparse_ext_t *x)
{
    tacl__owner_t o;
    uint8_t *mine = NULL;
    size_t m = 0;
    tacl_status_t st;

    st = owners_init(s, hashed, x, &o, &x);
    if (st == TACL_OK)
        st = owners_push(s, in, &o, comm, &mine, &m);
    if (st == TACL_OK)
        st = owners_pull(s, x, hashed, mine, m, comm, dense_out, sparse_out);
    if (st == TACL_ERR_NO_MEMORY)
        tacl__error(st, COLL, "no memory for a sparse all-reduce of %zu "
                    "rows", in->nnz);
    free(mine);
    return st;
}

/* Densify, dense all-reduce; a max all-reduce of a row mask names the
 * union for a sparse output. */
static tacl_status_t run_dense(const shape_t *s, const tacl_sparse_t *in,
                               void *dense_out,
                               tacl_sparse_result_t *sparse_out,
                               tacl_comm_t comm)
{
    uint8_t *dense = dense_out != NULL ? dense_out
                                       : malloc(s->nrows * s->rb);
    uint8_t *mask = sparse_out != NULL ? calloc(s->nrows, 1) : NULL;
    tacl_status_t st = TACL_OK;

    if (dense == NULL || (sparse_out != NULL && mask == NULL)) {
        st = tacl__error(TACL_ERR_NO_MEMORY, COLL, "no memory to densify "
                         "a %zu-row table", s->nrows);
        goto out;
    }
    memset(dense, 0, s->nrows * s->rb);
    for (size_t i = 0; i < in->nnz; i++) {
        uint64_t idx = tacl__sparse_index(in->indices, s->idx64, i);

        memcpy(dense + idx * s->rb, (const uint8_t *)in->values + i * s->rb,
               s->rb);
        if (mask != NULL)
            mask[idx] = 1;
    }
    st = tacl_allreduce(dense, dense, s->nrows * s->row_len, s->dtype,
                        TACL_SUM, comm, NULL);
    if (st != TACL_OK || sparse_out == NULL)
        goto out;
    st = tacl_allreduce(mask, mask, s->nrows, TACL_UINT8, TACL_MAX, comm,
                        NULL);
    if (st == TACL_OK)
        st = deliver_table(s, mask, 0, dense, NULL, sparse_out);
    if (st == TACL_ERR_NO_MEMORY)
        tacl__error(st, COLL, "no memory for the union's rows");
out:
    if (dense != dense_out)
        free(dense);
    free(mask);
    return st;
}

/*
 * SPARCML: SparCML's sparse recursive doubling (Renggli et al., SC'19,
 * the thesis' Table 3.2: hierarchy, incremental aggregation).  A partial
 * sum travels as index-sorted rows or, once that is more bytes than the
 * table, dense with a bitmap of the rows it holds (so the union stays
 * exact); the lower ranks' partial is added first, so every rank ends
 * with the same bits.  Ranks past the largest power of two p fold into
 * rank r - p first and get the result from it last.
 */
typedef struct {
    int dense;
    size_t m;            /* rows (sparse), set rows (dense) */
    uint8_t *buf;        /* sparse: a COO block; dense: bitmap, values */
} part_t;

static size_t dense_bytes(const shape_t *s)
{
    return pad8(pad8((s->nrows + 7) / 8) + s->nrows * s->rb);
}

static size_t part_bytes(const shape_t *s, const part_t *p)
{
    return p->dense ? dense_bytes(s) : coo_bytes(s, p->m);
}

/* p as dense (bitmap, then values); frees its sparse block. */
static tacl_status_t part_densify(const shape_t *s, part_t *p)
{
    size_t bm = pad8((s->nrows + 7) / 8);
    uint8_t *d;

    if (p->dense)
        return TACL_OK;
    d = calloc(1, dense_bytes(s));
    if (d == NULL)
        return TACL_ERR_NO_MEMORY;
    for (size_t i = 0; i < p->m; i++) {
        uint64_t idx = tacl__sparse_index(p->buf, s->idx64, i);

        d[idx / 8] |= (uint8_t)(1u << (idx % 8));
        memcpy(d + bm + idx * s->rb, p->buf + pad8(p->m * s->ib) +
               i * s->rb, s->rb);
    }
    free(p->buf);
    p->buf = d;
    p->dense = 1;
    return TACL_OK;
}

/* lo += hi, lo's rows first (hi is freed). */
static tacl_status_t part_add(const shape_t *s, part_t *lo, part_t *hi)
{
    tacl_status_t st = TACL_OK;

    if (lo->dense || hi->dense) {
        size_t bm = pad8((s->nrows + 7) / 8);

        if ((st = part_densify(s, lo)) != TACL_OK ||
            (st = part_densify(s, hi)) != TACL_OK)
            goto out;
        for (size_t b = 0; b < bm; b++)
            lo->buf[b] |= hi->buf[b];
        st = tacl__reduce_cpu(lo->buf + bm, lo->buf + bm, hi->buf + bm,
                              s->nrows * s->row_len, s->dtype, TACL_SUM);
        goto out;
    }
    /* Two sorted blocks: merge, summing equal indices lo first. */
    size_t cnt[2] = {lo->m, hi->m}, m;
    uint8_t *both = malloc(coo_bytes(s, lo->m) + coo_bytes(s, hi->m) + 1);
    uint8_t *sum = NULL;

    if (both == NULL) {
        st = TACL_ERR_NO_MEMORY;
        goto out;
    }
    memcpy(both, lo->buf, coo_bytes(s, lo->m));
    memcpy(both + coo_bytes(s, lo->m), hi->buf, coo_bytes(s, hi->m));
    st = sum_blocks(s, both, cnt, 2, &sum, &m);
    free(both);
    if (st != TACL_OK)
        goto out;
    free(lo->buf);
    lo->buf = sum;
    lo->m = m;
    /* The switch: dense once the rows are more bytes than the table. */
    if (coo_bytes(s, m) > dense_bytes(s))
        st = part_densify(s, lo);
out:
    free(hi->buf);
    hi->buf = NULL;
    return st;
}

/* Exchange parts with peer (either side may only send or receive). */
static tacl_status_t part_swap(const shape_t *s, tacl_comm_t comm, int peer,
                               const part_t *out, part_t *in)
{
    uint64_t hdr_out = out ? (out->dense ? UINT64_MAX : out->m) : 0;
    uint64_t hdr_in = 0;
    tacl_request_t req[2] = {NULL, NULL};
    tacl_status_t st = TACL_OK;

    /* First how many rows (or dense), then the rows. */
    for (int phase = 0; phase < 2 && st == TACL_OK; phase++) {
        if (phase == 1 && in != NULL) {
            in->dense = hdr_in == UINT64_MAX;
            in->m = in->dense ? 0 : (size_t)hdr_in;
            in->buf = malloc(part_bytes(s, in) + 1);
            if (in->buf == NULL)
                return TACL_ERR_NO_MEMORY;
        }
        if (out != NULL)
            st = tacl__p2p_own(TACL_COLL_SEND,
                               phase ? out->buf : (void *)&hdr_out,
                               phase ? part_bytes(s, out) : 8, peer,
                               TACL__TAG_SPARSE, NULL, comm, &req[0]);
        if (st == TACL_OK && in != NULL)
            st = tacl__p2p_own(TACL_COLL_RECV,
                               phase ? in->buf : (void *)&hdr_in,
                               phase ? part_bytes(s, in) : 8, peer,
                               TACL__TAG_SPARSE, NULL, comm, &req[1]);
        for (int k = 0; k < 2; k++) {
            if (req[k] != NULL) {
                tacl_status_t w = tacl_request_wait(req[k]);

                st = st == TACL_OK ? w : st;
                tacl_request_free(req[k]);
                req[k] = NULL;
            }
        }
    }
    if (st != TACL_OK && in != NULL) {
        free(in->buf);
        in->buf = NULL;
    }
    return st;
}

static tacl_status_t run_sparcml(const shape_t *s, const tacl_sparse_t *in,
                                 void *dense_out,
                                 tacl_sparse_result_t *sparse_out,
                                 tacl_comm_t comm)
{
    int n = s->n, r = s->rank, p = 1;
    part_t mine = {0, 0, NULL}, got = {0, 0, NULL};
    tacl_status_t st;

    while (p * 2 <= n)
        p *= 2;
    /* The own rows, index-sorted. */
    {
        uint8_t *own = malloc(coo_bytes(s, in->nnz) + 1);
        size_t cnt = in->nnz;

        if (own == NULL)
            return tacl__error(TACL_ERR_NO_MEMORY, COLL, "no memory for "
                               "%zu sparse rows", in->nnz);
        pack_rows(s, in, NULL, 0, in->nnz, own);
        st = sum_blocks(s, own, &cnt, 1, &mine.buf, &mine.m);
        free(own);
        if (st != TACL_OK)
            return st;
    }
    if (r >= p) {
        st = part_swap(s, comm, r - p, &mine, NULL);
        free(mine.buf);
        mine.buf = NULL;
        if (st == TACL_OK)
            st = part_swap(s, comm, r - p, NULL, &mine);
    } else {
        if (r + p < n) {
            st = part_swap(s, comm, r + p, NULL, &got);
            if (st == TACL_OK)
                st = part_add(s, &mine, &got);
        } else {
            st = TACL_OK;
        }
        for (int dist = 1; dist < p && st == TACL_OK; dist *= 2) {
            int peer = r ^ dist;

            st = part_swap(s, comm, peer, &mine, &got);
            if (st != TACL_OK)
                break;
            if (r < peer) {
                st = part_add(s, &mine, &got);
            } else {
                st = part_add(s, &got, &mine);
                free(mine.buf);
                mine = got;
                got.buf = NULL;
            }
        }
        if (st == TACL_OK && r + p < n)
            st = part_swap(s, comm, r + p, &mine, NULL);
    }
    if (st != TACL_OK)
        goto out;
    st = mine.dense ? deliver_table(s, mine.buf, 1, mine.buf +
                                    pad8((s->nrows + 7) / 8), dense_out,
                                    sparse_out)
                    : deliver_block(s, mine.buf, mine.m, dense_out,
                                    sparse_out);
out:
    if (st == TACL_ERR_NO_MEMORY)
        tacl__error(st, COLL, "no memory for SparCML's partial sums");
    free(mine.buf);
    free(got.buf);
    return st;
}

/*
 * OMNI: OmniReduce's scheme (Fei et al., SIGCOMM'21; the thesis' Table
 * 3.2): the table as blocks of 256 values, a block sent (its id and all
 * its values) when any of its rows is set, to the owner of its even
 * block range; owners sum and every rank pulls their non-zero blocks.
 * The rows of a block a rank does not give are zeros there, so the sums
 * stay rank-order.  A sparse output needs the union of rows, which
 * blocks lose: a max all-reduce of a row mask carries it.
 */
#define OMNI_BLOCK 256

static tacl_status_t run_omni(const shape_t *s, const tacl_sparse_t *in,
                              void *dense_out,
                              tacl_sparse_result_t *sparse_out,
                              tacl_comm_t comm)
{
    size_t es = tacl_dtype_size(s->dtype), L = s->row_len;
    uint64_t nblocks = (s->nrows * L + OMNI_BLOCK - 1) / OMNI_BLOCK;
    shape_t b = *s;
    int64_t *bidx = NULL;
    uint8_t *bval = NULL, *table = NULL, *mask = NULL;
    size_t nb = 0;
    entry_t *e = NULL;
    tacl_status_t st = TACL_OK;

    b.nrows = nblocks;
    b.row_len = OMNI_BLOCK;
    b.rb = OMNI_BLOCK * es;
    b.idx64 = 1;
    b.ib = 8;
    /* This rank's blocks: ids sorted and unique, values zero-filled. */
    e = malloc((in->nnz ? in->nnz : 1) * sizeof(*e));
    if (e == NULL) {
        st = TACL_ERR_NO_MEMORY;
        goto out;
    }
    for (size_t i = 0; i < in->nnz; i++) {
        e[i].idx = tacl__sparse_index(in->indices, s->idx64, i);
        e[i].row = (const uint8_t *)in->values + i * s->rb;
    }
    if (sort_entries(e, in->nnz, s->nrows) != TACL_OK) {
        st = TACL_ERR_NO_MEMORY;
        goto out;
    }
    bidx = malloc((in->nnz * (L / OMNI_BLOCK + 2) + 1) * sizeof(*bidx));
    if (bidx == NULL) {
        st = TACL_ERR_NO_MEMORY;
        goto out;
    }
    for (size_t i = 0; i < in->nnz; i++)
        for (uint64_t k = e[i].idx * L / OMNI_BLOCK;
             k <= ((e[i].idx + 1) * L - 1) / OMNI_BLOCK; k++)
            if (nb == 0 || (uint64_t)bidx[nb - 1] != k)
                bidx[nb++] = (int64_t)k;
    bval = calloc(nb ? nb : 1, b.rb);
    if (bval == NULL) {
        st = TACL_ERR_NO_MEMORY;
        goto out;
    }
    for (size_t i = 0, k = 0; i < in->nnz; i++) {
        uint64_t first = e[i].idx * L;   /* the row's first element */

        while ((uint64_t)bidx[k] != first / OMNI_BLOCK)
            k++;
        for (size_t x = 0; x < L; x++) {
            uint64_t at = first + x;
            size_t kk = k + (size_t)(at / OMNI_BLOCK - first / OMNI_BLOCK);

            memcpy(bval + kk * b.rb + (at % OMNI_BLOCK) * es,
                   e[i].row + x * es, es);
        }
    }
    tacl_sparse_t blocks = {.nrows = nblocks, .row_len = OMNI_BLOCK,
                            .index_type = TACL_INT64, .nnz = nb,
                            .indices = bidx, .values = bval};

    table = malloc(nblocks * b.rb);
    if (table == NULL) {
        st = TACL_ERR_NO_MEMORY;
        goto out;
    }
    st = run_owners(&b, &blocks, 0, table, NULL, comm, NULL);
    if (st != TACL_OK)
        goto out;
    if (dense_out != NULL)
        memcpy(dense_out, table, s->nrows * s->rb);
    if (sparse_out != NULL) {
        mask = calloc(s->nrows, 1);
        if (mask == NULL) {
            st = TACL_ERR_NO_MEMORY;
            goto out;
        }
        for (size_t i = 0; i < in->nnz; i++)
            mask[e[i].idx] = 1;
        st = tacl_allreduce(mask, mask, s->nrows, TACL_UINT8, TACL_MAX, comm,
                            NULL);
        if (st == TACL_OK)
            st = deliver_table(s, mask, 0, table, NULL, sparse_out);
    }
out:
    if (st == TACL_ERR_NO_MEMORY)
        tacl__error(st, COLL, "no memory for OmniReduce's blocks");
    free(e);
    free(bidx);
    free(bval);
    free(table);
    free(mask);
    return st;
}

/* AGPADDED: every rank's rows padded to the largest count, one
 * all-gather (the padding rows are never read). */
static tacl_status_t run_agpadded(const shape_t *s, const tacl_sparse_t *in,
                                  void *dense_out,
                                  tacl_sparse_result_t *sparse_out,
                                  tacl_comm_t comm)
{
    uint64_t most = in->nnz, *cnt = malloc((size_t)s->n * sizeof(*cnt));
    size_t *c = malloc((size_t)s->n * sizeof(*c)), block, m;
    uint8_t *own = NULL, *all = NULL, *sum = NULL;
    tacl_status_t st = cnt && c ? TACL_OK : TACL_ERR_NO_MEMORY;

    if (st == TACL_OK)
        st = tacl_allgather(&most, cnt, 1, TACL_UINT64, comm, NULL);
    if (st != TACL_OK)
        goto out;
    most = 0;
    for (int r = 0; r < s->n; r++)
        most = cnt[r] > most ? cnt[r] : most;
    block = coo_bytes(s, (size_t)most);
    own = calloc(1, block + 1);
    all = malloc(block * (size_t)s->n + 1);
    if (own == NULL || all == NULL) {
        st = TACL_ERR_NO_MEMORY;
        goto out;
    }
    pack_rows(s, in, NULL, 0, in->nnz, own);
    /* pack_rows put the values after this rank's own indices: move them
     * to the padded block's place. */
    memmove(own + pad8((size_t)most * s->ib), own + pad8(in->nnz * s->ib),
            in->nnz * s->rb);
    st = tacl_allgather(own, all, block, TACL_UINT8, comm, NULL);
    if (st != TACL_OK)
        goto out;
    /* Each block back to its own count, one after another. */
    for (int r = 0; r < s->n; r++) {
        c[r] = (size_t)cnt[r];
        memmove(all + (size_t)r * block + pad8(c[r] * s->ib),
                all + (size_t)r * block + pad8((size_t)most * s->ib),
                c[r] * s->rb);
    }
    {
        size_t at = 0;

        for (int r = 0; r < s->n; r++) {
            memmove(all + at, all + (size_t)r * block, coo_bytes(s, c[r]));
            at += coo_bytes(s, c[r]);
        }
    }
    st = sum_blocks(s, all, c, s->n, &sum, &m);
    if (st == TACL_OK)
        st = deliver_block(s, sum, m, dense_out, sparse_out);
out:
    if (st == TACL_ERR_NO_MEMORY)
        tacl__error(st, COLL, "no memory for a padded all-gather");
    free(cnt);
    free(c);
    free(own);
    free(all);
    free(sum);
    return st;
}

/*
 * ---- The hierarchical schemes: a node's ranks, then the rails. ----
 */

/* The node and rail communicators of a hierarchical scheme, which needs
 * the same number of ranks on every node (every rail one rank a node). */
static tacl_status_t hier_comms(tacl_sparse_scheme_t scheme, tacl_comm_t comm,
                                tacl_comm_t *local_p, tacl_comm_t *rail_p)
{
    char what[48];
    tacl_status_t st;

    snprintf(what, sizeof(what), "sparse all-reduce: %s",
             tacl_sparse_scheme_name(scheme));
    st = tacl__comm_need_even_nodes(comm, what);
    if (st == TACL_OK)
        st = tacl_comm_get_local(comm, local_p);
    if (st == TACL_OK)
        st = tacl_comm_get_rail(comm, rail_p);
    return st;
}

/* s seen from one of comm's derived communicators. */
static shape_t shape_on(const shape_t *s, tacl_comm_t sub, size_t nrows)
{
    shape_t t = *s;

    t.n = sub->size;
    t.rank = sub->rank;
    t.nrows = nrows;
    return t;
}

/* Renumber m indices (a COO block's, or a list) by map: i -> map[i]. */
static void renumber(const shape_t *s, void *indices, size_t m,
                     const uint32_t *map)
{
    for (size_t i = 0; i < m; i++)
        put_index(s, indices, i,
                  map[tacl__sparse_index(indices, s->idx64, i)]);
}

/*
 * ZEN_HIER: Zen (section 3.2.4's Balanced Parallelism) in two levels,
 * for a cluster whose links inside a node are faster than those between
 * nodes (hierarchical communication, section 4.2.1, Figure 4.1).  The
 * thesis analyses one GPU a machine (section 3.2.3); with L ranks a
 * node, flat Zen sends every rank's share for a remote owner across the
 * slow links, so a row given on every rank of a node crosses them L
 * times.  Here the owner of a row is two hashes: h0 over the L local
 * ranks names its class l (its rail), h0 over the N nodes of its place in
 * that class names the node.  (1) Inside each node every rank pushes
 * each row to local rank l of its class, which sums the node's rows of
 * the class in rank order (an all-to-all-v over shared memory).  (2) On
 * rail l, flat Zen over the class, renumbered 0..|class| so its hash
 * bitmap spans only the class: each node's sum crosses the slow links
 * once, to its owner, and every rail carries a 1/L share.  (3) Inside
 * each node the rails' results are all-gathered (they are disjoint).
 * The nodes' sums are added in the order of their ranks on the rail, so
 * the result is the rank-order sum only where that is the nodes' order;
 * every rank gets the owner's bits, so every rank gets the same.
 */
static tacl_status_t run_zen_hier(const shape_t *s, const tacl_sparse_t *in,
                                  void *dense_out,
                                  tacl_sparse_result_t *sparse_out,
                                  tacl_comm_t comm)
{
    tacl_comm_t local, rail;
    shape_t ls, rs;
    sparse_ext_t *lx, *rx;
    tacl__owner_t o;
    uint8_t *mine = NULL;
    size_t m = 0, first;
    tacl_sparse_result_t got = {0, NULL, NULL};
    tacl_status_t st = hier_comms(TACL_SPARSE_ZEN_HIER, comm, &local, &rail);

    if (st != TACL_OK)
        return st;
    if (s->nrows > UINT32_MAX)
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                           "sparse all-reduce: zen_hier takes tables of "
                           "fewer than 2^32 rows (%zu); use zen",
                           s->nrows);
    ls = shape_on(s, local, s->nrows);
    lx = ext_of(local);
    rx = ext_of(rail);
    if (lx == NULL || rx == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "no memory for the "
                           "sparse all-reduce's state");
    /* (1) The classes: local rank l's rows, and their places in it. */
    tacl__owner_init(&o, TACL__OWNER_HASH, ls.n, s->nrows,
                     TACL__SPARSE_OWNER_SEED);
    st = domains(lx, &o);
    if (st == TACL_OK)
        st = owners_push(&ls, in, &o, local, &mine, &m);
    if (st != TACL_OK)
        goto out;
    /* (2) Zen on the rail over the class, renumbered. */
    first = lx->dstart[ls.rank];
    rs = shape_on(s, rail, lx->dstart[ls.rank + 1] - first);
    renumber(&ls, mine, m, lx->pos);
    if (rs.nrows > 0) {
        tacl_sparse_t class_rows = {.nrows = rs.nrows,
                                    .row_len = s->row_len,
                                    .index_type = in->index_type,
                                    .nnz = m,
                                    .indices = mine,
                                    .values = mine + pad8(m * s->ib)};

        st = run_owners(&rs, &class_rows, 1, NULL, &got, rail, rx);
        if (st != TACL_OK)
            goto out;
    }
    renumber(&ls, got.indices, got.nnz, lx->members + first);
    /* (3) Every class to every rank of the node. */
    {
        tacl_sparse_t sums = {.nrows = s->nrows,
                              .row_len = s->row_len,
                              .index_type = in->index_type,
                              .nnz = got.nnz,
                              .indices = got.indices,
                              .values = got.values};

        st = run_agsparse(&ls, &sums, dense_out, sparse_out, local);
    }
out:
    free(mine);
    tacl_sparse_result_free(&got);
    return st;
}

/*
 * DENSE_ZEN: the thesis' own deployment of Zen (section 3.4.1,
 * Implementation: "Zen communicates dense tensors within machines with
 * ReduceScatter/AllGather"), where NVLink makes a dense table cheaper
 * inside a node than sorting rows.  (1) A dense reduce-scatter inside
 * each node leaves local rank l with slice l of the node's sum (the
 * table padded to L equal slices of rows), and a max reduce-scatter of a
 * row mask with the node's rows of the slice.  (2) On rail l, flat Zen
 * over the slice's rows (renumbered from the slice's start): only rows
 * some rank of the node gave cross the slow links.  (3) A dense
 * all-gather inside the node puts the slices together (and the union's
 * mask, for a sparse output).  A node's rows are added in the
 * reduce-scatter's order, then the nodes' sums as ZEN_HIER adds them.
 */
static tacl_status_t run_dense_zen(const shape_t *s, const tacl_sparse_t *in,
                                   void *dense_out,
                                   tacl_sparse_result_t *sparse_out,
                                   tacl_comm_t comm)
{
    tacl_comm_t local, rail;
    shape_t rs;
    size_t share, lo, valid, m = 0;
    uint8_t *table = NULL, *mask = NULL, *slice = NULL, *smask = NULL;
    uint8_t *sub = NULL;
    tacl_sparse_result_t got = {0, NULL, NULL};
    sparse_ext_t *rx;
    tacl_status_t st = hier_comms(TACL_SPARSE_DENSE_ZEN, comm, &local, &rail);

    if (st != TACL_OK)
        return st;
    share = (s->nrows + (size_t)local->size - 1) / (size_t)local->size;
    lo = (size_t)local->rank * share;
    valid = lo >= s->nrows          ? 0
            : s->nrows - lo < share ? s->nrows - lo
                                    : share;
    rx = ext_of(rail);
    table = calloc(share * (size_t)local->size, s->rb);
    mask = calloc(share * (size_t)local->size, 1);
    slice = malloc(share * s->rb + 1);
    smask = malloc(share + 1);
    sub = malloc(coo_bytes(s, share) + 1);
    if (rx == NULL || !table || !mask || !slice || !smask || !sub) {
        st = TACL_ERR_NO_MEMORY;
        goto out;
    }
    /* (1) The node's sum, a slice a local rank. */
    for (size_t i = 0; i < in->nnz; i++) {
        uint64_t idx = tacl__sparse_index(in->indices, s->idx64, i);

        memcpy(table + idx * s->rb, (const uint8_t *)in->values + i * s->rb,
               s->rb);
        mask[idx] = 1;
    }
    st = tacl_reduce_scatter(table, slice, share * s->row_len, s->dtype,
                             TACL_SUM, local, NULL);
    if (st == TACL_OK)
        st = tacl_reduce_scatter(mask, smask, share, TACL_UINT8, TACL_MAX,
                                 local, NULL);
    if (st != TACL_OK)
        goto out;
    /* (2) The slice's set rows, from its start, through Zen on the rail. */
    for (size_t i = 0; i < valid; i++)
        m += smask[i] != 0;
    for (size_t i = 0, k = 0; i < valid; i++) {
        if (smask[i] == 0)
            continue;
        put_index(s, sub, k, i);
        memcpy(sub + pad8(m * s->ib) + k++ * s->rb, slice + i * s->rb, s->rb);
    }
    rs = shape_on(s, rail, valid);
    if (valid > 0) {
        tacl_sparse_t rows = {.nrows = valid,
                              .row_len = s->row_len,
                              .index_type = s->idx64 ? TACL_INT64
                                                     : TACL_INT32,
                              .nnz = m,
                              .indices = sub,
                              .values = sub + pad8(m * s->ib)};

        st = run_owners(&rs, &rows, 1, slice, sparse_out ? &got : NULL, rail,
                        rx);
        if (st != TACL_OK)
            goto out;
    }
    /* (3) The slices (and the union's mask) to every rank of the node. */
    memset(smask, 0, share);
    for (size_t i = 0; i < got.nnz; i++)
        smask[tacl__sparse_index(got.indices, s->idx64, i)] = 1;
    st = tacl_allgather(slice, table, share * s->row_len, s->dtype, local,
                        NULL);
    if (st == TACL_OK && sparse_out != NULL)
        st = tacl_allgather(smask, mask, share, TACL_UINT8, local, NULL);
    if (st != TACL_OK)
        goto out;
    if (dense_out != NULL)
        memcpy(dense_out, table, s->nrows * s->rb);
    if (sparse_out != NULL)
        st = deliver_table(s, mask, 0, table, NULL, sparse_out);
out:
    if (st == TACL_ERR_NO_MEMORY)
        tacl__error(st, COLL, "no memory for a %zu-row table's slices",
                    s->nrows);
    free(table);
    free(mask);
    free(slice);
    free(smask);
    free(sub);
    tacl_sparse_result_free(&got);
    return st;
}

/*
 * AUTO: bytes a rank receives under each scheme (section 3.2.4), with
 * the union at its largest (no overlap), from every rank's row count,
 * those inside a node weighed by their cheaper link; ZEN_HIER only on
 * several nodes of as many ranks each.
 */
static tacl_status_t choose(const shape_t *s, const tacl_sparse_t *in,
                            tacl_comm_t comm, tacl_sparse_scheme_t *pick)
{
    uint64_t total = in->nnz;
    tacl_status_t st;

    if (s->n > 1) {
        st = tacl_allreduce(&total, &total, 1, TACL_UINT64, TACL_SUM, comm,
                            NULL);
        if (st != TACL_OK)
            return st;
    }
    *pick = tacl__sparse_auto_pick(s->n, comm->view.n_nodes,
                                   tacl__comm_nodes_even(comm), total,
                                   s->nrows, s->row_len, s->ib, s->rb,
                                   tacl__sparse_intra_weight(&comm->view));
    return TACL_OK;
}

/* Check a call's arguments (every one the blocking form checks) and
 * fill in its shape. */
static tacl_status_t sparse_prepare(const tacl_sparse_t *in,
                                    tacl_dtype_t dtype, tacl_op_t op,
                                    void *dense_out,
                                    tacl_sparse_result_t *sparse_out,
                                    tacl_sparse_scheme_t scheme,
                                    tacl_comm_t comm, shape_t *s_p)
{
    shape_t s;
    tacl_status_t st;

    if (sparse_out != NULL)
        memset(sparse_out, 0, sizeof(*sparse_out));
    st = check_args(in, dtype, op, dense_out, sparse_out, scheme);
    if (st != TACL_OK)
        return st;
    if (tacl__group_active())
        return tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                           "a sparse all-reduce cannot sit in a group "
                           "(it is several collectives in a row)");
    s.nrows = in->nrows;
    s.row_len = in->row_len;
    s.idx64 = in->index_type == TACL_INT64;
    s.ib = s.idx64 ? 8 : 4;
    s.rb = in->row_len * tacl_dtype_size(dtype);
    s.dtype = dtype;
    s.n = comm->size;
    s.rank = comm->rank;
    st = check_rows(in, &s);
    if (st == TACL_OK)
        *s_p = s;
    return st;
}

static tacl_status_t sparse_allreduce(const tacl_sparse_t *in,
                                      tacl_dtype_t dtype, tacl_op_t op,
                                      void *dense_out,
                                      tacl_sparse_result_t *sparse_out,
                                      tacl_sparse_scheme_t scheme,
                                      tacl_comm_t comm)
{
    shape_t s;
    sparse_ext_t *x;
    tacl_status_t st;

    st = sparse_prepare(in, dtype, op, dense_out, sparse_out, scheme, comm,
                        &s);
    if (st != TACL_OK)
        return st;
    x = ext_of(comm);
    if (x == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "no memory for the "
                           "sparse all-reduce's state");
    if (scheme == TACL_SPARSE_AUTO) {
        st = choose(&s, in, comm, &scheme);
        if (st != TACL_OK)
            return st;
    }
    x->last = scheme;
    switch (scheme) {
    case TACL_SPARSE_AGSPARSE:
        return run_agsparse(&s, in, dense_out, sparse_out, comm);
    case TACL_SPARSE_DENSE:
        return run_dense(&s, in, dense_out, sparse_out, comm);
    case TACL_SPARSE_SPARCML:
        return run_sparcml(&s, in, dense_out, sparse_out, comm);
    case TACL_SPARSE_OMNI:
        return run_omni(&s, in, dense_out, sparse_out, comm);
    case TACL_SPARSE_AGPADDED:
        return run_agpadded(&s, in, dense_out, sparse_out, comm);
    case TACL_SPARSE_ZEN_HIER:
        return run_zen_hier(&s, in, dense_out, sparse_out, comm);
    case TACL_SPARSE_DENSE_ZEN:
        return run_dense_zen(&s, in, dense_out, sparse_out, comm);
    default:
        return run_owners(&s, in, scheme == TACL_SPARSE_ZEN, dense_out,
                          sparse_out, comm, x);
    }
}

TACL_EXPORT tacl_status_t tacl_sparse_allreduce(const tacl_sparse_t *in,
                                    tacl_dtype_t dtype, tacl_op_t op,
                                    void *dense_out,
                                    tacl_sparse_result_t *sparse_out,
                                    tacl_sparse_scheme_t scheme,
                                    tacl_comm_t comm)
{
    tacl_status_t st;

    tacl__last_error_clear();
    st = tacl__comm_enter(comm);
    if (st != TACL_OK)
        return st;
    st = sparse_allreduce(in, dtype, op, dense_out, sparse_out, scheme,
                          comm);
    tacl__comm_leave(comm);
    return st == TACL_OK ? TACL_OK : tacl__comm_fail(comm, st);
}

/* A non-blocking call's copy of its arguments, for the worker. */
typedef struct {
    tacl_sparse_t in;
    tacl_dtype_t dtype;
    void *dense_out;
    tacl_sparse_result_t *sparse_out;
    tacl_sparse_scheme_t scheme;
} sparse_nb_t;

static tacl_status_t sparse_nb_run(void *arg, tacl_comm_t shadow)
{
    sparse_nb_t *a = arg;

    return tacl_sparse_allreduce(&a->in, a->dtype, TACL_SUM, a->dense_out,
                                 a->sparse_out, a->scheme, shadow);
}

static tacl_status_t sparse_allreduce_nb(const tacl_sparse_t *in,
                                         tacl_dtype_t dtype, tacl_op_t op,
                                         void *dense_out,
                                         tacl_sparse_result_t *sparse_out,
                                         tacl_sparse_scheme_t scheme,
                                         tacl_comm_t comm,
                                         tacl_request_t *req_p)
{
    sparse_nb_t *a;
    shape_t s;
    tacl_status_t st;

    if (req_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "sparse all-reduce: req_p is NULL");
    st = sparse_prepare(in, dtype, op, dense_out, sparse_out, scheme, comm,
                        &s);
    if (st != TACL_OK)
        return st;
    a = malloc(sizeof(*a));
    if (a == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
    *a = (sparse_nb_t){.in = *in, .dtype = dtype, .dense_out = dense_out,
                       .sparse_out = sparse_out, .scheme = scheme};
    return tacl__deferred_issue(comm, sparse_nb_run, a, req_p);
}

TACL_EXPORT tacl_status_t tacl_sparse_allreduce_nb(
    const tacl_sparse_t *in, tacl_dtype_t dtype, tacl_op_t op,
    void *dense_out, tacl_sparse_result_t *sparse_out,
    tacl_sparse_scheme_t scheme, tacl_comm_t comm, tacl_request_t *req_p)
{
    tacl_status_t st;

    tacl__last_error_clear();
    st = tacl__comm_enter(comm);
    if (st != TACL_OK)
        return st;
    st = sparse_allreduce_nb(in, dtype, op, dense_out, sparse_out, scheme,
                             comm, req_p);
    tacl__comm_leave(comm);
    return st == TACL_OK ? TACL_OK : tacl__comm_fail(comm, st);
}
