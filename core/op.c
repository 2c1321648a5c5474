/*
 * The operation vocabulary (op.h): names, argument identity, buffer
 * sizes and signatures.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "op.h"

static const char *const coll_names[TACL_NUM_COLLS] = {
#define COLL_NAME_(name, value, str) [name] = str,
    TACL_COLL_LIST(COLL_NAME_)
#undef COLL_NAME_
};

TACL_EXPORT const char *tacl_coll_name(tacl_coll_t coll)
{
    if ((unsigned)coll >= TACL_NUM_COLLS)
        return "invalid";
    return coll_names[coll];
}

/* Whether a and b spell one name, ignoring case, '_' and '-'. */
static int loose_eq(const char *a, const char *b)
{
    for (;;) {
        while (*a == '_' || *a == '-')
            a++;
        while (*b == '_' || *b == '-')
            b++;
        if (*a == '\0' || *b == '\0')
            return *a == *b;
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return 0;
        a++;
        b++;
    }
}

int tacl__coll_from_name(const char *name)
{
    for (int c = 0; c < TACL_NUM_COLLS && name != NULL; c++)
        if (loose_eq(coll_names[c], name))
            return c;
    return -1;
}

/* The table's arrays live right after it, in one allocation (the
 * matrix too, when with_matrix). */
static tacl__vcounts_t *vcounts_alloc(int n, int with_matrix)
{
    size_t un = (size_t)(n > 0 ? n : 0);
    size_t entries = 4 * un + (with_matrix ? un * un : 0);
    tacl__vcounts_t *v = malloc(sizeof(*v) + entries * sizeof(size_t));

    if (v == NULL)
        return NULL;
    v->n = n;
    v->hash = 0;
    v->send = (size_t *)(v + 1);
    v->sdispl = v->send + n;
    v->recv = v->sdispl + n;
    v->rdispl = v->recv + n;
    v->matrix = with_matrix ? v->rdispl + n : NULL;
    return v;
}

/* Entries after the header: the four arrays and the matrix, if any. */
static size_t vcounts_entries(const tacl__vcounts_t *v)
{
    size_t n = (size_t)v->n;

    return 4 * n + (v->matrix != NULL ? n * n : 0);
}

tacl__vcounts_t *tacl__vcounts_new(int n, const size_t *sendcounts,
                                   const size_t *sdispls, size_t sendcount,
                                   const size_t *recvcounts,
                                   const size_t *rdispls)
{
    tacl__vcounts_t *v = vcounts_alloc(n, 0);
    uint64_t h = tacl__mix64((uint64_t)n + 0x9e3779b97f4a7c15ull);

    if (v == NULL)
        return NULL;
    for (int j = 0; j < n; j++) {
        v->send[j] = sendcounts != NULL ? sendcounts[j] : sendcount;
        v->sdispl[j] = sdispls != NULL ? sdispls[j] : 0;
        v->recv[j] = recvcounts[j];
        v->rdispl[j] = rdispls[j];
    }
    for (size_t i = 0; i < 4 * (size_t)n; i++)
        h = tacl__mix64(h ^ (uint64_t)v->send[i]);
    v->hash = h;
    return v;
}

tacl__vcounts_t *tacl__vcounts_dup(const tacl__vcounts_t *v)
{
    tacl__vcounts_t *c;

    if (v == NULL)
        return NULL;
    c = vcounts_alloc(v->n, v->matrix != NULL);
    if (c == NULL)
        return NULL;
    memcpy(c->send, v->send, vcounts_entries(v) * sizeof(size_t));
    c->hash = v->hash;
    return c;
}

tacl__vcounts_t *tacl__vcounts_with(const tacl__vcounts_t *v,
                                    const uint64_t *rows)
{
    tacl__vcounts_t *c = vcounts_alloc(v->n, 1);
    size_t n = (size_t)v->n;

    if (c == NULL)
        return NULL;
    memcpy(c->send, v->send, 4 * n * sizeof(size_t));
    for (size_t i = 0; i < n * n; i++)
        c->matrix[i] = (size_t)rows[i];
    c->hash = v->hash;
    return c;
}

