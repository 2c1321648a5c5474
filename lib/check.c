/*
 * TACL_CHECK: do all ranks make the same call?
 *
 * A collective whose ranks disagree (a dtype of the same size, another op
 * or root, a different number of coalesced buffers, calls in a different
 * order) may otherwise return OK with results that differ between ranks,
 * or hang.  With checking on, every collective call (a group: once per
 * communicator) first gathers from each rank a header: the call's check
 * sequence number, how many collectives it holds and the first one's
 * signature (collective, count, dtype, op, root, quantization).  When the
 * headers agree and the call holds more than one collective, a second
 * gather brings every signature.  Each rank compares every rank's against
 * rank 0's, so all of them reach the same verdict and name the same rank,
 * field and values.  A call holding variable-count collectives then
 * gathers every rank's counts of each (what it sends to and receives
 * from every rank), so that every rank finds the same first pair whose
 * counts disagree (sendcounts[j] on rank i is recvcounts[i] on rank j,
 * as MPI requires) and names both ranks and both counts.
 * Point-to-point calls are not checked: they involve two ranks, not
 * the communicator.
 *
 * The exchange is an ordinary small all-gather (the one split uses) on
 * sequence numbers the call reserved before its operations', so its
 * tags agree even when the ranks go on to run different operations.
 * After a mismatch every rank moves the communicator's sequence number to
 * the highest any rank reached, so the next call starts in step again.
 * The exchange blocks: even an _nb call returns only once its peers have
 * reached it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "comm.h"
#include "log.h"

/* The first gather: enough to compare a call of one collective. */
typedef struct {
    uint64_t seq;       /* the check sequence number */
    uint64_t seq_next;  /* comm->seq after the call */
    int32_t nops;       /* collectives in the call */
    int32_t pad;
    tacl__op_sig_t first;
} head_t;

/* The error every rank returns for rank r's disagreement with rank 0. */
static tacl_status_t mismatch(const char *name, int r, int index,
                              const char *field, const char *theirs,
                              const char *ref)
{
    char where[48] = "";

    if (index >= 0)
        snprintf(where, sizeof(where), " in collective %d of the call",
                 index);
    return tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                       "%s: the ranks made different calls (TACL_CHECK): "
                       "rank %d has %s %s where rank 0 has %s%s; every rank "
                       "must make the same collective calls in the same "
                       "order", name, r, field, theirs, ref, where);
}

static tacl_status_t sig_mismatch(const char *name, int r, int index,
                                  const tacl__op_sig_t *theirs,
                                  const tacl__op_sig_t *ref)
{
    char a[32], b[32];
    tacl__sig_field_t f = tacl__op_sig_diff(theirs, ref);

    if (f == TACL__SIG_SAME)
        return TACL_OK;
    return mismatch(name, r, index, tacl__sig_field_name(f),
                    tacl__sig_field_value(theirs, f, a, sizeof(a)),
                    tacl__sig_field_value(ref, f, b, sizeof(b)));
}

static tacl_status_t compare_heads(const char *name, const head_t *all,
                                   int size)
{
    for (int r = 1; r < size; r++) {
        char a[32], b[32];
        tacl_status_t status;

        if (all[r].seq != all[0].seq) {
            snprintf(a, sizeof(a), "%llu", (unsigned long long)all[r].seq);
            snprintf(b, sizeof(b), "%llu", (unsigned long long)all[0].seq);
            return mismatch(name, r, -1, "sequence number", a, b);
        }
        if (all[r].nops != all[0].nops) {
            snprintf(a, sizeof(a), "%d", all[r].nops);
            snprintf(b, sizeof(b), "%d", all[0].nops);
            return mismatch(name, r, -1, "operation count (collectives in "
                            "the group, buffers of a coalesced call)", a, b);
        }
        status = sig_mismatch(name, r, all[0].nops > 1 ? 0 : -1,
                              &all[r].first, &all[0].first);
        if (status != TACL_OK)
            return status;
    }
    return TACL_OK;
}

