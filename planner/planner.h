/*
 * tacl's compression planner: which gradients to fuse into one call and
 * whether to compress each group, so that compression never slows a
 * training step down.  A consumer of tacl.h only, like the engine.
 *
 * The model (Cupcake, thesis section 5.3.1): after the forward pass
 * (forward seconds), backward computes the tensors' gradients in the
 * given order, tensor i taking backward[i] seconds.  A group of
 * consecutive tensors is ready when its last gradient is; it is then
 * encoded on the compute stream (delaying the backward of later tensors,
 * as a GPU kernel would), and communicated on the one communication
 * stream, in group order, as soon as that stream is free; the decoding
 * of what arrives runs on the communication side.  A group may instead
 * be encoded on the library's progress thread (a third stream, with the
 * codec's CPU costs), as Espresso offloads to the CPU.  The step ends
 * when every stream is done.  A group of x bytes costs
 *
 *     uncompressed:  h = 0,
 *                    g = alpha + beta_allreduce * x
 *     codec c:       h = encode_fixed + encode_per_byte * x
 *                    g = alpha + beta * ratio * x + m * decode(x)
 *
 * where a summable codec is all-reduced as encoded (beta_allreduce,
 * m = 1) and any other is all-gathered (beta_allgather per byte a rank
 * sends, m = ranks decodes).  These are alpha-beta lines; with a
 * communicator, tacl_planner_comm_fit() fits them to tacl_comm_estimate.
 *
 * The search (Algorithm 5.1, with both prunings of Theorem 5.1) is exact
 * for this model: every cost is affine in the bytes with non-negative
 * coefficients, which is what the prunings need (docs/design/
 * compression.md gives the argument).  Each codec option is searched
 * with every group under it, as the thesis searches for one compression
 * algorithm; then each group may switch to another option where the
 * timeline gets shorter, and Espresso's per-tensor decisions
 * (tacl_planner_decide) are taken instead where they are faster.  The
 * plan returned is never predicted slower than the best uncompressed
 * fusion, which is one of the candidates.  A codec's min_bytes makes a
 * smaller group go uncompressed under it; the search is then exact only
 * where no group falls below a minimum (a step in the cost is not
 * affine), and every plan's prediction stays the timeline's.
 */
#ifndef TACL_PLANNER_H
#define TACL_PLANNER_H

#include <stddef.h>

#include "tacl.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A model's profile: tensors in the order their gradients are ready. */
typedef struct {
    int ntensors;
    const double *bytes;    /**< gradient bytes of each tensor */
    const double *backward; /**< backward seconds of each tensor */
    double forward;         /**< forward seconds of the step */
} tacl_planner_model_t;

/** A codec's measured costs on this machine. */
typedef struct {
    char name[32];          /**< tacl_codec_find's name */
    double encode_fixed;    /**< seconds a call */
    double encode_per_byte; /**< seconds per input byte */
    double decode_fixed;
    double decode_per_byte;
    double ratio; /**< encoded bytes per input byte */
    int summable; /**< all-reduced as encoded (1) or gathered */
    /** Encoding on the progress thread instead of the device (Espresso's
     *  "CPU"); both 0: the codec has no such kernel. */
    double cpu_encode_fixed;
    double cpu_encode_per_byte;
    /** A group of fewer bytes is never encoded with this codec: it goes
     *  uncompressed (0: no minimum).  A sparsifier keeps its share of
     *  each group it encodes, so a small group holding, say, the output
     *  layer is starved, and training suffers; see
     *  tacl_planner_min_bytes_default(). */
    double min_bytes;
} tacl_planner_codec_t;

/** The minimum group a codec called name is used on by default: 64 KiB
 *  for those that keep a share of the values or one bit each ("topk",
 *  "threshold", "randk", "sign"), 0 for the casts and quantizers. */
double tacl_planner_min_bytes_default(const char *name);

/** The communication cost lines (seconds = alpha + beta * bytes). */
typedef struct {
    int ranks;
    double alpha;          /**< seconds a collective */
    double beta_allreduce; /**< seconds per byte all-reduced */
    double beta_allgather; /**< seconds per byte a rank contributes */
} tacl_planner_comm_t;

/** Option of a group: uncompressed, or an index into the codecs. */
#define TACL_PLANNER_NONE (-1)

/** A plan: groups of consecutive tensors and an option each. */
typedef struct {
    int ngroups;
    int *first;               /**< first tensor of each group, increasing */
    int *option;              /**< TACL_PLANNER_NONE or a codec index */
    int *on_cpu;              /**< 1: encoded on the progress thread */
    double step_time;         /**< predicted seconds of the step */
    double uncompressed_time; /**< best uncompressed fusion's */
    double layerwise_time;    /**< uncompressed, one call a tensor */
    long visited;             /**< search states the planner expanded */
} tacl_planner_plan_t;

/** The planner's view of one problem (prefix sums, options). */
typedef struct tacl_planner tacl_planner_t;

/**
 * Check the profile and prepare a planner for it (the arrays are copied).
 * TACL_ERR_INVALID_ARG with tacl_planner_last_error() naming a negative
 * or non-finite cost, a ratio of 0, a codec name tacl_codec_find does not
 * know, no tensors, or a NULL pointer.
 */
