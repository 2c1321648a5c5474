/*
 * Tagged point-to-point across nodes, against MPI's rules for receives
 * from any source (tests/coll/test_p2p_tag.c checks them on one node):
 * messages of one sender and tag are never overtaken, receives take
 * messages in the order they were posted, the sender's rank comes back,
 * a group may receive from itself and from a rank of another node, and
 * a pending receive from any source ends with an error, not a hang, when
 * the communicator is aborted or a peer dies (mn_run_p2p_dead).  Messages of 1 and 20000 elements: ofi's
 * eager and rendezvous protocols both.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mn.h"

#define MN_P2P_MSGS 3

/* A message of count elements, each the value v. */
static int32_t *message(size_t count, int32_t v)
{
    int32_t *buf = malloc(count * sizeof(*buf));

    for (size_t i = 0; buf != NULL && i < count; i++)
        buf[i] = v;
    return buf;
}

/* Whether every element of buf is its first; the first in *v_p. */
static int uniform(const int32_t *buf, size_t count, int32_t *v_p)
{
    for (size_t i = 1; i < count; i++)
        if (buf[i] != buf[0])
            return 0;
    *v_p = buf[0];
    return 1;
}

/*
 * Every rank but 0 sends MN_P2P_MSGS messages with tag 8 (its rank times
 * 100 plus the message's number); rank 0 receives them all from any
 * source, posted at once: each sender's come in the order sent.
 */
static void run_fifo(mn_t *mn, size_t count)
{
    int p = mn->nranks, n = (p - 1) * MN_P2P_MSGS;
    const char *what = "any-source: one sender's messages in order";

    if (mn->rank != 0) {
        for (int m = 0; m < MN_P2P_MSGS; m++) {
            int32_t *buf = message(count, mn->rank * 100 + m);

            mn_ok(mn,
                  tacl_send_tag(buf, count, TACL_INT32, 0, 8, mn->comm, NULL),
                  what);
            free(buf);
        }
    } else {
        int32_t **got = calloc((size_t)n, sizeof(*got));
        int *src = calloc((size_t)n, sizeof(int));
        int *next = calloc((size_t)p, sizeof(int));
        tacl_request_t *req = calloc((size_t)n, sizeof(*req));

        for (int k = 0; k < n; k++) {
            got[k] = message(count, -1);
            mn_ok(mn,
                  tacl_recv_tag_nb(got[k], count, TACL_INT32, TACL_ANY_SOURCE,
                                   8, &src[k], mn->comm, NULL, &req[k]),
                  what);
        }
        for (int k = 0; k < n; k++) {
            int32_t v = -1;

            mn_ok(mn, tacl_request_wait(req[k]), what);
            tacl_request_free(req[k]);
            if (src[k] < 1 || src[k] >= p) {
                mn_fail(mn, "%s: receive %d reports source %d", what, k,
                        src[k]);
            } else if (!uniform(got[k], count, &v) ||
                       v != src[k] * 100 + next[src[k]]) {
                mn_fail(mn, "%s: receive %d from rank %d got %d, want %d",
                        what, k, src[k], v, src[k] * 100 + next[src[k]]);
            }
            if (src[k] >= 1 && src[k] < p)
                next[src[k]]++;
            free(got[k]);
        }
        for (int r = 1; r < p; r++)
            if (next[r] != MN_P2P_MSGS)
                mn_fail(mn, "%s: %d messages from rank %d, want %d", what,
                        next[r], r, MN_P2P_MSGS);
        free(got);
        free(src);
        free(next);
        free(req);
    }
    mn_ok(mn, tacl_barrier(mn->comm, NULL), "tacl_barrier");
    mn->cases++;
}

/*
 * Rank 0 posts, in order, receives from any source, from the last rank
 * (another node), any source and the last rank again, all tag 7, before
 * the last rank sends 1..4 with tag 7: they get 1..4 in that order.
 */
static void run_posting_order(mn_t *mn, size_t count)
{
    const int peers[4] = {TACL_ANY_SOURCE, mn->nranks - 1, TACL_ANY_SOURCE,
                          mn->nranks - 1};
    const char *what = "any-source: receives match in posting order";
    int last = mn->nranks - 1;

    if (mn->rank == 0) {
        int32_t *got[4];
        int src[4];
        tacl_request_t req[4];

        for (int i = 0; i < 4; i++) {
            got[i] = message(count, -1);
            src[i] = -7;
            mn_ok(mn,
                  tacl_recv_tag_nb(got[i], count, TACL_INT32, peers[i], 7,
                                   &src[i], mn->comm, NULL, &req[i]),
                  what);
        }
        mn_ok(mn, tacl_barrier(mn->comm, NULL), "tacl_barrier");
        for (int i = 0; i < 4; i++) {
            int32_t v = -1;

            mn_ok(mn, tacl_request_wait(req[i]), what);
            tacl_request_free(req[i]);
            if (!uniform(got[i], count, &v) || v != i + 1 || src[i] != last)
                mn_fail(mn,
                        "%s: receive %d got %d from rank %d, want %d "
                        "from rank %d",
                        what, i, v, src[i], i + 1, last);
            free(got[i]);
        }
    } else {
        mn_ok(mn, tacl_barrier(mn->comm, NULL), "tacl_barrier");
        for (int i = 0; mn->rank == last && i < 4; i++) {
            int32_t *buf = message(count, i + 1);

            mn_ok(mn,
                  tacl_send_tag(buf, count, TACL_INT32, 0, 7, mn->comm, NULL),
                  what);
            free(buf);
        }
    }
    mn_ok(mn, tacl_barrier(mn->comm, NULL), "tacl_barrier");
    mn->cases++;
}

