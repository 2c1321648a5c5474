/*
 * The coalesced compressed collectives (tacl.h,
 * tacl_comp_allreduce_coalesced, _reduce_scatter_coalesced,
 * _allgather_coalesced): a list of buffers as one compressed call, so
 * that a fused group (Cupcake, thesis section 5.3) pays one header, one
 * encoding's fixed cost and one sequence of collectives.
 *
 * The list is packed into one staging buffer and the single call with
 * hops runs on it (compcoll.c, comp_hier.c): the SHUFFLE scheme's chunks
 * and the hierarchical calls' shares cut across buffers, and a staging
 * copy keeps every scheme, hop and residual exactly the single call's.
 * A reduce-scatter's list is packed block by block, so that block r of
 * the packed input (which goes to rank r) is every buffer's block r.
 *
 * The _nb forms check the list at issue, copy it (the arrays, not the
 * buffers) and the params, and run the blocking form in the
 * communicator's host-composed worker (deferred.c), as comp_nb.c does
 * for the single calls.
 *
 * Before the data moves the ranks all-gather a digest of their lists
 * (nbufs and the counts): ranks whose lists split the same total
 * differently would otherwise get each other's values in the wrong
 * buffers without an error.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "compcoll.h"
#include "deferred.h"
#include "log.h"

typedef enum { LIST_ALLREDUCE, LIST_REDUCE_SCATTER, LIST_ALLGATHER } list_kind_t;

static const char *const list_names[] = {
    "comp_allreduce_coalesced",
    "comp_reduce_scatter_coalesced",
    "comp_allgather_coalesced",
};

/* One coalesced call: the caller's list. */
typedef struct {
    list_kind_t kind;
    const char *name;
    int nbufs, n;
    const float *const *send;
    float *const *recv;
    const size_t *counts;
    float *const *errs;
    size_t total; /* the sum of the counts */
} list_t;

/* The arguments, each buffer in host memory. */
static tacl_status_t list_check(list_t *l)
{
    if (l->nbufs < 0)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL, "%s: nbufs %d",
                           l->name, l->nbufs);
    if (l->nbufs > 0 &&
        (l->send == NULL || l->recv == NULL || l->counts == NULL))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: %s is NULL with %d buffers", l->name,
                           l->send == NULL   ? "sendbufs"
                           : l->recv == NULL ? "recvbufs"
                                             : "counts",
                           l->nbufs);
    l->total = 0;
    for (int i = 0; i < l->nbufs; i++) {
        if (l->counts[i] > (SIZE_MAX / sizeof(float) - l->total) /
                               (size_t)l->n / 2)
            return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                               "%s: buffer %d: count %zu overflows the "
                               "list's size",
                               l->name, i, l->counts[i]);
        l->total += l->counts[i];
        if (l->counts[i] == 0)
            continue;
        if (l->send[i] == NULL || l->recv[i] == NULL ||
            (l->errs != NULL && l->errs[i] == NULL))
            return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                               "%s: buffer %d: %s is NULL with count %zu",
                               l->name, i,
                               l->send[i] == NULL   ? "sendbufs[i]"
                               : l->recv[i] == NULL ? "recvbufs[i]"
                                                    : "errs[i]",
                               l->counts[i]);
        if (tacl__memtype_detect(l->send[i]) != TACL_MEM_HOST ||
            tacl__memtype_detect(l->recv[i]) != TACL_MEM_HOST ||
            (l->errs != NULL &&
             tacl__memtype_detect(l->errs[i]) != TACL_MEM_HOST))
            return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                               "%s: buffer %d is device memory, which is "
                               "not taken yet; pass host buffers",
                               l->name, i);
    }
    return TACL_OK;
}

/* FNV-1a over nbufs and the counts. */
static uint64_t list_digest(const list_t *l)
{
    uint64_t h = tacl__fnv1a(TACL__FNV1A_SEED, &l->nbufs, sizeof(l->nbufs));

    return l->nbufs > 0 ? tacl__fnv1a(h, l->counts,
                                      (size_t)l->nbufs * sizeof(size_t))
                        : h;
}

