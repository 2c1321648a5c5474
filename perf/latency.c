/*
 * latency: the time of one small blocking collective, for tacl or for the
 * MPI library (the same source built twice: lat_tacl, and lat_mpi with
 * LAT_MPI defined), so the two are measured the same way.
 *
 * For each collective (allreduce, allgather, reducescatter, broadcast,
 * barrier) and each size from 8 bytes to 8 KB (times 4), every rank runs
 * warm-up calls, a barrier, then ITERS timed calls back to back, in 20
 * blocks; the figures are the loop time per call and the time per call
 * of the fastest block (the cost when no rank was descheduled meanwhile,
 * which on a shared machine the mean hides), each averaged over the
 * ranks.  Size is the
 * larger buffer, as nccl-tests counts it (all-gather: what each rank
 * receives; reduce-scatter: what each rank sends), in float32 (sum).
 * After the timing one call's result is checked exactly; a wrong value
 * makes the run fail.
 *
 * Output, from rank 0, one line per cell: "coll bytes mean_us best_us".
 * Usage: lat_tacl|lat_mpi [ITERS [MAXBYTES]]   (default 2000, 8192);
 * lat_tacl starts under tacl-run, lat_mpi under mpirun.
 *
 * Environment (lat_tacl): LAT_MODE=blocking (default) times the blocking
 * call, nb the "_nb" call and its wait, persistent tacl_start and the
 * wait on a request made once per cell by the tacl_*_init call (both
 * MPI-4's persistent collectives, so lat_mpi ignores it: its calls are
 * the blocking ones).  LAT_COLL=name runs that collective only, and
 * LAT_BYTES=n that one size only (any size; perf/callgrind_persist.sh).
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parse.h"
#ifdef LAT_MPI
#include <mpi.h>
#else
#include "tacl.h"
#endif

enum { ALLREDUCE, ALLGATHER, REDUCESCATTER, BROADCAST, BARRIER, NCOLLS };
static const char *const names[NCOLLS] = {"allreduce", "allgather",
                                          "reducescatter", "broadcast",
                                          "barrier"};

/* Timed calls go in this many blocks; the fastest block is also kept. */
#define BLOCKS 20

static int rank, nranks;
#ifdef LAT_MPI
#define LIB_OK MPI_SUCCESS
#else
#define LIB_OK TACL_OK
static tacl_comm_t comm;

enum { MODE_BLOCKING, MODE_NB, MODE_PERSISTENT };
static int mode = MODE_BLOCKING;
/* The cell's persistent request (MODE_PERSISTENT), NULL outside one. */
static tacl_request_t preq;
static int pcoll; /* its collective */
#endif

/* Whether coll is in list (names separated by commas; NULL: all). */
static int selected(const char *list, int coll)
{
    size_t len = strlen(names[coll]);

    for (const char *p = list; p != NULL; p = strchr(p, ',')) {
        p += *p == ',';
        if (strncmp(p, names[coll], len) == 0 &&
            (p[len] == ',' || p[len] == '\0'))
            return 1;
    }
    return list == NULL;
}

/* One call of coll with count elements per block. */
static int run(int coll, float *send, float *recv, int count)
{
#ifdef LAT_MPI
    switch (coll) {
    case ALLREDUCE:
        return MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM,
                             MPI_COMM_WORLD);
    case ALLGATHER:
        return MPI_Allgather(send, count, MPI_FLOAT, recv, count, MPI_FLOAT,
                             MPI_COMM_WORLD);
    case REDUCESCATTER:
        return MPI_Reduce_scatter_block(send, recv, count, MPI_FLOAT,
                                        MPI_SUM, MPI_COMM_WORLD);
    case BROADCAST:
        return MPI_Bcast(recv, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
    default:
        return MPI_Barrier(MPI_COMM_WORLD);
    }
#else
    tacl_request_t req = NULL;
    int st;

    if (preq != NULL && coll == pcoll) {
        st = tacl_start(preq);
        return st != TACL_OK ? st : tacl_request_wait(preq);
    }
    if (mode == MODE_NB && coll != BARRIER) {
        switch (coll) {
        case ALLREDUCE:
            st = tacl_allreduce_nb(send, recv, (size_t)count, TACL_FLOAT32,
                                   TACL_SUM, comm, NULL, &req);
            break;
        case ALLGATHER:
            st = tacl_allgather_nb(send, recv, (size_t)count, TACL_FLOAT32,
                                   comm, NULL, &req);
            break;
        case REDUCESCATTER:
            st = tacl_reduce_scatter_nb(send, recv, (size_t)count,
                                        TACL_FLOAT32, TACL_SUM, comm, NULL,
                                        &req);
            break;
        default:
            st = tacl_broadcast_nb(recv, recv, (size_t)count, TACL_FLOAT32,
                                   0, comm, NULL, &req);
            break;
        }
        if (st == TACL_OK)
            st = tacl_request_wait(req);
        if (req != NULL)
            tacl_request_free(req);
        return st;
    }
    switch (coll) {
    case ALLREDUCE:
        return tacl_allreduce(send, recv, (size_t)count, TACL_FLOAT32,
                              TACL_SUM, comm, NULL);
    case ALLGATHER:
        return tacl_allgather(send, recv, (size_t)count, TACL_FLOAT32, comm,
                              NULL);
    case REDUCESCATTER:
        return tacl_reduce_scatter(send, recv, (size_t)count, TACL_FLOAT32,
                                   TACL_SUM, comm, NULL);
    case BROADCAST:
        return tacl_broadcast(recv, recv, (size_t)count, TACL_FLOAT32, 0,
                              comm, NULL);
    default:
        return tacl_barrier(comm, NULL);
    }
#endif
}