/*
 * In a group every rank sends its rank to itself and to the next rank
 * (tag 5) and receives two messages from any source: one from itself,
 * one from the previous rank, each payload its reported source.
 */
static void run_group_self(mn_t *mn)
{
    int n = mn->nranks, r = mn->rank, prev = (r + n - 1) % n;
    int32_t mine = r, got[2] = {-1, -1};
    int src[2] = {-7, -7};
    const char *what = "any-source in a group with self";

    mn_ok(mn, tacl_group_start(), what);
    mn_ok(mn, tacl_send_tag(&mine, 1, TACL_INT32, r, 5, mn->comm, NULL),
          what);
    mn_ok(mn,
          tacl_send_tag(&mine, 1, TACL_INT32, (r + 1) % n, 5, mn->comm, NULL),
          what);
    for (int i = 0; i < 2; i++)
        mn_ok(mn,
              tacl_recv_tag(&got[i], 1, TACL_INT32, TACL_ANY_SOURCE, 5,
                            &src[i], mn->comm, NULL),
              what);
    mn_ok(mn, tacl_group_end(), what);
    if (got[0] != src[0] || got[1] != src[1] ||
        !((src[0] == r && src[1] == prev) || (src[1] == r && src[0] == prev)))
        mn_fail(mn, "%s: got %d from %d and %d from %d, want %d and %d", what,
                got[0], src[0], got[1], src[1], r, prev);
    mn_ok(mn, tacl_barrier(mn->comm, NULL), "tacl_barrier");
    mn->cases++;
}

static void *abort_later(void *arg)
{
    struct timespec ts = {0, 300 * 1000 * 1000};

    nanosleep(&ts, NULL);
    tacl_comm_abort((tacl_comm_t)arg);
    return NULL;
}

/*
 * Last: rank 0 waits on a receive from any source that nobody sends,
 * and another thread aborts the communicator 300 ms into it; the
 * receive must end with an error and a message within 10 s.  The other
 * ranks stay up meanwhile and leave without destroying theirs.
 */
static void run_abort(mn_t *mn)
{
    const char *what = "any-source: abort ends the receive";
    struct timespec t0, t1;
    pthread_t th;
    tacl_status_t st;
    int32_t x;

    mn_ok(mn, tacl_barrier(mn->comm, NULL), "tacl_barrier");
    mn->cases++;
    if (mn->rank != 0) {
        sleep(2);
        mn->comm = NULL;
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (pthread_create(&th, NULL, abort_later, mn->comm) != 0) {
        mn_fail(mn, "%s: pthread_create failed", what);
        return;
    }
    st = tacl_recv_tag(&x, 1, TACL_INT32, TACL_ANY_SOURCE, 9, NULL, mn->comm,
                       NULL);
    pthread_join(th, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (st == TACL_OK)
        mn_fail(mn, "%s: a receive nobody sent completed", what);
    else if (tacl_comm_last_error(mn->comm)[0] == '\0')
        mn_fail(mn, "%s: failed with %s but no message", what,
                tacl_status_string(st));
    if (t1.tv_sec - t0.tv_sec > 10)
        mn_fail(mn, "%s: it ended %ld s after the abort", what,
                (long)(t1.tv_sec - t0.tv_sec));
    mn->comm = NULL; /* aborted: freed */
}

/* Seconds since t0. */
static double since(const struct timespec *t0)
{
    struct timespec t1;

    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) +
           (double)(t1.tv_nsec - t0->tv_nsec) * 1e-9;
}

void mn_run_p2p_dead(mn_t *mn)
{
    const char *what = "any-source: a dead peer ends the receive";
    struct timespec t0;
    tacl_status_t st;
    int32_t x;

    mn_ok(mn, tacl_barrier(mn->comm, NULL), "tacl_barrier");
    mn->cases++;
    if (mn->rank == mn->nranks - 1) {
        /* Everyone has left the barrier once their word (tag 8) is in:
         * dying before, this rank could take the barrier's last message
         * with it and fail the others' barrier instead of their
         * receive.  Then gone without a word, as a crash would be. */
        for (int r = 0; r < mn->nranks - 1; r++)
            mn_ok(mn, tacl_recv_tag(&x, 1, TACL_INT32, r, 8, NULL, mn->comm,
                                    NULL),
                  "tacl_recv_tag (left the barrier)");
        fflush(stdout);
        _exit(0);
    }
    x = mn->rank;
    mn_ok(mn, tacl_send_tag(&x, 1, TACL_INT32, mn->nranks - 1, 8, mn->comm,
                            NULL),
          "tacl_send_tag (left the barrier)");
    clock_gettime(CLOCK_MONOTONIC, &t0);
    st = tacl_recv_tag(&x, 1, TACL_INT32, TACL_ANY_SOURCE, 9, NULL, mn->comm,
                       NULL);
    if (st == TACL_OK)
        mn_fail(mn, "%s: a receive nobody sent completed", what);
    else if (tacl_comm_last_error(mn->comm)[0] == '\0')
        mn_fail(mn, "%s: failed with %s but no message", what,
                tacl_status_string(st));
    else
        printf("mn_check rank %d: %s: %s after %.1f s: %s\n", mn->rank, what,
               tacl_status_string(st), since(&t0),
               tacl_comm_last_error(mn->comm));
    if (since(&t0) > 30)
        mn_fail(mn, "%s: it ended %.1f s after the barrier", what,
                since(&t0));
    /* The communicator has failed: what is left of it leaves with us. */
    mn->comm = NULL;
}

void mn_run_p2p(mn_t *mn)
{
    static const size_t counts[2] = {1, 20000};

    for (int i = 0; i < 2; i++) {
        run_fifo(mn, counts[i]);
        run_posting_order(mn, counts[i]);
    }
    run_group_self(mn);
    run_abort(mn);
}
