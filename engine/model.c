/*
 * The character-level language model: forward and hand-written backward,
 * matrix products through BLAS (OpenBLAS).  See model.h.
 */
#include "model.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Offsets inside a block's buffer: W1 (H x D), b1, W2 (D x H), b2. */
#define BLK_W1(m) ((size_t)0)
#define BLK_B1(m) ((size_t)(m)->hidden * (m)->width)
#define BLK_W2(m) (BLK_B1(m) + (size_t)(m)->hidden)
#define BLK_B2(m) (BLK_W2(m) + (size_t)(m)->width * (m)->hidden)

static size_t round_up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

int model_init(model_t *m, int ctx, int emb, int hidden, int blocks,
               int vocab, int wdim, size_t align)
{
    memset(m, 0, sizeof(*m));
    if (ctx < 1 || emb < 1 || hidden < 1 || blocks < 1 || align < 1 ||
        ctx > 1024 || emb > 4096 || hidden > 65536 || blocks > 1024 ||
        vocab < 0 || wdim < 0 || wdim > 4096 || (vocab > 0) != (wdim > 0))
        return -1;
    m->ctx = ctx;
    m->emb = emb;
    m->hidden = hidden;
    m->blocks = blocks;
    m->vocab = vocab;
    m->wdim = wdim;
    m->cwidth = ctx * emb;
    m->width = m->cwidth + wdim;
    m->n_layers = blocks + 2;
    m->align = align;
    m->count = calloc((size_t)m->n_layers, sizeof(size_t));
    m->padded = calloc((size_t)m->n_layers, sizeof(size_t));
    if (m->count == NULL || m->padded == NULL) {
        model_fini(m);
        return -1;
    }
    m->count[0] = (size_t)MODEL_VOCAB * emb;
    for (int l = 1; l <= blocks; l++)
        m->count[l] = 2 * (size_t)hidden * m->width + hidden + m->width;
    m->count[blocks + 1] = (size_t)MODEL_VOCAB * m->width + MODEL_VOCAB;
    for (int l = 0; l < m->n_layers; l++)
        m->padded[l] = round_up(m->count[l], align);
    return 0;
}

void model_fini(model_t *m)
{
    free(m->count);
    free(m->padded);
    m->count = m->padded = NULL;
}

size_t model_total_padded(const model_t *m)
{
    size_t total = 0;

    for (int l = 0; l < m->n_layers; l++)
        total += m->padded[l];
    return total;
}

uint64_t model_hash64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Uniform in [-1, 1), from the seed, a table's tag and an index. */
static double uniform(uint64_t seed, uint64_t tag, size_t idx)
{
    return (double)(model_hash64(seed ^ (tag << 48) ^ idx) >> 11) /
           9007199254740992.0 * 2.0 - 1.0;
}

/* The word table's tag: above every layer's (at most 1026 layers). */
#define WORDS_TAG 0xfffful

float model_words_init_value(const model_t *m, size_t idx, uint64_t seed)
{
    if (idx >= (size_t)m->vocab * m->wdim)
        return 0.0f;
    /* As the byte embedding's: each word row is a vector of its own. */
    return (float)(uniform(seed, WORDS_TAG, idx) * 0.5);
}

float model_init_value(const model_t *m, int l, size_t idx, uint64_t seed)
{
    double u, scale;

    if (idx >= m->count[l])
        return 0.0f;
    u = uniform(seed, (uint64_t)l, idx);
    if (l == 0) {
        scale = 0.5;
    } else if (l <= m->blocks) {
        if (idx < BLK_B1(m))
            scale = 1.0 / sqrt((double)m->width);
        else if (idx < BLK_W2(m))
            return 0.0f;
        else if (idx < BLK_B2(m))
            scale = 0.5 / sqrt((double)m->hidden);
        else
            return 0.0f;
    } else {
        if (idx >= (size_t)MODEL_VOCAB * m->width)
            return 0.0f;
        scale = 1.0 / sqrt((double)m->width);
    }
    return (float)(u * scale);
}

size_t model_acts_floats(const model_t *m, int b)
{
    size_t bw = (size_t)b * m->width, bh = (size_t)b * m->hidden;

    return (m->blocks + 1) * bw + 2 * m->blocks * bh +
           (size_t)b * MODEL_VOCAB + bw + bh;
}

