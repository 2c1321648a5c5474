/*
 * Multi-process test harness: see harness.h.
 *
 * Shared state lives in one MAP_SHARED anonymous mapping created before
 * the fork: the published unique id with its ready flag, one result slot
 * per rank and a scratch area for the bodies.  Every wait (id publication,
 * the parent's wait for its children) has a deadline; children also ask
 * the kernel to kill them when the parent dies, so no test leaves
 * processes behind.  Forking and reaping are tests/common's (fork.h).
 */
#define _GNU_SOURCE
#include "harness.h"
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "fork.h"

/* Id publication states. */
#define ID_PENDING 0
#define ID_READY 1
#define ID_FAILED 2

typedef struct {
    int id_state;
    tacl_unique_id_t id;
    coll_rank_result_t rank[COLL_MAX_RANKS];
    unsigned char scratch[COLL_SCRATCH_BYTES];
} coll_shared_t;

double coll_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void coll_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int vappend(char *msg, const char *fmt, va_list ap)
{
    size_t used = strnlen(msg, COLL_MSG_LEN - 1);

    if (used > 0 && used < COLL_MSG_LEN - 2) {
        msg[used++] = ' ';
        msg[used] = '\0';
    }
    vsnprintf(msg + used, COLL_MSG_LEN - used, fmt, ap);
    return 1;
}

int coll_fail(coll_ctx_t *ctx, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vappend(ctx->msg, fmt, ap);
    va_end(ap);
    return 1;
}

int coll_free_port(void)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof(addr);
    int fd, port = -1;

    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0 &&
        getsockname(fd, (struct sockaddr *)&addr, &len) == 0)
        port = ntohs(addr.sin_port);
    close(fd);
    return port;
}

/* Wait for rank 0 to publish the id; 0 on success, -1 on failure. */
static int wait_for_id(coll_shared_t *sh, double deadline)
{
    for (;;) {
        int state = __atomic_load_n(&sh->id_state, __ATOMIC_ACQUIRE);

        if (state == ID_READY)
            return 0;
        if (state == ID_FAILED || coll_now() > deadline)
            return -1;
        coll_sleep_ms(1);
    }
}

static int child_prepare(const coll_opts_t *opts, coll_shared_t *sh,
                         coll_ctx_t *ctx, double deadline)
{
    tacl_status_t st;

    if (opts->init == COLL_INIT_NONE)
        return 0;
    if (ctx->rank == 0) {
        st = tacl_get_unique_id(&sh->id);
        if (st != TACL_OK) {
            __atomic_store_n(&sh->id_state, ID_FAILED, __ATOMIC_RELEASE);
            return coll_fail(ctx, "tacl_get_unique_id returned %s: %s",
                             tacl_status_string(st), tacl_last_error());
        }
        __atomic_store_n(&sh->id_state, ID_READY, __ATOMIC_RELEASE);
    } else if (wait_for_id(sh, deadline) != 0) {
        return coll_fail(ctx, "rank 0 did not publish the unique id");
    }
    ctx->id = &sh->id;
    if (opts->init == COLL_INIT_MANUAL)
        return 0;
    st = tacl_comm_init_rank(ctx->nranks, &sh->id, ctx->rank, &ctx->comm);
    if (st != TACL_OK)
        return coll_fail(ctx, "tacl_comm_init_rank returned %s: %s",
                         tacl_status_string(st), tacl_last_error());
    return 0;
}

static void child_main(const coll_opts_t *opts, coll_body_t body,
                       coll_shared_t *sh, int rank, double deadline)
{
    coll_rank_result_t *slot = &sh->rank[rank];
    coll_ctx_t ctx;
    double t0;
    int code;

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (const char *const *e = opts->env; e && *e; e++)
        putenv((char *)*e);

    memset(&ctx, 0, sizeof(ctx));
    ctx.rank = rank;
    ctx.nranks = opts->nranks;
    ctx.arg = opts->arg;
    ctx.scratch = sh->scratch;
    ctx.msg = slot->msg;

    code = child_prepare(opts, sh, &ctx, deadline);
    if (code != 0)
        _exit(code & 0x7f);
    t0 = coll_now();
    code = body(&ctx);
    slot->elapsed_s = coll_now() - t0;
    slot->body_code = code;
    __atomic_store_n(&slot->body_done, 1, __ATOMIC_RELEASE);
    if (ctx.comm != NULL) {
        tacl_status_t st = tacl_comm_destroy(ctx.comm);

        if (st != TACL_OK && !opts->destroy_may_fail && code == 0)
            code = coll_fail(&ctx, "tacl_comm_destroy returned %s: %s",
                             tacl_status_string(st), tacl_last_error());
    }
    fflush(stdout);
    fflush(stderr);
    _exit(code == 0 ? 0 : (code & 0x7f) ? (code & 0x7f) : 1);
}

/* What every child of a run is handed, but for its rank. */
typedef struct {
    const coll_opts_t *opts;
    coll_body_t body;
    coll_shared_t *sh;
    double deadline;
} coll_run_t;

