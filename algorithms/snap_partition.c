/*
 * The thesis' Algorithm 6.2 (chapter 6, section 6.5.3): how much of a
 * snapshot's copies each idle span of the network may carry, so that the
 * copies travel while training's own traffic leaves the link idle.  The
 * spans come from the executor's record of when the caller's operations
 * to other nodes were in flight (lib/snap_sched.c); here is only the
 * arithmetic, for the tests to hold against hand-worked cases.
 */
#include "placement.h"

/* f(s): a partition of s bytes on the link. */
static double part_time(const tacl__partition_in_t *in, double bytes)
{
    return in->alpha_s + bytes / in->bytes_per_s;
}

uint64_t tacl__snap_partition(const double *span_s, int n,
                              const tacl__partition_in_t *in,
                              uint64_t *budget)
{
    uint64_t remain = in->copies > 0 ? in->copy_bytes : 0, beyond;
    int copy = 0;

    for (int i = 0; i < n; i++)
        budget[i] = 0;
    for (int i = 0; i < n && remain > 0; i++) {
        double span = in->mu * span_s[i];

        while (span > 0 && remain > 0) {
            double size;

            if (span >= part_time(in, (double)in->part_bytes))
                size = (double)in->part_bytes;
            else if (in->whole_parts)
                size = remain < in->part_bytes &&
                               span >= part_time(in, (double)remain)
                           ? (double)remain
                           : 0;
            else if (span > in->alpha_s)
                size = (span - in->alpha_s) * in->bytes_per_s;
            else
                break;
            if (size > (double)remain)
                size = (double)remain;
            if ((uint64_t)size == 0)
                break;
            remain -= (uint64_t)size;
            span -= part_time(in, (double)(uint64_t)size);
            budget[i] += (uint64_t)size;
            if (remain == 0 && ++copy < in->copies)
                remain = in->copy_bytes;
        }
    }
    if (remain == 0)
        return 0;
    /* The last span's length counts as infinite: it takes the rest. */
    beyond = remain + (uint64_t)(in->copies - copy - 1) * in->copy_bytes;
    budget[n - 1] += beyond;
    return beyond;
}