tacl__vcounts_t *tacl__vcounts_of_rank(const tacl__vcounts_t *v, int rank)
{
    tacl__vcounts_t *c = vcounts_alloc(v->n, 1);
    size_t n = (size_t)v->n, sd = 0, rd = 0;
    uint64_t h = tacl__mix64((uint64_t)v->n + 0x9e3779b97f4a7c15ull);

    if (c == NULL)
        return NULL;
    memcpy(c->matrix, v->matrix, n * n * sizeof(size_t));
    for (size_t j = 0; j < n; j++) {
        c->send[j] = v->matrix[(size_t)rank * n + j];
        c->recv[j] = v->matrix[j * n + (size_t)rank];
        c->sdispl[j] = sd;
        c->rdispl[j] = rd;
        sd += c->send[j];
        rd += c->recv[j];
    }
    for (size_t i = 0; i < 4 * n; i++)
        h = tacl__mix64(h ^ (uint64_t)c->send[i]);
    c->hash = h;
    return c;
}

void tacl__vcounts_free(tacl__vcounts_t *v)
{
    free(v);
}

int tacl__vcounts_same(const tacl__vcounts_t *a, const tacl__vcounts_t *b)
{
    if (a == b)
        return 1;
    if (a == NULL || b == NULL || a->n != b->n || a->hash != b->hash ||
        (a->matrix == NULL) != (b->matrix == NULL))
        return 0;
    return memcmp(a->send, b->send, vcounts_entries(a) * sizeof(size_t)) == 0;
}

size_t tacl__vsend(const tacl__coll_args_t *a, int peer, size_t *displ_p)
{
    if (a->v != NULL) {
        *displ_p = a->v->sdispl[peer];
        return a->v->send[peer];
    }
    *displ_p = a->type == TACL_COLL_ALLGATHERV ? 0 : (size_t)peer * a->count;
    return a->count;
}

size_t tacl__vrecv(const tacl__coll_args_t *a, int peer, size_t *displ_p)
{
    if (a->v != NULL) {
        *displ_p = a->v->rdispl[peer];
        return a->v->recv[peer];
    }
    *displ_p = (size_t)peer * a->count;
    return a->count;
}

/*
 * The elements a variable-count operation's buffers span on this rank:
 * the end of the furthest region that holds any.  -1 on overflow.
 */
static int vcounts_extent(const tacl__coll_args_t *a, int nranks,
                          uint64_t *send_p, uint64_t *recv_p)
{
    *send_p = *recv_p = 0;
    for (int j = 0; j < nranks; j++) {
        size_t sd, rd, sn = tacl__vsend(a, j, &sd), rn = tacl__vrecv(a, j, &rd);
        uint64_t end;

        if (sn > 0) {
            if (__builtin_add_overflow((uint64_t)sd, (uint64_t)sn, &end))
                return -1;
            *send_p = TACL_MAX(*send_p, end);
        }
        if (rn > 0) {
            if (__builtin_add_overflow((uint64_t)rd, (uint64_t)rn, &end))
                return -1;
            *recv_p = TACL_MAX(*recv_p, end);
        }
    }
    return 0;
}

/*
 * Every field of the arguments is part of a call's identity but seq.  A
 * new field changes the size and stops the build here: add it below.
 */
_Static_assert(sizeof(tacl__coll_args_t) == 96,
               "tacl__coll_args_t changed: update tacl__coll_args_same");

int tacl__coll_args_same(const tacl__coll_args_t *a,
                         const tacl__coll_args_t *b)
{
    return a->type == b->type && a->tag == b->tag &&
           a->source == b->source && a->sendbuf == b->sendbuf &&
           a->recvbuf == b->recvbuf && a->count == b->count &&
           a->dtype == b->dtype && a->op == b->op && a->root == b->root &&
           a->memtype == b->memtype && a->chunk_bytes == b->chunk_bytes &&
           a->qbits == b->qbits && a->qblock == b->qblock &&
           a->shm_map == b->shm_map && a->send_mapped == b->send_mapped &&
           tacl__vcounts_same(a->v, b->v);
}

