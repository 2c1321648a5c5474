/*
 * memcpy_bw: the memory bandwidth a copy-based transport can hope for.
 *
 * For 1 MB, 16 MB and 128 MB it times memcpy() on one core, then on two
 * threads at once, each copying between its own pair of buffers.  Bandwidth
 * is bytes copied (the size of the destination) per second; the two-thread
 * figure is the sum of both threads.  A shared-memory collective that
 * copies each byte once per hop cannot beat these figures, so they bound
 * the busbw the perf binaries report.
 *
 * Usage: memcpy_bw [-t SECONDS_PER_SIZE] [-p THREADS]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MB (1024.0 * 1024.0)

typedef struct {
    size_t size;
    double min_s;           /* copy at least this long */
    pthread_barrier_t *start;
    double gbps;            /* result: GB/s (1e9 bytes per second) */
    int rc;
} bw_job_t;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Copies size bytes back and forth until min_s has passed. */
static void *copy_loop(void *arg)
{
    bw_job_t *job = arg;
    char *a, *b;
    double t0, t;
    uint64_t copies = 0;

    a = malloc(job->size);
    b = malloc(job->size);
    if (a == NULL || b == NULL) {
        job->rc = ENOMEM;
        free(a);
        free(b);
        if (job->start != NULL) {
            pthread_barrier_wait(job->start);
        }
        return NULL;
    }
    /* Touch both buffers so page faults stay out of the timing. */
    memset(a, 1, job->size);
    memset(b, 2, job->size);
    memcpy(b, a, job->size);
    if (job->start != NULL) {
        pthread_barrier_wait(job->start);
    }
    t0 = now_s();
    do {
        memcpy((copies & 1) ? a : b, (copies & 1) ? b : a, job->size);
        copies++;
        t = now_s();
    } while (t - t0 < job->min_s || copies < 4);
    job->gbps = (double)copies * (double)job->size / (t - t0) / 1e9;
    /* Keep the copies observable so they cannot be optimised away. */
    if (a[job->size / 2] != 1 && a[job->size / 2] != 2) {
        job->rc = EIO;
    }
    free(a);
    free(b);
    return NULL;
}

/* Runs nthreads copy loops at once; returns their summed GB/s or -1. */
static double run_threads(int nthreads, size_t size, double min_s)
{
    pthread_t tid[64];
    bw_job_t job[64];
    pthread_barrier_t start;
    double sum = 0;
    int i;

    if (pthread_barrier_init(&start, NULL, (unsigned)nthreads) != 0) {
        return -1;
    }
    for (i = 0; i < nthreads; i++) {
        job[i].size = size;
        job[i].min_s = min_s;
        job[i].start = &start;
        job[i].gbps = 0;
        job[i].rc = 0;
    }
    for (i = 0; i < nthreads; i++) {
        if (pthread_create(&tid[i], NULL, copy_loop, &job[i]) != 0) {
            /* The started threads wait on a barrier that cannot open. */
            fprintf(stderr, "memcpy_bw: pthread_create failed\n");
            exit(1);
        }
    }
    for (i = 0; i < nthreads; i++) {
        pthread_join(tid[i], NULL);
    }
    pthread_barrier_destroy(&start);
    for (i = 0; i < nthreads; i++) {
        if (job[i].rc != 0) {
            return -1;
        }
        sum += job[i].gbps;
    }
    return sum;
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = {1u << 20, 16u << 20, 128u << 20};
    double min_s = 0.25, one, many;
    int opt, nthreads = 2;
    size_t i;

    while ((opt = getopt(argc, argv, "t:p:h")) != -1) {
        switch (opt) {
        case 't':
            min_s = atof(optarg);
            break;
        case 'p':
            nthreads = atoi(optarg);
            break;
        default:
            fprintf(stderr, "usage: memcpy_bw [-t SECONDS_PER_SIZE] "
                    "[-p THREADS]\n");
            return opt == 'h' ? 0 : 2;
        }
    }
    if (!(min_s > 0 && min_s <= 60) || nthreads < 2 || nthreads > 64) {
        fprintf(stderr, "memcpy_bw: -t takes 0 < s <= 60, -p 2 to 64\n");
        return 2;
    }
    printf("# memcpy bandwidth, GB/s = 1e9 bytes copied per second\n");
    printf("# %10s  %12s  %12s  %12s\n", "size", "1 thread",
           "all threads", "per thread");
    printf("# %10s  %12s  %12s  %12s\n", "(B)", "(GB/s)", "(GB/s)",
           "(GB/s)");
    printf("# threads: %d, each copying its own buffers\n", nthreads);
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        one = run_threads(1, sizes[i], min_s);
        many = run_threads(nthreads, sizes[i], min_s);
        if (one < 0 || many < 0) {
            fprintf(stderr, "memcpy_bw: cannot allocate 2 x %.0f MB per "
                    "thread\n", (double)sizes[i] / MB);
            return 1;
        }
        printf("  %10zu  %12.2f  %12.2f  %12.2f\n", sizes[i], one, many,
               many / nthreads);
    }
    return 0;
}
