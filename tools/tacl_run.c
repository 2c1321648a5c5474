/*
 * tacl-run: start N ranks of a command on this node.
 *
 * The launcher picks a free TCP port on the loopback interface, then forks
 * one process per rank with the environment tacl_comm_init_env() reads
 * (TACL_ROOT_ADDR, TACL_RANK, TACL_NRANKS, ...) and the torchrun-style
 * variables (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, ...).  Each rank
 * runs in its own process group so that stopping a rank also stops what it
 * started (a shell and its children).
 *
 * One event loop waits on a signalfd (SIGCHLD, SIGINT, SIGTERM) and, with
 * --tag, on the ranks' output pipes.  The first rank that fails decides
 * the exit code; the others then get SIGTERM and, 3 s later, SIGKILL.
 * With --keep-going a failed rank stops nobody (a job that survives the
 * loss of a rank, see tacl_comm_shrink): the others run to their end and
 * tacl-run then exits with the first failure's code.
 * --timeout bounds the whole run and makes it exit with 124.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "parse.h"
#include "tacl.h"

#define RUN_MAX_RANKS 4096
#define RUN_MAX_SECONDS 1e7
#define RUN_KILL_GRACE_MS 3000
#define RUN_LINE_MAX 65536
#define RUN_DRAIN_MS 1000
#define RUN_EXIT_USAGE 2
#define RUN_EXIT_TIMEOUT 124
#define RUN_MIN(a, b) ((a) < (b) ? (a) : (b))

/* One output pipe of one rank, read by the launcher in --tag mode. */
typedef struct {
    int fd;             /* read end, -1 once closed */
    int out_fd;         /* where prefixed lines go: 1 or 2 */
    char *buf;          /* bytes of a line not yet printed */
    size_t len;
} run_pipe_t;

typedef struct {
    pid_t pid;          /* 0 once reaped */
    run_pipe_t pipes[2];
} run_rank_t;

typedef struct {
    int nranks;
    double timeout_s;   /* 0: no timeout */
    int tag;
    int keep_going;     /* a failed rank does not stop the others */
    char **cmd;
    run_rank_t *ranks;
    int alive;          /* ranks not reaped yet */
    int exit_code;      /* first failure's code, -1 while none */
    int failed_rank;
    int interrupted;    /* signal number forwarded to the ranks, or 0 */
    int timed_out;
    int64_t kill_at_ms; /* when to SIGKILL the survivors, -1: not armed */
} run_t;

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void usage(FILE *f)
{
    fprintf(f,
        "usage: tacl-run -n N [--timeout S] [--tag] [--] CMD [ARGS...]\n"
        "\n"
        "Start N ranks of CMD on this node, with the environment that\n"
        "tacl_comm_init_env() reads: TACL_ROOT_ADDR=127.0.0.1:PORT,\n"
        "TACL_RANK, TACL_NRANKS, TACL_LOCAL_RANK, TACL_LOCAL_SIZE, and\n"
        "RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,\n"
        "MASTER_PORT as torchrun sets them.\n"
        "\n"
        "  -n, --nranks N   number of ranks (1 to %d)\n"
        "  -t, --timeout S  stop every rank after S seconds, exit 124\n"
        "  --tag            prefix each output line with [rank]\n"
        "  -k, --keep-going a rank that fails does not stop the others;\n"
        "                   the exit code is still the first failure's\n"
        "  -h, --help       print this help\n"
        "  --version        print tacl's version\n"
        "\n"
        "If a rank exits non-zero or dies by a signal, the others get\n"
        "SIGTERM, then SIGKILL after 3 s, and tacl-run exits with that\n"
        "rank's code (128 + signal for a signal); with --keep-going the\n"
        "others run on and tacl-run exits with that code at the end.\n",
        RUN_MAX_RANKS);
}