int tacl__coll_bytes(const tacl__coll_args_t *a, int rank, int nranks,
                     uint64_t max_bytes, uint64_t *send_p, uint64_t *recv_p)
{
    uint64_t esize = tacl_dtype_size(a->dtype), block, all;
    int is_root = a->root == rank;

    *send_p = *recv_p = 0;
    if (a->type == TACL_COLL_BARRIER)
        return 0;
    if (tacl__coll_vcounted(a->type)) {
        uint64_t send, recv;

        if (vcounts_extent(a, nranks, &send, &recv) != 0 ||
            __builtin_mul_overflow(send, esize, send_p) ||
            __builtin_mul_overflow(recv, esize, recv_p) ||
            *send_p > max_bytes || *recv_p > max_bytes) {
            *send_p = *recv_p = 0;
            return -1;
        }
        return 0;
    }
    if (__builtin_mul_overflow((uint64_t)a->count, esize, &block) ||
        __builtin_mul_overflow(block, (uint64_t)(nranks > 0 ? nranks : 1),
                               &all) ||
        all > max_bytes)
        return -1;
    switch (a->type) {
    case TACL_COLL_ALLGATHER:
        *send_p = block;
        *recv_p = all;
        break;
    case TACL_COLL_REDUCE_SCATTER:
        *send_p = all;
        *recv_p = block;
        break;
    case TACL_COLL_ALLTOALL:
        *send_p = *recv_p = all;
        break;
    case TACL_COLL_SEND:
        *send_p = block;
        break;
    case TACL_COLL_RECV:
        *recv_p = block;
        break;
    case TACL_COLL_BROADCAST:
        *send_p = is_root ? block : 0;
        *recv_p = block;
        break;
    case TACL_COLL_REDUCE:
        *send_p = block;
        *recv_p = is_root ? block : 0;
        break;
    default:
        *send_p = *recv_p = block;
        break;
    }
    return 0;
}

uint64_t tacl__coll_input_bytes(const tacl__coll_args_t *a, int nranks)
{
    uint64_t block = (uint64_t)a->count * tacl_dtype_size(a->dtype);

    switch (a->type) {
    case TACL_COLL_BARRIER:
        return 0;
    case TACL_COLL_REDUCE_SCATTER:
        return block * (uint64_t)nranks;
    default:
        return block;
    }
}

void tacl__coll_shared_reads(const tacl__coll_args_t *a, int rank,
                             int nranks, uint64_t *bytes_p, int *readers_p)
{
    *bytes_p = a->type == TACL_COLL_BROADCAST && rank != a->root
                   ? 0
                   : tacl__coll_input_bytes(a, nranks);
    /* A reduce's root reads every input; the others read none. */
    *readers_p = a->type == TACL_COLL_REDUCE ? rank != a->root : nranks - 1;
    if (*bytes_p == 0)
        *readers_p = 0;
}

tacl__op_sig_t tacl__op_sig_of(const tacl__coll_args_t *a)
{
    tacl__op_sig_t s = {.coll = (int32_t)a->type, .op = -1, .root = -1};

    if (a->type != TACL_COLL_BARRIER) {
        s.count = a->count;
        s.dtype = (int32_t)a->dtype;
    }
    if (tacl__coll_reduces(a->type))
        s.op = (int32_t)a->op;
    if (tacl__coll_rooted(a->type) || tacl__coll_p2p(a->type))
        s.root = a->root;
    s.qbits = a->qbits;
    s.qblock = a->qbits != 0 ? (int32_t)a->qblock : 0;
    if (tacl__coll_vcounted(a->type))
        s.vhash = a->v != NULL ? a->v->hash : tacl__mix64(a->count);
    return s;
}

