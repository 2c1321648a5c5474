/*
 * The sharded-training engine (see engine.h).
 *
 * Ranks form g partition groups of M ranks (the node, or --group-size);
 * gi is the group index, li the rank inside the group.  Three
 * communicators: the world, the group, and the "inter" communicator of
 * the ranks with the same li in every group (MiCS's cross-group replicas).
 *
 * Every layer buffer (n elements, n a multiple of N) is cut into shards:
 *   N  the whole buffer,
 *   I  n/M elements at li * n/M (the group shard, the same in every group),
 *   G  n/N elements.  When the strategy has an I level anywhere, a global
 *      shard must lie inside the rank's group shard, so global operations
 *      run in two hops (the group, then the inter communicator) and the
 *      shard is at (li * g + gi) * n/N ("nested").  Otherwise they run on
 *      the world communicator and the shard is at rank * n/N ("flat"),
 *      which is what ZeRO does.
 * Each rank holds its P, G and optimizer-state shards of every layer, at
 * the level the strategy says.  By PaRO's principle 1 the state shard lies
 * inside the parameter and gradient shards, so Adam updates the held
 * parameters in place.
 *
 * One micro-step: for each layer, gather its parameters (unless P is N)
 * while the next layer's gather runs non-blocking; forward; then backward
 * from the last layer, gathering again, each layer's gradient reduced to
 * the gradient level (within the group for I: MiCS's first hop) by a
 * non-blocking call that runs while the layer below computes, then
 * accumulated.  After s micro-steps: the remaining gradient
 * reduction to the state level (across groups once per step: the second
 * hop), Adam on the held state shard, and parameters spread back to the
 * parameter level, every layer in one coalesced call.
 */
#define _GNU_SOURCE
#include "engine.h"
#include "gcomp.h"
#include "words.h"

#include <cblas.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define ENGINE_MAGIC "TACLENG1"

struct engine {
    engine_opts_t o;
    model_t model;
    tacl_comm_t world, grp, inter;
    int n, m, ng;        /* world size, group size, number of groups */
    int rank, li, gi;
    int nested;          /* global shards go through the group */
    tacl_quant_t qw, qg;
    const uint8_t *text;
    size_t text_len;
    uint64_t step;       /* optimizer steps done */
    uint64_t data_pos;   /* global batches drawn from the text */
    /* Per layer: the held shards. */
    float **p_hold, **g_hold, **m_hold, **v_hold, **secondary;
    /* Work buffers: two gathered layers, a full gradient, a shard. */
    float *wfull[2], *gfull[2], *gtmp[2], *acts_mem;
    uint8_t *tok;
    void **allocs;
    int n_allocs, max_allocs;
    uint64_t bytes_p, bytes_g, bytes_os;
    int b;               /* samples per micro-batch per rank */
    /* Compression (engine_set_plan): groups of consecutive layers
     * lo[k]..hi[k], in gradient-ready order (hi first), each compressed
     * or not; ngroups 0: the dense per-layer path above. */
    gcomp_codec_t codec;
    /* How the compressed calls of the plan's reduce-scatter and of the
     * all-reduce across groups run (codec.hops on those communicators). */
    gcomp_route_t route_rs, route_ar;
    int ngroups, *grp_lo, *grp_hi, *grp_comp;
    tacl_request_t *grp_req;  /* each group's call in flight, or NULL */
    size_t *loff, *ioff;  /* each layer's offset in Psi and in Psi / M */
    float *gflat;         /* every layer's full micro-step gradient */
    float *err_rs, *err_ar; /* residuals: the reduce-scatter, across groups */
    float *pack, *shard;  /* a group packed, and its reduced block */
    /* The profile: least seconds of a micro-step's forward and of each
     * layer's backward since engine_profile_reset. */
    double prof_fwd, *prof_bwd;
    /* What the planner predicts, measured (engine_plan_span): the last
     * micro-step less its waits for parameter gathers, and the step's
     * all-reduce across groups with a plan. */
    double gather_wait_s, span_s;
    engine_words_t *words;  /* the word embedding, or NULL */
    char err[512];
};

static const char *const level_names = "NIG";

void engine_opts_default(engine_opts_t *opts)
{
    memset(opts, 0, sizeof(*opts));
    opts->p = opts->g = opts->os = LVL_G;
    opts->qwz_bits = 8;
    opts->qgz_bits = 4;
    opts->micro_steps = 1;
    opts->batch = 64;
    opts->ctx = 8;
    opts->emb = 16;
    opts->hidden = 256;
    opts->blocks = 4;
    opts->lr = 3e-3f;
    opts->seed = 1;
    opts->sparse_scheme = TACL_SPARSE_AUTO;
}

static int level_of(char c, engine_level_t *lvl)
{
    const char *at = strchr(level_names, c);

    if (c == '\0' || at == NULL)
        return -1;
    *lvl = (engine_level_t)(at - level_names);
    return 0;
}

int engine_parse_strategy(const char *name, engine_opts_t *opts)
{
    static const struct { const char *alias, *levels; } aliases[] = {
        {"DDP", "NNN"}, {"ZeRO-1", "NNG"}, {"ZeRO-2", "NGG"},
        {"ZeRO-3", "GGG"}, {"MiCS", "III"},
    };
    const char *levels = name;
    engine_level_t lv[3];

    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (strcasecmp(name, aliases[i].alias) == 0)
            levels = aliases[i].levels;
    if (strlen(levels) != 3)
        return -1;
    for (int i = 0; i < 3; i++)
        if (level_of(levels[i], &lv[i]) != 0)
            return -1;
    if (lv[2] < lv[0] || lv[2] < lv[1])
        return -1;
    opts->p = lv[0];
    opts->g = lv[1];
    opts->os = lv[2];
    return 0;
}

static void set_err(engine_t *e, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(e->err, sizeof(e->err), fmt, ap);
    va_end(ap);
}

const char *engine_error(const engine_t *e)
{
    return e->err;
}

/* Offset and length of this rank's shard of layer l at a level. */
static size_t shard_len(const engine_t *e, int l, engine_level_t lvl)
{
    size_t n = e->model.padded[l];

    return lvl == LVL_N ? n : lvl == LVL_I ? n / e->m : n / e->n;
}

static size_t shard_off(const engine_t *e, int l, engine_level_t lvl)
{
    size_t chunk = e->model.padded[l] / e->n;

    if (lvl == LVL_N)
        return 0;
    if (lvl == LVL_I)
        return (size_t)e->li * shard_len(e, l, LVL_I);
    return e->nested ? ((size_t)e->li * e->ng + e->gi) * chunk
                     : (size_t)e->rank * chunk;
}

static tacl_status_t comm_fail(engine_t *e, tacl_comm_t comm,
                               tacl_status_t st, const char *what)
{
    set_err(e, "%s failed: %s (%s)", what, tacl_status_string(st),
            tacl_comm_last_error(comm));
    return st;
}

/*
 * Wait for and free the world's request in *req_p, if one is pending, and
 * clear it; a failure is recorded as what's.
 */
static tacl_status_t wait_pending(engine_t *e, tacl_request_t *req_p,
                                  const char *what)
{
    tacl_status_t st;

    if (*req_p == NULL)
        return TACL_OK;
    st = tacl_request_wait(*req_p);
    tacl_request_free(*req_p);
    *req_p = NULL;
    if (st != TACL_OK)
        return comm_fail(e, e->world, st, what);
    return TACL_OK;
}

#define CHECK_COMM(e, comm, call, what)                                      \
    do {                                                                     \
        tacl_status_t st_ = (call);                                          \
        if (st_ != TACL_OK)                                                  \
            return comm_fail((e), (comm), st_, (what));                      \
    } while (0)