/* Every rank's digest against this rank's: all fail alike. */
static tacl_status_t list_agree(const list_t *l, tacl_comm_t comm)
{
    uint64_t mine = list_digest(l), *all = malloc((size_t)l->n * 8);
    tacl_status_t st;

    if (all == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "%s: no memory for %d digests", l->name, l->n);
    st = tacl_allgather(&mine, all, 1, TACL_UINT64, comm, NULL);
    for (int r = 0; st == TACL_OK && r < l->n; r++)
        if (all[r] != mine)
            st = tacl__error(TACL_ERR_INVALID_ARG, COLL,
                             "%s: rank %d passes another list of buffers "
                             "than rank %d (nbufs or counts differ; %d "
                             "buffers, %zu values here)",
                             l->name, r, comm->rank, l->nbufs, l->total);
    free(all);
    return st;
}

/*
 * Copy between the list (bufs, each of len values, at stride apart in
 * blocks) and the staged array: block b of the staged array is every
 * buffer's block b, one after the other.  to_staged 1 packs, 0 unpacks.
 */
static void list_copy(const list_t *l, float *const *bufs, float *staged,
                      size_t blocks, int to_staged)
{
    size_t at = 0;

    for (size_t b = 0; b < blocks; b++)
        for (int i = 0; i < l->nbufs; i++) {
            size_t len = l->counts[i];
            float *place = bufs[i] + b * len;

            if (len == 0)
                continue;
            if (to_staged)
                memcpy(staged + at, place, len * sizeof(float));
            else
                memcpy(place, staged + at, len * sizeof(float));
            at += len;
        }
}

/* Blocks of a buffer's input (a reduce-scatter's n) and output (an
 * all-gather's n): the packing's stride. */
static size_t in_blocks(const list_t *l)
{
    return l->kind == LIST_REDUCE_SCATTER ? (size_t)l->n : 1;
}

static size_t out_blocks(const list_t *l)
{
    return l->kind == LIST_ALLGATHER ? (size_t)l->n : 1;
}

static tacl_status_t list_run(list_t *l, const tacl_codec_t *codec,
                              const tacl_codec_params_t *params,
                              tacl_comp_scheme_t scheme,
                              tacl_comp_hops_t hops, tacl_comm_t comm)
{
    float *sin = NULL, *sout = NULL, *err = NULL;
    size_t in, out;
    tacl_status_t st;

    tacl__last_error_clear();
    if (comm == NULL || tacl_comm_size(comm, &l->n) != TACL_OK)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: not a live communicator", l->name);
    st = list_check(l);
    if (st == TACL_OK)
        st = list_agree(l, comm);
    if (st != TACL_OK)
        return tacl__comm_fail(comm, st);
    /* Values a rank stages in and gets out. */
    in = l->total * in_blocks(l);
    out = l->total * out_blocks(l);
    sin = malloc((in ? in : 1) * sizeof(float));
    sout = malloc((out ? out : 1) * sizeof(float));
    if (l->errs != NULL)
        err = malloc((in ? in : 1) * sizeof(float));
    if (sin == NULL || sout == NULL || (l->errs != NULL && err == NULL)) {
        st = tacl__comm_fail(comm, tacl__error(TACL_ERR_NO_MEMORY, COLL,
                                               "%s: no memory to stage "
                                               "%zu values",
                                               l->name, in + out));
        goto out;
    }
    list_copy(l, (float *const *)l->send, sin, in_blocks(l), 1);
    if (err != NULL)
        list_copy(l, l->errs, err, in_blocks(l), 1);
    switch (l->kind) {
    case LIST_ALLREDUCE:
        st = tacl_comp_allreduce_hops(sin, sout, l->total, codec, params, err,
                                      scheme, hops, comm);
        break;
    case LIST_REDUCE_SCATTER:
        st = tacl_comp_reduce_scatter_hops(sin, sout, l->total, codec, params,
                                           err, scheme, hops, comm);
        break;
    default:
        st = tacl_comp_allgather_hops(sin, sout, l->total, codec, params, err,
                                      hops, comm);
        break;
    }
    if (st != TACL_OK)
        goto out;
    list_copy(l, l->recv, sout, out_blocks(l), 0);
    if (err != NULL)
        list_copy(l, l->errs, err, in_blocks(l), 0);
out:
    free(sin);
    free(sout);
    free(err);
    return st;
}

