/*
 * The sharded-training engine: trains the model of model.h data-parallel
 * with one of PaRO's 14 sharding strategies (parameters, gradients and
 * optimizer states each not sharded (N), sharded within the partition
 * group (I) or sharded globally (G)), plus ZeRO++'s hpZ, qwZ and qgZ on
 * ZeRO-3.  It uses only tacl's public API (include/tacl.h).
 */
#ifndef ENGINE_ENGINE_H
#define ENGINE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include <tacl.h>

#include "gcomp.h"
#include "model.h"

typedef enum { LVL_N = 0, LVL_I = 1, LVL_G = 2 } engine_level_t;

typedef struct {
    engine_level_t p, g, os;  /* sharding of parameters, grads, states */
    int group_size;           /* ranks per partition group, 0: the node */
    int hpz, qwz, qgz;        /* ZeRO++ options, on GGG only */
    int qwz_bits, qgz_bits;   /* 8 and 4 by default */
    int micro_steps;          /* s: gradient accumulation steps */
    int batch;                /* global batch (samples per step) */
    int ctx, emb, hidden, blocks;
    /* The word embedding (issue 31): vocab words (0: none) of embed_dim
     * floats, replicated, its gradient synchronised by sparse_scheme
     * (TACL_SPARSE_DENSE: the engine's dense all-reduce of the table). */
    int vocab, embed_dim;
    tacl_sparse_scheme_t sparse_scheme;
    float lr;
    uint64_t seed;
} engine_opts_t;

typedef struct engine engine_t;

typedef struct {
    double loss;          /* mean cross-entropy of the global batch */
    double intra_bytes;   /* bytes sent inside groups, all ranks summed */
    double inter_bytes;   /* bytes sent between groups, all ranks summed */
    uint64_t my_intra, my_inter;  /* this rank's share */
    /* The word embedding's gradient sync (0 without one): rank 0's
     * seconds, bytes all ranks sent for it, the scheme that ran (AUTO's
     * pick). */
    double embed_s, embed_bytes;
    tacl_sparse_scheme_t embed_scheme;
} engine_step_t;

/*
 * Parse a strategy name: three letters of N/I/G ("IIG") or an alias
 * (DDP, ZeRO-1, ZeRO-2, ZeRO-3, MiCS, case-insensitive).  0 or -1 when
 * the name is unknown or breaks PaRO's principle 1 (optimizer states
 * sharded at least as finely as parameters and gradients).
 */
int engine_parse_strategy(const char *name, engine_opts_t *opts);
void engine_opts_default(engine_opts_t *opts);

/*
 * Build the engine on comm (collective): partition groups, shards and
 * every buffer, parameters initialised from the seed.  text/len is the
 * training text (at least ctx + 1 bytes).  On error returns a tacl status
 * and writes a message into err.
 */
tacl_status_t engine_create(tacl_comm_t comm, const engine_opts_t *opts,
                            const uint8_t *text, size_t len,
                            engine_t **engine_p, char *err, size_t errlen);
void engine_destroy(engine_t *e);

/* One optimizer step (s micro-steps); collective. */
tacl_status_t engine_step(engine_t *e, engine_step_t *out);

/* Bytes this rank holds for parameters, gradients, optimizer states. */
void engine_state_bytes(const engine_t *e, uint64_t *p, uint64_t *g,
                        uint64_t *os);
/* Psi (padded parameter count), world size N, group size M. */
void engine_shape(const engine_t *e, size_t *psi, int *n, int *m);
uint64_t engine_step_index(const engine_t *e);

/* The state a rank holds, for snapshots (snapshot.c). */
typedef enum {
    ENGINE_SHARD_PARAM,   /* parameters */
    ENGINE_SHARD_GRAD,    /* accumulated gradients */
    ENGINE_SHARD_ADAM_M,  /* Adam's first moment */
    ENGINE_SHARD_ADAM_V   /* Adam's second moment */
} engine_shard_t;
#define ENGINE_SHARD_KINDS 4

/*
 * This rank's shard of layer l of a kind: *len_p floats at *ptr_p.  l
 * runs to engine_shard_layers() - 1: after the model's layers comes the
 * word table (whole: it is replicated), when there is one.
 */
void engine_shard(engine_t *e, engine_shard_t kind, int l, float **ptr_p,
                  size_t *len_p);
int engine_shard_layers(const engine_t *e);
/*
 * The ranks holding the same shards as this one (their parameter and
 * optimizer-state shards equal after every step): a group number shared
 * by exactly those ranks, or -1 when no other rank holds this rank's.
 * Optimizer states sharded over the world (ZeRO) are every rank's own;
 * sharded inside partition groups (MiCS), rank li of every group holds
 * the same; not sharded (DDP), every rank holds the same.
 */