static int child_run(int rank, void *arg)
{
    const coll_run_t *run = arg;

    child_main(run->opts, run->body, run->sh, rank, run->deadline);
    return 0;
}

int coll_run(const coll_opts_t *opts, coll_body_t body, coll_result_t *res)
{
    tt_proc_t procs[COLL_MAX_RANKS];
    coll_run_t run = {.opts = opts, .body = body};
    int n = opts->nranks, ok = 1, forked;

    memset(res, 0, sizeof(*res));
    res->nranks = n;
    if (n < 1 || n > COLL_MAX_RANKS)
        return -1;
    run.sh = tt_shared_map(sizeof(*run.sh));
    if (run.sh == NULL)
        return -1;
    run.deadline = coll_now() + (opts->deadline_s > 0 ? opts->deadline_s
                                                     : 60);
    forked = tt_fork(procs, n, child_run, &run);
    if (forked < n) {
        snprintf(res->rank[forked].msg, COLL_MSG_LEN, "fork failed: %s",
                 strerror(errno));
        ok = 0;
    }
    /* Stragglers get two seconds more than the bodies' own deadline. */
    tt_wait(procs, forked, run.deadline + 2 - coll_now(), 0);

    for (int r = 0; r < n; r++) {
        coll_rank_result_t *out = &res->rank[r];
        const tt_proc_t *p = &procs[r];

        if (r < forked && p->timed_out) {
            out->killed = 1;
            out->signal = SIGKILL;
        } else if (r < forked && WIFEXITED(p->status)) {
            out->exited = 1;
            out->exit_code = WEXITSTATUS(p->status);
        } else if (r < forked && WIFSIGNALED(p->status)) {
            out->signal = WTERMSIG(p->status);
        }
        out->body_done = run.sh->rank[r].body_done;
        out->body_code = run.sh->rank[r].body_code;
        out->elapsed_s = run.sh->rank[r].elapsed_s;
        if (out->msg[0] == '\0')
            memcpy(out->msg, run.sh->rank[r].msg, COLL_MSG_LEN);
        out->msg[COLL_MSG_LEN - 1] = '\0';
        if (!out->exited || out->exit_code != 0)
            ok = 0;
    }
    memcpy(res->scratch, run.sh->scratch, COLL_SCRATCH_BYTES);
    tt_shared_unmap(run.sh, sizeof(*run.sh));
    return ok ? 0 : -1;
}

void coll_expect_pass(const coll_result_t *res)
{
    char report[8192];
    size_t used = 0;
    int failed = 0;

    report[0] = '\0';
    for (int r = 0; r < res->nranks; r++) {
        const coll_rank_result_t *rr = &res->rank[r];
        const char *why;

        if (rr->exited && rr->exit_code == 0)
            continue;
        failed++;
        if (rr->killed)
            why = "killed at the deadline (hung)";
        else if (rr->signal)
            why = strsignal(rr->signal);
        else
            why = "failed";
        if (used < sizeof(report))
            used += (size_t)snprintf(report + used, sizeof(report) - used,
                                     "\n  rank %d %s (exit %d): %s", r, why,
                                     rr->exit_code, rr->msg);
    }
    cr_assert(failed == 0, "%d of %d ranks failed:%s", failed, res->nranks,
              report);
}

void coll_expect_pass_but(const coll_result_t *res, int victim, int sig)
{
    coll_result_t copy = *res;

    if (victim >= 0) {
        cr_assert_eq(res->rank[victim].signal, sig,
                     "victim rank %d ended with signal %d, exit %d: %s",
                     victim, res->rank[victim].signal,
                     res->rank[victim].exit_code, res->rank[victim].msg);
        /* The victim was meant to die; judge the others. */
        copy.rank[victim].exited = 1;
        copy.rank[victim].exit_code = 0;
        copy.rank[victim].signal = 0;
    }
    coll_expect_pass(&copy);
}

void coll_run_opts_expect_pass(const coll_opts_t *opts, coll_body_t body)
{
    coll_result_t *res = malloc(sizeof(*res));

    cr_assert_not_null(res);
    coll_run(opts, body, res);
    coll_expect_pass(res);
    free(res);
}

void coll_run_expect_pass(int nranks, coll_body_t body, void *arg,
                          const char *const *env)
{
    coll_opts_t opts = {
        .nranks = nranks,
        .deadline_s = 120,
        .init = COLL_INIT_AUTO,
        .env = env,
        .arg = arg,
    };

    coll_run_opts_expect_pass(&opts, body);
}

tacl_status_t coll_join_node(coll_ctx_t *ctx, const char *prefix,
                             int per_node, tacl_comm_t *comm_p)
{
    char node[64];

    snprintf(node, sizeof(node), "%s-%d", prefix, ctx->rank / per_node);
    setenv("TACL_NODE_ID", node, 1);
    setenv("UCX_NET_DEVICES", "lo", 1);
    /* The parent may have read the configuration before the fork. */
    tacl__config_reload();
    return tacl_comm_init_rank(ctx->nranks, ctx->id, ctx->rank, comm_p);
}