/*
 * In-place reductions and expansions of one region over all layers (or
 * one layer: first..last).  A region buffer bufs[l] covers the layer's
 * shard at level `from` (reduce) or `to` (expand); the call leaves the
 * reduced values in the shard at level `to` (reduce), or fills the whole
 * region from the shards at level `from` (expand).  Each hop is one
 * coalesced call over the layers.
 */
typedef enum { HOP_GROUP, HOP_INTER, HOP_WORLD } hop_t;

static tacl_comm_t hop_comm(const engine_t *e, hop_t hop)
{
    return hop == HOP_GROUP ? e->grp : hop == HOP_INTER ? e->inter
                                                        : e->world;
}

/* One hop of reduce-scatter or all-gather in place over layers. */
static tacl_status_t hop_run(engine_t *e, int reduce, hop_t hop,
                             float *const *bufs, int first, int last,
                             tacl_request_t *req_p)
{
    tacl_comm_t comm = hop_comm(e, hop);
    int nb = last - first + 1, idx = hop == HOP_GROUP ? e->li
                                   : hop == HOP_INTER ? e->gi : e->rank;
    int size = hop == HOP_GROUP ? e->m : hop == HOP_INTER ? e->ng : e->n;
    const void *sends[nb];
    void *recvs[nb];
    size_t counts[nb];

    if (req_p != NULL)
        *req_p = NULL;
    if (size == 1)
        return TACL_OK;
    for (int i = 0; i < nb; i++) {
        int l = first + i;
        /* The region the hop works on: the whole layer for the world and
         * the group, the group shard for the inter hop. */
        size_t region = hop == HOP_INTER ? shard_len(e, l, LVL_I)
                                         : e->model.padded[l];

        counts[i] = region / (size_t)size;
        if (reduce) {
            sends[i] = bufs[i];
            recvs[i] = bufs[i] + (size_t)idx * counts[i];
        } else {
            sends[i] = bufs[i] + (size_t)idx * counts[i];
            recvs[i] = bufs[i];
        }
    }
    if (reduce && req_p != NULL)
        CHECK_COMM(e, comm,
                   tacl_reduce_scatter_coalesced_nb(sends, recvs, counts,
                                                    nb, TACL_FLOAT32,
                                                    TACL_SUM, comm, NULL,
                                                    req_p),
                   "reduce-scatter");
    else if (reduce)
        CHECK_COMM(e, comm,
                   tacl_reduce_scatter_coalesced(sends, recvs, counts, nb,
                                                 TACL_FLOAT32, TACL_SUM,
                                                 comm, NULL),
                   "reduce-scatter");
    else
        CHECK_COMM(e, comm,
                   tacl_allgather_coalesced(sends, recvs, counts, nb,
                                            TACL_FLOAT32, comm, NULL),
                   "all-gather");
    return TACL_OK;
}

/*
 * Reduce from level `from` to `to` in place.  bufs[i] points at the
 * start of the `from` shard of layer first + i.  The hops: N->I the
 * group; I->G the inter communicator; N->G the world when flat, else
 * N->I then I->G.
 */
static tacl_status_t reduce_levels(engine_t *e, engine_level_t from,
                                   engine_level_t to, float **bufs,
                                   int first, int last)
{
    tacl_status_t st;
    int nb = last - first + 1;

    if (from == to)
        return TACL_OK;
    if (from == LVL_N && to == LVL_G && !e->nested)
        return hop_run(e, 1, HOP_WORLD, bufs, first, last, NULL);
    if (from == LVL_N) {
        st = hop_run(e, 1, HOP_GROUP, bufs, first, last, NULL);
        if (st != TACL_OK || to == LVL_I)
            return st;
        for (int i = 0; i < nb; i++)
            bufs[i] += shard_off(e, first + i, LVL_I);
    }
    return hop_run(e, 1, HOP_INTER, bufs, first, last, NULL);
}

/* Expand from level `from` to `to` in place; bufs[i] at the `to` shard. */
static tacl_status_t expand_levels(engine_t *e, engine_level_t from,
                                   engine_level_t to, float **bufs,
                                   int first, int last)
{
    tacl_status_t st;
    int nb = last - first + 1;
    float *inner[nb > 0 ? nb : 1];

    if (from == to)
        return TACL_OK;
    if (from == LVL_G && to == LVL_N && !e->nested)
        return hop_run(e, 0, HOP_WORLD, bufs, first, last, NULL);
    if (from == LVL_G) {
        for (int i = 0; i < nb; i++)
            inner[i] = bufs[i] + (to == LVL_N ? shard_off(e, first + i,
                                                          LVL_I) : 0);
        st = hop_run(e, 0, HOP_INTER, inner, first, last, NULL);
        if (st != TACL_OK || to == LVL_I)
            return st;
    }
    return hop_run(e, 0, HOP_GROUP, bufs, first, last, NULL);
}

/* All-reduce one region per layer across the given hop (group call). */
static tacl_status_t allreduce_layers(engine_t *e, hop_t hop, float **bufs,
                                      engine_level_t lvl)
{
    tacl_comm_t comm = hop_comm(e, hop);
    tacl_status_t st = TACL_OK, st2;

    if ((hop == HOP_INTER ? e->ng : e->n) == 1)
        return TACL_OK;
    tacl_group_start();
    for (int l = 0; l < e->model.n_layers && st == TACL_OK; l++)
        st = tacl_allreduce(bufs[l], bufs[l], shard_len(e, l, lvl),
                            TACL_FLOAT32, TACL_SUM, comm, NULL);
    st2 = tacl_group_end();
    if (st == TACL_OK)
        st = st2;
    if (st != TACL_OK)
        return comm_fail(e, comm, st, "all-reduce");
    return TACL_OK;
}

/* ---- Allocation: every buffer once, from tacl_mem_alloc. ---- */

static void *ealloc(engine_t *e, size_t bytes, uint64_t *count_p)
{
    void *p = NULL;

    if (bytes == 0)
        bytes = sizeof(float);
    if (e->n_allocs == e->max_allocs ||
        tacl_mem_alloc(&p, bytes, TACL_MEM_HOST) != TACL_OK) {
        set_err(e, "cannot allocate %zu bytes: %s", bytes,
                tacl_last_error());
        return NULL;
    }
    e->allocs[e->n_allocs++] = p;
    if (count_p != NULL)
        *count_p += bytes;
    return p;
}

