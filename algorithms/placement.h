/*
 * Where the copies of a snapshot live (placement.c): which units (nodes in
 * the node failure domain, ranks in the rank domain) hold the m copies of
 * each unit's state, and how likely a job survives k units lost at once.
 * Pure arithmetic: no I/O, no communicator; the snapshot entry points and
 * the tests call it directly.
 */
#ifndef TACL_ALGORITHMS_PLACEMENT_H
#define TACL_ALGORITHMS_PLACEMENT_H

#include <stdint.h>

#include "tacl.h"

/** How the copies are spread over the units. */
typedef enum {
    /** Group when m divides the units, mixed otherwise. */
    TACL__PLACE_AUTO = 0,
    /** Groups of m units hold one another's copies (m must divide N). */
    TACL__PLACE_GROUP,
    /** Unit u's copies on u, u + 1, ..., u + m - 1 (mod N). */
    TACL__PLACE_RING,
    /** Groups, and a ring over the last m + (N mod m) units. */
    TACL__PLACE_MIXED,
} tacl__place_kind_t;

/** The copies of every unit: holders[u * m + j], j = 0 is u itself. */
typedef struct {
    int units;               /* N */
    int m;                   /* copies of each unit's state */
    tacl__place_kind_t kind; /* resolved: never AUTO */
    int *holders;            /* units * m entries */
} tacl__placement_t;

/** The name of a kind ("group", "ring", "mixed", "auto"). */
const char *tacl__place_kind_name(tacl__place_kind_t kind);

/**
 * Build the placement of `units` units with m copies each (1 <= m <=
 * units).  GROUP needs m to divide units; AUTO resolves to GROUP or MIXED
 * (the thesis' Algorithm 6.1).  Free with tacl__place_free.
 */
tacl_status_t tacl__place_build(int units, int m, tacl__place_kind_t kind,
                                tacl__placement_t *p_p);

/** Free what tacl__place_build allocated (a zeroed struct is fine). */
void tacl__place_free(tacl__placement_t *p);

/** The m units holding unit u's copies, u itself first. */
static inline const int *tacl__place_holders(const tacl__placement_t *p,
                                             int u)
{
    return p->holders + (size_t)u * (size_t)p->m;
}

/**
 * Exactly how many of the C(N, k) sets of k lost units leave every unit
 * with a surviving copy (*ok_p) out of how many (*total_p), by counting
 * every set.  Needs N <= 62; the work is C(N, k) times the distinct holder
 * sets, so keep C(N, k) within a few hundred million.
 */
tacl_status_t tacl__place_recovery(const tacl__placement_t *p, int k,
                                   uint64_t *ok_p, uint64_t *total_p);

/** C(n, k) as a double (exact up to 2^53); 0 when k < 0 or k > n. */
double tacl__place_choose(int n, int k);

/**
 * The thesis' Corollary 6.1 bound on recovery with group placement:
 * 1 for k < m, max(0, 1 - N C(N-m, k-m) / (m C(N, k))) otherwise (exact
 * while k < 2m).
 */
double tacl__place_corollary(int n, int m, int k);

/**
 * The best recovery any placement can reach at k = m (Theorem 6.1's
 * proof): 1 - ceil(N / m) / C(N, m).
 */
double tacl__place_upper_bound(int n, int m);

/**
 * The rank holding copy j of `rank` when units are nodes: the rank of the
 * holder node with the same local index (the same rail), or that index
 * modulo the holder node's size when nodes differ in size.  node_of and
 * local_of give each of the nranks ranks' node and local index.  When
 * units are ranks, pass node_of = NULL: the answer is the holder unit.
 * Returns -1 if the holder node has no rank.
 */
int tacl__place_rank_holder(const tacl__placement_t *p, int nranks,
                            const int *node_of, const int *local_of, int rank,
                            int j);

/** What the thesis' Algorithm 6.2 partitions, and over what link. */
typedef struct {
    uint64_t copy_bytes; /* C: one copy of the unit's state */
    int copies;          /* m - 1: the copies sent to peers */
    uint64_t part_bytes; /* R / p: the largest partition */
    double alpha_s;      /* f(s) = alpha + s / bytes_per_s: a partition's */
    double bytes_per_s;  /*   time on the link (B) */
    double mu;           /* share of each idle span to fill, in (0, 1] */
    int whole_parts;     /* partitions only of R/p, or a copy's shorter
                            last part: no span takes a cut one */
} tacl__partition_in_t;

/**
 * Copies among declared replicas (tacl_snapshot_replicated): ranks with
 * the same group_of[r] >= 0 hold the same state, so each one's own copy
 * serves as the others'.  For every rank whose group spans at least m
 * units (nodes when node_of is given, else ranks), shared[r] is 1 and
 * holders[r * m + j] its m holders inside its group, r first: the
 * group's units (in rank order) placed by kind (GROUP becomes AUTO where
 * m does not divide them), copy j on the holder node's member with r's
 * local index, else the one at r's place among its own node's members
 * (modulo their count).  Other ranks get shared[r] 0 and their holders
 * are left as they are.
 */
tacl_status_t tacl__place_shared(int nranks, const int *group_of,
                                 const int *node_of, const int *local_of,
                                 int m, tacl__place_kind_t kind, int *holders,
                                 int *shared);

/**
 * The thesis' Algorithm 6.2 (section 6.5.3): fill the idle spans
 * span_s[0..n) of a step (seconds, in the order they come) with
 * partitions of the copies.  Each span takes partitions of R/p bytes
 * while mu times its length still holds f(R/p), then one of what the
 * rest of it carries, (rest - alpha) B; the copies are sent one after
 * the other.  budget[i] gets the bytes of the partitions in span i; the
 * last span also takes what the spans cannot hold (its length counts as
 * infinite, line 2), which is returned: 0 when the copies fit in the
 * idle time.  With whole_parts a span ends its round where the next
 * whole part does not fit, as when parts are also the checksum unit.
 * Two slips of the pseudo-code are mended: a span charges f(size) of
 * the partition it took (not f of what is left of the copy), and a span
 * too short for any byte ends its round instead of looping.  n >= 1.
 */
uint64_t tacl__snap_partition(const double *span_s, int n,
                              const tacl__partition_in_t *in,
                              uint64_t *budget);

#endif /* TACL_ALGORITHMS_PLACEMENT_H */
