/*
 * Tests of the TCP bootstrap.  A fork-based harness (tests/common) runs
 * one process per rank: the rank that creates the unique id publishes it
 * in a shared anonymous mapping, a process's first failed CHECK prints
 * the line and the status it saw there and ends the process, which
 * exits 0 only when all its checks passed.  The parent waits with a
 * deadline, kills stragglers and asserts on each process's result.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap.h"
#include "check.h"
#include "common.h"
#include "config.h"
#include "fork.h"
#include "log.h"
#include "socket.h"

/* A call that must return TACL_OK; else the process fails naming it. */
#define CHECK_OK(call)                                                       \
    do {                                                                     \
        tacl_status_t st_ = (call);                                          \
        CHECK(st_ == TACL_OK, "%s: status %d", #call, (int)st_);             \
    } while (0)

#define MAX_PROCS 32
/* How long the parent lets one multi-process test run. */
#define HARNESS_LIMIT_S 30.0

typedef struct {
    tacl_unique_id_t id;
    int id_ready;             /* 1 published, -1 creation failed */
    uint64_t stamp[MAX_PROCS];
    int arrived;              /* a counter for syncing outside tacl */
} shared_t;

/* What one process of a test does. */
typedef struct {
    shared_t *sh;
    int proc;    /* index of this process */
    int rank;
    int nranks;
    int port;    /* > 0: make the id from 127.0.0.1:port */
    const void *arg;
} ctx_t;

typedef int (*proc_fn_t)(ctx_t *c);

static double seconds_since(uint64_t t0)
{
    return (double)(tacl__now_ns() - t0) / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (long)(ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static int free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(fd >= 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

/*
 * The id of a test: made from 127.0.0.1:port, or created by the process
 * that is rank 0 (creator) and read by the others from the mapping.
 */
static tacl_status_t find_id(ctx_t *c, int creator, tacl_unique_id_t *id)
{
    tacl_status_t status;
    uint64_t t0 = tacl__now_ns();

    if (c->port > 0)
        return tacl__bootstrap_id_from_addr("127.0.0.1", c->port, id);
    if (creator) {
        status = tacl__bootstrap_unique_id(&c->sh->id);
        __atomic_store_n(&c->sh->id_ready, status == TACL_OK ? 1 : -1,
                         __ATOMIC_RELEASE);
        *id = c->sh->id;
        return status;
    }
    while (__atomic_load_n(&c->sh->id_ready, __ATOMIC_ACQUIRE) == 0) {
        if (seconds_since(t0) > 10.0)
            return TACL_ERR_TIMEOUT;
        sleep_ms(1);
    }
    if (c->sh->id_ready < 0)
        return TACL_ERR_INTERNAL;
    *id = c->sh->id;
    return TACL_OK;
}

/* find_id, which must succeed. */
static void get_id(ctx_t *c, int creator, tacl_unique_id_t *id)
{
    tacl_status_t st = find_id(c, creator, id);

    CHECK(st == TACL_OK, "get_id: status %d", (int)st);
}

/*
 * The start of most processes: get the id (rank 0 makes it) and join the
 * bootstrap with a 10 s timeout.
 */
static tacl__bootstrap_t *join(ctx_t *c)
{
    tacl__bootstrap_t *bs;
    tacl_unique_id_t id;

    get_id(c, c->rank == 0, &id);
    CHECK_OK(tacl__bootstrap_init(&id, c->rank, c->nranks, 10.0, &bs));
    return bs;
}

/* What the processes of one run share, but for their index. */
typedef struct {
    shared_t *sh;
    const int *ranks;
    int nranks;
    int port;
    proc_fn_t fn;
    const void *arg;
} run_t;

static int proc_main(int i, void *arg)
{
    const run_t *run = arg;
    ctx_t c = {.sh = run->sh, .proc = i,
               .rank = run->ranks ? run->ranks[i] : i,
               .nranks = run->nranks, .port = run->port, .arg = run->arg};

    return run->fn(&c);
}

/* Fork one process per entry of ranks[] (its rank), run fn in each. */
static void run_procs(int nprocs, const int *ranks, int nranks, int port,
                      proc_fn_t fn, const void *arg)
{
    run_t run = {.ranks = ranks, .nranks = nranks, .port = port, .fn = fn,
                 .arg = arg};
    tt_proc_t procs[MAX_PROCS];

    cr_assert(nprocs <= MAX_PROCS);
    run.sh = tt_shared_map(sizeof(*run.sh));
    cr_assert(run.sh != NULL);
    cr_assert(tt_fork(procs, nprocs, proc_main, &run) == nprocs,
              "fork failed");
    tt_wait(procs, nprocs, HARNESS_LIMIT_S, 0);
    for (int i = 0; i < nprocs; i++) {
        int st = procs[i].status;
        int code = procs[i].timed_out ? -1
                   : WIFEXITED(st)    ? WEXITSTATUS(st)
                                      : 128 + WTERMSIG(st);

        cr_expect_neq(code, -1, "process %d (rank %d) was stuck", i,
                      ranks ? ranks[i] : i);
        cr_expect_eq(code, 0,
                     "process %d (rank %d) failed (exit %d); its CHECK "
                     "said where", i, ranks ? ranks[i] : i, code);
    }
    tt_shared_unmap(run.sh, sizeof(*run.sh));
}

static void run_ranks(int nranks, proc_fn_t fn, const void *arg)
{
    run_procs(nranks, NULL, nranks, 0, fn, arg);
}

static uint8_t pattern(int round, int rank, size_t i)
{
    return (uint8_t)(rank * 131 + (int)i * 7 + round * 29 + (int)(i >> 8));
}

/* Poll check() for seconds, ms apart: the bootstrap stays healthy. */
static void check_quiet_for(tacl__bootstrap_t *bs, double seconds, int ms)
{
    uint64_t t0 = tacl__now_ns();

    while (seconds_since(t0) < seconds) {
        CHECK_OK(tacl__bootstrap_check(bs));
        sleep_ms(ms);
    }
}

/* Allgather three rounds of `size`-byte records, with barriers. */
static int proc_allgather(ctx_t *c)
{
    size_t size = *(const size_t *)c->arg;
    tacl__bootstrap_t *bs;
    uint8_t *all;

    bs = join(c);
    CHECK(tacl__bootstrap_rank(bs) == c->rank);
    CHECK(tacl__bootstrap_nranks(bs) == c->nranks);
    all = malloc(size * (size_t)c->nranks);
    CHECK(all != NULL);
    for (int round = 0; round < 3; round++) {
        memset(all, 0xee, size * (size_t)c->nranks);
        for (size_t i = 0; i < size; i++)
            all[(size_t)c->rank * size + i] = pattern(round, c->rank, i);
        CHECK_OK(tacl__bootstrap_allgather(bs, all, size));
        for (int r = 0; r < c->nranks; r++)
            for (size_t i = 0; i < size; i++)
                CHECK(all[(size_t)r * size + i] == pattern(round, r, i));
        CHECK_OK(tacl__bootstrap_barrier(bs));
        CHECK_OK(tacl__bootstrap_check(bs));
    }
    free(all);
    tacl__bootstrap_fini(bs);
    return 0;
}

static void allgather_sizes(int nranks)
{
    static const size_t sizes[] = {1, 65536};

    for (size_t i = 0; i < TACL_ARRAY_SIZE(sizes); i++)
        run_ranks(nranks, proc_allgather, &sizes[i]);
}

Test(bootstrap, allgather_1) { allgather_sizes(1); }
Test(bootstrap, allgather_2) { allgather_sizes(2); }
Test(bootstrap, allgather_3) { allgather_sizes(3); }
Test(bootstrap, allgather_5) { allgather_sizes(5); }
Test(bootstrap, allgather_8) { allgather_sizes(8); }

Test(bootstrap, allgather_16_large)
{
    static const size_t size = 65536;

    run_ranks(16, proc_allgather, &size);
}

/* The late rank stamps the time it enters the barrier; no rank may
 * leave the barrier before that. */
static int proc_barrier(ctx_t *c)
{
    tacl__bootstrap_t *bs;

    bs = join(c);
    for (int late = c->nranks - 1; late >= 0; late -= 2) {
        if (c->rank == late) {
            sleep_ms(200);
            __atomic_store_n(&c->sh->stamp[late], tacl__now_ns(),
                             __ATOMIC_RELEASE);
        }
        CHECK_OK(tacl__bootstrap_barrier(bs));
        uint64_t entered = __atomic_load_n(&c->sh->stamp[late],
                                           __ATOMIC_ACQUIRE);
        CHECK(entered != 0 && tacl__now_ns() >= entered);
    }
    tacl__bootstrap_fini(bs);
    return 0;
}

Test(bootstrap, barrier_waits_for_the_last_rank)
{
    run_ranks(5, proc_barrier, NULL);
}

/* Rank 0 starts late, so the others retry connecting to its port. */
static int proc_from_addr(ctx_t *c)
{
    tacl__bootstrap_t *bs;
    tacl_unique_id_t id;
    tacl_status_t st;
    int64_t all[MAX_PROCS];

    get_id(c, 0, &id);
    if (c->rank == 0)
        sleep_ms(300);
    CHECK_OK(tacl__bootstrap_init(&id, c->rank, c->nranks, 10.0, &bs));
    all[c->rank] = 1000 + c->rank;
    CHECK_OK(tacl__bootstrap_allgather(bs, all, sizeof(all[0])));
    for (int r = 0; r < c->nranks; r++)
        CHECK(all[r] == 1000 + r);
    if (c->rank == 0) {
        /* Rank 0 keeps a listener of its own (for a shrink), not the
         * root port: another job may bind that one again. */
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)c->port)};
        struct sockaddr_in bound;
        int fd;

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        st = tacl__sock_listen(&sa, 1, &fd, &bound);
        CHECK(st == TACL_OK, "the root port is still bound after init: %s",
              tacl__last_error());
        close(fd);
    }
    tacl__bootstrap_fini(bs);
    return 0;
}

Test(bootstrap, id_from_addr)
{
    run_procs(4, NULL, 4, free_port(), proc_from_addr, NULL);
}

Test(bootstrap, id_from_host_name_matches_address)
{
    tacl_unique_id_t a, b;

    cr_assert_eq(tacl__bootstrap_id_from_addr("127.0.0.1", 29500, &a),
                 TACL_OK);
    cr_assert_eq(tacl__bootstrap_id_from_addr("localhost", 29500, &b),
                 TACL_OK);
    cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0,
                 "ids for one root address must be equal everywhere");
    cr_assert_eq(tacl__bootstrap_id_from_addr("127.0.0.1", 0, &a),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__bootstrap_id_from_addr("no-such-host.invalid", 1,
                                              &a),
                 TACL_ERR_INVALID_ARG);
}