static int alloc_buffers(engine_t *e)
{
    const model_t *md = &e->model;
    int L = md->n_layers;
    size_t maxn = 0;

    e->max_allocs = 5 * L + 16;
    e->allocs = calloc((size_t)e->max_allocs, sizeof(void *));
    e->p_hold = calloc((size_t)L, sizeof(float *));
    e->g_hold = calloc((size_t)L, sizeof(float *));
    e->m_hold = calloc((size_t)L, sizeof(float *));
    e->v_hold = calloc((size_t)L, sizeof(float *));
    e->secondary = calloc((size_t)L, sizeof(float *));
    e->prof_bwd = calloc((size_t)L, sizeof(double));
    if (!e->allocs || !e->p_hold || !e->g_hold || !e->m_hold ||
        !e->v_hold || !e->secondary || !e->prof_bwd) {
        set_err(e, "out of memory");
        return -1;
    }
    for (int l = 0; l < L; l++) {
        size_t lp = shard_len(e, l, e->o.p), lg = shard_len(e, l, e->o.g);
        size_t lo = shard_len(e, l, e->o.os);

        maxn = md->padded[l] > maxn ? md->padded[l] : maxn;
        if (!(e->p_hold[l] = ealloc(e, lp * 4, &e->bytes_p)) ||
            !(e->g_hold[l] = ealloc(e, lg * 4, &e->bytes_g)) ||
            !(e->m_hold[l] = ealloc(e, lo * 4, &e->bytes_os)) ||
            !(e->v_hold[l] = ealloc(e, lo * 4, &e->bytes_os)))
            return -1;
        if (e->o.hpz &&
            !(e->secondary[l] = ealloc(e, shard_len(e, l, LVL_I) * 4,
                                       &e->bytes_p)))
            return -1;
    }
    if (e->o.p != LVL_N && (!(e->wfull[0] = ealloc(e, maxn * 4, NULL)) ||
                            !(e->wfull[1] = ealloc(e, maxn * 4, NULL))))
        return -1;
    if (!(e->gfull[0] = ealloc(e, maxn * 4, NULL)) ||
        !(e->gfull[1] = ealloc(e, maxn * 4, NULL)) ||
        !(e->gtmp[0] = ealloc(e, maxn / e->n * 4, NULL)) ||
        !(e->gtmp[1] = ealloc(e, maxn / e->n * 4, NULL)) ||
        !(e->acts_mem = ealloc(e, model_acts_floats(md, e->b) * 4, NULL)) ||
        !(e->tok = ealloc(e, (size_t)e->b * (md->ctx + 1), NULL)))
        return -1;
    return 0;
}

static void init_params(engine_t *e)
{
    for (int l = 0; l < e->model.n_layers; l++) {
        size_t off = shard_off(e, l, e->o.p), len = shard_len(e, l, e->o.p);

        for (size_t i = 0; i < len; i++)
            e->p_hold[l][i] = model_init_value(&e->model, l, off + i,
                                               e->o.seed);
    }
}

/* ---- Creation ---- */

static tacl_status_t make_groups(engine_t *e)
{
    int local_size, node, n_nodes, lrank;
    int mm[2];
    tacl_status_t st;

    if (e->o.group_size > 0) {
        if (e->n % e->o.group_size != 0) {
            set_err(e, "--group-size %d does not divide the world size %d",
                    e->o.group_size, e->n);
            return TACL_ERR_INVALID_ARG;
        }
        e->m = e->o.group_size;
        e->gi = e->rank / e->m;
        e->li = e->rank % e->m;
    } else {
        tacl_comm_local_size(e->world, &local_size);
        tacl_comm_node(e->world, &node);
        tacl_comm_n_nodes(e->world, &n_nodes);
        tacl_comm_local_rank(e->world, &lrank);
        mm[0] = local_size;
        mm[1] = -local_size;
        st = tacl_allreduce(mm, mm, 2, TACL_INT32, TACL_MAX, e->world, NULL);
        if (st != TACL_OK)
            return comm_fail(e, e->world, st, "all-reduce");
        if (mm[0] != -mm[1]) {
            set_err(e, "nodes have different rank counts (%d to %d): give "
                    "--group-size", -mm[1], mm[0]);
            return TACL_ERR_INVALID_USAGE;
        }
        e->m = local_size;
        e->gi = node;
        e->li = lrank;
    }
    e->ng = e->n / e->m;
    st = tacl_comm_split(e->world, e->gi, e->li, &e->grp);
    if (st != TACL_OK)
        return comm_fail(e, e->world, st, "split into groups");
    st = tacl_comm_split(e->world, e->li, e->gi, &e->inter);
    if (st != TACL_OK)
        return comm_fail(e, e->world, st, "split across groups");
    return TACL_OK;
}

/* Bounds of the word embedding: every table (four) in host memory. */
#define WORDS_MAX_VOCAB (1 << 22)
#define WORDS_MAX_DIM 1024
#define WORDS_MAX_FLOATS ((size_t)1 << 26)

static int check_words(engine_t *e)
{
    const engine_opts_t *o = &e->o;

    if (o->vocab == 0 && o->embed_dim == 0)
        return 0;
    if (o->vocab < 2 || o->vocab > WORDS_MAX_VOCAB) {
        set_err(e, "--vocab %d: the word vocabulary takes 2 to %d words",
                o->vocab, WORDS_MAX_VOCAB);
        return -1;
    }
    if (o->embed_dim < 1 || o->embed_dim > WORDS_MAX_DIM) {
        set_err(e, "--embed-dim %d: a word vector takes 1 to %d floats",
                o->embed_dim, WORDS_MAX_DIM);
        return -1;
    }
    if ((size_t)o->vocab * (size_t)o->embed_dim > WORDS_MAX_FLOATS) {
        set_err(e, "--vocab %d x --embed-dim %d is more than %zu floats a "
                "table", o->vocab, o->embed_dim, WORDS_MAX_FLOATS);
        return -1;
    }
    if ((unsigned)o->sparse_scheme >= TACL_NUM_SPARSE_SCHEMES) {
        set_err(e, "sparse scheme %d is not a scheme", (int)o->sparse_scheme);
        return -1;
    }
    return 0;
}

static int check_opts(engine_t *e)
{
    const engine_opts_t *o = &e->o;
    long per = (long)e->n * o->micro_steps;

    if ((o->hpz || o->qwz || o->qgz) &&
        !(o->p == LVL_G && o->g == LVL_G && o->os == LVL_G)) {
        set_err(e, "hpZ, qwZ and qgZ apply to ZeRO-3 (GGG) only");
        return -1;
    }
    if ((o->qwz && o->qwz_bits != 8 && o->qwz_bits != 4) ||
        (o->qgz && o->qgz_bits != 8 && o->qgz_bits != 4)) {
        set_err(e, "quantization takes 8 or 4 bits");
        return -1;
    }
    if (o->micro_steps < 1 || o->batch < 1 || o->batch % per != 0) {
        set_err(e, "the batch (%d) must be a positive multiple of world "
                "size x micro-steps (%ld)", o->batch, per);
        return -1;
    }
    if (!(o->lr > 0.0f)) {
        set_err(e, "the learning rate must be positive");
        return -1;
    }
    return check_words(e);
}

tacl_status_t engine_create(tacl_comm_t comm, const engine_opts_t *opts,
                            const uint8_t *text, size_t len,
                            engine_t **engine_p, char *err, size_t errlen)
{
    engine_t *e = calloc(1, sizeof(*e));
    tacl_status_t st = TACL_ERR_INVALID_ARG;

    if (e == NULL) {
        snprintf(err, errlen, "out of memory");
        return TACL_ERR_NO_MEMORY;
    }
    e->o = *opts;
    e->world = comm;
    e->text = text;
    e->text_len = len;
    tacl_comm_rank(comm, &e->rank);
    tacl_comm_size(comm, &e->n);
    openblas_set_num_threads(1);
    if (check_opts(e) != 0)
        goto err;
    if (model_init(&e->model, opts->ctx, opts->emb, opts->hidden,
                   opts->blocks, opts->vocab, opts->embed_dim,
                   (size_t)e->n) != 0) {
        set_err(e, "bad model shape (ctx %d, emb %d, hidden %d, blocks %d)",
                opts->ctx, opts->emb, opts->hidden, opts->blocks);
        goto err;
    }
    if (len < (size_t)opts->ctx + 2) {
        set_err(e, "the text has %zu bytes, fewer than the context + 2",
                len);
        goto err;
    }
    e->b = opts->batch / (e->n * opts->micro_steps);
    st = make_groups(e);
    if (st != TACL_OK)
        goto err;
    e->nested = e->o.p == LVL_I || e->o.g == LVL_I || e->o.os == LVL_I;
    e->qw.bits = opts->qwz_bits;
    e->qg.bits = opts->qgz_bits;
    st = TACL_ERR_NO_MEMORY;
    if (alloc_buffers(e) != 0)
        goto err;
    init_params(e);
    if (opts->vocab > 0 &&
        (st = words_create(comm, &e->model, e->b, opts->micro_steps,
                           opts->seed, opts->sparse_scheme, &e->words,
                           &e->bytes_p, &e->bytes_g, &e->bytes_os, e->err,
                           sizeof(e->err))) != TACL_OK)
        goto err;
    *engine_p = e;
    return TACL_OK;

err:
    /* engine_destroy frees whatever was made. */
    snprintf(err, errlen, "%s", e->err);
    engine_destroy(e);
    return st;
}

