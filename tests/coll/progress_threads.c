/*
 * The progress thread against user threads, outside Criterion so that
 * the ThreadSanitizer stage of .ci/run can run it (under tacl-run, two
 * ranks or more).
 *
 * Phase 1, every rank: a communicator with progress_thread = 1 runs
 * rounds of _nb all-reduces with callbacks while the progress thread, a
 * second user thread calling tacl_request_test and tacl_comm_get_counters
 * on every request, and the main thread waiting on them in reverse order
 * all drive progress at once.  Each callback must run exactly once with
 * TACL_OK and every result must be exact.
 *
 * Phase 2: blocking calls (each collective and a group's blocking end)
 * run in the calling thread and leave the progress thread asleep: over
 * BLOCKING calls its context switches (from /proc) stay within its timed
 * wake-ups, where waking it for each call gave one or more per call.
 *
 * Phase 3: rank 0 posts an all-reduce nobody else joins and a second
 * thread aborts the communicator while the progress thread runs; the
 * callback must report the error once.  The other ranks see the abort
 * as the communicator's async error and destroy it.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tacl.h"

#define ROUNDS 40
#define NOPS 8
#define MAXCOUNT 4096
#define BLOCKING 200

#define FAIL(...)                                                            \
    do {                                                                     \
        fprintf(stderr, "progress_threads rank %d: ", my_rank);              \
        fprintf(stderr, __VA_ARGS__);                                        \
        fprintf(stderr, "\n");                                               \
        exit(1);                                                             \
    } while (0)

static int my_rank = -1;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

typedef struct {
    _Atomic int calls;
    _Atomic int status;
} cb_t;

static void on_done(tacl_request_t req, tacl_status_t status, void *arg)
{
    cb_t *cb = arg;

    (void)req;
    atomic_store(&cb->status, status);
    atomic_fetch_add(&cb->calls, 1);
}

typedef struct {
    tacl_comm_t comm;
    tacl_request_t *reqs;
    int n;
    _Atomic int stop;
} tester_t;

/* Test every request until all are done, reading the counters too. */
static void *tester_main(void *arg)
{
    tester_t *t = arg;
    double t0 = now_s();
    int left = t->n;

    while (left > 0 && !atomic_load(&t->stop) && now_s() - t0 < 60) {
        tacl_counters_t c;

        left = 0;
        for (int i = 0; i < t->n; i++) {
            int done = 0;
            tacl_status_t st = tacl_request_test(t->reqs[i], &done);

            if (st != TACL_OK)
                FAIL("test of request %d: %s", i, tacl_status_string(st));
            left += !done;
        }
        if (tacl_comm_get_counters(t->comm, &c) != TACL_OK)
            FAIL("counters: %s", tacl_comm_last_error(t->comm));
    }
    return NULL;
}

static uint32_t input(int rank, int op, size_t i)
{
    return (uint32_t)((i * 2654435761u) ^ ((uint32_t)op << 20)) +
           (uint32_t)rank * 0x01000193u;
}

