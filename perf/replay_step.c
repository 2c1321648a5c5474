/*
 * The replay harness' steps: the compute side sleeps (or spins) through
 * forward and backward and hands each group over when its last tensor is
 * ready; the communication thread runs the groups in order.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "replay.h"

/* Sleep or spin until the monotonic clock reads deadline (seconds). */
static void wait_until(double deadline, int spin)
{
    struct timespec ts;

    if (spin) {
        while (tacl__perf_now() < deadline)
            ;
        return;
    }
    ts.tv_sec = (time_t)deadline;
    ts.tv_nsec = (long)((deadline - (double)ts.tv_sec) * 1e9);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ;
}

static tacl_status_t run_group(replay_comm_t *ct, int g)
{
    const replay_policy_t *pol = ct->pol;
    int last = replay_group_last(pol, ct->ntensors, g);
    size_t off = ct->off[pol->first[g]], n = ct->off[last + 1] - off;

    if (pol->option[g] == TACL_PLANNER_NONE)
        return tacl_allreduce_nb(ct->grad + off, ct->grad + off, n,
                                 TACL_FLOAT32, TACL_SUM, ct->comm, NULL,
                                 &ct->reqs[g]);
    return tacl_comp_allreduce_hops(
        ct->grad + off, ct->grad + off, n, ct->codec, &ct->params,
        ct->err + off, ct->routes[pol->option[g]].scheme,
        ct->routes[pol->option[g]].hops, ct->comm);
}

void *replay_comm_main(void *arg)
{
    replay_comm_t *ct = arg;

    pthread_mutex_lock(&ct->mu);
    for (;;) {
        int g;
        tacl_status_t st;

        while (!ct->quit && (ct->done || ct->next >= ct->ready))
            pthread_cond_wait(&ct->cv, &ct->mu);
        if (ct->quit)
            break;
        g = ct->next;
        pthread_mutex_unlock(&ct->mu);
        st = run_group(ct, g);
        if (st != TACL_OK && ct->st == TACL_OK) {
            ct->st = st;
            ct->failed_group = g;
        }
        if (g + 1 == ct->pol->ngroups || st != TACL_OK) {
            for (int k = 0; k <= g; k++) {
                if (ct->reqs[k] == NULL)
                    continue;
                st = tacl_request_wait(ct->reqs[k]);
                if (st != TACL_OK && ct->st == TACL_OK) {
                    ct->st = st;
                    ct->failed_group = k;
                }
                tacl_request_free(ct->reqs[k]);
                ct->reqs[k] = NULL;
            }
        }
        pthread_mutex_lock(&ct->mu);
        ct->next = g + 1;
        if (g + 1 == ct->pol->ngroups || ct->st != TACL_OK) {
            ct->done = 1;
            pthread_cond_broadcast(&ct->cv);
        }
    }
    pthread_mutex_unlock(&ct->mu);
    return NULL;
}

static void mark_ready(replay_comm_t *ct, int ngroups)
{
    pthread_mutex_lock(&ct->mu);
    ct->ready = ngroups;
    pthread_cond_broadcast(&ct->cv);
    pthread_mutex_unlock(&ct->mu);
}

/*
 * One step of a policy: forward, then backward tensor by tensor, each
 * group handed over when its last tensor is ready; the seconds until
 * every group is done, or -1 when a collective failed.
 */
static double run_step(replay_comm_t *ct, const replay_profile_t *pf,
                       const replay_policy_t *pol, int step, int spin)
{
    double t0, at;
    int g = 0;

    pthread_mutex_lock(&ct->mu);
    ct->pol = pol;
    ct->ready = ct->next = ct->done = 0;
    ct->params.seed = (uint64_t)step + 1;
    pthread_mutex_unlock(&ct->mu);
    t0 = tacl__perf_now();
    at = t0 + pf->forward;
    wait_until(at, spin);
    for (int i = 0; i < pf->n; i++) {
        at += pf->back[i];
        wait_until(at, spin);
        if (i == replay_group_last(pol, pf->n, g))
            mark_ready(ct, ++g);
    }
    pthread_mutex_lock(&ct->mu);
    while (!ct->done)
        pthread_cond_wait(&ct->cv, &ct->mu);
    pthread_mutex_unlock(&ct->mu);
    return ct->st == TACL_OK ? tacl__perf_now() - t0 : -1;
}

/* Whether every rank holds the same output (a checksum's min and max),
 * and for uncompressed runs whether it is the exact sum; 0 when so. */