void engine_destroy(engine_t *e)
{
    if (e == NULL)
        return;
    for (int i = 0; i < e->n_allocs; i++)
        tacl_mem_free(e->allocs[i]);
    free(e->allocs);
    free(e->p_hold);
    free(e->g_hold);
    free(e->m_hold);
    free(e->v_hold);
    free(e->secondary);
    free(e->prof_bwd);
    free(e->grp_lo);
    free(e->grp_hi);
    free(e->grp_comp);
    free(e->grp_req);
    free(e->loff);
    free(e->ioff);
    words_destroy(e->words);
    if (e->grp != NULL)
        tacl_comm_destroy(e->grp);
    if (e->inter != NULL)
        tacl_comm_destroy(e->inter);
    model_fini(&e->model);
    free(e);
}

/* ---- Gathering parameters, with a non-blocking first hop ---- */

typedef struct {
    tacl_request_t req;
    int layer, backward;
    float *dst;
} gather_t;

/* The buffer a layer's full parameters are read from during compute. */
static tacl_status_t gather_start(engine_t *e, int l, int backward,
                                  float *dst, gather_t *g)
{
    tacl_status_t st = TACL_OK;
    size_t n = e->model.padded[l];
    tacl_comm_t comm;

    g->req = NULL;
    g->layer = l;
    g->backward = backward;
    g->dst = dst;
    if (e->o.p == LVL_N)
        return TACL_OK;
    if (e->o.p == LVL_I || (backward && e->o.hpz)) {
        comm = e->grp;
        st = tacl_allgather_nb(e->o.p == LVL_I ? e->p_hold[l]
                                               : e->secondary[l],
                               dst, n / e->m, TACL_FLOAT32, comm, NULL,
                               &g->req);
    } else if (e->nested) {
        comm = e->inter;
        st = tacl_allgather_nb(e->p_hold[l], dst + shard_off(e, l, LVL_I),
                               n / e->n, TACL_FLOAT32, comm, NULL, &g->req);
    } else if (e->o.qwz) {
        comm = e->world;
        st = tacl_allgather_quantized_nb(e->p_hold[l], dst, n / e->n,
                                         TACL_FLOAT32, &e->qw, comm, NULL,
                                         &g->req);
    } else {
        comm = e->world;
        st = tacl_allgather_nb(e->p_hold[l], dst, n / e->n, TACL_FLOAT32,
                               comm, NULL, &g->req);
    }
    if (st != TACL_OK)
        return comm_fail(e, comm, st, "all-gather of parameters");
    return TACL_OK;
}

static tacl_status_t gather_wait(engine_t *e, gather_t *g,
                                 const float **w_p)
{
    int l = g->layer;
    tacl_status_t st;

    double t0 = engine_clock_s();

    if (e->o.p == LVL_N) {
        *w_p = e->p_hold[l];
        return TACL_OK;
    }
    st = wait_pending(e, &g->req, "all-gather of parameters");
    if (st == TACL_OK && e->o.p == LVL_G && e->nested &&
        !(g->backward && e->o.hpz)) {
        float *buf = g->dst;

        st = hop_run(e, 0, HOP_GROUP, &buf, l, l, NULL);
    }
    e->gather_wait_s += engine_clock_s() - t0;
    if (st != TACL_OK)
        return st;
    if (e->o.hpz && !g->backward)
        memcpy(e->secondary[l], g->dst + shard_off(e, l, LVL_I),
               shard_len(e, l, LVL_I) * sizeof(float));
    *w_p = g->dst;
    return TACL_OK;
}

/* ---- One micro-step ---- */

/*
 * Samples k of the global batch of step t: the same on any world.  A
 * sample's key places its text and names its words' stream.
 */
static tacl_status_t load_batch(engine_t *e, int micro)
{
    int c1 = e->model.ctx + 1;
    size_t span = e->text_len - (size_t)c1 + 1;
    tacl_status_t st = TACL_OK;

    for (int i = 0; i < e->b && st == TACL_OK; i++) {
        uint64_t k = ((uint64_t)micro * e->n + e->rank) * e->b + i;
        uint64_t key = model_hash64(e->o.seed * 0x100000001b3ULL ^
                                    model_hash64(e->data_pos) ^ k);

        memcpy(e->tok + (size_t)i * c1, e->text + key % span, (size_t)c1);
        if (e->words != NULL)
            st = words_draw(e->words, i, key,
                            e->tok[(size_t)i * c1 + c1 - 1]);
    }
    if (st != TACL_OK)
        set_err(e, "drawing the words: %s", tacl_last_error());
    return st;
}

/*
 * A layer's micro-step gradient on its way to the held gradient shard.
 * The first hop starts non-blocking as soon as the backward has written
 * the gradient, and runs while the layer below computes; finishing it
 * runs the second hop (nested global shards) and accumulates.
 */
typedef struct {
    tacl_request_t req;
    int layer;           /* -1: nothing pending */
    int slot;            /* which gfull / gtmp buffer */
} greduce_t;

static tacl_status_t reduce_start(engine_t *e, int l, int slot,
                                  greduce_t *r)
{
    float *buf = e->gfull[slot];
    engine_level_t lg = e->o.g;
    tacl_status_t st;

    r->layer = l;
    r->slot = slot;
    r->req = NULL;
    if (e->o.qgz) {
        st = tacl_reduce_scatter_quantized_nb(buf, e->gtmp[slot],
                                              shard_len(e, l, lg),
                                              TACL_FLOAT32, TACL_SUM,
                                              &e->qg, e->world, NULL,
                                              &r->req);
        if (st != TACL_OK)
            return comm_fail(e, e->world, st, "quantized reduce-scatter");
        return TACL_OK;
    }
    if (lg == LVL_N)
        return TACL_OK;
    return hop_run(e, 1, lg == LVL_G && !e->nested ? HOP_WORLD : HOP_GROUP,
                   &buf, l, l, &r->req);
}

static tacl_status_t reduce_finish(engine_t *e, greduce_t *r)
{
    int l = r->layer;
    engine_level_t lg = e->o.g;
    float *src, *inner;
    tacl_status_t st;

    if (l < 0)
        return TACL_OK;
    r->layer = -1;
    st = wait_pending(e, &r->req, "reduce-scatter of gradients");
    if (st != TACL_OK)
        return st;
    if (e->o.qgz) {
        src = e->gtmp[r->slot];
    } else {
        if (lg == LVL_G && e->nested) {
            inner = e->gfull[r->slot] + shard_off(e, l, LVL_I);
            st = hop_run(e, 1, HOP_INTER, &inner, l, l, NULL);
            if (st != TACL_OK)
                return st;
        }
        src = e->gfull[r->slot] + shard_off(e, l, lg);
    }
    cblas_saxpy((int)shard_len(e, l, lg), 1.0f, src, 1, e->g_hold[l], 1);
    return TACL_OK;
}

double engine_clock_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Layer l's backward into grad, timed for the profile. */
static void backward_timed(engine_t *e, int l, const float *w, float *grad,
                           model_acts_t *acts, float scale)
{
    double t0 = engine_clock_s(), dt;

    model_backward(&e->model, l, w, grad, acts, scale);
    dt = engine_clock_s() - t0;
    if (e->prof_bwd[l] == 0.0 || dt < e->prof_bwd[l])
        e->prof_bwd[l] = dt;
}