static void phase_concurrent(tacl_comm_t comm, int rank, int nranks)
{
    static uint32_t x[NOPS][MAXCOUNT], y[NOPS][MAXCOUNT];
    tacl_request_t reqs[NOPS];
    cb_t cbs[NOPS];

    for (int round = 0; round < ROUNDS; round++) {
        tester_t t = {comm, reqs, NOPS, 0};
        pthread_t tid;

        for (int k = 0; k < NOPS; k++) {
            size_t count = 1 + (size_t)((round * 37 + k * 501) % MAXCOUNT);

            for (size_t i = 0; i < count; i++)
                x[k][i] = input(rank, k, i);
            atomic_init(&cbs[k].calls, 0);
            atomic_init(&cbs[k].status, TACL_IN_PROGRESS);
            if (tacl_allreduce_nb(x[k], y[k], count, TACL_UINT32, TACL_BXOR,
                                  comm, NULL, &reqs[k]) != TACL_OK)
                FAIL("allreduce_nb: %s", tacl_comm_last_error(comm));
            if (tacl_request_set_callback(reqs[k], on_done, &cbs[k]) !=
                TACL_OK)
                FAIL("set_callback: %s", tacl_comm_last_error(comm));
        }
        if (pthread_create(&tid, NULL, tester_main, &t) != 0)
            FAIL("pthread_create");
        for (int k = NOPS - 1; k >= 0; k--)
            if (tacl_request_wait(reqs[k]) != TACL_OK)
                FAIL("wait: %s", tacl_comm_last_error(comm));
        atomic_store(&t.stop, 1);
        pthread_join(tid, NULL);
        for (int k = 0; k < NOPS; k++) {
            size_t count = 1 + (size_t)((round * 37 + k * 501) % MAXCOUNT);

            if (atomic_load(&cbs[k].calls) != 1 ||
                atomic_load(&cbs[k].status) != TACL_OK)
                FAIL("round %d op %d: %d callbacks, status %d", round, k,
                     atomic_load(&cbs[k].calls),
                     atomic_load(&cbs[k].status));
            for (size_t i = 0; i < count; i++) {
                uint32_t want = 0;

                for (int r = 0; r < nranks; r++)
                    want ^= input(r, k, i);
                if (y[k][i] != want)
                    FAIL("round %d op %d [%zu]: %#x, want %#x", round, k, i,
                         y[k][i], want);
            }
            if (tacl_request_free(reqs[k]) != TACL_OK)
                FAIL("free: %s", tacl_comm_last_error(comm));
        }
    }
}

/* The context switches so far of this process's threads named name;
 * -1: none is. */
static long thread_switches(const char *name)
{
    char path[300], line[256];
    long total = -1;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    FILE *f;

    if (d == NULL)
        FAIL("/proc/self/task: %s", strerror(errno));
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        if ((f = fopen(path, "r")) == NULL)
            continue; /* the thread ended */
        if (fgets(line, sizeof(line), f) == NULL)
            line[0] = '\0';
        fclose(f);
        line[strcspn(line, "\n")] = '\0';
        if (strcmp(line, name) != 0)
            continue;
        snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        if (total < 0)
            total = 0;
        while (fgets(line, sizeof(line), f) != NULL) {
            long n;

            if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1 ||
                sscanf(line, "nonvoluntary_ctxt_switches: %ld", &n) == 1)
                total += n;
        }
        fclose(f);
    }
    closedir(d);
    return total;
}

static void phase_blocking(tacl_comm_t comm, int rank, int nranks)
{
    enum { COUNT = 65536 }; /* 256 KB: past the fast path, on the executor */
    static uint32_t x[COUNT], y[COUNT];
    long before, after, allowed;
    double t0 = now_s();

    for (size_t i = 0; i < COUNT; i++)
        x[i] = input(rank, 0, i);
    before = thread_switches("tacl-progress");
    if (before < 0)
        FAIL("no progress thread found");
    for (int k = 0; k < BLOCKING; k++) {
        tacl_status_t st;

        if (k % 2 == 0) {
            st = tacl_allreduce(x, y, COUNT, TACL_UINT32, TACL_BXOR, comm,
                                NULL);
        } else {
            tacl_request_t ignored;

            st = tacl_group_start();
            if (st == TACL_OK)
                st = tacl_allreduce_nb(x, y, COUNT, TACL_UINT32, TACL_BXOR,
                                       comm, NULL, &ignored);
            if (st == TACL_OK)
                st = tacl_group_end();
        }
        if (st != TACL_OK)
            FAIL("blocking call %d: %s", k, tacl_comm_last_error(comm));
    }
    for (size_t i = 0; i < COUNT; i++) {
        uint32_t want = 0;

        for (int r = 0; r < nranks; r++)
            want ^= input(r, 0, i);
        if (y[i] != want)
            FAIL("blocking [%zu]: %#x, want %#x", i, y[i], want);
    }
    after = thread_switches("tacl-progress");
    /* Its timed sleep ends once a second; a margin of 10 for the rest. */
    allowed = 2 * (long)(now_s() - t0 + 1) + 10;
    if (after - before > allowed)
        FAIL("%d blocking calls woke the progress thread: %ld context "
             "switches (at most %ld expected)", BLOCKING, after - before,
             allowed);
    printf("progress_threads rank %d: %d blocking calls, the progress "
           "thread switched %ld times\n", rank, BLOCKING, after - before);
}