static int check_result(replay_comm_t *ct, int nranks, int exact,
                        const char *policy)
{
    size_t total = ct->off[ct->ntensors];
    double sum[2] = {0, 0}, wrong = 0;

    for (size_t j = 0; j < total; j++) {
        sum[0] += (double)ct->grad[j] * (double)((j % 251) + 1);
        if (exact) {
            float want = 0;

            for (int r = 0; r < nranks; r++)
                want += replay_value(r, j);
            wrong += ct->grad[j] != want;
        }
    }
    sum[1] = -sum[0];
    if (tacl_allreduce(sum, sum, 2, TACL_FLOAT64, TACL_MAX, ct->comm, NULL) !=
            TACL_OK ||
        tacl_allreduce(&wrong, &wrong, 1, TACL_FLOAT64, TACL_SUM, ct->comm,
                       NULL) != TACL_OK)
        return -1;
    if (sum[0] != -sum[1] || wrong != 0) {
        fprintf(stderr, "replay: check %s: %s\n", policy,
                wrong != 0 ? "values differ from the exact sum"
                           : "ranks hold different results");
        return -1;
    }
    return 0;
}

/*
 * The residuals of a policy that compresses: only its compressed groups'
 * are zeroed (the steps touch no others), so that those pages are faulted
 * in here rather than in a timed step, and the rest of the allocation,
 * never touched, takes no memory.  0, or -1 after a message.
 */
static int residuals_alloc(replay_comm_t *ct, const replay_policy_t *pol)
{
    ct->err = malloc(ct->off[ct->ntensors] * sizeof(float));
    if (ct->err == NULL) {
        fprintf(stderr, "replay: policy %s: no memory for %zu residuals\n",
                pol->name, ct->off[ct->ntensors]);
        return -1;
    }
    for (int g = 0; g < pol->ngroups; g++) {
        size_t a = ct->off[pol->first[g]];
        size_t b = ct->off[replay_group_last(pol, ct->ntensors, g) + 1];

        if (pol->option[g] != TACL_PLANNER_NONE)
            memset(ct->err + a, 0, (b - a) * sizeof(float));
    }
    return 0;
}

/* The steps of one policy, their seconds to t; 0, or -1 after a
 * message. */
static int run_steps(replay_comm_t *ct, const replay_profile_t *pf,
                     const replay_steps_t *o, int rank, replay_result_t *res,
                     double *t)
{
    for (int s = 0; s < o->warmup + o->steps; s++) {
        /* The last step left its sums here: every step starts from the
         * same gradients, refilled before the barrier, out of its time. */
        replay_fill(ct->grad, ct->off[pf->n], rank);
        if (tacl_barrier(ct->comm, NULL) != TACL_OK ||
            (t[s] = run_step(ct, pf, &res->pol, s, o->spin)) < 0) {
            fprintf(stderr, "replay: policy %s, group %d: %s\n",
                    res->pol.name, ct->failed_group,
                    tacl_comm_last_error(ct->comm));
            return -1;
        }
    }
    return 0;
}

/* Run one policy: replay.h says what. */
int replay_run_policy(replay_comm_t *ct, const replay_profile_t *pf,
                      const replay_steps_t *o, int rank, int nranks,
                      replay_result_t *res)
{
    int total = o->warmup + o->steps, rc = -1;
    double *t = malloc((size_t)total * sizeof(double));
    tacl_comm_t job = ct->comm;

    if (t == NULL)
        return -1;
    /* The library keeps scratch for the largest calls a communicator has
     * run (the executor's pool, and the node and rail communicators of
     * the compressed hops): on a communicator of its own, a policy's
     * scratch goes when it ends instead of adding to the next one's.  It
     * shares the job's connections; its first step pays what a first
     * call pays, as the first policy's always did (--warmup). */
    if (tacl_comm_split(job, 0, rank, &ct->comm) != TACL_OK) {
        fprintf(stderr, "replay: policy %s: %s\n", res->pol.name,
                tacl_comm_last_error(job));
        ct->comm = job;
        free(t);
        return -1;
    }
    if (res->compressed > 0 && residuals_alloc(ct, &res->pol) != 0)
        goto out_destroy;
    if (run_steps(ct, pf, o, rank, res, t) != 0 ||
        tacl_allreduce(t, t, (size_t)total, TACL_FLOAT64, TACL_MAX, ct->comm,
                       NULL) != TACL_OK)
        goto out_destroy;
    res->measured = tacl__perf_median(t + o->warmup, o->steps);
    if (o->inject_error && rank == 0)
        ct->grad[0] += 1.0f;
    if (o->check &&
        check_result(ct, nranks, res->compressed == 0, res->pol.name) != 0)
        goto out_destroy;
    rc = 0;
out_destroy:
    free(ct->err);
    ct->err = NULL;
    if (tacl_comm_destroy(ct->comm) != TACL_OK && rc == 0) {
        fprintf(stderr, "replay: policy %s: %s\n", res->pol.name,
                tacl_last_error());
        rc = -1;
    }
    ct->comm = job;
    free(t);
    return rc;
}