/* The layers of plan group k: pointers and lengths, lowest layer first. */
static int plan_group(engine_t *e, int k, float **grads, size_t *counts,
                      float **dst)
{
    int lo = e->grp_lo[k], nl = e->grp_hi[k] - lo + 1;

    for (int i = 0; i < nl; i++) {
        grads[i] = e->gflat + e->loff[lo + i];
        counts[i] = e->model.padded[lo + i];
        dst[i] = e->g_hold[lo + i];
    }
    return nl;
}

/* The communicator of the plan's reduce-scatter and its size. */
static tacl_comm_t plan_comm(const engine_t *e, int *size_p)
{
    int flat = e->o.g == LVL_G && !e->nested;

    *size_p = flat ? e->n : e->m;
    return flat ? e->world : e->grp;
}

/* Whether plan group k's call is encoded: a communicator inside one
 * node goes dense. */
static int plan_compressed(const engine_t *e, int k)
{
    return e->grp_comp[k] && e->route_rs != GCOMP_ROUTE_DENSE;
}

/*
 * Finish the plan groups' reduce-scatters in flight, in the order they
 * were started, adding each group's reduced block into its held gradient
 * shards.  Every call is waited for, even after one failed, so that
 * none is left using the buffers; the first failure is returned.
 */
static tacl_status_t plan_finish(engine_t *e)
{
    int size, L = e->model.n_layers, nl;
    float *grads[L], *dst[L];
    size_t counts[L];
    tacl_status_t st = TACL_OK, st_k;

    plan_comm(e, &size);
    for (int k = 0; k < e->ngroups; k++) {
        if (e->grp_req[k] == NULL)
            continue;
        st_k = wait_pending(e, &e->grp_req[k],
                            plan_compressed(e, k)
                                ? "compressed reduce-scatter of gradients"
                                : "reduce-scatter of gradients");
        if (st_k != TACL_OK) {
            st = st != TACL_OK ? st : st_k;
            continue;
        }
        if (st != TACL_OK)
            continue;
        nl = plan_group(e, k, grads, counts, dst);
        gcomp_unpack_add(size, nl, counts,
                         e->shard + e->loff[e->grp_lo[k]] / (size_t)size,
                         dst);
    }
    return st;
}

/*
 * With a plan: once layer l's gradient is in gflat, start the reduction
 * of the group it completes (the group's lowest layer is the last one
 * ready) to the gradient level as one collective, compressed or not as
 * the plan says: over the world for global gradient shards, inside the
 * partition group for group shards (MiCS's first hop).  Each group's
 * call runs on while the layers below compute (a compressed one encodes
 * in the library's worker), in its own region of pack, shard and the
 * residual, as the planner's timeline has it; plan_finish ends them all
 * after the backward.
 */
static tacl_status_t plan_reduce(engine_t *e, int l)
{
    int k = 0, nl, size, L = e->model.n_layers;
    tacl_comm_t comm = plan_comm(e, &size);
    float *grads[L], *dst[L];
    size_t counts[L], off;
    tacl_status_t st;
    int compress;

    while (k < e->ngroups && e->grp_lo[k] != l)
        k++;
    if (k == e->ngroups)
        return TACL_OK;
    nl = plan_group(e, k, grads, counts, dst);
    if (size == 1) {
        for (int i = 0; i < nl; i++)
            cblas_saxpy((int)counts[i], 1.0f, grads[i], 1, dst[i], 1);
        return TACL_OK;
    }
    off = e->loff[l];
    compress = plan_compressed(e, k);
    st = gcomp_reduce_scatter(&e->codec, compress, e->route_rs, comm, size,
                              nl, grads, counts, dst, e->err_rs + off,
                              e->pack + off, e->shard + off / (size_t)size,
                              &e->grp_req[k]);
    if (st != TACL_OK)
        return comm_fail(e, comm, st, compress
                                          ? "compressed reduce-scatter of "
                                            "gradients"
                                          : "reduce-scatter of gradients");
    return TACL_OK;
}

static tacl_status_t micro_step(engine_t *e, int micro, double *loss_p)
{
    const model_t *md = &e->model;
    int L = md->n_layers;
    model_acts_t acts;
    gather_t g[2];
    greduce_t red[2] = {{NULL, -1, 0}, {NULL, -1, 0}};
    const float *w;
    tacl_status_t st;
    float scale = 1.0f / (float)e->o.batch;
    double fwd = 0.0, t0, start = engine_clock_s();

    e->gather_wait_s = 0.0;
    st = load_batch(e, micro);
    if (st != TACL_OK)
        return st;
    /* randk draws its indices from the seed: the same on every rank, a
     * new one every micro-step. */
    e->codec.params.seed = e->step * (uint64_t)e->o.micro_steps +
                           (uint64_t)micro + 1;
    model_acts_bind(md, &acts, e->acts_mem, e->b, e->tok,
                    e->words != NULL ? words_tokens(e->words) : NULL);
    if (e->words != NULL)
        words_forward(e->words, &acts);
    st = gather_start(e, 0, 0, e->wfull[0], &g[0]);
    for (int l = 0; l < L && st == TACL_OK; l++) {
        if (l + 1 < L)
            st = gather_start(e, l + 1, 0, e->wfull[(l + 1) % 2],
                              &g[(l + 1) % 2]);
        if (st == TACL_OK)
            st = gather_wait(e, &g[l % 2], &w);
        if (st == TACL_OK) {
            t0 = engine_clock_s();
            model_forward(md, l, w, &acts);
            fwd += engine_clock_s() - t0;
        }
    }
    if (st != TACL_OK)
        return st;
    t0 = engine_clock_s();
    *loss_p += model_loss_sum(md, &acts);
    fwd += engine_clock_s() - t0;
    if (e->prof_fwd == 0.0 || fwd < e->prof_fwd)
        e->prof_fwd = fwd;
    /* The output layer's parameters are gathered again like any other:
     * Table 3 counts a backward all-gather of every layer. */
    st = gather_start(e, L - 1, 1, e->wfull[(L - 1) % 2], &g[(L - 1) % 2]);
    for (int l = L - 1; l >= 0 && st == TACL_OK; l--) {
        if (l > 0)
            st = gather_start(e, l - 1, 1, e->wfull[(l - 1) % 2],
                              &g[(l - 1) % 2]);
        if (st == TACL_OK)
            st = gather_wait(e, &g[l % 2], &w);
        if (st == TACL_OK && e->ngroups > 0) {
            backward_timed(e, l, w, e->gflat + e->loff[l], &acts, scale);
            st = plan_reduce(e, l);
            continue;
        }
        /* The buffer's previous layer (l + 2) must be reduced first. */
        if (st == TACL_OK)
            st = reduce_finish(e, &red[l % 2]);
        if (st == TACL_OK) {
            backward_timed(e, l, w, e->gfull[l % 2], &acts, scale);
            st = reduce_start(e, l, l % 2, &red[l % 2]);
        }
    }
    /* After layer 0's backward acts->dx is the gradient of x0. */
    if (st == TACL_OK && e->words != NULL)
        words_backward(e->words, &acts);
    for (int i = 0; i < 2 && st == TACL_OK; i++)
        st = reduce_finish(e, &red[(L + i) % 2]);
    if (st == TACL_OK)
        st = plan_finish(e);
    e->span_s = engine_clock_s() - start - e->gather_wait_s;
    return st;
}

/* ---- The optimizer step ---- */

