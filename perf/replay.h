/*
 * perf/replay: a model's training step replayed with compute stand-ins,
 * real codecs and real tacl collectives, so that gradient-communication
 * policies (bucket fusion, layer-wise compression, the planner's plan)
 * are timed side by side in one job (issue 30).
 *
 * replay_policy.c reads a profile and builds each policy's grouping
 * (pure: no communication); replay_cost.c times the codec and the
 * compressed call and prices them for the planner; replay_step.c runs a
 * policy's steps with the communication thread; replay.c parses the
 * command line, plans, runs every policy and prints the table.
 */
#ifndef TACL_PERF_REPLAY_H
#define TACL_PERF_REPLAY_H

#include <pthread.h>
#include <stddef.h>

#include "planner.h"

/** A model profile as perf/profiles/ stores it (tacl-plan's format). */
typedef struct {
    char name[64];
    int n;          /* tensors, in gradient-ready order */
    double *bytes;  /* float32 bytes of each */
    double *back;   /* backward seconds of each */
    double forward; /* forward seconds of the step */
} replay_profile_t;

/**
 * Read path into *pf (name copied from name).  Lines other than
 * "forward", "tensor" and comments ('#', also after a value) are refused,
 * as are sizes that are not whole float32 counts; 0, or -1 after printing
 * the file, line and reason to stderr.
 */
int replay_profile_read(const char *path, const char *name,
                        replay_profile_t *pf);
void replay_profile_free(replay_profile_t *pf);

/** A policy's grouping: groups of consecutive tensors, an option each. */
typedef struct {
    char name[32];
    int ngroups;
    int *first;  /* first tensor of each group, increasing, first[0] = 0 */
    int *option; /* TACL_PLANNER_NONE or 0 (the codec) */
    char family[16]; /* "bucket" or "even" for the sweeps, else "" */
} replay_policy_t;

/**
 * PyTorch DDP's buckets: tensors in ready order are added to a bucket
 * until it holds at least cap bytes (the first bucket: first_cap), as
 * DDP's compute_bucket_assignment_by_size closes them.  Uncompressed.
 */
int replay_policy_buckets(const replay_profile_t *pf, double first_cap,
                          double cap, replay_policy_t *pol);
/** ngroups groups of about equal bytes (fewer when there are fewer
 *  tensors).  Uncompressed. */
int replay_policy_even(const replay_profile_t *pf, int ngroups,
                       replay_policy_t *pol);
/** One group a tensor, compressed when its bytes exceed threshold (0:
 *  every tensor). */
int replay_policy_layerwise(const replay_profile_t *pf, double threshold,
                            replay_policy_t *pol);
/** A copy of the planner's groups and options. */
int replay_policy_from_plan(const tacl_planner_plan_t *plan,
                            replay_policy_t *pol);
void replay_policy_free(replay_policy_t *pol);

/** A policy's outcome. */
typedef struct {
    replay_policy_t pol;
    double measured, predicted; /* seconds */
    int compressed;             /* groups under the codec */
} replay_result_t;

/**
 * Rank r's gradient value j: an integer in [-2^10, 2^10) times 2^-12,
 * so sums over up to 2^12 ranks are exact in float32 in any order.
 */
float replay_value(int rank, size_t j);

/** v[j] = replay_value(rank, j) for j < n. */
void replay_fill(float *v, size_t n, int rank);

/** The codec's costs timed alone: seconds = fixed + per_byte * bytes. */
typedef struct {
    double enc_fixed, enc_per_byte, dec_fixed, dec_per_byte, ratio;
} replay_codec_cost_t;

/** The codec timed alone (encode with error feedback, decode), the
 *  slowest rank's; 0 or -1 after a message. */
int replay_time_codec(const tacl_codec_t *codec,
                      const tacl_codec_params_t *params, tacl_comm_t comm,
                      replay_codec_cost_t *cost_p);
/**
 * How a compressed group travels: the compressed call's scheme and the
 * hops that carry encoded data (Espresso's decision tree, less the
 * device/CPU choice).  The planner gets one codec option a route.
 */
typedef struct {
    tacl_comp_scheme_t scheme;
    tacl_comp_hops_t hops;
} replay_route_t;

/** The route's name, "gather/all" and the like, into buf. */
void replay_route_name(const replay_route_t *r, char *buf, size_t size);

/** The compressed call over a route timed: seconds = *a_p + *b_p *
 *  bytes. */
int replay_time_call(const tacl_codec_t *codec,
                     const tacl_codec_params_t *params,
                     const replay_route_t *route, tacl_comm_t comm,
                     double *a_p, double *b_p);

/**
 * The harness' communication thread (replay_comm_main, started with a
 * pointer to this): it runs the groups of a step in order as the compute
 * side marks them ready, and says when all are done.  Uncompressed
 * groups are posted with tacl_allreduce_nb, compressed ones run the
 * blocking tacl_comp_allreduce_hops over their option's route, both in
 * place in grad (as DDP reduces its buckets).  Start it with done = 1.
 */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ready, next, done, quit;
    tacl_status_t st;
    int failed_group;
    const replay_policy_t *pol;
    const size_t *off; /* element offset of each tensor, and the total */
    int ntensors;
    float *grad; /* every tensor's gradient, reduced in place */
    float *err;  /* residuals: allocated while a policy compresses */
    tacl_comm_t comm;
    const tacl_codec_t *codec;
    tacl_codec_params_t params;
    const replay_route_t *routes; /* of each codec option */
    tacl_request_t *reqs;
} replay_comm_t;

void *replay_comm_main(void *arg);

/** How a policy's steps run. */
typedef struct {
    int steps, warmup, spin, check;
    int inject_error; /* tests only: rank 0's first value made wrong */
} replay_steps_t;

/**
 * Run one policy's steps: res->measured the median over the measured
 * steps of the slowest rank's; with check, the results compared (exact
 * sums when nothing is compressed, the same on every rank always).
 * The policy runs on a communicator split from ct->comm for it and
 * destroyed at its end, so that the library's scratch for its groups
 * goes with it.  Before each step, outside its time, grad is refilled
 * with this rank's values; when the policy compresses, ct->err is
 * allocated for it, its compressed groups' residuals zeroed, and freed
 * at the end.  0, or -1 after a message.
 */
int replay_run_policy(replay_comm_t *ct, const replay_profile_t *pf,
                      const replay_steps_t *o, int rank, int nranks,
                      replay_result_t *res);

/** Last tensor of group g. */
static inline int replay_group_last(const replay_policy_t *pol, int n, int g)
{
    return g + 1 < pol->ngroups ? pol->first[g + 1] - 1 : n - 1;
}

#endif /* TACL_PERF_REPLAY_H */