static void *aborter_main(void *arg)
{
    sleep_ms(30);
    if (tacl_comm_abort(arg) != TACL_OK)
        FAIL("abort: %s", tacl_last_error());
    return NULL;
}

static void phase_abort(tacl_comm_t comm, int rank)
{
    tacl_status_t err = TACL_OK;
    double t0 = now_s();

    if (rank == 0) {
        float x = 1, y = 0;
        tacl_request_t req;
        cb_t cb;
        pthread_t tid;
        tacl_status_t st;

        atomic_init(&cb.calls, 0);
        atomic_init(&cb.status, TACL_IN_PROGRESS);
        if (tacl_allreduce_nb(&x, &y, 1, TACL_FLOAT32, TACL_SUM, comm, NULL,
                              &req) != TACL_OK ||
            tacl_request_set_callback(req, on_done, &cb) != TACL_OK)
            FAIL("post: %s", tacl_comm_last_error(comm));
        if (pthread_create(&tid, NULL, aborter_main, comm) != 0)
            FAIL("pthread_create");
        while (atomic_load(&cb.calls) == 0 && now_s() - t0 < 30)
            sleep_ms(1);
        pthread_join(tid, NULL);
        if (atomic_load(&cb.calls) != 1 || atomic_load(&cb.status) >= 0)
            FAIL("after abort: %d callbacks, status %d",
                 atomic_load(&cb.calls), atomic_load(&cb.status));
        st = tacl_request_wait(req);
        if (st != atomic_load(&cb.status))
            FAIL("wait gave %s, the callback %d", tacl_status_string(st),
                 atomic_load(&cb.status));
        if (tacl_request_free(req) != TACL_OK)
            FAIL("free: %s", tacl_last_error());
        return;
    }
    while (err == TACL_OK && now_s() - t0 < 30) {
        if (tacl_comm_get_async_error(comm, &err) != TACL_OK)
            FAIL("get_async_error: %s", tacl_comm_last_error(comm));
        sleep_ms(2);
    }
    if (err == TACL_OK)
        FAIL("rank 0's abort never arrived");
    if (tacl_comm_destroy(comm) != TACL_OK)
        FAIL("destroy: %s", tacl_comm_last_error(comm));
}

int main(void)
{
    tacl_config_t cfg = TACL_CONFIG_INIT;
    tacl_comm_t comm;
    int nranks;

    cfg.progress_thread = 1;
    cfg.name = "progress_threads";
    cfg.timeout = 60;
    if (tacl_comm_init_env_config(&cfg, &comm) != TACL_OK)
        FAIL("init: %s", tacl_last_error());
    if (tacl_comm_rank(comm, &my_rank) != TACL_OK ||
        tacl_comm_size(comm, &nranks) != TACL_OK)
        FAIL("rank/size: %s", tacl_comm_last_error(comm));
    if (nranks < 2) {
        fprintf(stderr, "progress_threads: needs two ranks or more\n");
        return 77;
    }
    phase_concurrent(comm, my_rank, nranks);
    phase_blocking(comm, my_rank, nranks);
    phase_abort(comm, my_rank);
    printf("progress_threads rank %d: %d rounds of %d operations, abort: "
           "ok\n", my_rank, ROUNDS, NOPS);
    return 0;
}
