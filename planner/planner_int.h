/*
 * The planner's own state, shared by its files: the profile as prefix
 * sums (so a group's bytes and backward time are two subtractions), the
 * options, and the last error.
 */
#ifndef TACL_PLANNER_INT_H
#define TACL_PLANNER_INT_H

#include "planner.h"

struct tacl_planner {
    int n; /* tensors */
    int ncodecs;
    double forward;
    double *pre_bytes; /* n + 1 prefix sums */
    double *pre_back;  /* n + 1 prefix sums */
    tacl_planner_comm_t comm;
    tacl_planner_codec_t *codecs;
};

/** Bytes of tensors first..last. */
static inline double planner_bytes(const tacl_planner_t *p, int first,
                                   int last)
{
    return p->pre_bytes[last + 1] - p->pre_bytes[first];
}

/** Tensors *f_p..*last_p of group gi of ngroups (first NULL: one group a
 *  tensor). */
static inline void planner_group(const tacl_planner_t *p, int ngroups,
                                 const int *first, int gi, int *f_p,
                                 int *last_p)
{
    *f_p = first ? first[gi] : gi;
    *last_p = gi + 1 == ngroups ? p->n - 1
              : first           ? first[gi + 1] - 1
                                : gi;
}

/** Whether option encodes tensors first..last (a codec's min_bytes makes a
 *  smaller group go uncompressed). */
static inline int planner_encodes(const tacl_planner_t *p, int option,
                                  int first, int last)
{
    return option != TACL_PLANNER_NONE &&
           planner_bytes(p, first, last) >= p->codecs[option].min_bytes;
}

/** Label NONE (on the device) each group its option does not encode
 *  (first NULL: one group a tensor; on_cpu may be NULL). */
void tacl__planner_settle(const tacl_planner_t *p, int ngroups,
                          const int *first, int *option, int *on_cpu);

/** Backward seconds of tensors first..last. */
static inline double planner_back(const tacl_planner_t *p, int first,
                                  int last)
{
    return p->pre_back[last + 1] - p->pre_back[first];
}

/**
 * The timeline of planner.h: groups (first NULL: one a tensor) under
 * options, encoded on the progress thread where on_cpu[g] (NULL: none
 * is); gap_before[g], when given, says whether group g's communication
 * waited on the stream being idle (a bubble).  The step's seconds.
 */
double tacl__planner_timeline(const tacl_planner_t *p, int ngroups,
                              const int *first, const int *option,
                              const int *on_cpu, int *gap_before);

/**
 * tacl_planner_fuse, looking only for a step shorter than cutoff seconds
 * (the best another option reached): none found is *ngroups_p = 0 and
 * *time_p = INFINITY.  A cutoff makes the optimistic outcome prune from
 * the start.
 */
tacl_status_t tacl__planner_fuse_below(tacl_planner_t *planner, int option,
                                       double cutoff, int *first,
                                       int *ngroups_p, double *time_p,
                                       long *visited_p);

/** Record why a planner call fails; returns status. */
tacl_status_t tacl__planner_fail(tacl_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* TACL_PLANNER_INT_H */