/* Returns 0, or the exit code for a bad command line. */
static int parse_args(run_t *run, int argc, char **argv)
{
    int i, n = 0;
    tacl__parse_err_t err;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *flag, *val = NULL;

        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-') {
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(a, "--version") == 0) {
            printf("tacl-run (tacl) %d.%d.%d\n", TACL_VERSION_MAJOR,
                   TACL_VERSION_MINOR, TACL_VERSION_PATCH);
            exit(0);
        }
        if (strcmp(a, "--tag") == 0) {
            run->tag = 1;
            continue;
        }
        if (strcmp(a, "-k") == 0 || strcmp(a, "--keep-going") == 0) {
            run->keep_going = 1;
            continue;
        }
        /* flag: the option as given, without "=value", for messages. */
        if (strncmp(a, "--nranks=", 9) == 0) {
            val = a + 9;
            flag = "--nranks";
        } else if (strncmp(a, "--timeout=", 10) == 0) {
            val = a + 10;
            flag = "--timeout";
        } else if (strcmp(a, "-n") == 0 || strcmp(a, "--nranks") == 0 ||
                   strcmp(a, "-np") == 0 || strcmp(a, "-t") == 0 ||
                   strcmp(a, "--timeout") == 0) {
            flag = a;
        } else {
            fprintf(stderr, "tacl-run: unknown option '%s'\n", a);
            goto err_usage;
        }
        if (val == NULL) {
            if (i + 1 >= argc) {
                fprintf(stderr, "tacl-run: option '%s' needs a value\n",
                        argv[i]);
                goto err_usage;
            }
            val = argv[++i];
        }
        if (strcmp(flag, "-t") != 0 && strcmp(flag, "--timeout") != 0) {
            err = tacl__parse_int(val, 1, RUN_MAX_RANKS, &n);
            if (err != TACL_PARSE_OK) {
                fprintf(stderr, "tacl-run: bad value '%s' for %s: %s (a "
                        "rank count, 1 to %d)\n", val, flag,
                        tacl__parse_strerror(err), RUN_MAX_RANKS);
                goto err_usage;
            }
        } else {
            /* DBL_MIN: any positive number of seconds, not 0. */
            err = tacl__parse_double(val, DBL_MIN, RUN_MAX_SECONDS,
                                     &run->timeout_s);
            if (err != TACL_PARSE_OK) {
                fprintf(stderr, "tacl-run: bad value '%s' for %s: %s "
                        "(seconds, above 0, at most %g)\n", val, flag,
                        tacl__parse_strerror(err), RUN_MAX_SECONDS);
                goto err_usage;
            }
        }
    }
    if (n == 0) {
        fprintf(stderr, "tacl-run: the rank count (-n N) is required\n");
        goto err_usage;
    }
    if (i >= argc) {
        fprintf(stderr, "tacl-run: no command to run\n");
        goto err_usage;
    }
    run->nranks = n;
    run->cmd = &argv[i];
    return 0;

err_usage:
    usage(stderr);
    return RUN_EXIT_USAGE;
}

/* Finds a free TCP port on 127.0.0.1: bind port 0, read it, close. */
static int pick_port(int *port_p)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int fd;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fprintf(stderr, "tacl-run: socket failed: %m\n");
        return -1;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = 0;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        fprintf(stderr, "tacl-run: cannot find a free port: %m\n");
        goto err_close_fd;
    }
    close(fd);
    *port_p = ntohs(sa.sin_port);
    return 0;

err_close_fd:
    close(fd);
    return -1;
}

static int set_env_int(const char *name, long value)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "%ld", value);
    return setenv(name, buf, 1);
}

/* In the child: set this rank's environment.  Returns 0 or -1. */
static int set_rank_env(const run_t *run, int rank, int port)
{
    char addr[64];
    int rc = 0;

    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    rc |= setenv("TACL_ROOT_ADDR", addr, 1);
    rc |= set_env_int("TACL_RANK", rank);
    rc |= set_env_int("TACL_NRANKS", run->nranks);
    rc |= set_env_int("TACL_LOCAL_RANK", rank);
    rc |= set_env_int("TACL_LOCAL_SIZE", run->nranks);
    rc |= setenv("MASTER_ADDR", "127.0.0.1", 1);
    rc |= set_env_int("MASTER_PORT", port);
    rc |= set_env_int("RANK", rank);
    rc |= set_env_int("WORLD_SIZE", run->nranks);
    rc |= set_env_int("LOCAL_RANK", rank);
    rc |= set_env_int("LOCAL_WORLD_SIZE", run->nranks);
    rc |= set_env_int("GROUP_RANK", 0);
    return rc == 0 ? 0 : -1;
}

/* In the child, after fork: never returns. */
static void exec_rank(const run_t *run, int rank, int port,
                      const int out_fds[2])
{
    sigset_t none;

    setpgid(0, 0);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    if (out_fds != NULL &&
        (dup2(out_fds[0], STDOUT_FILENO) < 0 ||
         dup2(out_fds[1], STDERR_FILENO) < 0)) {
        fprintf(stderr, "tacl-run: rank %d: dup2 failed: %m\n", rank);
        _exit(127);
    }
    if (set_rank_env(run, rank, port) != 0) {
        fprintf(stderr, "tacl-run: rank %d: setenv failed: %m\n", rank);
        _exit(127);
    }
    execvp(run->cmd[0], run->cmd);
    fprintf(stderr, "tacl-run: rank %d: cannot run '%s': %m\n", rank,
            run->cmd[0]);
    _exit(127);
}

