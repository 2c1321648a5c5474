/*
 * The engine's word embedding (see words.h).
 *
 * The table is replicated, so its gradient needs one all-reduce a step,
 * and only the rows of the step's words are non-zero: the case of the
 * thesis' chapter 3 (Zen), whose sparse all-reduce tacl implements.
 * The backward adds each micro-step's rows into a dense gradient table
 * and notes which rows it touched; the sync packs those rows and hands
 * them to tacl_sparse_allreduce with the gradient table as dense_out,
 * which writes every row (the untouched ones as zeros, or as other
 * ranks' sums).  The whole table then takes the same Adam step as the
 * dense layers, so a sparse scheme and the dense baseline differ only
 * in how the sum travels: rank-order schemes (ZEN, AGSPARSE, ...) give
 * the rank-order sum bit for bit, the dense all-reduce its own order.
 * (sparse_out with a lazy, row-wise Adam would touch fewer rows, but it
 * would be another optimizer, and the losses of the two could not be
 * compared.)
 */
#include "words.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Zipf's exponent of the words: natural language's, the traces' default. */
#define WORDS_ZIPF 1.0

struct engine_words {
    const model_t *m;
    tacl_comm_t comm;      /* split from the world: its own counters */
    tacl_sparse_scheme_t scheme;
    tacl_zipf_t zipf;
    size_t len;            /* vocab * wdim */
    float *arr[4];         /* table, gradient, Adam's m and v */
    float *vals;           /* the touched rows, packed for the sync */
    int64_t *tok;          /* b * ctx words of the micro-batch */
    int64_t *rows;         /* the rows touched this step, first-seen order */
    uint8_t *mark;         /* vocab marks: row touched this step */
    size_t nnz, max_rows;
    int b;
    void *mem[8];
    int n_mem;
};

static void *walloc(engine_words_t *w, size_t bytes)
{
    void *p = NULL;

    if (tacl_mem_alloc(&p, bytes > 0 ? bytes : 1, TACL_MEM_HOST) !=
        TACL_OK)
        return NULL;
    w->mem[w->n_mem++] = p;
    memset(p, 0, bytes);
    return p;
}

static int alloc_words(engine_words_t *w)
{
    const model_t *m = w->m;

    for (int k = 0; k < 4; k++)
        if (!(w->arr[k] = walloc(w, w->len * sizeof(float))))
            return -1;
    w->vals = walloc(w, w->max_rows * m->wdim * sizeof(float));
    w->tok = walloc(w, (size_t)w->b * m->ctx * sizeof(int64_t));
    w->rows = walloc(w, w->max_rows * sizeof(int64_t));
    w->mark = walloc(w, (size_t)m->vocab);
    return w->vals && w->tok && w->rows && w->mark ? 0 : -1;
}

tacl_status_t words_create(tacl_comm_t world, const model_t *m, int b,
                           int s, uint64_t seed, tacl_sparse_scheme_t scheme,
                           engine_words_t **words_p, uint64_t *p,
                           uint64_t *g, uint64_t *os, char *err,
                           size_t errlen)
{
    engine_words_t *w = calloc(1, sizeof(*w));
    size_t per_step = (size_t)b * m->ctx * (size_t)s;
    int rank;
    tacl_status_t st;

    if (w == NULL) {
        snprintf(err, errlen, "word embedding: out of memory");
        return TACL_ERR_NO_MEMORY;
    }
    w->m = m;
    w->b = b;
    w->scheme = scheme;
    w->len = (size_t)m->vocab * m->wdim;
    w->max_rows = per_step < (size_t)m->vocab ? per_step : (size_t)m->vocab;
    tacl_comm_rank(world, &rank);
    st = tacl_comm_split(world, 0, rank, &w->comm);
    if (st != TACL_OK) {
        snprintf(err, errlen, "word embedding: split failed: %s (%s)",
                 tacl_status_string(st), tacl_comm_last_error(world));
        goto err;
    }
    st = tacl_zipf_create((uint64_t)m->vocab, WORDS_ZIPF, seed, &w->zipf);
    if (st != TACL_OK) {
        snprintf(err, errlen, "word embedding: %s", tacl_last_error());
        goto err;
    }
    st = TACL_ERR_NO_MEMORY;
    if (alloc_words(w) != 0) {
        snprintf(err, errlen, "word embedding: cannot allocate a table of "
                 "%d x %d floats: %s", m->vocab, m->wdim, tacl_last_error());
        goto err;
    }
    for (size_t i = 0; i < w->len; i++)
        w->arr[0][i] = model_words_init_value(m, i, seed);
    *p += w->len * sizeof(float);
    *g += w->len * sizeof(float);
    *os += 2 * w->len * sizeof(float);
    *words_p = w;
    return TACL_OK;

err:
    words_destroy(w);
    return st;
}

void words_destroy(engine_words_t *w)
{
    if (w == NULL)
        return;
    for (int i = 0; i < w->n_mem; i++)
        tacl_mem_free(w->mem[i]);
    tacl_zipf_destroy(w->zipf);
    if (w->comm != NULL)
        tacl_comm_destroy(w->comm);
    free(w);
}

