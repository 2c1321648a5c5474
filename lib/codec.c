/*
 * The codec table and the tacl_codec_* entry points (tacl.h's "gradient
 * codecs").  Built-ins (kernels/cpu/codec_*.c) come first, then the
 * codecs users register.  A registered codec is copied and its missing
 * optional slot (check) pointed to a stub that accepts every parameter,
 * so no caller tests a slot for NULL.
 *
 * Every argument is checked here, once, before a codec's slot runs:
 * pointers, the buffer list, then the parameters through check.  Error
 * feedback is done here too: encode x + e, decode it back, and leave
 * e = x + e - decode.  That costs a decode and a temporary copy of the
 * list; a built-in with a fused kernel (the sparsifiers: the kept values
 * travel exact, so e is x + e with the kept places zeroed) does it in
 * place instead (tacl__codec_fused_feedback).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "codec_list.h"
#include "common.h"
#include "log.h"

#define CODEC_MAX 64
#define CODEC_NAME_MAX 31

static tacl_codec_t codec_table[CODEC_MAX];
static int codec_count;
static pthread_mutex_t codec_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t codec_once = PTHREAD_ONCE_INIT;

static const char *codec_accept_all(const tacl_codec_params_t *params)
{
    return NULL;
}

static void codec_add(const tacl_codec_t *codec)
{
    codec_table[codec_count] = *codec;
    if (codec_table[codec_count].check == NULL)
        codec_table[codec_count].check = codec_accept_all;
    codec_count++;
}

static void codec_builtins(void)
{
    static const tacl_codec_t *const builtin[] = {
        &tacl__codec_fp16,  &tacl__codec_bf16, &tacl__codec_int8,
        &tacl__codec_int4,  &tacl__codec_topk, &tacl__codec_threshold,
        &tacl__codec_randk, &tacl__codec_sign,
    };
    for (size_t i = 0; i < TACL_ARRAY_SIZE(builtin); i++)
        codec_add(builtin[i]);
}

/* The table entry called name, or NULL; the caller holds codec_lock. */
static const tacl_codec_t *codec_lookup(const char *name)
{
    for (int i = 0; i < codec_count; i++)
        if (strcmp(codec_table[i].name, name) == 0)
            return &codec_table[i];
    return NULL;
}

TACL_EXPORT tacl_status_t tacl_codec_register(const tacl_codec_t *codec)
{
    tacl_status_t st = TACL_OK;

    pthread_once(&codec_once, codec_builtins);
    if (codec == NULL || codec->name == NULL || codec->name[0] == '\0' ||
        strlen(codec->name) > CODEC_NAME_MAX)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "codec_register: the codec or its name is NULL, "
                           "empty or longer than %d characters",
                           CODEC_NAME_MAX);
    if (!codec->encode || !codec->decode || !codec->encoded_bound)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "codec_register: codec %s lacks encode, decode "
                           "or encoded_bound",
                           codec->name);
    pthread_mutex_lock(&codec_lock);
    if (codec_lookup(codec->name) != NULL)
        st = tacl__error(TACL_ERR_INVALID_ARG, COLL,
                         "codec_register: a codec called %s exists already",
                         codec->name);
    else if (codec_count == CODEC_MAX)
        st = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                         "codec_register: the table of %d codecs is full",
                         CODEC_MAX);
    else
        codec_add(codec);
    pthread_mutex_unlock(&codec_lock);
    return st;
}

TACL_EXPORT tacl_status_t tacl_codec_find(const char *name,
                                          const tacl_codec_t **codec_p)
{
    const tacl_codec_t *found;

    pthread_once(&codec_once, codec_builtins);
    if (name == NULL || codec_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "codec_find: name or codec_p is NULL");
    pthread_mutex_lock(&codec_lock);
    found = codec_lookup(name);
    pthread_mutex_unlock(&codec_lock);
    if (found == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "codec_find: no codec called '%s' (built-in: "
                           "fp16, bf16, int8, int4, topk, threshold, randk, "
                           "sign; or register it first)",
                           name);
    *codec_p = found;
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_codec_check(const tacl_codec_t *codec,
                                           const tacl_codec_params_t *params)
{
    const char *why;

    if (codec == NULL || params == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "codec: the codec or its params is NULL");
    why = codec->check ? codec->check(params) : NULL;
    if (why != NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL, "codec %s: %s",
                           codec->name, why);
    return TACL_OK;
}

/*
 * The checks every entry point makes: the codec and params, then a list of
 * nbufs buffers (bufs may be NULL where only the counts matter).
 */
static tacl_status_t codec_check_list(const char *call,
                                      const tacl_codec_t *codec,
                                      const tacl_codec_params_t *params,
                                      int nbufs, const void *const *bufs,
                                      const size_t *counts, int need_bufs)
{
    tacl_status_t st = tacl_codec_check(codec, params);

    if (st != TACL_OK)
        return st;
    if (nbufs < 1 || counts == NULL || (need_bufs && bufs == NULL))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: codec %s needs a list of at least one "
                           "buffer and its counts (nbufs %d, counts %s)",
                           call, codec->name, nbufs,
                           counts ? "given" : "NULL");
    for (int b = 0; need_bufs && b < nbufs; b++)
        if (bufs[b] == NULL && counts[b] > 0)
            return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                               "%s: codec %s: buffer %d is NULL with count "
                               "%zu",
                               call, codec->name, b, counts[b]);
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_codec_encoded_bound(
    const tacl_codec_t *codec, const tacl_codec_params_t *params, int nbufs,
    const size_t *counts, size_t *bytes_p)
{
    tacl_status_t st = codec_check_list("codec_encoded_bound", codec, params,
                                        nbufs, NULL, counts, 0);
    if (st != TACL_OK)
        return st;
    if (bytes_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "codec_encoded_bound: bytes_p is NULL");
    *bytes_p = codec->encoded_bound(params, nbufs, counts);
    return TACL_OK;
}