/* The rank in *arg never joins; the others must time out in time. */
static int proc_absent(ctx_t *c)
{
    int absent = *(const int *)c->arg;
    tacl__bootstrap_t *bs = NULL;
    tacl_unique_id_t id;
    tacl_status_t st;
    uint64_t t0;
    double dt;

    if (c->rank == absent)
        return 0;
    get_id(c, c->rank == 0, &id);
    t0 = tacl__now_ns();
    st = tacl__bootstrap_init(&id, c->rank, c->nranks, 2.0, &bs);
    dt = seconds_since(t0);
    CHECK(st == TACL_ERR_TIMEOUT, "status %d", (int)st);
    CHECK(bs == NULL);
    CHECK(dt > 1.5 && dt < 3.0, "it took %d ms", (int)(dt * 1000));
    return 0;
}

Test(bootstrap, missing_rank_times_out)
{
    static const int absent = 2;

    run_ranks(4, proc_absent, &absent);
}

Test(bootstrap, missing_root_times_out)
{
    static const int absent = 0;

    run_procs(3, NULL, 3, free_port(), proc_absent, &absent);
}

/*
 * After init and a barrier, the rank in *arg exits without fini (mode 0)
 * or aborts (mode 1); every other rank's check() must report it.
 */
typedef struct {
    int victim;
    int abort;
} victim_t;