static void adam(engine_t *e, float *p, const float *grad, float *m,
                 float *v, size_t len)
{
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    float t = (float)(e->step + 1);
    float c1 = 1.0f - powf(b1, t), c2 = 1.0f - powf(b2, t);

    for (size_t i = 0; i < len; i++) {
        m[i] = b1 * m[i] + (1.0f - b1) * grad[i];
        v[i] = b2 * v[i] + (1.0f - b2) * grad[i] * grad[i];
        p[i] -= e->o.lr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
    }
}

/*
 * With a plan, the once-a-step all-reduce of group gradient shards
 * across groups (MiCS's second hop): one collective a plan group,
 * compressed as the plan says, with its own residual.
 */
static tacl_status_t plan_allreduce_inter(engine_t *e, float **bufs)
{
    tacl_status_t st = TACL_OK;

    if (e->ng == 1)
        return TACL_OK;
    for (int k = 0; k < e->ngroups && st == TACL_OK; k++) {
        int lo = e->grp_lo[k], nl = e->grp_hi[k] - lo + 1;
        size_t counts[nl];

        for (int i = 0; i < nl; i++)
            counts[i] = shard_len(e, lo + i, LVL_I);
        st = gcomp_allreduce(&e->codec, e->grp_comp[k], e->route_ar,
                             e->inter, nl,
                             bufs + lo, counts, e->err_ar + e->ioff[lo],
                             e->pack);
    }
    if (st != TACL_OK)
        return comm_fail(e, e->inter, st,
                         "all-reduce of gradients across groups");
    return TACL_OK;
}

static tacl_status_t update(engine_t *e)
{
    int L = e->model.n_layers;
    float *bufs[L];
    engine_level_t lp = e->o.p, lg = e->o.g, lo = e->o.os;
    tacl_status_t st;

    /* Gradients to the state level: the once-per-step hop. */
    for (int l = 0; l < L; l++)
        bufs[l] = e->g_hold[l];
    if (lo == LVL_N) {
        st = allreduce_layers(e, HOP_WORLD, bufs, LVL_N);
    } else if (lo == LVL_I) {
        st = reduce_levels(e, lg, LVL_I, bufs, 0, L - 1);
        for (int l = 0; l < L && st == TACL_OK; l++)
            bufs[l] = e->g_hold[l] + shard_off(e, l, LVL_I) -
                      shard_off(e, l, lg);
        if (st == TACL_OK && e->ngroups > 0) {
            double t0 = engine_clock_s();

            st = plan_allreduce_inter(e, bufs);
            e->span_s += engine_clock_s() - t0;
        }
        else if (st == TACL_OK)
            st = allreduce_layers(e, HOP_INTER, bufs, LVL_I);
    } else {
        st = reduce_levels(e, lg, LVL_G, bufs, 0, L - 1);
    }
    if (st != TACL_OK)
        return st;
    for (int l = 0; l < L; l++) {
        size_t off = shard_off(e, l, lo);

        adam(e, e->p_hold[l] + off - shard_off(e, l, lp),
             e->g_hold[l] + off - shard_off(e, l, lg), e->m_hold[l],
             e->v_hold[l], shard_len(e, l, lo));
        memset(e->g_hold[l], 0, shard_len(e, l, lg) * sizeof(float));
        bufs[l] = e->p_hold[l];
    }
    /* Updated parameters back to the parameter level. */
    return expand_levels(e, lo, lp, bufs, 0, L - 1);
}

static void link_bytes(engine_t *e, uint64_t *intra, uint64_t *inter)
{
    tacl_comm_t comms[3] = {e->world, e->grp, e->inter};
    tacl_counters_t c;

    *intra = *inter = 0;
    for (int i = 0; i < 3; i++) {
        if (tacl_comm_get_counters(comms[i], &c) != TACL_OK)
            continue;
        *intra += c.links[TACL_LINK_HOST].bytes +
                  c.links[TACL_LINK_GPU].bytes;
        *inter += c.links[TACL_LINK_NET].bytes;
    }
}

/* The word embedding's sync and Adam step, timed for the summary. */
static tacl_status_t words_update(engine_t *e, engine_step_t *out,
                                  uint64_t *bytes_p)
{
    double t0 = engine_clock_s();
    float *arr[4];
    size_t len;
    tacl_status_t st;

    st = words_sync(e->words, bytes_p, &out->embed_scheme, e->err,
                    sizeof(e->err));
    out->embed_s = engine_clock_s() - t0;
    if (st != TACL_OK)
        return st;
    for (int k = 0; k < 4; k++)
        arr[k] = words_array(e->words, k, &len);
    adam(e, arr[0], arr[1], arr[2], arr[3], len);
    memset(arr[1], 0, len * sizeof(float));
    return TACL_OK;
}

tacl_status_t engine_step(engine_t *e, engine_step_t *out)
{
    double loss = 0.0, sums[4];
    uint64_t wbytes = 0;
    tacl_status_t st;

    out->embed_s = out->embed_bytes = 0.0;
    out->embed_scheme = TACL_SPARSE_AUTO;
    tacl_comm_reset_counters(e->world);
    tacl_comm_reset_counters(e->grp);
    tacl_comm_reset_counters(e->inter);
    for (int micro = 0; micro < e->o.micro_steps; micro++) {
        st = micro_step(e, micro, &loss);
        if (st != TACL_OK)
            return st;
    }
    st = update(e);
    if (st == TACL_OK && e->words != NULL)
        st = words_update(e, out, &wbytes);
    if (st != TACL_OK)
        return st;
    e->step++;
    e->data_pos++;
    link_bytes(e, &out->my_intra, &out->my_inter);
    sums[0] = loss;
    sums[1] = (double)out->my_intra;
    sums[2] = (double)out->my_inter;
    sums[3] = (double)wbytes;
    /* Without words the statistics stay three, as before them. */
    CHECK_COMM(e, e->world,
               tacl_allreduce(sums, sums, e->words != NULL ? 4 : 3,
                              TACL_FLOAT64, TACL_SUM, e->world, NULL),
               "all-reduce of the step's statistics");
    out->loss = sums[0] / e->o.batch;
    out->intra_bytes = sums[1];
    out->inter_bytes = sums[2];
    out->embed_bytes = e->words != NULL ? sums[3] : 0.0;
    return TACL_OK;
}

/* ---- Compression plans ---- */

const char *engine_compress_unsupported(const engine_opts_t *o)
{
    int nested = o->p == LVL_I || o->g == LVL_I || o->os == LVL_I;

    if (o->qgz)
        return "--compress and --qgz both compress the gradients: give one";
    if (o->g == LVL_G && !nested)
        return NULL;
    if (o->g == LVL_I && o->os == LVL_I)
        return NULL;
    return "--compress needs a strategy that reduce-scatters gradients in "
           "one hop (gradients G and no I level: ZeRO-2 (NGG), ZeRO-3 "
           "(GGG)) or inside the group and then all-reduces them across "
           "groups (gradients and states I: MiCS (III), NII)";
}

/* The plan's buffers, once: full gradients, residuals, scratch. */
static int alloc_plan_buffers(engine_t *e)
{
    int L = e->model.n_layers;
    size_t psi = model_total_padded(&e->model);

    if (e->gflat != NULL)
        return 0;
    e->loff = calloc((size_t)L + 1, sizeof(size_t));
    e->ioff = calloc((size_t)L + 1, sizeof(size_t));
    if (e->loff == NULL || e->ioff == NULL) {
        set_err(e, "out of memory");
        return -1;
    }
    for (int l = 0; l < L; l++) {
        e->loff[l + 1] = e->loff[l] + e->model.padded[l];
        e->ioff[l + 1] = e->ioff[l] + shard_len(e, l, LVL_I);
    }
    if (!(e->gflat = ealloc(e, psi * 4, NULL)) ||
        !(e->err_rs = ealloc(e, psi * 4, &e->bytes_g)) ||
        !(e->err_ar = ealloc(e, e->ioff[L] * 4, &e->bytes_g)) ||
        !(e->pack = ealloc(e, psi * 4, NULL)) ||
        !(e->shard = ealloc(e, psi * 4, NULL)))
        return -1;
    return 0;
}