/* Encode x + e for every buffer with a residual, and update e. */
static tacl_status_t codec_encode_feedback(
    const tacl_codec_t *codec, const tacl_codec_params_t *params, int nbufs,
    const float *const *srcs, const size_t *counts, float *const *errs,
    void *dst, size_t *bytes_p)
{
    size_t total = tacl__codec_total(nbufs, counts), off = 0;
    tacl__codec_feedback_t fused = tacl__codec_fused_feedback(codec);
    float *sum, **view;
    tacl_status_t st = TACL_ERR_NO_MEMORY;

    if (fused != NULL)
        return fused(params, nbufs, srcs, counts, errs, dst, bytes_p);
    sum = malloc((total ? total : 1) * sizeof(float));
    view = malloc((size_t)nbufs * sizeof(float *));
    if (sum == NULL || view == NULL) {
        tacl__error(st, ALLOC,
                    "codec %s: no memory for error feedback "
                    "over %zu values",
                    codec->name, total);
        goto out_free;
    }
    for (int b = 0; b < nbufs; b++) {
        view[b] = sum + off;
        for (size_t i = 0; i < counts[b]; i++)
            view[b][i] = srcs[b][i] + (errs[b] ? errs[b][i] : 0.0f);
        off += counts[b];
    }
    st = codec->encode(params, nbufs, (const float *const *)view, counts, dst,
                       bytes_p);
    if (st == TACL_OK)
        st = codec->decode(params, dst, *bytes_p, nbufs, view, counts, 0);
    for (int b = 0; st == TACL_OK && b < nbufs; b++)
        for (size_t i = 0; errs[b] && i < counts[b]; i++)
            errs[b][i] = srcs[b][i] + errs[b][i] - view[b][i];
out_free:
    free(view);
    free(sum);
    return st;
}

TACL_EXPORT tacl_status_t tacl_codec_encode(
    const tacl_codec_t *codec, const tacl_codec_params_t *params, int nbufs,
    const float *const *srcs, const size_t *counts, float *const *errs,
    void *dst, size_t capacity, size_t *bytes_p)
{
    tacl_status_t st = codec_check_list("codec_encode", codec, params, nbufs,
                                        (const void *const *)srcs, counts, 1);
    size_t need;

    if (st != TACL_OK)
        return st;
    need = codec->encoded_bound(params, nbufs, counts);
    if (dst == NULL || bytes_p == NULL || capacity < need)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "codec_encode: codec %s needs dst and bytes_p "
                           "and %zu bytes of room (dst %s, capacity %zu)",
                           codec->name, need, dst ? "given" : "NULL",
                           capacity);
    if (errs != NULL)
        return codec_encode_feedback(codec, params, nbufs, srcs, counts, errs,
                                     dst, bytes_p);
    return codec->encode(params, nbufs, srcs, counts, dst, bytes_p);
}

static tacl_status_t codec_decode_any(const char *call,
                                      const tacl_codec_t *codec,
                                      const tacl_codec_params_t *params,
                                      const void *src, size_t bytes,
                                      int nbufs, float *const *dsts,
                                      const size_t *counts, int accumulate)
{
    tacl_status_t st = codec_check_list(call, codec, params, nbufs,
                                        (const void *const *)dsts, counts, 1);
    if (st != TACL_OK)
        return st;
    if (src == NULL && bytes > 0)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: codec %s: src is NULL with %zu bytes", call,
                           codec->name, bytes);
    return codec->decode(params, src, bytes, nbufs, dsts, counts, accumulate);
}

TACL_EXPORT tacl_status_t tacl_codec_decode(const tacl_codec_t *codec,
                                            const tacl_codec_params_t *params,
                                            const void *src, size_t bytes,
                                            int nbufs, float *const *dsts,
                                            const size_t *counts)
{
    return codec_decode_any("codec_decode", codec, params, src, bytes, nbufs,
                            dsts, counts, 0);
}

TACL_EXPORT tacl_status_t tacl_codec_decode_accumulate(
    const tacl_codec_t *codec, const tacl_codec_params_t *params,
    const void *src, size_t bytes, int nbufs, float *const *dsts,
    const size_t *counts)
{
    return codec_decode_any("codec_decode_accumulate", codec, params, src,
                            bytes, nbufs, dsts, counts, 1);
}