int engine_replica_group(const engine_t *e);
/* Seconds on the monotonic clock, for the engine's timings. */
double engine_clock_s(void);
/* A hash of the word table's bytes (0 without one): equal on every rank
 * when the replicas agree. */
uint64_t engine_words_checksum(const engine_t *e);
/* Steps done and the data position (global batches drawn): the samples
 * of the next step follow from the seed and the data position. */
void engine_position(const engine_t *e, uint64_t *step_p,
                     uint64_t *data_pos_p);
void engine_set_position(engine_t *e, uint64_t step, uint64_t data_pos);
/* The model: layer sizes (count, padded) for reports. */
const model_t *engine_model(const engine_t *e);

/*
 * Gradient compression (issue 30).  NULL when the strategy's gradients
 * can be compressed (reduce-scattered on the world, or inside the group
 * and then all-reduced across groups), else why not, naming the option.
 */
const char *engine_compress_unsupported(const engine_opts_t *opts);

/*
 * Reduce gradients by a plan from the next micro-step on: ngroups groups
 * of consecutive tensors in gradient-ready order (tensor i is layer
 * n_layers - 1 - i), group k starting at tensor first[k] (first[0] = 0,
 * increasing), compressed with codec where compress[k].  Each group is
 * one collective; the engine owns an error-feedback residual per
 * gradient shard, zeroed when a plan is set.  codec->hops says which
 * hops carry encoded data (gcomp_route on the reduce-scatter's and the
 * cross-group communicators: a reduce-scatter inside one node goes
 * dense).  Collective: every rank sets the same plan at the same point.
 */
tacl_status_t engine_set_plan(engine_t *e, const gcomp_codec_t *codec,
                              int ngroups, const int *first,
                              const int *compress);

/* Where a plan's groups travel (engine_plan_comms). */
typedef struct {
    tacl_comm_t rs_comm;     /* the reduce-scatter's: world, or the group */
    int rs_size;             /* its ranks */
    gcomp_route_t rs_route;
    tacl_comm_t ar_comm;     /* the all-reduce across groups, or NULL */
    int ar_div;              /* a group's bytes over this: its shard there */
    gcomp_route_t ar_route;
} engine_plan_comms_t;

/*
 * The communicators a plan's groups are reduced over and the routes of
 * codec's calls on them (gcomp_route under codec->hops), as
 * engine_set_plan would take them, for pricing the calls before a plan
 * is set: the reduce-scatter over the world (or the partition group for
 * group shards), and for MiCS the once-a-step all-reduce of each group's
 * shard across groups.  Collective on the world.  TACL_ERR_INVALID_USAGE
 * with the reason in engine_error when the strategy or the hops rule
 * compression out.
 */
tacl_status_t engine_plan_comms(engine_t *e, const gcomp_codec_t *codec,
                                engine_plan_comms_t *pc);

/*
 * The plan in engine_plan_words() int32 words, for a snapshot:
 * ngroups (0: none set), then first[] and compress[] (n_layers each, as
 * engine_set_plan takes them).  engine_plan_import sets such a plan
 * again (collective, as engine_set_plan) keeping the residuals as they
 * are, for a restored job whose residuals were restored with it.
 */
size_t engine_plan_words(const engine_t *e);
void engine_plan_export(const engine_t *e, int32_t *words);
tacl_status_t engine_plan_import(engine_t *e, const gcomp_codec_t *codec,
                                 const int32_t *words);

/* The error-feedback residuals (allocated now if not yet): the
 * reduce-scatter's and the cross-group all-reduce's, in the plan's
 * packed layouts.  TACL_ERR_INVALID_USAGE for a strategy that cannot
 * compress. */
tacl_status_t engine_residuals(engine_t *e, float **rs_p, size_t *rs_len_p,
                               float **ar_p, size_t *ar_len_p);

/* The profile: least seconds of a micro-step's forward (the loss
 * included) and of each layer's backward (backward[l], n_layers values)
 * since the last reset (or creation). */
void engine_profile(const engine_t *e, double *forward_p, double *backward);
void engine_profile_reset(engine_t *e);

/*
 * What a plan's predicted micro-step covers, measured on the last step:
 * seconds of its last micro-step less the waits for parameter gathers
 * (forward, backward and the gradients' reduce-scatters), plus the
 * step's all-reduce across groups under a plan (MiCS's, which the
 * planner prices with each group).  Not the optimizer's step.
 */
double engine_plan_span(const engine_t *e);

/* Checkpoint of the sharded state, readable by any strategy; collective. */
tacl_status_t engine_save(engine_t *e, const char *path);
tacl_status_t engine_load(engine_t *e, const char *path);
const char *engine_error(const engine_t *e);

#endif /* ENGINE_ENGINE_H */