static int proc_victim(ctx_t *c)
{
    const victim_t *v = c->arg;
    tacl__bootstrap_t *bs;
    tacl_status_t st;
    uint64_t t0;
    char buf[8];

    bs = join(c);
    CHECK_OK(tacl__bootstrap_barrier(bs));
    /* The victim strikes only once every rank has left the barrier. */
    __atomic_add_fetch(&c->sh->arrived, 1, __ATOMIC_ACQ_REL);
    if (c->rank == v->victim) {
        t0 = tacl__now_ns();
        while (__atomic_load_n(&c->sh->arrived, __ATOMIC_ACQUIRE) <
               c->nranks)
            CHECK(seconds_since(t0) < 10.0);
        if (!v->abort)
            _exit(0); /* Dies holding its sockets: no goodbye. */
        tacl__bootstrap_abort(bs);
        st = tacl__bootstrap_check(bs);
        CHECK(st == TACL_ERR_REMOTE, "status %d", (int)st);
        sleep_ms(500);
        tacl__bootstrap_fini(bs);
        return 0;
    }
    t0 = tacl__now_ns();
    do {
        st = tacl__bootstrap_check(bs);
        if (st == TACL_OK)
            sleep_ms(1);
    } while (st == TACL_OK && seconds_since(t0) < 2.0);
    CHECK(st == TACL_ERR_REMOTE, "status %d", (int)st);
    CHECK(strstr(tacl__last_error(), "rank") != NULL);
    /* Once failed, always failed. */
    CHECK(tacl__bootstrap_check(bs) == TACL_ERR_REMOTE);
    st = tacl__bootstrap_allgather(bs, buf, 1);
    CHECK(st == TACL_ERR_REMOTE, "status %d", (int)st);
    tacl__bootstrap_fini(bs);
    return 0;
}