/*
 * The routes of codec's calls on the plan's communicator (*rs) and
 * across groups (*ar; FLAT on one group), collectively.  Both are agreed
 * on before either may fail, so that no rank waits in the second
 * agreement for one that gave up.
 */
static tacl_status_t plan_routes(engine_t *e, const gcomp_codec_t *codec,
                                 gcomp_route_t *rs, gcomp_route_t *ar)
{
    char why_hops[256], why_ar[256];
    int size, bad;

    *ar = GCOMP_ROUTE_FLAT;
    bad = gcomp_route(codec->hops, plan_comm(e, &size), e->world, rs,
                      why_hops, sizeof(why_hops)) != 0;
    if (e->ng > 1 && gcomp_route(codec->hops, e->inter, e->world, ar,
                                 why_ar, sizeof(why_ar)) != 0 && !bad) {
        bad = 1;
        memcpy(why_hops, why_ar, sizeof(why_hops));
    }
    if (bad) {
        set_err(e, "%s", why_hops);
        return TACL_ERR_INVALID_USAGE;
    }
    return TACL_OK;
}

/* engine_set_plan; keep: the residuals as they are (a restored plan's). */
static tacl_status_t set_plan(engine_t *e, const gcomp_codec_t *codec,
                              int ngroups, const int *first,
                              const int *compress, int keep)
{
    int L = e->model.n_layers;
    const char *why = engine_compress_unsupported(&e->o);
    gcomp_route_t rs, ar;

    if (why != NULL) {
        set_err(e, "%s", why);
        return TACL_ERR_INVALID_USAGE;
    }
    if (codec == NULL || codec->codec == NULL || ngroups < 1 ||
        ngroups > L || first == NULL || compress == NULL || first[0] != 0) {
        set_err(e, "engine_set_plan: a NULL codec or plan, or %d groups "
                "for %d layers", ngroups, L);
        return TACL_ERR_INVALID_ARG;
    }
    for (int k = 1; k < ngroups; k++)
        if (first[k] <= first[k - 1] || first[k] >= L) {
            set_err(e, "engine_set_plan: group %d starts at tensor %d, "
                    "not after %d and below %d", k, first[k], first[k - 1],
                    L);
            return TACL_ERR_INVALID_ARG;
        }
    if (alloc_plan_buffers(e) != 0)
        return TACL_ERR_NO_MEMORY;
    if (plan_routes(e, codec, &rs, &ar) != TACL_OK)
        return TACL_ERR_INVALID_USAGE;
    e->route_rs = rs;
    e->route_ar = ar;
    free(e->grp_lo);
    free(e->grp_hi);
    free(e->grp_comp);
    free(e->grp_req);
    e->grp_lo = calloc((size_t)ngroups, sizeof(int));
    e->grp_hi = calloc((size_t)ngroups, sizeof(int));
    e->grp_comp = calloc((size_t)ngroups, sizeof(int));
    e->grp_req = calloc((size_t)ngroups, sizeof(tacl_request_t));
    if (!e->grp_lo || !e->grp_hi || !e->grp_comp || !e->grp_req) {
        e->ngroups = 0;
        set_err(e, "out of memory");
        return TACL_ERR_NO_MEMORY;
    }
    /* Tensor i is layer L - 1 - i: gradients are ready from the top. */
    for (int k = 0; k < ngroups; k++) {
        int end = k + 1 < ngroups ? first[k + 1] : L;

        e->grp_hi[k] = L - 1 - first[k];
        e->grp_lo[k] = L - end;
        e->grp_comp[k] = compress[k] != 0;
    }
    e->codec = *codec;
    e->ngroups = ngroups;
    /* A new layout of the residuals: they start again from zero. */
    if (!keep) {
        memset(e->err_rs, 0, e->loff[L] * sizeof(float));
        memset(e->err_ar, 0, e->ioff[L] * sizeof(float));
    }
    return TACL_OK;
}

tacl_status_t engine_set_plan(engine_t *e, const gcomp_codec_t *codec,
                              int ngroups, const int *first,
                              const int *compress)
{
    return set_plan(e, codec, ngroups, first, compress, 0);
}

tacl_status_t engine_plan_comms(engine_t *e, const gcomp_codec_t *codec,
                                engine_plan_comms_t *pc)
{
    const char *why = engine_compress_unsupported(&e->o);

    if (why != NULL) {
        set_err(e, "%s", why);
        return TACL_ERR_INVALID_USAGE;
    }
    memset(pc, 0, sizeof(*pc));
    pc->rs_comm = plan_comm(e, &pc->rs_size);
    if (plan_routes(e, codec, &pc->rs_route, &pc->ar_route) != TACL_OK)
        return TACL_ERR_INVALID_USAGE;
    /* The groups' all-reduce across groups: state sharded in the group
     * (MiCS) over several groups (plan_allreduce_inter). */
    if (e->o.os == LVL_I && e->ng > 1) {
        pc->ar_comm = e->inter;
        pc->ar_div = e->m;
    }
    return TACL_OK;
}

size_t engine_plan_words(const engine_t *e)
{
    return 2 * (size_t)e->model.n_layers + 1;
}

void engine_plan_export(const engine_t *e, int32_t *words)
{
    int L = e->model.n_layers;

    memset(words, 0, engine_plan_words(e) * sizeof(*words));
    words[0] = e->ngroups;
    for (int k = 0; k < e->ngroups; k++) {
        words[1 + k] = L - 1 - e->grp_hi[k];
        words[1 + L + k] = e->grp_comp[k];
    }
}

tacl_status_t engine_plan_import(engine_t *e, const gcomp_codec_t *codec,
                                 const int32_t *words)
{
    int L = e->model.n_layers, first[L], compress[L];

    for (int k = 0; k < L; k++) {
        first[k] = words[1 + k];
        compress[k] = words[1 + L + k];
    }
    return set_plan(e, codec, words[0], first, compress, 1);
}

tacl_status_t engine_residuals(engine_t *e, float **rs_p, size_t *rs_len_p,
                               float **ar_p, size_t *ar_len_p)
{
    int L = e->model.n_layers;
    const char *why = engine_compress_unsupported(&e->o);

    if (why != NULL) {
        set_err(e, "%s", why);
        return TACL_ERR_INVALID_USAGE;
    }
    if (alloc_plan_buffers(e) != 0)
        return TACL_ERR_NO_MEMORY;
    *rs_p = e->err_rs;
    *rs_len_p = e->loff[L];
    *ar_p = e->err_ar;
    *ar_len_p = e->ioff[L];
    return TACL_OK;
}

void engine_profile(const engine_t *e, double *forward_p, double *backward)
{
    *forward_p = e->prof_fwd;
    for (int l = 0; l < e->model.n_layers; l++)
        backward[l] = e->prof_bwd[l];
}

double engine_plan_span(const engine_t *e)
{
    return e->span_s;
}

void engine_profile_reset(engine_t *e)
{
    e->prof_fwd = 0.0;
    memset(e->prof_bwd, 0, (size_t)e->model.n_layers * sizeof(double));
}

void engine_state_bytes(const engine_t *e, uint64_t *p, uint64_t *g,
                        uint64_t *os)
{
    *p = e->bytes_p;
    *g = e->bytes_g;
    *os = e->bytes_os;
}