void model_acts_bind(const model_t *m, model_acts_t *acts, float *mem,
                     int b, const uint8_t *tok, const int64_t *words)
{
    size_t bw = (size_t)b * m->width, bh = (size_t)b * m->hidden;

    acts->b = b;
    acts->tok = tok;
    acts->words = words;
    acts->x = mem;
    mem += (m->blocks + 1) * bw;
    acts->a = mem;
    mem += m->blocks * bh;
    acts->r = mem;
    mem += m->blocks * bh;
    acts->logits = mem;
    mem += (size_t)b * MODEL_VOCAB;
    acts->dx = mem;
    mem += bw;
    acts->dh = mem;
}

/* out[i, :] += bias for every row i. */
static void add_bias(float *out, const float *bias, int rows, int cols)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            out[(size_t)i * cols + j] += bias[j];
}

/* bias_grad[j] = sum over rows of g[i, j]. */
static void col_sums(float *bias_grad, const float *g, int rows, int cols)
{
    memset(bias_grad, 0, (size_t)cols * sizeof(float));
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            bias_grad[j] += g[(size_t)i * cols + j];
}

static void forward_embed(const model_t *m, const float *w,
                          model_acts_t *acts)
{
    int e = m->emb;

    for (int i = 0; i < acts->b; i++) {
        const uint8_t *t = acts->tok + (size_t)i * (m->ctx + 1);
        float *x = acts->x + (size_t)i * m->width;

        for (int c = 0; c < m->ctx; c++)
            memcpy(x + (size_t)c * e, w + (size_t)t[c] * e,
                   (size_t)e * sizeof(float));
    }
}

static void forward_block(const model_t *m, int k, const float *w,
                          model_acts_t *acts)
{
    int b = acts->b, d = m->width, h = m->hidden;
    const float *x = acts->x + (size_t)k * b * d;
    float *y = acts->x + (size_t)(k + 1) * b * d;
    float *a = acts->a + (size_t)k * b * h, *r = acts->r + (size_t)k * b * h;

    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, h, d, 1.0f, x,
                d, w + BLK_W1(m), d, 0.0f, a, h);
    add_bias(a, w + BLK_B1(m), b, h);
    for (size_t i = 0; i < (size_t)b * h; i++)
        r[i] = a[i] > 0.0f ? a[i] : 0.0f;
    memcpy(y, x, (size_t)b * d * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, d, h, 1.0f, r,
                h, w + BLK_W2(m), h, 1.0f, y, d);
    add_bias(y, w + BLK_B2(m), b, d);
}

static void forward_output(const model_t *m, const float *w,
                           model_acts_t *acts)
{
    int b = acts->b, d = m->width;
    const float *x = acts->x + (size_t)m->blocks * b * d;
    const float *bias = w + (size_t)MODEL_VOCAB * d;

    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, MODEL_VOCAB, d,
                1.0f, x, d, w, d, 0.0f, acts->logits, MODEL_VOCAB);
    add_bias(acts->logits, bias, b, MODEL_VOCAB);
    /* Softmax in place: the logits become probabilities. */
    for (int i = 0; i < b; i++) {
        float *p = acts->logits + (size_t)i * MODEL_VOCAB, mx = p[0];
        double sum = 0.0;

        for (int j = 1; j < MODEL_VOCAB; j++)
            mx = p[j] > mx ? p[j] : mx;
        for (int j = 0; j < MODEL_VOCAB; j++) {
            p[j] = expf(p[j] - mx);
            sum += p[j];
        }
        for (int j = 0; j < MODEL_VOCAB; j++)
            p[j] = (float)(p[j] / sum);
    }
}

void model_forward(const model_t *m, int l, const float *w,
                   model_acts_t *acts)
{
    if (l == 0)
        forward_embed(m, w, acts);
    else if (l <= m->blocks)
        forward_block(m, l - 1, w, acts);
    else
        forward_output(m, w, acts);
}

double model_loss_sum(const model_t *m, const model_acts_t *acts)
{
    double sum = 0.0;

    for (int i = 0; i < acts->b; i++) {
        int target = acts->tok[(size_t)i * (m->ctx + 1) + m->ctx];
        float p = acts->logits[(size_t)i * MODEL_VOCAB + target];

        sum -= log(p > 1e-30f ? (double)p : 1e-30);
    }
    return sum;
}