Test(bootstrap, exit_without_fini_reaches_every_rank)
{
    static const victim_t v = {.victim = 2, .abort = 0};

    run_ranks(5, proc_victim, &v);
}

Test(bootstrap, exit_of_root_reaches_every_rank)
{
    static const victim_t v = {.victim = 0, .abort = 0};

    run_ranks(3, proc_victim, &v);
}

Test(bootstrap, abort_reaches_every_rank)
{
    static const victim_t v = {.victim = 1, .abort = 1};

    run_ranks(6, proc_victim, &v);
}

/* Rank 2 leaves cleanly; the others' check() must stay quiet. */
static int proc_goodbye(ctx_t *c)
{
    tacl__bootstrap_t *bs;
    tacl_status_t st;
    char buf[8];

    bs = join(c);
    CHECK_OK(tacl__bootstrap_barrier(bs));
    if (c->rank == 2) {
        tacl__bootstrap_fini(bs);
        return 0;
    }
    check_quiet_for(bs, 0.5, 2);
    /* Rank 2's neighbors can tell that it left. */
    if (c->rank == 1 || c->rank == 3) {
        st = tacl__bootstrap_allgather(bs, buf, 1);
        CHECK(st == TACL_ERR_INVALID_USAGE, "status %d", (int)st);
        CHECK_OK(tacl__bootstrap_check(bs));
    }
    tacl__bootstrap_fini(bs);
    return 0;
}

Test(bootstrap, fini_is_not_a_failure)
{
    run_ranks(4, proc_goodbye, NULL);
}

/*
 * Rank 1 polls check() while rank 0's allgather record already waits on
 * its socket: check() must leave the record for the allgather.
 */
static int proc_check_early_data(ctx_t *c)
{
    tacl__bootstrap_t *bs;
    int all[4];

    bs = join(c);
    for (int round = 0; round < 2; round++) {
        if (c->rank == 1)
            check_quiet_for(bs, 0.3, 1);
        all[c->rank] = 100 * round + c->rank;
        CHECK_OK(tacl__bootstrap_allgather(bs, all, sizeof(all[0])));
        for (int r = 0; r < c->nranks; r++)
            CHECK(all[r] == 100 * round + r);
    }
    tacl__bootstrap_fini(bs);
    return 0;
}

Test(bootstrap, check_leaves_data_for_the_allgather)
{
    run_ranks(4, proc_check_early_data, NULL);
}

/* Rank 0 passes a smaller record than the others: every rank must fail
 * fast instead of reading garbage or hanging. */
static int proc_size_mismatch(ctx_t *c)
{
    tacl__bootstrap_t *bs;
    tacl_status_t st;
    uint64_t t0;
    char all[4 * 8];

    bs = join(c);
    t0 = tacl__now_ns();
    st = tacl__bootstrap_allgather(bs, all, c->rank == 0 ? 4 : 8);
    CHECK(st == TACL_ERR_INVALID_USAGE || st == TACL_ERR_REMOTE, "status %d",
          (int)st);
    CHECK(seconds_since(t0) < 2.0);
    CHECK(tacl__bootstrap_check(bs) == TACL_ERR_REMOTE);
    tacl__bootstrap_fini(bs);
    return 0;
}