tacl_status_t tacl_planner_create(const tacl_planner_model_t *model,
                                  const tacl_planner_comm_t *comm,
                                  const tacl_planner_codec_t *codecs,
                                  int ncodecs, tacl_planner_t **planner_p);
void tacl_planner_destroy(tacl_planner_t *planner);

/** Why the calling thread's last planner call failed. */
const char *tacl_planner_last_error(void);

/** Compute (h) and communication (g) seconds of tensors first..last
 *  under an option. */
void tacl_planner_group_cost(const tacl_planner_t *planner, int option,
                             int first, int last, double *h_p, double *g_p);

/** Predicted step seconds of a plan: groups, options, and where each
 *  group is encoded (on_cpu[g]: the progress thread; NULL: the device). */
double tacl_planner_time(const tacl_planner_t *planner, int ngroups,
                         const int *first, const int *option,
                         const int *on_cpu);

/**
 * Cupcake's search for one option (every group under it): the fastest
 * grouping into first (room for ntensors entries) and *ngroups_p, its
 * time into *time_p; states expanded into *visited_p (may be NULL).
 */
tacl_status_t tacl_planner_fuse(tacl_planner_t *planner, int option,
                                int *first, int *ngroups_p, double *time_p,
                                long *visited_p);

/** The plan: the best option's fusion, refined per group, or Espresso's
 *  per-tensor decisions (tacl_planner_decide) where they are faster;
 *  never predicted slower than uncompressed.  Free with
 *  tacl_planner_plan_free. */
tacl_status_t tacl_planner_plan(tacl_planner_t *planner,
                                tacl_planner_plan_t *plan_p);
void tacl_planner_plan_free(tacl_planner_plan_t *plan);

/**
 * Espresso's per-tensor decisions (thesis section 4.7), one collective a
 * tensor.  Each tensor is uncompressed or under a codec, encoded on the
 * compute stream (the device) or, where the codec has CPU costs, on the
 * progress thread (a third stream, in readiness order); communication
 * keeps one stream in tensor order.
 *
 * First the device decisions (Algorithm 4.1): tensors visited by size,
 * largest first, nearer the output layer first among equals (Property
 * 2); for each, the option of least step time with the others kept
 * (Property 3); uncompressed tensors communicated before a bubble of
 * the communication timeline are never compressed (Property 1).  Then
 * the offload counts (Algorithm 4.2): compressed tensors grouped by size
 * and codec, and every vector of counts u_i tried, the u_i tensors of a
 * group farthest from the output layer going to the progress thread
 * (Lemma 4.1); past 2^12 vectors the counts are improved one group at a
 * time instead.  codec[i] is TACL_PLANNER_NONE or a codec index and
 * on_cpu[i] 0 or 1; *time_p the predicted step seconds, never more than
 * uncompressed.
 */
tacl_status_t tacl_planner_decide(tacl_planner_t *planner, int *codec,
                                  int *on_cpu, double *time_p);

/** Predicted step seconds of per-tensor decisions (one call a tensor). */
double tacl_planner_time_decided(const tacl_planner_t *planner,
                                 const int *codec, const int *on_cpu);

/**
 * Fit the communication lines to tacl_comm_estimate on comm (all-reduce
 * of float32 and all-gather of bytes, from 64 KiB to 64 MiB).
 */
tacl_status_t tacl_planner_comm_fit(tacl_comm_t comm,
                                    tacl_planner_comm_t *comm_p);

/** One run of a collective at count elements (tacl_planner_time_call). */
typedef tacl_status_t (*tacl_planner_call_fn)(void *arg, size_t count);

/**
 * Time a call on comm, collectively: call(arg, counts[i]) four times at
 * each of the two counts, the first run of each left out, the slowest
 * rank's median kept, and the line through the two (seconds = *a_p +
 * *b_p * bytes, bytes = elem_size * count; neither below 0), so that
 * every rank gets the same line.  A failed call fails this one with its
 * status, on every rank that saw it.
 */
tacl_status_t tacl_planner_time_call(tacl_comm_t comm,
                                     tacl_planner_call_fn call, void *arg,
                                     const size_t counts[2],
                                     size_t elem_size, double *a_p,
                                     double *b_p);

/**
 * A codec option priced as a timed compressed call (seconds = call_a +
 * call_b * bytes) rather than from its kernels: the planner prices a
 * compressed group as alpha + beta * ratio * x + m * decode(x) on the
 * communication stream (beta and m the all-reduce's and 1 for a summable
 * codec, the all-gather's and the ranks otherwise) after encode(x) on
 * the compute stream.  For a call that encodes off the compute stream
 * (a non-blocking call, or a communication thread), encode is 0 and the
 * decode terms take what the lines leave of the call.  The codec into
 * *codec_p; TACL_ERR_INVALID_ARG with tacl_planner_last_error() naming a
 * NULL pointer, a ratio not above 0 or a negative or non-finite cost.
 */
tacl_status_t tacl_planner_codec_from_call(const char *name, int summable,
                                           double ratio, double call_a,
                                           double call_b,
                                           const tacl_planner_comm_t *lines,
                                           tacl_planner_codec_t *codec_p);

#ifdef __cplusplus
}
#endif

#endif /* TACL_PLANNER_H */