static void backward_output(const model_t *m, const float *w, float *grad,
                            model_acts_t *acts, float scale)
{
    int b = acts->b, d = m->width;
    const float *x = acts->x + (size_t)m->blocks * b * d;
    float *g = acts->logits;

    /* d loss / d logits = (p - onehot) * scale, in place. */
    for (int i = 0; i < b; i++) {
        int target = acts->tok[(size_t)i * (m->ctx + 1) + m->ctx];
        float *row = g + (size_t)i * MODEL_VOCAB;

        row[target] -= 1.0f;
        for (int j = 0; j < MODEL_VOCAB; j++)
            row[j] *= scale;
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, MODEL_VOCAB, d, b,
                1.0f, g, MODEL_VOCAB, x, d, 0.0f, grad, d);
    col_sums(grad + (size_t)MODEL_VOCAB * d, g, b, MODEL_VOCAB);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, d, MODEL_VOCAB,
                1.0f, g, MODEL_VOCAB, w, d, 0.0f, acts->dx, d);
}

static void backward_block(const model_t *m, int k, const float *w,
                           float *grad, model_acts_t *acts)
{
    int b = acts->b, d = m->width, h = m->hidden;
    const float *x = acts->x + (size_t)k * b * d;
    const float *a = acts->a + (size_t)k * b * h;
    const float *r = acts->r + (size_t)k * b * h;
    float *dx = acts->dx, *dh = acts->dh;

    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, h, b, 1.0f, dx,
                d, r, h, 0.0f, grad + BLK_W2(m), h);
    col_sums(grad + BLK_B2(m), dx, b, d);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, h, d, 1.0f,
                dx, d, w + BLK_W2(m), h, 0.0f, dh, h);
    for (size_t i = 0; i < (size_t)b * h; i++)
        if (a[i] <= 0.0f)
            dh[i] = 0.0f;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, h, d, b, 1.0f, dh,
                h, x, d, 0.0f, grad + BLK_W1(m), d);
    col_sums(grad + BLK_B1(m), dh, b, h);
    /* The residual path keeps dx; the MLP path adds dh W1. */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, d, h, 1.0f,
                dh, h, w + BLK_W1(m), d, 1.0f, dx, d);
}

static void backward_embed(const model_t *m, float *grad,
                           const model_acts_t *acts)
{
    int e = m->emb;

    memset(grad, 0, m->count[0] * sizeof(float));
    for (int i = 0; i < acts->b; i++) {
        const uint8_t *t = acts->tok + (size_t)i * (m->ctx + 1);
        const float *dx = acts->dx + (size_t)i * m->width;

        for (int c = 0; c < m->ctx; c++) {
            float *g = grad + (size_t)t[c] * e;

            for (int j = 0; j < e; j++)
                g[j] += dx[(size_t)c * e + j];
        }
    }
}

void model_backward(const model_t *m, int l, const float *w, float *grad,
                    model_acts_t *acts, float scale)
{
    if (l == 0)
        backward_embed(m, grad, acts);
    else if (l <= m->blocks)
        backward_block(m, l - 1, w, grad, acts);
    else
        backward_output(m, w, grad, acts, scale);
    memset(grad + m->count[l], 0,
           (m->padded[l] - m->count[l]) * sizeof(float));
}

void model_words_forward(const model_t *m, const float *table,
                         model_acts_t *acts)
{
    int wd = m->wdim;
    float mean = 1.0f / (float)m->ctx;

    for (int i = 0; i < acts->b; i++) {
        const int64_t *w = acts->words + (size_t)i * m->ctx;
        float *x = acts->x + (size_t)i * m->width + m->cwidth;

        memset(x, 0, (size_t)wd * sizeof(float));
        for (int c = 0; c < m->ctx; c++)
            cblas_saxpy(wd, mean, table + (size_t)w[c] * wd, 1, x, 1);
    }
}

void model_words_backward(const model_t *m, float *grad,
                          const model_acts_t *acts)
{
    int wd = m->wdim;
    float mean = 1.0f / (float)m->ctx;

    for (int i = 0; i < acts->b; i++) {
        const int64_t *w = acts->words + (size_t)i * m->ctx;
        const float *dx = acts->dx + (size_t)i * m->width + m->cwidth;

        for (int c = 0; c < m->ctx; c++)
            cblas_saxpy(wd, mean, dx, 1, grad + (size_t)w[c] * wd, 1);
    }
}