Test(bootstrap, record_size_mismatch_fails_everywhere)
{
    run_ranks(4, proc_size_mismatch, NULL);
}

/*
 * Join as c->rank after delay_ms and expect to be told at once (within
 * 3 s) that rank 1 joined twice.
 */
static void join_expect_twice(ctx_t *c, const tacl_unique_id_t *id,
                              int delay_ms)
{
    tacl__bootstrap_t *bs;
    tacl_status_t st;
    uint64_t t0;

    sleep_ms(delay_ms);
    t0 = tacl__now_ns();
    st = tacl__bootstrap_init(id, c->rank, c->nranks, 10.0, &bs);
    CHECK(st == TACL_ERR_INVALID_USAGE, "process %d: status %d: %s",
          c->proc, (int)st, tacl__last_error());
    CHECK(strstr(tacl__last_error(), "rank 1 joined twice") != NULL,
          "process %d: %s", c->proc, tacl__last_error());
    CHECK(seconds_since(t0) < 3.0, "process %d failed after %.2f s",
          c->proc, seconds_since(t0));
}

/*
 * Two processes claim rank 1 of 4 and none claims rank 2: the duplicate,
 * rank 0 and every rank already joined fail at once with "rank 1 joined
 * twice" rather than waiting out the timeout for rank 2.
 */
static int proc_duplicate(ctx_t *c)
{
    tacl_unique_id_t id;

    get_id(c, c->proc == 0, &id);
    join_expect_twice(c, &id, c->proc == 2 ? 300 : 0);
    return 0;
}

Test(bootstrap, duplicate_rank_fails_at_once)
{
    static const int ranks[] = {0, 1, 1, 3};

    run_procs(4, ranks, 4, 0, proc_duplicate, NULL);
}

/*
 * A duplicate that arrives after every rank joined: rank 0 keeps the
 * listener of an id it made and answers it, while the ranks check the
 * ring, with "rank 1 joined twice" (it used to be refused connections
 * until its timeout).
 */
static int proc_late_duplicate(ctx_t *c)
{
    tacl__bootstrap_t *bs;
    tacl_unique_id_t id;

    get_id(c, c->proc == 0, &id);
    if (c->proc == 3) {
        join_expect_twice(c, &id, 500);
        return 0;
    }
    CHECK_OK(tacl__bootstrap_init(&id, c->rank, c->nranks, 10.0, &bs));
    check_quiet_for(bs, 2.0, 1);
    CHECK_OK(tacl__bootstrap_barrier(bs));
    tacl__bootstrap_fini(bs);
    return 0;
}

Test(bootstrap, late_duplicate_rank_is_told)
{
    static const int ranks[] = {0, 1, 2, 1};

    run_procs(4, ranks, 3, 0, proc_late_duplicate, NULL);
}

/*
 * Impostors come first: a process with another rank count and one whose
 * id carries another nonce.  Both are refused; the real ranks then join.
 */
static int proc_impostor(ctx_t *c)
{
    tacl__bootstrap_t *bs;
    tacl_unique_id_t id;
    tacl_status_t st;

    get_id(c, c->proc == 0, &id);
    if (c->proc == 1) {
        st = tacl__bootstrap_init(&id, 1, 4, 10.0, &bs);
        CHECK(st == TACL_ERR_INVALID_ARG, "status %d", (int)st);
        return 0;
    }
    if (c->proc == 2) {
        /* The nonce sits after magic, version, flags, address, port. */
        id.internal[16] ^= 0x5a;
        st = tacl__bootstrap_init(&id, 1, 3, 10.0, &bs);
        CHECK(st == TACL_ERR_INVALID_ARG, "status %d", (int)st);
        return 0;
    }
    if (c->proc != 0)
        sleep_ms(400);
    CHECK_OK(tacl__bootstrap_init(&id, c->rank, c->nranks, 10.0, &bs));
    CHECK_OK(tacl__bootstrap_barrier(bs));
    tacl__bootstrap_fini(bs);
    return 0;
}

