/*
 * sparse_trace: one rank's rows of a sparse-gradient trace
 * (sim/sparse_trace.h), as raw little-endian int64 indices, for the
 * benchmarks that are not C (perf/sparse_bench.py reads them), so every
 * figure and tacl-sim see the same rows.
 *
 *   sparse_trace --rows N --density D [--zipf S] [--seed X] --rank R
 *                --out FILE
 *
 * Prints "rows N nnz K" on stdout; exit 1 when the law's tail cannot
 * give D * N distinct rows, 2 for a bad argument.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sparse_trace.h"

static int usage(void)
{
    fprintf(stderr, "usage: sparse_trace --rows N --density D [--zipf S] "
            "[--seed X] --rank R --out FILE\n");
    return 2;
}

int main(int argc, char **argv)
{
    unsigned long long rows = 0, seed = 1;
    double density = -1, zipf = 1.0;
    int rank = -1;
    const char *out = NULL;
    tacl__sparse_trace_t t;
    int64_t *idx;
    size_t nnz, got;
    FILE *f;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rows"))
            rows = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--density"))
            density = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--zipf"))
            zipf = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--rank"))
            rank = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--out"))
            out = argv[i + 1];
        else
            return usage();
    }
    if (rows == 0 || !(density > 0 && density <= 1) || rank < 0 || !out)
        return usage();
    if (tacl__sparse_trace_init(&t, rows, zipf, seed) != TACL_OK) {
        fprintf(stderr, "sparse_trace: cannot make a trace of %llu rows "
                "(Zipf %g)\n", rows, zipf);
        return 2;
    }
    nnz = (size_t)(density * (double)rows + 0.5);
    idx = malloc((nnz ? nnz : 1) * sizeof(*idx));
    if (idx == NULL)
        return 1;
    tacl__sparse_trace_rank(&t, rank, nnz, idx, &got);
    f = fopen(out, "wb");
    if (f == NULL || fwrite(idx, sizeof(*idx), got, f) != got ||
        fclose(f) != 0) {
        fprintf(stderr, "sparse_trace: cannot write %s\n", out);
        return 1;
    }
    printf("rows %llu nnz %zu\n", rows, got);
    free(idx);
    tacl__sparse_trace_fini(&t);
    if (got < nnz) {
        fprintf(stderr, "sparse_trace: the law gave %zu of %zu rows\n", got,
                nnz);
        return 1;
    }
    return 0;
}