static list_t list_make(list_kind_t kind, int nbufs,
                        const float *const *sendbufs, float *const *recvbufs,
                        const size_t *counts, float *const *errs)
{
    list_t l = {.kind = kind,
                .name = list_names[kind],
                .nbufs = nbufs,
                .send = sendbufs,
                .recv = recvbufs,
                .counts = counts,
                .errs = errs};

    return l;
}

TACL_EXPORT tacl_status_t tacl_comp_allreduce_coalesced(
    int nbufs, const float *const *sendbufs, float *const *recvbufs,
    const size_t *counts, const tacl_codec_t *codec,
    const tacl_codec_params_t *params, float *const *errs,
    tacl_comp_scheme_t scheme, tacl_comp_hops_t hops, tacl_comm_t comm)
{
    list_t l = list_make(LIST_ALLREDUCE, nbufs, sendbufs, recvbufs, counts,
                         errs);

    return list_run(&l, codec, params, scheme, hops, comm);
}

TACL_EXPORT tacl_status_t tacl_comp_reduce_scatter_coalesced(
    int nbufs, const float *const *sendbufs, float *const *recvbufs,
    const size_t *recvcounts, const tacl_codec_t *codec,
    const tacl_codec_params_t *params, float *const *errs,
    tacl_comp_scheme_t scheme, tacl_comp_hops_t hops, tacl_comm_t comm)
{
    list_t l = list_make(LIST_REDUCE_SCATTER, nbufs, sendbufs, recvbufs,
                         recvcounts, errs);

    return list_run(&l, codec, params, scheme, hops, comm);
}

TACL_EXPORT tacl_status_t tacl_comp_allgather_coalesced(
    int nbufs, const float *const *sendbufs, float *const *recvbufs,
    const size_t *sendcounts, const tacl_codec_t *codec,
    const tacl_codec_params_t *params, float *const *errs,
    tacl_comp_hops_t hops, tacl_comm_t comm)
{
    list_t l = list_make(LIST_ALLGATHER, nbufs, sendbufs, recvbufs,
                         sendcounts, errs);

    return list_run(&l, codec, params, TACL_COMP_GATHER, hops, comm);
}

/* A non-blocking call's copy of its list, in one block with it. */
typedef struct {
    list_kind_t kind;
    int nbufs;
    const float **send;
    float **recv;
    size_t *counts;
    float **errs;
    const tacl_codec_t *codec;
    tacl_codec_params_t params;
    tacl_comp_scheme_t scheme;
    tacl_comp_hops_t hops;
} list_nb_t;

static tacl_status_t list_nb_run(void *arg, tacl_comm_t shadow)
{
    const list_nb_t *a = arg;
    list_t l = list_make(a->kind, a->nbufs, (const float *const *)a->send,
                         a->recv, a->counts, a->errs);

    return list_run(&l, a->codec, &a->params, a->scheme, a->hops, shadow);
}

/* Check the call as the blocking form would (but for the agreement, the
 * worker's), copy the list and queue it. */