/* Sends sig to every rank still running, and to its process group. */
static void signal_ranks(run_t *run, int sig)
{
    int r;

    for (r = 0; r < run->nranks; r++) {
        if (run->ranks[r].pid > 0) {
            kill(-run->ranks[r].pid, sig);
            kill(run->ranks[r].pid, sig);
        }
    }
}

/* SIGTERM now, SIGKILL once the grace period ends. */
static void stop_ranks(run_t *run)
{
    if (run->kill_at_ms >= 0) {
        return;
    }
    signal_ranks(run, SIGTERM);
    run->kill_at_ms = now_ms() + RUN_KILL_GRACE_MS;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);

        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

static void emit_line(int rank, int fd, const char *p, size_t n)
{
    char prefix[24];
    int plen = snprintf(prefix, sizeof(prefix), "[%d] ", rank);

    write_all(fd, prefix, (size_t)plen);
    write_all(fd, p, n);
    if (n == 0 || p[n - 1] != '\n') {
        write_all(fd, "\n", 1);
    }
}

/* Reads what a pipe holds and prints its complete lines. */
static void drain_pipe(int rank, run_pipe_t *p)
{
    ssize_t got;
    size_t start = 0, i;

    got = read(p->fd, p->buf + p->len, RUN_LINE_MAX - p->len);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) {
        return;
    }
    if (got <= 0) {
        if (p->len > 0) {
            emit_line(rank, p->out_fd, p->buf, p->len);
        }
        p->len = 0;
        close(p->fd);
        p->fd = -1;
        return;
    }
    p->len += (size_t)got;
    for (i = 0; i < p->len; i++) {
        if (p->buf[i] == '\n') {
            emit_line(rank, p->out_fd, p->buf + start, i + 1 - start);
            start = i + 1;
        }
    }
    if (start == 0 && p->len == RUN_LINE_MAX) {
        /* A line longer than the buffer goes out in pieces. */
        emit_line(rank, p->out_fd, p->buf, p->len);
        start = p->len;
    }
    memmove(p->buf, p->buf + start, p->len - start);
    p->len -= start;
}

static int rank_of_pid(const run_t *run, pid_t pid)
{
    int r;

    for (r = 0; r < run->nranks; r++) {
        if (run->ranks[r].pid == pid) {
            return r;
        }
    }
    return -1;
}

/* Says why rank r ended with status, and what happens next. */
static void report_failure(const run_t *run, int r, pid_t pid, int status)
{
    int code = WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                   : WEXITSTATUS(status);

    if (run->timed_out || run->interrupted) {
        return;
    }
    if (run->keep_going) {
        fprintf(stderr, "tacl-run: rank %d (pid %d) %s %d; the others "
                "keep going (--keep-going)\n", r, (int)pid,
                WIFSIGNALED(status) ? "was killed by signal"
                                    : "exited with status",
                WIFSIGNALED(status) ? WTERMSIG(status) : code);
    } else if (WIFSIGNALED(status)) {
        fprintf(stderr, "tacl-run: rank %d (pid %d) was killed by signal "
                "%d (%s); stopping the other ranks\n", r, (int)pid,
                WTERMSIG(status), strsignal(WTERMSIG(status)));
    } else {
        fprintf(stderr, "tacl-run: rank %d (pid %d) exited with status %d; "
                "stopping the other ranks\n", r, (int)pid, code);
    }
}

/*
 * Reaps every rank that ended; the first failure decides the exit code.
 * Ranks found dead in the same pass count as failing together, and one
 * killed by a signal then wins over one that exited with an error:
 * waitpid() does not return children in the order they died, and a peer
 * that noticed a killed rank and exited within milliseconds used to be
 * reported in its place (seen in the engine's kill tests).
 */
