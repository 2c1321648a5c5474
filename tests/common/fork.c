/*
 * The fork harness of the multi-process tests (see fork.h).
 */
#define _GNU_SOURCE
#include "fork.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int tt_rank = -1;

void *tt_shared_map(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED)
        return NULL;
    memset(p, 0, size);
    return p;
}

void tt_shared_unmap(void *p, size_t size)
{
    if (p != NULL)
        munmap(p, size);
}

int tt_fork(tt_proc_t *procs, int n, tt_proc_fn_t fn, void *arg)
{
    memset(procs, 0, (size_t)n * sizeof(*procs));
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();

        if (pid < 0)
            return i;
        if (pid == 0) {
            tt_rank = i;
            _exit(fn(i, arg));
        }
        procs[i].pid = pid;
    }
    return n;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int tt_proc_passed(const tt_proc_t *p)
{
    return p->ended && WIFEXITED(p->status) && WEXITSTATUS(p->status) == 0;
}

/* Whether p is forked and neither reaped nor kept back. */
static int waiting_for(const tt_proc_t *p)
{
    return p->pid > 0 && !p->keep;
}

static void kill_and_reap(tt_proc_t *p)
{
    kill(p->pid, SIGKILL);
    waitpid(p->pid, &p->status, 0);
    p->pid = 0;
    p->ended = 1;
}

int tt_wait(tt_proc_t *procs, int n, double timeout_s, unsigned flags)
{
    double deadline = now_s() + timeout_s;
    int left = 0, failed = 0;

    for (int i = 0; i < n; i++)
        left += waiting_for(&procs[i]);
    while (left > 0) {
        int reaped = 0;

        for (int i = 0; i < n; i++) {
            tt_proc_t *p = &procs[i];

            if (!waiting_for(p) ||
                waitpid(p->pid, &p->status, WNOHANG) != p->pid)
                continue;
            p->pid = 0;
            p->ended = 1;
            left--;
            reaped = 1;
            if (tt_proc_passed(p) || !(flags & TT_WAIT_FAIL_FAST))
                continue;
            for (int o = 0; o < n; o++)
                if (waiting_for(&procs[o]))
                    kill(procs[o].pid, SIGKILL);
        }
        if (left > 0 && timeout_s > 0 && now_s() > deadline) {
            for (int i = 0; i < n; i++) {
                if (!waiting_for(&procs[i]))
                    continue;
                kill_and_reap(&procs[i]);
                procs[i].timed_out = 1;
            }
            left = 0;
        }
        if (!reaped && left > 0)
            usleep(1000);
    }
    for (int i = 0; i < n; i++)
        failed += !procs[i].keep && procs[i].ended &&
                  !tt_proc_passed(&procs[i]);
    return failed;
}