static tacl_status_t list_nb_issue(list_t *l, const tacl_codec_t *codec,
                                   const tacl_codec_params_t *params,
                                   tacl_comp_scheme_t scheme,
                                   tacl_comp_hops_t hops, tacl_comm_t comm,
                                   tacl_request_t *req_p)
{
    size_t nb = l->nbufs > 0 ? (size_t)l->nbufs : 0;
    list_nb_t *a;
    tacl_status_t st;

    if (req_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL, "%s: req_p is NULL",
                           l->name);
    l->n = comm->size;
    st = list_check(l);
    if (st == TACL_OK)
        st = tacl__comp_check(l->name, codec, params, scheme);
    if (st == TACL_OK && (unsigned)hops >= TACL_NUM_COMP_HOPS)
        st = tacl__error(TACL_ERR_INVALID_ARG, COLL, "%s: unknown hops %d",
                         l->name, (int)hops);
    if (st != TACL_OK)
        return st;
    a = malloc(sizeof(*a) + nb * (3 * sizeof(void *) + sizeof(size_t)));
    if (a == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
    a->kind = l->kind;
    a->nbufs = l->nbufs;
    a->send = (const float **)(a + 1);
    a->recv = (float **)(a->send + nb);
    a->errs = l->errs != NULL ? (float **)(a->recv + nb) : NULL;
    a->counts = (size_t *)((float **)(a->recv + nb) + nb);
    for (size_t i = 0; i < nb; i++) {
        a->send[i] = l->send[i];
        a->recv[i] = l->recv[i];
        a->counts[i] = l->counts[i];
        if (a->errs != NULL)
            a->errs[i] = l->errs[i];
    }
    a->codec = codec;
    a->params = *params;
    a->scheme = scheme;
    a->hops = hops;
    return tacl__deferred_issue(comm, list_nb_run, a, req_p);
}

static tacl_status_t list_nb_entry(list_t *l, const tacl_codec_t *codec,
                                   const tacl_codec_params_t *params,
                                   tacl_comp_scheme_t scheme,
                                   tacl_comp_hops_t hops, tacl_comm_t comm,
                                   tacl_request_t *req_p)
{
    TACL__COMM_HELD(comm, tacl__comm_fail(comm, list_nb_issue(l, codec,
                                                              params, scheme,
                                                              hops, comm,
                                                              req_p)));
}

TACL_EXPORT tacl_status_t tacl_comp_allreduce_coalesced_nb(
    int nbufs, const float *const *sendbufs, float *const *recvbufs,
    const size_t *counts, const tacl_codec_t *codec,
    const tacl_codec_params_t *params, float *const *errs,
    tacl_comp_scheme_t scheme, tacl_comp_hops_t hops, tacl_comm_t comm,
    tacl_request_t *req_p)
{
    list_t l = list_make(LIST_ALLREDUCE, nbufs, sendbufs, recvbufs, counts,
                         errs);

    return list_nb_entry(&l, codec, params, scheme, hops, comm, req_p);
}

TACL_EXPORT tacl_status_t tacl_comp_reduce_scatter_coalesced_nb(
    int nbufs, const float *const *sendbufs, float *const *recvbufs,
    const size_t *recvcounts, const tacl_codec_t *codec,
    const tacl_codec_params_t *params, float *const *errs,
    tacl_comp_scheme_t scheme, tacl_comp_hops_t hops, tacl_comm_t comm,
    tacl_request_t *req_p)
{
    list_t l = list_make(LIST_REDUCE_SCATTER, nbufs, sendbufs, recvbufs,
                         recvcounts, errs);

    return list_nb_entry(&l, codec, params, scheme, hops, comm, req_p);
}

TACL_EXPORT tacl_status_t tacl_comp_allgather_coalesced_nb(
    int nbufs, const float *const *sendbufs, float *const *recvbufs,
    const size_t *sendcounts, const tacl_codec_t *codec,
    const tacl_codec_params_t *params, float *const *errs,
    tacl_comp_hops_t hops, tacl_comm_t comm, tacl_request_t *req_p)
{
    list_t l = list_make(LIST_ALLGATHER, nbufs, sendbufs, recvbufs,
                         sendcounts, errs);

    return list_nb_entry(&l, codec, params, TACL_COMP_GATHER, hops, comm,
                         req_p);
}
