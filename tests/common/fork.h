/*
 * The fork harness of the multi-process tests: a zeroed shared mapping
 * made before the fork, n processes forked to run one function each, and
 * a wait that gives up at a deadline, kills what is left and says how
 * every process ended.  Each suite keeps its own shared layout, rank
 * setup and verdicts around these pieces.
 *
 * Nothing here asserts: a forked process must not call Criterion, and the
 * parent decides what an ending means (a rank killed on purpose may be
 * the expected one).
 */
#ifndef TACL_TESTS_COMMON_FORK_H
#define TACL_TESTS_COMMON_FORK_H

#include <stddef.h>
#include <sys/types.h>

/** One forked process and how it ended. */
typedef struct {
    pid_t pid;      /* 0 when not forked, or once reaped */
    int ended;      /* reaped: status holds its waitpid status */
    int status;
    int timed_out;  /* still running at the deadline, so killed */
    int keep;       /* set by the caller: tt_wait leaves it unreaped */
} tt_proc_t;

/** What a forked process runs; its return value is its exit status. */
typedef int (*tt_proc_fn_t)(int index, void *arg);

/** In a forked process, its index; -1 in the parent. */
extern int tt_rank;

/** A zeroed MAP_SHARED anonymous mapping of size bytes, or NULL. */
void *tt_shared_map(size_t size);

/** Unmap what tt_shared_map returned. */
void tt_shared_unmap(void *p, size_t size);

/**
 * Fork n processes after flushing stdio: process i sets tt_rank to i and
 * exits with fn(i, arg).  Fills procs[0..n-1] and returns how many were
 * forked: fewer than n when a fork failed (errno says why).
 */
int tt_fork(tt_proc_t *procs, int n, tt_proc_fn_t fn, void *arg);

/** tt_wait flag: the first process to fail takes the others down. */
#define TT_WAIT_FAIL_FAST 1u

/**
 * Reap the forked processes of procs, polling, until all have ended or
 * timeout_s seconds have passed (none: timeout_s <= 0).  Those still
 * running then are killed with SIGKILL, reaped and marked timed_out.
 * Processes marked keep are neither waited for nor killed.  Returns how
 * many of the others did not pass.
 */
int tt_wait(tt_proc_t *procs, int n, double timeout_s, unsigned flags);

/** Whether p ended by exiting with status 0. */
int tt_proc_passed(const tt_proc_t *p);

#endif /* TACL_TESTS_COMMON_FORK_H */