void engine_shape(const engine_t *e, size_t *psi, int *n, int *m)
{
    *psi = model_total_padded(&e->model);
    *n = e->n;
    *m = e->m;
}

void engine_shard(engine_t *e, engine_shard_t kind, int l, float **ptr_p,
                  size_t *len_p)
{
    static const int level_of_kind[] = {0, 1, 2, 2};
    float **held[] = {e->p_hold, e->g_hold, e->m_hold, e->v_hold};
    engine_level_t lvl[] = {e->o.p, e->o.g, e->o.os};

    if (l == e->model.n_layers) {
        *ptr_p = words_array(e->words, (int)kind, len_p);
        return;
    }
    *ptr_p = held[kind][l];
    *len_p = shard_len(e, l, lvl[level_of_kind[kind]]);
}

int engine_shard_layers(const engine_t *e)
{
    return e->model.n_layers + (e->words != NULL);
}

int engine_replica_group(const engine_t *e)
{
    switch (e->o.os) {
    case LVL_N:
        return e->n > 1 ? 0 : -1;
    case LVL_I:
        return e->ng > 1 ? e->li : -1;
    default:
        return -1;
    }
}

uint64_t engine_words_checksum(const engine_t *e)
{
    return e->words != NULL ? words_checksum(e->words) : 0;
}

void engine_position(const engine_t *e, uint64_t *step_p,
                     uint64_t *data_pos_p)
{
    *step_p = e->step;
    *data_pos_p = e->data_pos;
}

void engine_set_position(engine_t *e, uint64_t step, uint64_t data_pos)
{
    e->step = step;
    e->data_pos = data_pos;
}

uint64_t engine_step_index(const engine_t *e)
{
    return e->step;
}

const model_t *engine_model(const engine_t *e)
{
    return &e->model;
}

/* ---- Checkpoints ----
 * One file: a header, then per layer its real parameters, Adam m and v
 * (count floats each), in the model's own layout, whatever the strategy.
 * The ranks that own an optimizer-state shard write their part of all
 * three (one copy: group 0 when states are per group, rank 0 when not);
 * on load every rank reads what its strategy holds. */

typedef struct {
    char magic[8];
    int32_t ctx, emb, hidden, blocks;
    uint64_t step, seed;
} ckpt_header_t;

static off_t layer_base(const engine_t *e, int l)
{
    off_t off = (off_t)sizeof(ckpt_header_t);

    for (int j = 0; j < l; j++)
        off += (off_t)(3 * e->model.count[j] * sizeof(float));
    return off;
}

/* Move [off, off + len) of one array of layer l, clipped to its count. */
static int ckpt_io(engine_t *e, int fd, int write, int l, int which,
                   float *buf, size_t off, size_t len)
{
    size_t count = e->model.count[l];
    off_t pos;
    ssize_t done;

    if (!write)
        memset(buf, 0, len * sizeof(float));
    if (off >= count)
        return 0;
    if (off + len > count)
        len = count - off;
    pos = layer_base(e, l) + (off_t)((which * count + off) * sizeof(float));
    done = write ? pwrite(fd, buf, len * sizeof(float), pos)
                 : pread(fd, buf, len * sizeof(float), pos);
    if (done != (ssize_t)(len * sizeof(float))) {
        set_err(e, "checkpoint %s failed: %s", write ? "write" : "read",
                done < 0 ? strerror(errno) : "short file");
        return -1;
    }
    return 0;
}

static tacl_status_t ckpt_agree(engine_t *e, int ok)
{
    int all = ok ? 0 : 1;
    tacl_status_t st = tacl_allreduce(&all, &all, 1, TACL_INT32, TACL_MAX,
                                      e->world, NULL);

    if (st != TACL_OK)
        return comm_fail(e, e->world, st, "all-reduce");
    if (all != 0) {
        if (ok)
            set_err(e, "checkpoint failed on another rank");
        return TACL_ERR_SYSTEM;
    }
    return TACL_OK;
}

tacl_status_t engine_save(engine_t *e, const char *path)
{
    ckpt_header_t h;
    engine_level_t lo = e->o.os, lp = e->o.p;
    int writer, fd = -1, ok = 1;
    tacl_status_t st;

    memset(&h, 0, sizeof(h));
    memcpy(h.magic, ENGINE_MAGIC, 8);
    h.ctx = e->model.ctx;
    h.emb = e->model.emb;
    h.hidden = e->model.hidden;
    h.blocks = e->model.blocks;
    h.step = e->step;
    h.seed = e->o.seed;
    if (e->rank == 0) {
        fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
            ftruncate(fd, layer_base(e, e->model.n_layers)) != 0) {
            set_err(e, "cannot write checkpoint %s: %s", path,
                    strerror(errno));
            ok = 0;
        }
    }
    st = ckpt_agree(e, ok);
    if (st != TACL_OK)
        goto out;
    writer = lo == LVL_G || (lo == LVL_I && e->gi == 0) || e->rank == 0;
    if (writer && fd < 0 && (fd = open(path, O_RDWR)) < 0) {
        set_err(e, "cannot open checkpoint %s: %s", path, strerror(errno));
        ok = 0;
    }
    for (int l = 0; writer && ok && l < e->model.n_layers; l++) {
        size_t off = shard_off(e, l, lo), len = shard_len(e, l, lo);

        if (ckpt_io(e, fd, 1, l, 0, e->p_hold[l] + off - shard_off(e, l, lp),
                    off, len) != 0 ||
            ckpt_io(e, fd, 1, l, 1, e->m_hold[l], off, len) != 0 ||
            ckpt_io(e, fd, 1, l, 2, e->v_hold[l], off, len) != 0)
            ok = 0;
    }
    if (fd >= 0 && fsync(fd) != 0 && ok) {
        set_err(e, "cannot sync checkpoint %s: %s", path, strerror(errno));
        ok = 0;
    }
    st = ckpt_agree(e, ok);
out:
    if (fd >= 0)
        close(fd);
    return st;
}

tacl_status_t engine_load(engine_t *e, const char *path)
{
    ckpt_header_t h;
    int ok = 1, fd = open(path, O_RDONLY);

    if (fd < 0) {
        set_err(e, "cannot open checkpoint %s: %s", path, strerror(errno));
        ok = 0;
    } else if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
               memcmp(h.magic, ENGINE_MAGIC, 8) != 0) {
        set_err(e, "%s is not an engine checkpoint", path);
        ok = 0;
    } else if (h.ctx != e->model.ctx || h.emb != e->model.emb ||
               h.hidden != e->model.hidden || h.blocks != e->model.blocks) {
        set_err(e, "checkpoint %s is of another model (ctx %d, emb %d, "
                "hidden %d, blocks %d)", path, h.ctx, h.emb, h.hidden,
                h.blocks);
        ok = 0;
    }
    for (int l = 0; ok && l < e->model.n_layers; l++) {
        engine_level_t lo = e->o.os;

        if (ckpt_io(e, fd, 0, l, 0, e->p_hold[l], shard_off(e, l, e->o.p),
                    shard_len(e, l, e->o.p)) != 0 ||
            ckpt_io(e, fd, 0, l, 1, e->m_hold[l], shard_off(e, l, lo),
                    shard_len(e, l, lo)) != 0 ||
            ckpt_io(e, fd, 0, l, 2, e->v_hold[l], shard_off(e, l, lo),
                    shard_len(e, l, lo)) != 0)
            ok = 0;
    }
    if (ok)
        e->step = e->data_pos = h.step;
    if (fd >= 0)
        close(fd);
    return ckpt_agree(e, ok);
}