#ifndef LAT_MPI
/* The cell's persistent request, made as run() would call it. */
static int make_persistent(int coll, float *send, float *recv, int count)
{
    pcoll = coll;
    switch (coll) {
    case ALLREDUCE:
        return tacl_allreduce_init(send, recv, (size_t)count, TACL_FLOAT32,
                                   TACL_SUM, comm, NULL, &preq);
    case ALLGATHER:
        return tacl_allgather_init(send, recv, (size_t)count, TACL_FLOAT32,
                                   comm, NULL, &preq);
    case REDUCESCATTER:
        return tacl_reduce_scatter_init(send, recv, (size_t)count,
                                        TACL_FLOAT32, TACL_SUM, comm, NULL,
                                        &preq);
    case BROADCAST:
        return tacl_broadcast_init(recv, recv, (size_t)count, TACL_FLOAT32,
                                   0, comm, NULL, &preq);
    default:
        return tacl_barrier_init(comm, NULL, &preq);
    }
}
#endif

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Sum of one double over the ranks. */
static double sum_over_ranks(double v)
{
    double all = v;
#ifdef LAT_MPI
    MPI_Allreduce(&v, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#else
    double in[1] = {v};
    tacl_allreduce(in, &all, 1, TACL_FLOAT64, TACL_SUM, comm, NULL);
#endif
    return all;
}

/* Small integers, exact in float32 sums. */
static float value(int r, int i)
{
    return (float)((r * 7 + i) % 64);
}

/* Whether one call of coll gives the exact result; 1 when wrong. */
static int check(int coll, float *send, float *recv, int count)
{
    int n = coll == ALLGATHER ? count * nranks : count, wrong = 0;
    int blocks = coll == REDUCESCATTER ? nranks : 1;

    for (int i = 0; i < count * blocks; i++)
        send[i] = value(rank, i);
    for (int i = 0; i < n; i++)
        recv[i] = rank == 0 && coll == BROADCAST ? value(0, i) : -1;
    if (run(coll, send, recv, count) != LIB_OK)
        return 1;
    for (int i = 0; i < n && coll != BARRIER; i++) {
        float want = 0;
        if (coll == ALLREDUCE || coll == REDUCESCATTER) {
            int at = coll == REDUCESCATTER ? rank * count + i : i;
            for (int r = 0; r < nranks; r++)
                want += value(r, at);
        } else if (coll == ALLGATHER) {
            want = value(i / count, i % count);
        } else {
            want = value(0, i);
        }
        wrong += recv[i] != want;
    }
    return wrong != 0;
}

/* ITERS, MAXBYTES or LAT_BYTES in parse.h's grammar (size: with K, M, G
 * suffixes); 0, or -1 after saying what is wrong. */
static int lat_parse(const char *prog, const char *what, const char *s,
                     int size, uint64_t lo, uint64_t hi, uint64_t *v_p)
{
    tacl__parse_err_t err = size ? tacl__parse_size(s, lo, hi, v_p)
                                 : tacl__parse_uint(s, lo, hi, v_p);

    if (err == TACL_PARSE_OK)
        return 0;
    fprintf(stderr, "%s: bad value '%s' for %s: %s (at least %llu)\n"
            "usage: %s [ITERS [MAXBYTES]]\n", prog, s, what,
            tacl__parse_strerror(err), (unsigned long long)lo, prog);
    return -1;
}

int main(int argc, char **argv)
{
    uint64_t n_iters = 2000, max_bytes = 8192, only_bytes = 0;
    const char *lat_bytes = getenv("LAT_BYTES");
    float *send, *recv;
    int failed = 0;

    if ((argc > 1 && lat_parse(argv[0], "ITERS", argv[1], 0, BLOCKS,
                               INT_MAX, &n_iters) != 0) ||
        (argc > 2 && lat_parse(argv[0], "MAXBYTES", argv[2], 1, 8,
                               SIZE_MAX, &max_bytes) != 0) ||
        (lat_bytes != NULL && lat_bytes[0] != '\0' &&
         lat_parse(argv[0], "LAT_BYTES", lat_bytes, 1, 0, SIZE_MAX,
                   &only_bytes) != 0))
        return 2;
    int iters = (int)n_iters;

#ifdef LAT_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
#else
    if (tacl_comm_init_env(&comm) != TACL_OK ||
        tacl_comm_rank(comm, &rank) != TACL_OK ||
        tacl_comm_size(comm, &nranks) != TACL_OK) {
        fprintf(stderr, "lat_tacl: init failed: %s\n", tacl_last_error());
        return 1;
    }
#endif
    const char *only_coll = getenv("LAT_COLL");

#ifndef LAT_MPI
    if (getenv("LAT_MODE") != NULL) {
        const char *m = getenv("LAT_MODE");
        mode = strcmp(m, "nb") == 0           ? MODE_NB
               : strcmp(m, "persistent") == 0 ? MODE_PERSISTENT
                                              : MODE_BLOCKING;
        if (mode == MODE_BLOCKING && strcmp(m, "blocking") != 0) {
            fprintf(stderr, "LAT_MODE=%s: blocking, nb or persistent\n", m);
            return 2;
        }
    }
#endif
    if (only_bytes > max_bytes)
        max_bytes = only_bytes;
    send = malloc(max_bytes * (size_t)nranks);
    recv = malloc(max_bytes * (size_t)nranks);
    if (send == NULL || recv == NULL)
        return 1;
    memset(send, 0, max_bytes * (size_t)nranks);
    memset(recv, 0, max_bytes * (size_t)nranks);
    for (int coll = 0; coll < NCOLLS; coll++) {
        for (size_t bytes = 8; bytes <= max_bytes; bytes *= 4) {
            /* Elements per block: the size is the larger buffer. */
            int count = (int)(bytes / sizeof(float));
            double t0, t, best;

            if (coll == ALLGATHER || coll == REDUCESCATTER)
                count /= nranks;
            if (!selected(only_coll, coll))
                break;
            if (only_bytes != 0) {
                if (bytes > 8)
                    break;
                bytes = only_bytes;
                count = (int)(bytes / sizeof(float));
                if (coll == ALLGATHER || coll == REDUCESCATTER)
                    count /= nranks;
            }
            if (count < 1 || (coll == BARRIER && bytes > 8))
                continue;
#ifndef LAT_MPI
            if (mode == MODE_PERSISTENT &&
                make_persistent(coll, send, recv, count) != TACL_OK) {
                fprintf(stderr, "rank %d: %s init: %s\n", rank, names[coll],
                        tacl_last_error());
                failed = 1;
                preq = NULL;
                continue;
            }
#endif
            for (int i = 0; i < iters / 10 + 10; i++)
                failed |= run(coll, send, recv, count) != LIB_OK;
            run(BARRIER, send, recv, 0);
            t0 = now();
            best = 1e30;
            for (int b = 0; b < BLOCKS; b++) {
                double tb = now();
                for (int i = 0; i < iters / BLOCKS; i++)
                    failed |= run(coll, send, recv, count) != LIB_OK;
                tb = (now() - tb) / (iters / BLOCKS);
                best = tb < best ? tb : best;
            }
            t = (now() - t0) / (iters / BLOCKS * BLOCKS) * 1e6;
            t = sum_over_ranks(t) / nranks;
            best = sum_over_ranks(best * 1e6) / nranks;
            failed |= check(coll, send, recv, count);
#ifndef LAT_MPI
            if (preq != NULL) {
                failed |= tacl_request_free(preq) != TACL_OK;
                preq = NULL;
            }
#endif
            if (rank == 0)
                printf("%s %zu %.3f %.3f\n", names[coll],
                       coll == BARRIER ? (size_t)0 : bytes, t, best);
        }
    }
    if (failed)
        fprintf(stderr, "rank %d: a call failed or a result was wrong\n",
                rank);
#ifdef LAT_MPI
    MPI_Finalize();
#else
    tacl_comm_destroy(comm);
#endif
    free(send);
    free(recv);
    return failed;
}
