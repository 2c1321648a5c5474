/*
 * Surviving the loss of a rank: one rank is killed (SIGKILL) after a first
 * all-reduce; the others see the communicator fail, shrink it to the
 * survivors with tacl_comm_shrink, and go on with exact results on the new
 * communicator.  Run it with the launcher, which must let the others run
 * on when a rank dies:
 *     tacl-run -n 8 --keep-going --tag ./shrink_example
 * tacl-run then exits with 137 (the victim's SIGKILL); every survivor
 * prints "ok".  SHRINK_VICTIM=R picks the rank to kill (default 3).
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <tacl.h>

#define COUNT 1024

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Every rank contributes its rank in the old communicator plus i. */
static int sum_check(tacl_comm_t comm, int old_rank, int expect_base,
                     int size)
{
    static int buf[COUNT];
    int i, wrong = 0;

    for (i = 0; i < COUNT; i++)
        buf[i] = old_rank + i;
    if (tacl_allreduce(buf, buf, COUNT, TACL_INT32, TACL_SUM, comm,
                       NULL) != TACL_OK)
        return -1;
    for (i = 0; i < COUNT; i++)
        wrong += buf[i] != expect_base + size * i;
    return wrong;
}

int main(void)
{
    const char *v = getenv("SHRINK_VICTIM");
    tacl_comm_t comm, newcomm;
    tacl_status_t st;
    int rank, nranks, new_rank, new_size, victim, wrong, i;
    int olds[64];
    double t0;

    if (tacl_comm_init_env(&comm) != TACL_OK) {
        fprintf(stderr, "init failed: %s\n", tacl_last_error());
        return 1;
    }
    tacl_comm_rank(comm, &rank);
    tacl_comm_size(comm, &nranks);
    victim = v != NULL ? atoi(v) : (nranks > 3 ? 3 : nranks - 1);
    if (nranks < 2 || nranks > 64 || victim < 0 || victim >= nranks) {
        fprintf(stderr, "run 2 to 64 ranks, SHRINK_VICTIM below them\n");
        return 1;
    }
    /* 1. Everyone together. */
    wrong = sum_check(comm, rank, nranks * (nranks - 1) / 2, nranks);
    printf("rank %d of %d: first allreduce %s\n", rank, nranks,
           wrong == 0 ? "exact" : wrong < 0 ? "FAILED" : "WRONG");
    if (wrong != 0)
        return 1;
    /* 2. The victim dies without a word, after giving the others time
     * to leave the first all-reduce (a death inside it would fail it
     * there, before this example gets to the shrink). */
    if (rank == victim) {
        const struct timespec pause = {0, 300 * 1000000L};

        fflush(stdout);
        nanosleep(&pause, NULL);
        raise(SIGKILL);
    }
    /* 3. The next operation fails on every survivor... */
    st = tacl_allreduce(olds, olds, 1, TACL_INT32, TACL_SUM, comm, NULL);
    printf("rank %d: allreduce after the death: %s\n", rank,
           tacl_status_string(st));
    /* 4. ...and the survivors build a communicator without the dead. */
    t0 = now_s();
    st = tacl_comm_shrink(comm, &newcomm);
    if (st != TACL_OK) {
        fprintf(stderr, "rank %d: shrink failed: %s\n", rank,
                tacl_comm_last_error(comm));
        return 1;
    }
    tacl_comm_rank(newcomm, &new_rank);
    tacl_comm_size(newcomm, &new_size);
    printf("rank %d is rank %d of %d after a shrink of %.3f s\n", rank,
           new_rank, new_size, now_s() - t0);
    tacl_comm_destroy(comm); /* may report the old failure */
    /* 5. Exact results on the survivors: the sum of their old ranks, and
     * each one's old rank gathered in order. */
    wrong = sum_check(newcomm, rank, nranks * (nranks - 1) / 2 - victim,
                      new_size);
    if (tacl_allgather(&rank, olds, 1, TACL_INT32, newcomm, NULL) !=
        TACL_OK)
        wrong = -1;
    for (i = 0; wrong == 0 && i < new_size; i++)
        wrong += olds[i] != i + (i >= victim);
    printf("rank %d: %s\n", new_rank,
           wrong == 0 ? "ok, exact results without the dead rank" :
           wrong < 0 ? "FAILED" : "WRONG");
    tacl_comm_destroy(newcomm);
    return wrong != 0;
}
