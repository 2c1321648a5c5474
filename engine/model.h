/*
 * The engine's model: a character-level language model in float32 with a
 * hand-written backward pass.
 *
 * A sample is CTX bytes of text and the byte after them.  The embedding
 * layer looks up each context byte (vocabulary 256) and concatenates the
 * vectors into x0 (width D = CTX * EMB, plus WDIM with word embeddings,
 * below); each of the L residual MLP blocks
 * computes x + W2 relu(W1 x + b1) + b2; the output layer gives 256 logits,
 * trained by softmax cross-entropy against the next byte.
 *
 * Every layer's parameters are one flat float buffer (the unit the engine
 * gathers and reduce-scatters), padded with zeros to a multiple of a given
 * alignment so every shard has the same size.  The model code only sees
 * full (gathered) buffers: which rank holds what is the engine's business.
 *
 * Word embeddings (optional, issue 31): a sample also carries CTX word
 * tokens of a frequency-sorted vocabulary of VOCAB words, and a table of
 * VOCAB x WDIM floats; the mean of the sample's word rows fills the last
 * WDIM columns of x0.  The table is not a layer: its gradient touches
 * only the rows of the batch's words, which the engine keeps replicated
 * and synchronises with the sparse all-reduce.
 */
#ifndef ENGINE_MODEL_H
#define ENGINE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define MODEL_VOCAB 256

typedef struct {
    int ctx;        /* context bytes per sample */
    int emb;        /* embedding width per byte */
    int hidden;     /* hidden width of the MLP blocks */
    int blocks;     /* number of residual MLP blocks */
    int vocab;      /* words of the word embedding, 0: none */
    int wdim;       /* word embedding width (0 without one) */
    int cwidth;     /* ctx * emb: the bytes' columns of x0 */
    int width;      /* cwidth + wdim */
    int n_layers;   /* blocks + 2: embedding, blocks, output */
    size_t align;   /* layer buffers are padded to a multiple of this */
    size_t *count;  /* real parameter count of each layer */
    size_t *padded; /* padded length of each layer's buffer */
} model_t;

/* Fills the layer sizes; align is the world size; vocab and wdim 0 for
 * no word embedding.  0 or -1 (bad shape). */
int model_init(model_t *m, int ctx, int emb, int hidden, int blocks,
               int vocab, int wdim, size_t align);
void model_fini(model_t *m);
/* Sum of padded layer lengths: the Psi of PaRO's tables, in elements. */
size_t model_total_padded(const model_t *m);

/* splitmix64: the engine's one hash, for initial values and sampling. */
uint64_t model_hash64(uint64_t x);
/* The initial value of element idx of layer l, the same on every rank. */
float model_init_value(const model_t *m, int l, size_t idx, uint64_t seed);
/* The initial value of element idx of the word table. */
float model_words_init_value(const model_t *m, size_t idx, uint64_t seed);

/* Activations of one micro-batch of b samples, allocated by the engine. */
typedef struct {
    int b;
    const uint8_t *tok;  /* b * (ctx + 1) bytes: context then target */
    const int64_t *words; /* b * ctx word tokens, or NULL */
    float *x;            /* (blocks + 1) * b * width: block inputs, x_L */
    float *a;            /* blocks * b * hidden: pre-activations */
    float *r;            /* blocks * b * hidden: relu outputs */
    float *logits;       /* b * VOCAB, probabilities after the forward */
    float *dx;           /* b * width: gradient flowing backwards */
    float *dh;           /* b * hidden: scratch */
} model_acts_t;

/* Float counts the activations of b samples need, for one allocation. */
size_t model_acts_floats(const model_t *m, int b);
void model_acts_bind(const model_t *m, model_acts_t *acts, float *mem,
                     int b, const uint8_t *tok, const int64_t *words);

/* Forward of layer l with its full parameters w. */
void model_forward(const model_t *m, int l, const float *w,
                   model_acts_t *acts);
/* Sum of the cross-entropy over the micro-batch (after the last layer). */
double model_loss_sum(const model_t *m, const model_acts_t *acts);
/*
 * Backward of layer l: writes the layer's gradient into grad (padded
 * length, overwritten) and passes the input gradient on.  scale is the
 * factor of the loss gradient (1 / global batch), applied at the output.
 */
void model_backward(const model_t *m, int l, const float *w, float *grad,
                    model_acts_t *acts, float scale);

/* The word embedding's forward: x0's last wdim columns from table. */
void model_words_forward(const model_t *m, const float *table,
                         model_acts_t *acts);
/*
 * Its backward, after layer 0's (acts->dx is the gradient of x0): adds
 * each word's share into its row of grad (vocab x wdim), so micro-steps
 * accumulate; rows of words not in the batch are left alone.
 */
void model_words_backward(const model_t *m, float *grad,
                          const model_acts_t *acts);

#endif /* ENGINE_MODEL_H */
