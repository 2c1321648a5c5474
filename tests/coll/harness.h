/*
 * Multi-process test harness for the public API.
 *
 * coll_run() forks one process per rank.  Rank 0 creates a unique id and
 * publishes it through a shared anonymous mapping; the other ranks wait
 * for it (bounded), every rank joins the communicator, runs the test body,
 * destroys the communicator and exits.  The parent waits for all children
 * with a deadline, kills stragglers and collects each rank's verdict and
 * message, which coll_expect_pass() turns into Criterion assertions.
 *
 * Bodies run in child processes: they must not use cr_assert (a failed
 * assertion there would not reach Criterion).  They report through their
 * return value and coll_fail(), usually via the COLL_CHECK macros.
 */
#ifndef TACL_TESTS_COLL_HARNESS_H
#define TACL_TESTS_COLL_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "tacl.h"

#define COLL_MAX_RANKS 16
#define COLL_MSG_LEN 1024
#define COLL_SCRATCH_BYTES 4096

/** How the harness prepares each child before the body runs. */
typedef enum {
    /** Rank 0 makes the id, every rank joins; the body gets ctx->comm. */
    COLL_INIT_AUTO = 0,
    /** Rank 0 makes the id; the body calls tacl_comm_init_rank itself. */
    COLL_INIT_MANUAL,
    /** Nothing: no id, no communicator (for tacl_comm_init_env tests). */
    COLL_INIT_NONE
} coll_init_mode_t;

typedef struct coll_ctx coll_ctx_t;

/**
 * A test body.  Returns 0 on success, or nonzero after writing a message
 * with coll_fail().
 */
typedef int (*coll_body_t)(coll_ctx_t *ctx);

typedef struct {
    int nranks;
    /** Seconds the whole run may last before stragglers are killed. */
    int deadline_s;
    coll_init_mode_t init;
    /** "NAME=VALUE" strings set in every child before anything runs. */
    const char *const *env;
    /**
     * When set, a communicator that fails to destroy does not fail the
     * rank (failure tests, where peers are gone).
     */
    int destroy_may_fail;
    /** Opaque argument handed to the body as ctx->arg. */
    void *arg;
} coll_opts_t;

struct coll_ctx {
    int rank;
    int nranks;
    /** The communicator (COLL_INIT_AUTO); set it to NULL if the body
     *  destroyed or aborted it. */
    tacl_comm_t comm;
    /** The unique id (COLL_INIT_AUTO and COLL_INIT_MANUAL). */
    const tacl_unique_id_t *id;
    void *arg;
    /** Memory shared by every rank and the parent, zeroed per run. */
    volatile void *scratch;
    /** Where coll_fail() writes (per rank, shared with the parent). */
    char *msg;
};

/** Result of one rank as seen by the parent. */
typedef struct {
    int exited;      /* 1 when the process exited by itself */
    int exit_code;   /* its exit status when exited */
    int signal;      /* the signal that ended it, 0 if none */
    int killed;      /* 1 when the parent killed it at the deadline */
    int body_done;   /* 1 when the body returned */
    int body_code;   /* what the body returned */
    double elapsed_s;/* from the start of the body to its end */
    char msg[COLL_MSG_LEN];
} coll_rank_result_t;

typedef struct {
    int nranks;
    coll_rank_result_t rank[COLL_MAX_RANKS];
    /** Copy of the scratch area after the run. */
    unsigned char scratch[COLL_SCRATCH_BYTES];
} coll_result_t;

/**
 * Run body on opts->nranks forked ranks and fill *res.  Returns 0 when
 * every rank exited with status 0, else -1.  Never asserts.
 */
int coll_run(const coll_opts_t *opts, coll_body_t body, coll_result_t *res);

/** Criterion assertion that every rank of res passed, naming failures. */
void coll_expect_pass(const coll_result_t *res);

/**
 * Criterion assertion that rank victim of res was ended by signal sig
 * (a victim < 0: none) and that every other rank passed.
 */
void coll_expect_pass_but(const coll_result_t *res, int victim, int sig);

/** Run body as opts say and assert every rank passed. */
void coll_run_opts_expect_pass(const coll_opts_t *opts, coll_body_t body);

/** Run and assert every rank passed: the common case. */
void coll_run_expect_pass(int nranks, coll_body_t body, void *arg,
                          const char *const *env);

/**
 * Append a formatted failure message (or a detail of one already
 * written) to this rank's message, a space apart; returns 1.
 */
int coll_fail(coll_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/** Seconds on CLOCK_MONOTONIC (shared by all processes of the machine). */
double coll_now(void);

/** Sleep for ms milliseconds. */
void coll_sleep_ms(int ms);

/**
 * Join the run's communicator (COLL_INIT_MANUAL) as a rank of emulated
 * node rank / per_node, named prefix-<node> (TACL_NODE_ID; UCX over
 * loopback between nodes), into *comm_p.
 */
tacl_status_t coll_join_node(coll_ctx_t *ctx, const char *prefix,
                             int per_node, tacl_comm_t *comm_p);

/** A free TCP port on 127.0.0.1 (bound and released), or -1. */
int coll_free_port(void);

/*
 * Checks for bodies.  Each returns from the body with a message naming the
 * call, the status and the communicator's last error.
 */
#define COLL_CHECK_OK(ctx, call)                                             \
    do {                                                                     \
        tacl_status_t st_ = (call);                                          \
        if (st_ != TACL_OK)                                                  \
            return coll_fail((ctx), "%s:%d: %s returned %s (%d): %s",        \
                             __FILE__, __LINE__, #call,                      \
                             tacl_status_string(st_), (int)st_,              \
                             tacl_comm_last_error((ctx)->comm));             \
    } while (0)

#define COLL_CHECK(ctx, cond, ...)                                           \
    do {                                                                     \
        if (!(cond)) {                                                       \
            coll_fail((ctx), "%s:%d: check '%s' failed", __FILE__, __LINE__, \
                      #cond);                                                \
            return coll_fail((ctx), __VA_ARGS__);                            \
        }                                                                    \
    } while (0)

/* call fails with status want and the last error names word. */
#define COLL_CHECK_FAILS(ctx, call, want, word)                              \
    do {                                                                     \
        tacl_status_t st_ = (call);                                          \
        const char *m_ = tacl_comm_last_error((ctx)->comm);                  \
        COLL_CHECK(ctx, st_ == (want), "%s returned %s, not %s", #call,      \
                   tacl_status_string(st_), tacl_status_string(want));       \
        COLL_CHECK(ctx, m_ != NULL && strstr(m_, word) != NULL,              \
                   "%s: message '%s' does not name '%s'", #call,             \
                   m_ ? m_ : "(null)", word);                                \
    } while (0)

#endif /* TACL_TESTS_COLL_HARNESS_H */
