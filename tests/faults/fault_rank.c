/*
 * One rank of a fault trial (fault_trials.sh runs it under tacl-run or
 * tacl-cluster).  Every rank joins with tacl_comm_init_env, checks a few
 * all-reduces, then loops on 1 MB all-reduces, each checked exactly, until
 * one fails or FAULT_RUN_S seconds pass (every 8 operations they agree
 * on whether to stop).  One rank, FAULT_VICTIM (default
 * the last), injects the fault of the mode FAULT_AFTER_MS after the loop
 * starts:
 *   kill     SIGKILL itself with an all-reduce pending
 *   stop     SIGSTOP itself between two all-reduces (a survivor SIGKILLs
 *            it FAULT_REAP_S after seeing its own error, to end the job)
 *   thread   a second thread calls tacl_comm_abort while the main thread
 *            is inside a blocking all-reduce
 *   pending  tacl_comm_abort with an all-reduce _nb pending, then wait
 *            for and free that request
 *   none     no fault from inside (the trial script cuts or flaps a link)
 * It prints "FAULT rank=V t=T" when it injects the fault and every rank
 * that sees an error prints "RESULT rank=R status=S t=T ops=N msg=M"
 * (T in seconds of CLOCK_REALTIME, comparable to the script's clock); a
 * rank whose loop ends without an error prints status=ok.  The exit code
 * is 0 unless a result was wrong or a call broke its contract (3).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tacl.h"

#define COUNT (256 * 1024)

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double env_num(const char *name, double dflt)
{
    const char *s = getenv(name);

    return s != NULL && *s != '\0' ? atof(s) : dflt;
}

static void say_fault(int rank)
{
    printf("FAULT rank=%d t=%.6f\n", rank, now_s());
    fflush(stdout);
}

static void say_result(int rank, tacl_status_t st, long ops,
                       const char *msg)
{
    char clean[600];
    size_t i;

    /* One line per result. */
    for (i = 0; msg[i] != '\0' && i + 1 < sizeof(clean); i++)
        clean[i] = msg[i] == '\n' ? ' ' : msg[i];
    clean[i] = '\0';
    printf("RESULT rank=%d status=%s t=%.6f ops=%ld msg=%s\n", rank,
           st == TACL_OK ? "ok" : tacl_status_string(st), now_s(), ops,
           clean);
    fflush(stdout);
}

typedef struct {
    tacl_comm_t comm;
    int rank;
    double delay_s;
} watchdog_t;

static void *watchdog(void *arg)
{
    watchdog_t *w = arg;
    struct timespec ts = {(time_t)w->delay_s,
                          (long)((w->delay_s - (double)(time_t)w->delay_s) *
                                 1e9)};

    nanosleep(&ts, NULL);
    say_fault(w->rank);
    if (tacl_comm_abort(w->comm) != TACL_OK) {
        fprintf(stderr, "rank %d: abort failed: %s\n", w->rank,
                tacl_last_error());
        exit(3);
    }
    return NULL;
}