Test(bootstrap, root_refuses_wrong_nranks_and_nonce)
{
    static const int ranks[] = {0, 1, 1, 1, 2};

    run_procs(5, ranks, 3, 0, proc_impostor, NULL);
}

Test(bootstrap, garbage_id_is_invalid)
{
    tacl__bootstrap_t *bs = (tacl__bootstrap_t *)&bs;
    tacl__bootstrap_t *const sentinel = bs;
    tacl_unique_id_t id;

    memset(&id, 0, sizeof(id));
    cr_assert_eq(tacl__bootstrap_init(&id, 0, 2, 1.0, &bs),
                 TACL_ERR_INVALID_ARG);
    cr_assert(strstr(tacl__last_error(), "unique id") != NULL,
              "message: %s", tacl__last_error());
    for (size_t i = 0; i < sizeof(id.internal); i++)
        id.internal[i] = (char)(i * 37 + 11);
    cr_assert_eq(tacl__bootstrap_init(&id, 1, 2, 1.0, &bs),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__bootstrap_init(NULL, 0, 1, 1.0, &bs),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(bs, sentinel, "output set on failure");
}

Test(bootstrap, bad_rank_is_invalid)
{
    tacl__bootstrap_t *bs = (tacl__bootstrap_t *)&bs;
    tacl__bootstrap_t *const sentinel = bs;
    tacl_unique_id_t id;

    cr_assert_eq(tacl__bootstrap_unique_id(&id), TACL_OK);
    cr_assert_eq(tacl__bootstrap_init(&id, -1, 2, 1.0, &bs),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__bootstrap_init(&id, 2, 2, 1.0, &bs),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__bootstrap_init(&id, 0, 0, 1.0, &bs),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__bootstrap_init(&id, 0, -3, 1.0, &bs),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__bootstrap_init(&id, 0, 1, 1.0, NULL),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(bs, sentinel, "output set on failure");
    /* The id is still good for a proper rank. */
    cr_assert_eq(tacl__bootstrap_init(&id, 0, 1, 1.0, &bs), TACL_OK);
    tacl__bootstrap_fini(bs);
}

Test(bootstrap, single_rank_in_process)
{
    tacl__bootstrap_t *bs;
    tacl_unique_id_t id;
    uint32_t v = 0xabcdef01u;

    cr_assert_eq(tacl__bootstrap_unique_id(&id), TACL_OK);
    cr_assert_eq(tacl__bootstrap_init(&id, 0, 1, 5.0, &bs), TACL_OK);
    cr_assert_eq(tacl__bootstrap_rank(bs), 0);
    cr_assert_eq(tacl__bootstrap_nranks(bs), 1);
    cr_assert_eq(tacl__bootstrap_allgather(bs, &v, sizeof(v)), TACL_OK);
    cr_assert_eq(v, 0xabcdef01u);
    cr_assert_eq(tacl__bootstrap_barrier(bs), TACL_OK);
    cr_assert_eq(tacl__bootstrap_check(bs), TACL_OK);
    tacl__bootstrap_abort(bs);
    cr_assert_eq(tacl__bootstrap_check(bs), TACL_ERR_REMOTE);
    cr_assert_eq(tacl__bootstrap_barrier(bs), TACL_ERR_REMOTE);
    tacl__bootstrap_fini(bs);
}

Test(bootstrap, socket_ifname_picks_the_interface)
{
    tacl_unique_id_t id;
    struct in_addr addr;

    /* Criterion runs each test in its own process: the variable stays
     * here.  The id keeps the IPv4 address after magic, version, flags. */
    cr_assert_eq(setenv("TACL_SOCKET_IFNAME", "lo", 1), 0);
    tacl__config_reload();
    cr_assert_eq(tacl__bootstrap_unique_id(&id), TACL_OK);
    memcpy(&addr, id.internal + 8, sizeof(addr));
    cr_assert_eq(ntohl(addr.s_addr), INADDR_LOOPBACK);
    cr_assert_eq(setenv("TACL_SOCKET_IFNAME", "no-such-if0", 1), 0);
    tacl__config_reload();
    cr_assert_eq(tacl__bootstrap_unique_id(&id), TACL_ERR_INVALID_ARG);
    cr_assert(strstr(tacl__last_error(), "no-such-if0") != NULL);
}
