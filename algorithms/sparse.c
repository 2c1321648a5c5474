/*
 * Owner functions of the sparse schemes (design in sparse.h: the thesis'
 * Zen, chapter 3, sections 3.3.3-3.3.4).
 *
 * h0 is Carter and Wegman's universal family over the Mersenne prime
 * p = 2^61 - 1: ((a x + b) mod p) mod n with 1 <= a < p, 0 <= b < p.
 * Row indices are below 2^61 (a table that large does not exist), so
 * distinct indices collide modulo p with probability 0 and the family is
 * universal, which is all Theorem 3.2 asks of it.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "sparse.h"

#define MERSENNE61 ((1ull << 61) - 1)

/* x mod 2^61 - 1 for x < 2^122. */
static uint64_t mod61(unsigned __int128 x)
{
    uint64_t r = (uint64_t)(x & MERSENNE61) + (uint64_t)(x >> 61);

    r = (r & MERSENNE61) + (r >> 61);
    return r >= MERSENNE61 ? r - MERSENNE61 : r;
}

void tacl__owner_init(tacl__owner_t *o, tacl__owner_kind_t kind, int n,
                      uint64_t nrows, uint64_t seed)
{
    uint64_t s = seed;

    memset(o, 0, sizeof(*o));
    o->kind = kind;
    o->n = n;
    o->nrows = nrows;
    o->a = 1 + tacl__splitmix64(&s) % (MERSENNE61 - 1);
    o->b = tacl__splitmix64(&s) % MERSENNE61;
}

int tacl__owner_of(const tacl__owner_t *o, uint64_t idx)
{
    if (o->kind == TACL__OWNER_RANGE)
        /* Ranges of ceil(nrows / n) rows, as a parameter server's. */
        return (int)(idx / ((o->nrows + (uint64_t)o->n - 1) /
                            (uint64_t)o->n));
    return (int)(mod61((unsigned __int128)o->a * idx + o->b) %
                 (uint64_t)o->n);
}

tacl_status_t tacl__sparse_partition(const tacl__owner_t *o,
                                     const void *indices, int idx64,
                                     size_t nnz, size_t *counts,
                                     size_t *order)
{
    size_t *slot = malloc((size_t)o->n * sizeof(*slot)), start = 0;

    if (slot == NULL)
        return TACL_ERR_NO_MEMORY;
    memset(counts, 0, (size_t)o->n * sizeof(*counts));
    for (size_t i = 0; i < nnz; i++)
        counts[tacl__owner_of(o, tacl__sparse_index(indices, idx64, i))]++;
    for (int j = 0; j < o->n; j++) {
        slot[j] = start;
        start += counts[j];
    }
    /* Hashing again is cheaper than a table of nnz owners to keep. */
    for (size_t i = 0; i < nnz; i++)
        order[slot[tacl__owner_of(o, tacl__sparse_index(indices, idx64,
                                                        i))]++] = i;
    free(slot);
    return TACL_OK;
}

void tacl__sparse_domains(const tacl__owner_t *o, size_t *dsize,
                          uint32_t *pos)
{
    memset(dsize, 0, (size_t)o->n * sizeof(*dsize));
    for (uint64_t idx = 0; idx < o->nrows; idx++) {
        int j = tacl__owner_of(o, idx);

        pos[idx] = (uint32_t)dsize[j]++;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

tacl_status_t tacl__sparse_imbalance(const tacl__owner_t *o,
                                     const void *const *sets, int idx64,
                                     const size_t *nnz, int nranks,
                                     double *push_p, double *pull_p,
                                     size_t *union_p)
{
    size_t total = 0, nunion = 0, *load;
    uint64_t *all;
    double push = 0, pull;

    for (int r = 0; r < nranks; r++)
        total += nnz[r];
    all = malloc((total ? total : 1) * sizeof(*all));
    load = calloc((size_t)o->n, sizeof(*load));
    if (all == NULL || load == NULL) {
        free(all);
        free(load);
        return TACL_ERR_NO_MEMORY;
    }
    for (int r = 0, k = 0; r < nranks; r++) {
        memset(load, 0, (size_t)o->n * sizeof(*load));
        for (size_t i = 0; i < nnz[r]; i++) {
            uint64_t idx = tacl__sparse_index(sets[r], idx64, i);

            load[tacl__owner_of(o, idx)]++;
            all[k++] = idx;
        }
        for (int j = 0; j < o->n && nnz[r] > 0; j++) {
            double ratio = (double)o->n * (double)load[j] / (double)nnz[r];

            push = ratio > push ? ratio : push;
        }
    }
    qsort(all, total, sizeof(*all), cmp_u64);
    memset(load, 0, (size_t)o->n * sizeof(*load));
    for (size_t i = 0; i < total; i++) {
        if (i > 0 && all[i] == all[i - 1])
            continue;
        nunion++;
        load[tacl__owner_of(o, all[i])]++;
    }
    pull = 0;
    for (int j = 0; j < o->n && nunion > 0; j++) {
        double ratio = (double)o->n * (double)load[j] / (double)nunion;

        pull = ratio > pull ? ratio : pull;
    }
    free(all);
    free(load);
    *push_p = push;
    *pull_p = pull;
    *union_p = nunion;
    return TACL_OK;
}

tacl__sparse_bytes_t tacl__sparse_bytes(int n, double total, double nrows,
                                        double ib, double rb, double u)
{
    tacl__sparse_bytes_t b;
    double mean = total / n, idx = u * ib < nrows / 8 ? u * ib : nrows / 8;

    b.agsparse = (total - mean) * (ib + rb);
    b.zen = (double)(n - 1) / n * (mean * (ib + rb) + u * rb + idx);
    b.dense = 2.0 * (n - 1) / n * nrows * rb;
    return b;
}

tacl_sparse_scheme_t tacl__sparse_auto_pick(int n, uint64_t total,
                                            uint64_t nrows, size_t ib,
                                            size_t rb)
{
    double u = (double)(total < nrows ? total : nrows);
    tacl__sparse_bytes_t b;

    if (n <= 1)
        return TACL_SPARSE_AGSPARSE;
    b = tacl__sparse_bytes(n, (double)total, (double)nrows, (double)ib,
                           (double)rb, u);
    if (b.agsparse < b.zen && b.agsparse < b.dense)
        return TACL_SPARSE_AGSPARSE;
    return b.dense < b.zen ? TACL_SPARSE_DENSE : TACL_SPARSE_ZEN;
}