/* Streams of the clue words: one of CLUES per target byte. */
#define CLUES 4
#define CLUE_STREAM 0xc1c1c1c1c1c1c1c1ull

tacl_status_t words_draw(engine_words_t *w, int i, uint64_t key,
                         int target)
{
    int64_t *t = w->tok + (size_t)i * w->m->ctx;
    uint64_t clue = (uint64_t)target * CLUES + key % CLUES;
    tacl_status_t st;

    st = tacl_zipf_draw(w->zipf, key, (size_t)w->m->ctx - 1, t);
    if (st != TACL_OK)
        return st;
    return tacl_zipf_draw(w->zipf, model_hash64(CLUE_STREAM ^ clue), 1,
                          t + w->m->ctx - 1);
}

const int64_t *words_tokens(const engine_words_t *w)
{
    return w->tok;
}

void words_forward(engine_words_t *w, model_acts_t *acts)
{
    model_words_forward(w->m, w->arr[0], acts);
}

void words_backward(engine_words_t *w, const model_acts_t *acts)
{
    size_t n = (size_t)acts->b * w->m->ctx;

    model_words_backward(w->m, w->arr[1], acts);
    for (size_t i = 0; i < n; i++)
        if (!w->mark[w->tok[i]]) {
            w->mark[w->tok[i]] = 1;
            w->rows[w->nnz++] = w->tok[i];
        }
}

/* The touched rows through the sparse all-reduce, summed into arr[1]. */
static tacl_status_t sync_rows(engine_words_t *w)
{
    size_t wd = (size_t)w->m->wdim;
    tacl_sparse_t in = {.nrows = (size_t)w->m->vocab,
                        .row_len = wd,
                        .index_type = TACL_INT64,
                        .nnz = w->nnz,
                        .indices = w->rows,
                        .values = w->vals};

    for (size_t k = 0; k < w->nnz; k++)
        memcpy(w->vals + k * wd, w->arr[1] + (size_t)w->rows[k] * wd,
               wd * sizeof(float));
    /* dense_out is the gradient table: the rows were copied out first. */
    return tacl_sparse_allreduce(&in, TACL_FLOAT32, TACL_SUM, w->arr[1],
                                 NULL, w->scheme, w->comm);
}

/* The bytes comm sent since its counters were last reset; resets them. */
static uint64_t sent_bytes(tacl_comm_t comm)
{
    tacl_counters_t c;
    uint64_t bytes = 0;

    if (tacl_comm_get_counters(comm, &c) == TACL_OK)
        bytes = c.links[TACL_LINK_HOST].bytes + c.links[TACL_LINK_GPU].bytes +
                c.links[TACL_LINK_NET].bytes;
    tacl_comm_reset_counters(comm);
    return bytes;
}

/*
 * The sync's bytes: the hierarchical schemes run on comm's node and rail
 * communicators (made by their first call, cached since), whose
 * counters are their own.
 */
static uint64_t sync_bytes(engine_words_t *w, tacl_sparse_scheme_t ran)
{
    uint64_t bytes = sent_bytes(w->comm);
    tacl_comm_t sub;

    if (ran != TACL_SPARSE_ZEN_HIER && ran != TACL_SPARSE_DENSE_ZEN)
        return bytes;
    if (tacl_comm_get_local(w->comm, &sub) == TACL_OK)
        bytes += sent_bytes(sub);
    if (tacl_comm_get_rail(w->comm, &sub) == TACL_OK)
        bytes += sent_bytes(sub);
    return bytes;
}

tacl_status_t words_sync(engine_words_t *w, uint64_t *bytes_p,
                         tacl_sparse_scheme_t *scheme_p, char *err,
                         size_t errlen)
{
    tacl_status_t st;

    tacl_comm_reset_counters(w->comm);
    if (w->scheme == TACL_SPARSE_DENSE)
        st = tacl_allreduce(w->arr[1], w->arr[1], w->len, TACL_FLOAT32,
                            TACL_SUM, w->comm, NULL);
    else
        st = sync_rows(w);
    for (size_t k = 0; k < w->nnz; k++)
        w->mark[w->rows[k]] = 0;
    w->nnz = 0;
    if (st != TACL_OK) {
        snprintf(err, errlen, "sync of the word embedding's gradient "
                 "(scheme %s) failed: %s (%s)",
                 tacl_sparse_scheme_name(w->scheme), tacl_status_string(st),
                 tacl_comm_last_error(w->comm));
        return st;
    }
    *scheme_p = w->scheme == TACL_SPARSE_DENSE
                    ? TACL_SPARSE_DENSE
                    : tacl_sparse_last_scheme(w->comm);
    *bytes_p = sync_bytes(w, *scheme_p);
    return TACL_OK;
}

float *words_array(engine_words_t *w, int kind, size_t *len_p)
{
    *len_p = w->len;
    return w->arr[kind];
}

uint64_t words_checksum(const engine_words_t *w)
{
    uint64_t h = 0;
    uint32_t bits;

    for (size_t i = 0; i < w->len; i++) {
        memcpy(&bits, &w->arr[0][i], sizeof(bits));
        h = model_hash64(h ^ bits);
    }
    return h;
}