static int check_sum(const float *r, int n)
{
    float want = (float)n * (float)(n + 1) / 2.0f;

    for (size_t i = 0; i < COUNT; i += 997)
        if (r[i] != want)
            return 0;
    return r[COUNT - 1] == want;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "none";
    double run_s = env_num("FAULT_RUN_S", 20), after_s;
    double reap_s = env_num("FAULT_REAP_S", 1.5);
    float *s = malloc(COUNT * sizeof(float)), *r = malloc(COUNT * 4);
    int64_t *pids;
    tacl_comm_t comm;
    tacl_status_t st = TACL_OK;
    int rank, n, victim, is_victim;
    long ops = 0;
    double t_end, t_fault;
    pthread_t th;
    watchdog_t w;

    if (s == NULL || r == NULL)
        return 3;
    after_s = env_num("FAULT_AFTER_MS", 300) / 1000.0;
    st = tacl_comm_init_env(&comm);
    if (st != TACL_OK) {
        fprintf(stderr, "init failed: %s\n", tacl_last_error());
        return 3;
    }
    tacl_comm_rank(comm, &rank);
    tacl_comm_size(comm, &n);
    victim = (int)env_num("FAULT_VICTIM", n - 1);
    is_victim = rank == victim && strcmp(mode, "none") != 0;
    pids = calloc((size_t)n, sizeof(*pids));
    pids[rank] = getpid();
    if (tacl_allgather(pids + rank, pids, 1, TACL_INT64, comm, NULL) !=
        TACL_OK)
        return 3;
    for (size_t i = 0; i < COUNT; i++)
        s[i] = (float)(rank + 1);
    for (int k = 0; k < 3; k++) {
        if (tacl_allreduce(s, r, COUNT, TACL_FLOAT32, TACL_SUM, comm,
                           NULL) != TACL_OK || !check_sum(r, n)) {
            fprintf(stderr, "rank %d: warm-up failed: %s\n", rank,
                    tacl_last_error());
            return 3;
        }
    }
    t_fault = now_s() + after_s;
    t_end = now_s() + run_s;
    if (is_victim && strcmp(mode, "thread") == 0) {
        w = (watchdog_t){comm, rank, after_s};
        pthread_create(&th, NULL, watchdog, &w);
    }
    for (;;) {
        /* Every 8 operations the ranks agree whether to stop, so that
         * none starts an operation the others have left. */
        if (ops % 8 == 0) {
            int32_t stop = now_s() >= t_end, any = 0;

            st = tacl_allreduce(&stop, &any, 1, TACL_INT32, TACL_MAX, comm,
                                NULL);
            if (st != TACL_OK || any)
                break;
        }
        if (is_victim && now_s() >= t_fault) {
            if (strcmp(mode, "kill") == 0) {
                tacl_request_t req;

                tacl_allreduce_nb(s, r, COUNT, TACL_FLOAT32, TACL_SUM, comm,
                                  NULL, &req);
                say_fault(rank);
                raise(SIGKILL);
            } else if (strcmp(mode, "stop") == 0) {
                say_fault(rank);
                raise(SIGSTOP);
            } else if (strcmp(mode, "pending") == 0) {
                tacl_request_t req = NULL;

                st = tacl_allreduce_nb(s, r, COUNT, TACL_FLOAT32, TACL_SUM,
                                       comm, NULL, &req);
                say_fault(rank);
                if (st != TACL_OK || tacl_comm_abort(comm) != TACL_OK)
                    return 3;
                st = tacl_request_wait(req);
                if (tacl_request_free(req) != TACL_OK)
                    return 3;
                say_result(rank, st, ops, tacl_last_error());
                return 0;
            }
        }
        st = tacl_allreduce(s, r, COUNT, TACL_FLOAT32, TACL_SUM, comm, NULL);
        if (st != TACL_OK)
            break;
        if (!check_sum(r, n)) {
            fprintf(stderr, "rank %d: wrong all-reduce result\n", rank);
            return 3;
        }
        ops++;
    }
    say_result(rank, st, ops,
               st == TACL_OK ? "" : tacl_comm_last_error(comm));
    if (is_victim && strcmp(mode, "thread") == 0) {
        pthread_join(th, NULL);
        return 0; /* the watchdog's abort made the handle invalid */
    }
    if (st != TACL_OK && strcmp(mode, "stop") == 0 && rank != victim) {
        /* End the job once the other survivors have timed out too. */
        struct timespec ts = {(time_t)reap_s,
                              (long)((reap_s - (double)(time_t)reap_s) *
                                     1e9)};

        nanosleep(&ts, NULL);
        kill((pid_t)pids[victim], SIGKILL);
    }
    if (st != TACL_OK)
        tacl_comm_abort(comm);
    else
        tacl_comm_destroy(comm);
    free(pids);
    free(s);
    free(r);
    return 0;
}
