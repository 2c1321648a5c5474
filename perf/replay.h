/*
 * perf/replay: a model's training step replayed with compute stand-ins,
 * real codecs and real tacl collectives, so that gradient-communication
 * policies (bucket fusion, layer-wise compression, the planner's plan)
 * are timed side by side in one job (issue 30).
 *
 * replay_policy.c reads a profile and builds each policy's grouping
 * (pure: no communication); replay.c times the codecs, plans, runs the
 * steps and prints the table.
 */
#ifndef TACL_PERF_REPLAY_H
#define TACL_PERF_REPLAY_H

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

/** Last tensor of group g. */
static inline int replay_group_last(const replay_policy_t *pol, int n, int g)
{
    return g + 1 < pol->ngroups ? pol->first[g + 1] - 1 : n - 1;
}

#endif /* TACL_PERF_REPLAY_H */