static void reap_ranks(run_t *run)
{
    int status, r, code, first = -1, first_status = 0;
    pid_t pid, first_pid = 0;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        r = rank_of_pid(run, pid);
        if (r < 0) {
            continue;
        }
        run->ranks[r].pid = 0;
        run->alive--;
        if (WIFEXITED(status)) {
            code = WEXITSTATUS(status);
        } else if (WIFSIGNALED(status)) {
            code = 128 + WTERMSIG(status);
        } else {
            continue;
        }
        if (code == 0 || run->exit_code >= 0) {
            continue;
        }
        if (first < 0 ||
            (WIFSIGNALED(status) && !WIFSIGNALED(first_status))) {
            first = r;
            first_pid = pid;
            first_status = status;
        }
    }
    if (first < 0) {
        return;
    }
    run->exit_code = WIFSIGNALED(first_status)
                         ? 128 + WTERMSIG(first_status)
                         : WEXITSTATUS(first_status);
    run->failed_rank = first;
    report_failure(run, first, first_pid, first_status);
    if (!run->keep_going || run->timed_out || run->interrupted) {
        stop_ranks(run);
    }
}

static void handle_signal(run_t *run, int sfd)
{
    struct signalfd_siginfo si;
    ssize_t got = read(sfd, &si, sizeof(si));

    if (got != (ssize_t)sizeof(si)) {
        return;
    }
    if (si.ssi_signo == SIGCHLD) {
        reap_ranks(run);
        return;
    }
    /* SIGINT or SIGTERM: forward it; a second one kills at once. */
    if (run->interrupted) {
        signal_ranks(run, SIGKILL);
        return;
    }
    run->interrupted = (int)si.ssi_signo;
    signal_ranks(run, (int)si.ssi_signo);
    if (run->kill_at_ms < 0) {
        run->kill_at_ms = now_ms() + RUN_KILL_GRACE_MS;
    }
}

static int open_pipes(run_rank_t *rk, int wr_fds[2])
{
    int i, fds[2];

    for (i = 0; i < 2; i++) {
        if (pipe2(fds, O_CLOEXEC) != 0) {
            fprintf(stderr, "tacl-run: pipe failed: %m\n");
            return -1;
        }
        rk->pipes[i].fd = fds[0];
        rk->pipes[i].out_fd = i + 1;
        rk->pipes[i].buf = malloc(RUN_LINE_MAX);
        rk->pipes[i].len = 0;
        wr_fds[i] = fds[1];
        if (rk->pipes[i].buf == NULL) {
            fprintf(stderr, "tacl-run: out of memory\n");
            return -1;
        }
    }
    return 0;
}

/* Forks every rank.  Returns 0, or -1 after stopping those started. */
static int start_ranks(run_t *run, int port)
{
    int r, i, wr_fds[2] = {-1, -1};
    pid_t pid;

    for (r = 0; r < run->nranks; r++) {
        if (run->tag && open_pipes(&run->ranks[r], wr_fds) != 0) {
            goto err_stop_ranks;
        }
        fflush(NULL);
        pid = fork();
        if (pid < 0) {
            fprintf(stderr, "tacl-run: fork failed: %m\n");
            goto err_stop_ranks;
        }
        if (pid == 0) {
            exec_rank(run, r, port, run->tag ? wr_fds : NULL);
        }
        setpgid(pid, pid);
        run->ranks[r].pid = pid;
        run->alive++;
        for (i = 0; i < 2 && run->tag; i++) {
            close(wr_fds[i]);
            wr_fds[i] = -1;
        }
    }
    return 0;

err_stop_ranks:
    for (i = 0; i < 2; i++) {
        if (wr_fds[i] >= 0) {
            close(wr_fds[i]);
        }
    }
    run->exit_code = 1;
    stop_ranks(run);
    return -1;
}

static int pipes_open(const run_t *run)
{
    int r, i, n = 0;

    for (r = 0; r < run->nranks && run->tag; r++) {
        for (i = 0; i < 2; i++) {
            n += run->ranks[r].pipes[i].fd >= 0;
        }
    }
    return n;
}

/* Milliseconds until the next deadline, -1 if none. */
static int next_wait_ms(const run_t *run, int64_t deadline_ms)
{
    int64_t now = now_ms(), next = -1;

    if (deadline_ms >= 0 && !run->timed_out) {
        next = deadline_ms;
    }
    if (run->kill_at_ms >= 0 && (next < 0 || run->kill_at_ms < next)) {
        next = run->kill_at_ms;
    }
    if (next < 0) {
        return -1;
    }
    return next <= now ? 0 : (int)RUN_MIN(next - now, 1000000);
}

