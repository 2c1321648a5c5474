/*
 * core_rtt: how far apart two cores are, as the round trip of one cache
 * line between them.
 *
 * Two threads, pinned to the first two CPUs this process may run on, pass
 * a flag back and forth through one cache line; the median of several
 * rounds of the time per round trip is printed in nanoseconds.  Cores
 * that share a last-level cache trade a line in tens of nanoseconds; cores
 * on different dies or sockets take hundreds.  On a virtual machine the
 * host may move its virtual CPUs between such places while it runs, and
 * every shared-memory collective that hands data from core to core
 * through the cache (a chunk one rank writes and another reduces, or one
 * both read) slows down with them: perf/compare.sh prints this figure
 * beside each result so that the two states are told apart.
 *
 * Usage: core_rtt [-n ROUNDS]     prints "rtt_ns N", or "rtt_ns -" with a
 *                                  reason when fewer than two CPUs
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TRIPS 20000
#define MAX_ROUNDS 101

typedef struct {
    _Alignas(64) atomic_int flag;  /* alone in its cache line */
    _Alignas(64) int cpu;
    int trips;
} pingpong_t;

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int pin(int cpu)
{
    cpu_set_t set;

    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* The far side: says it is ready on its CPU (2), then answers each 1
 * with a 0 (unpinned if pinning fails, so that the near side never waits
 * forever). */
static void *answer(void *arg)
{
    pingpong_t *pp = arg;

    if (pin(pp->cpu) != 0)
        fprintf(stderr, "core_rtt: cannot pin to CPU %d\n", pp->cpu);
    atomic_store(&pp->flag, 2); /* ready, on its CPU */
    for (int i = 0; i < pp->trips; i++) {
        while (atomic_load_explicit(&pp->flag, memory_order_acquire) != 1)
            ;
        atomic_store_explicit(&pp->flag, 0, memory_order_seq_cst);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    static pingpong_t pp;
    double rtt[MAX_ROUNDS];
    int cpus[2], ncpus = 0, rounds = 5, opt;
    cpu_set_t set;

    while ((opt = getopt(argc, argv, "n:")) != -1) {
        if (opt != 'n' || (rounds = atoi(optarg)) < 1 ||
            rounds > MAX_ROUNDS) {
            fprintf(stderr, "usage: core_rtt [-n ROUNDS (1-%d)]\n",
                    MAX_ROUNDS);
            return 2;
        }
    }
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        perror("core_rtt: sched_getaffinity");
        return 1;
    }
    for (int c = 0; c < CPU_SETSIZE && ncpus < 2; c++)
        if (CPU_ISSET(c, &set))
            cpus[ncpus++] = c;
    if (ncpus < 2) {
        printf("rtt_ns - (this process may run on one CPU only)\n");
        return 0;
    }
    if (pin(cpus[0]) != 0) {
        fprintf(stderr, "core_rtt: cannot pin to CPU %d\n", cpus[0]);
        return 1;
    }
    for (int r = 0; r < rounds; r++) {
        pthread_t far;
        double t0;

        atomic_store(&pp.flag, 0);
        pp.cpu = cpus[1];
        pp.trips = TRIPS;
        if (pthread_create(&far, NULL, answer, &pp) != 0) {
            fprintf(stderr, "core_rtt: cannot start a thread\n");
            return 1;
        }
        /* Yield until it runs on its CPU: it may start on this one. */
        while (atomic_load(&pp.flag) != 2)
            sched_yield();
        t0 = now_ns();
        for (int i = 0; i < TRIPS; i++) {
            atomic_store_explicit(&pp.flag, 1, memory_order_seq_cst);
            while (atomic_load_explicit(&pp.flag, memory_order_acquire) != 0)
                ;
        }
        rtt[r] = (now_ns() - t0) / TRIPS;
        pthread_join(far, NULL);
    }
    qsort(rtt, (size_t)rounds, sizeof(rtt[0]), cmp_double);
    printf("rtt_ns %.0f\n", rtt[rounds / 2]);
    return 0;
}