tacl__sig_field_t tacl__op_sig_diff(const tacl__op_sig_t *a,
                                    const tacl__op_sig_t *b)
{
    if (a->coll != b->coll)
        return TACL__SIG_COLL;
    /* A variable-count call's tables are compared on their own (check.c):
     * they name the ranks and counts that disagree. */
    if (a->count != b->count && !tacl__coll_vcounted((tacl_coll_t)a->coll))
        return TACL__SIG_COUNT;
    if (a->dtype != b->dtype)
        return TACL__SIG_DTYPE;
    if (a->op != b->op)
        return TACL__SIG_OP;
    if (a->root != b->root)
        return TACL__SIG_ROOT;
    if (a->qbits != b->qbits)
        return TACL__SIG_QBITS;
    if (a->qblock != b->qblock)
        return TACL__SIG_QBLOCK;
    return TACL__SIG_SAME;
}

uint64_t tacl__op_sig_hash(const tacl__op_sig_t *s)
{
    uint64_t h = tacl__mix64(s->count + 0x9e3779b97f4a7c15ull);

    h = tacl__mix64(h ^ s->vhash);
    h = tacl__mix64(h ^ ((uint64_t)(uint32_t)s->coll << 32 |
                         (uint32_t)s->dtype));
    h = tacl__mix64(h ^ ((uint64_t)(uint32_t)s->op << 32 |
                         (uint32_t)s->root));
    return tacl__mix64(h ^ ((uint64_t)(uint32_t)s->qbits << 32 |
                    (uint32_t)s->qblock));
}

static const char *const field_names[TACL__SIG_SAME] = {
    [TACL__SIG_COLL] = "collective",
    [TACL__SIG_COUNT] = "count",
    [TACL__SIG_DTYPE] = "dtype",
    [TACL__SIG_OP] = "op",
    [TACL__SIG_ROOT] = "root",
    [TACL__SIG_QBITS] = "quantization bits",
    [TACL__SIG_QBLOCK] = "quantization block",
};

const char *tacl__sig_field_name(tacl__sig_field_t f)
{
    return (unsigned)f < TACL__SIG_SAME ? field_names[f] : "nothing";
}

const char *tacl__sig_field_value(const tacl__op_sig_t *s,
                                  tacl__sig_field_t f, char *buf,
                                  size_t len)
{
    switch (f) {
    case TACL__SIG_COLL:
        return tacl_coll_name((tacl_coll_t)s->coll);
    case TACL__SIG_DTYPE:
        return tacl_dtype_name((tacl_dtype_t)s->dtype);
    case TACL__SIG_OP:
        return s->op < 0 ? "none" : tacl_op_name((tacl_op_t)s->op);
    case TACL__SIG_COUNT:
        snprintf(buf, len, "%llu", (unsigned long long)s->count);
        return buf;
    case TACL__SIG_ROOT:
        snprintf(buf, len, "%d", s->root);
        return buf;
    case TACL__SIG_QBITS:
        snprintf(buf, len, "%d", s->qbits);
        return buf;
    default:
        snprintf(buf, len, "%d", s->qblock);
        return buf;
    }
}

int tacl__op_sig_format(const tacl__op_sig_t *s, char *buf, size_t len)
{
    int n = snprintf(buf, len, "coll=%s count=%llu dtype=%s redop=%s root=%d",
                     tacl_coll_name((tacl_coll_t)s->coll),
                     (unsigned long long)s->count,
                     tacl_dtype_name((tacl_dtype_t)s->dtype),
                     s->op < 0 ? "none" : tacl_op_name((tacl_op_t)s->op),
                     s->root);

    if (s->qbits != 0 && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " qbits=%d qblock=%d",
                      s->qbits, s->qblock);
    if (tacl__coll_vcounted((tacl_coll_t)s->coll) && n >= 0 &&
        (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " vcounts=%016llx",
                      (unsigned long long)s->vhash);
    return n;
}