/* The second gather: every collective of a call of several. */
static tacl_status_t compare_all(tacl_comm_t comm, const char *name,
                                 const tacl__op_sig_t *mine, int n,
                                 uint64_t seq)
{
    tacl__op_sig_t *all =
        malloc((size_t)comm->size * (size_t)n * sizeof(*all));
    tacl_status_t status;

    if (all == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
    status = tacl__comm_allgather_small(comm, seq % TACL__SEQ_HALF, mine, all,
                                        (size_t)n * sizeof(*all));
    for (int r = 1; r < comm->size && status == TACL_OK; r++)
        for (int i = 0; i < n && status == TACL_OK; i++)
            status = sig_mismatch(name, r, i, &all[r * n + i], &all[i]);
    free(all);
    return status;
}

/*
 * The variable-count collectives of a call: gather every rank's counts
 * (for each such collective, its send then its receive counts, n each)
 * and compare each pair of ranks both ways.  Every rank holds the same
 * counts, so every rank names the same pair.
 */
static tacl_status_t compare_vcounts(tacl_comm_t comm, const tacl__op_t *ops,
                                     int nops, uint64_t seq)
{
    size_t n = (size_t)comm->size, nv = 0, row, k = 0;
    uint64_t *mine, *all;
    tacl_status_t status = TACL_OK;
    int index = 0;

    for (int i = 0; i < nops; i++)
        nv += ops[i].args.v != NULL;
    if (nv == 0)
        return TACL_OK;
    row = nv * 2 * n;
    mine = malloc(row * sizeof(*mine));
    all = malloc(n * row * sizeof(*all));
    if (mine == NULL || all == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
        goto out;
    }
    for (int i = 0; i < nops; i++) {
        const tacl__vcounts_t *v = ops[i].args.v;

        for (size_t j = 0; v != NULL && j < n; j++) {
            mine[k * 2 * n + j] = v->send[j];
            mine[k * 2 * n + n + j] = v->recv[j];
        }
        k += v != NULL;
    }
    status = tacl__comm_allgather_small(comm, seq % TACL__SEQ_HALF, mine, all,
                                        row * sizeof(*all));
    k = 0;
    for (int i = 0; i < nops && status == TACL_OK; i++) {
        const char *name = tacl_coll_name(ops[i].args.type);

        if (tacl__coll_p2p(ops[i].args.type))
            continue;
        index++;
        if (ops[i].args.v == NULL)
            continue;
        for (size_t a = 0; a < n && status == TACL_OK; a++)
            for (size_t b = 0; b < n && status == TACL_OK; b++) {
                uint64_t sends = all[a * row + k * 2 * n + b];
                uint64_t expects = all[b * row + k * 2 * n + n + a];
                char where[48] = "";

                if (sends == expects)
                    continue;
                if (nops > 1)
                    snprintf(where, sizeof(where),
                             " in collective %d of the call", index - 1);
                status = tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                                     "%s: the ranks' counts disagree "
                                     "(TACL_CHECK): rank %zu sends %llu "
                                     "elements to rank %zu, which expects "
                                     "%llu from rank %zu%s; sendcounts[j] "
                                     "on rank i must equal recvcounts[i] on "
                                     "rank j", name, a,
                                     (unsigned long long)sends, b,
                                     (unsigned long long)expects, a, where);
            }
        k++;
    }
out:
    free(mine);
    free(all);
    return status;
}

/* After a mismatch: the highest sequence number any rank reached. */
static void resync(tacl_comm_t comm, const head_t *all)
{
    uint64_t next = 0;

    for (int r = 0; r < comm->size; r++)
        if (all[r].seq_next > next)
            next = all[r].seq_next;
    pthread_mutex_lock(&comm->x.ctx->lock);
    if (comm->seq < next)
        comm->seq = next;
    pthread_mutex_unlock(&comm->x.ctx->lock);
}

tacl_status_t tacl__check_call(tacl_comm_t comm, const tacl__op_t *ops,
                               int nops, uint64_t check_seq,
                               uint64_t seq_next)
{
    tacl__op_sig_t *sigs = malloc(((size_t)nops + 1) * sizeof(*sigs));
    head_t mine = {.seq = check_seq, .seq_next = seq_next}, *all;
    const char *name = "call";
    tacl_status_t status;
    int n = 0;

    all = malloc((size_t)comm->size * sizeof(*all));
    if (sigs == NULL || all == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
        goto out;
    }
    for (int i = 0; i < nops; i++)
        if (!tacl__coll_p2p(ops[i].args.type))
            sigs[n++] = tacl__op_sig_of(&ops[i].args);
    if (n > 0) {
        mine.first = sigs[0];
        name = tacl_coll_name((tacl_coll_t)sigs[0].coll);
    }
    mine.nops = n;
    status = tacl__comm_allgather_small(comm, check_seq % TACL__SEQ_HALF,
                                        &mine, all, sizeof(mine));
    if (status != TACL_OK)
        goto out;
    status = compare_heads(name, all, comm->size);
    if (status == TACL_OK && n > 1)
        status = compare_all(comm, name, sigs, n, check_seq + 1);
    if (status == TACL_OK)
        status = compare_vcounts(comm, ops, nops, check_seq + 2);
    if (status == TACL_ERR_INVALID_USAGE)
        resync(comm, all);
out:
    free(sigs);
    free(all);
    return status;
}

static tacl_status_t set_check_held(tacl_comm_t comm, int on)
{
    pthread_mutex_lock(&comm->x.ctx->lock);
    comm->check = on != 0;
    pthread_mutex_unlock(&comm->x.ctx->lock);
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_comm_set_check(tacl_comm_t comm, int on)
{
    TACL__COMM_HELD(comm, set_check_held(comm, on));
}