static void event_loop(run_t *run, int sfd)
{
    struct pollfd *pfd;
    int64_t deadline_ms = -1, drain_until_ms = -1;
    int n, r, i, wait_ms, *owner;

    pfd = calloc((size_t)run->nranks * 2 + 1, sizeof(*pfd));
    owner = calloc((size_t)run->nranks * 2 + 1, sizeof(*owner));
    if (pfd == NULL || owner == NULL) {
        fprintf(stderr, "tacl-run: out of memory\n");
        exit(1);
    }
    if (run->timeout_s > 0) {
        deadline_ms = now_ms() + (int64_t)(run->timeout_s * 1000.0);
    }
    while (run->alive > 0 || pipes_open(run) > 0) {
        /*
         * Once every rank ended, what a leftover child of a rank still
         * writes is read for at most a second more.
         */
        if (run->alive == 0) {
            if (drain_until_ms < 0) {
                drain_until_ms = now_ms() + RUN_DRAIN_MS;
            } else if (now_ms() >= drain_until_ms) {
                break;
            }
        }
        n = 0;
        pfd[n].fd = sfd;
        pfd[n++].events = POLLIN;
        for (r = 0; r < run->nranks && run->tag; r++) {
            for (i = 0; i < 2; i++) {
                if (run->ranks[r].pipes[i].fd >= 0) {
                    owner[n] = r * 2 + i;
                    pfd[n].fd = run->ranks[r].pipes[i].fd;
                    pfd[n++].events = POLLIN;
                }
            }
        }
        wait_ms = next_wait_ms(run, deadline_ms);
        if (drain_until_ms >= 0 && (wait_ms < 0 || wait_ms > RUN_DRAIN_MS)) {
            wait_ms = RUN_DRAIN_MS;
        }
        if (poll(pfd, (nfds_t)n, wait_ms) < 0 &&
            errno != EINTR) {
            fprintf(stderr, "tacl-run: poll failed: %m\n");
            signal_ranks(run, SIGKILL);
            exit(1);
        }
        if (pfd[0].revents & POLLIN) {
            handle_signal(run, sfd);
        }
        for (i = 1; i < n; i++) {
            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                drain_pipe(owner[i] / 2,
                           &run->ranks[owner[i] / 2].pipes[owner[i] % 2]);
            }
        }
        if (deadline_ms >= 0 && !run->timed_out && now_ms() >= deadline_ms &&
            run->alive > 0) {
            fprintf(stderr, "tacl-run: timeout after %g s; stopping every "
                    "rank\n", run->timeout_s);
            run->timed_out = 1;
            stop_ranks(run);
        }
        if (run->kill_at_ms >= 0 && now_ms() >= run->kill_at_ms &&
            run->alive > 0) {
            signal_ranks(run, SIGKILL);
            run->kill_at_ms = now_ms() + RUN_KILL_GRACE_MS;
        }
    }
    free(owner);
    free(pfd);
}

int main(int argc, char **argv)
{
    run_t run;
    sigset_t mask;
    int rc, port, sfd, r;

    memset(&run, 0, sizeof(run));
    run.exit_code = -1;
    run.failed_rank = -1;
    run.kill_at_ms = -1;
    rc = parse_args(&run, argc, argv);
    if (rc != 0) {
        return rc;
    }
    if (pick_port(&port) != 0) {
        return 1;
    }
    run.ranks = calloc((size_t)run.nranks, sizeof(*run.ranks));
    if (run.ranks == NULL) {
        fprintf(stderr, "tacl-run: out of memory\n");
        return 1;
    }
    for (r = 0; r < run.nranks; r++) {
        run.ranks[r].pipes[0].fd = -1;
        run.ranks[r].pipes[1].fd = -1;
    }
    /* Signals arrive through the signalfd only; children unblock them. */
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) != 0) {
        fprintf(stderr, "tacl-run: sigprocmask failed: %m\n");
        return 1;
    }
    sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        fprintf(stderr, "tacl-run: signalfd failed: %m\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    start_ranks(&run, port);
    /* A child may have ended before the signalfd saw it: reap once. */
    reap_ranks(&run);
    event_loop(&run, sfd);
    close(sfd);
    for (r = 0; r < run.nranks; r++) {
        free(run.ranks[r].pipes[0].buf);
        free(run.ranks[r].pipes[1].buf);
    }
    free(run.ranks);
    if (run.timed_out) {
        return RUN_EXIT_TIMEOUT;
    }
    if (run.exit_code >= 0) {
        return run.exit_code;
    }
    return run.interrupted ? 128 + run.interrupted : 0;
}
