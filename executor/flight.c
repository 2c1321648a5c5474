/*
 * The flight recorder (see flight.h).
 *
 * A record is written once when its operation starts and once when it
 * ends, under the context lock that the operation holds anyway, with one
 * clock read (its start; a dump gives its age, not its duration); the
 * pending details (steps done, messages outstanding, peers) are computed
 * from the execution only when a dump asks.  A record knows its ordinal,
 * so an execution that outlives its slot (more than TACL_FLIGHT_RECORDS
 * operations posted while it runs) leaves the newer record alone.
 *
 * Signals: TACL_FLIGHT_SIGNAL names a signal whose handler increments a
 * counter and nothing else (async-signal-safe).  Each context compares
 * the counter with the last value it saw once per progress call and
 * dumps its communicators when it moved.  A thread blocked in sigwait()
 * would dump a rank that never calls tacl again, but it needs the signal
 * blocked in every thread of the application, which a library cannot
 * promise; a rank stuck outside tacl is found from its peers' dumps.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common.h"
#include "config.h"
#include "executor.h"
#include "flight.h"
#include "log.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static tacl__flight_t *registry;
static pthread_once_t signal_once = PTHREAD_ONCE_INIT;
static volatile unsigned signal_gen;

static void on_signal(int sig)
{
    (void)sig;
    __atomic_add_fetch(&signal_gen, 1, __ATOMIC_RELAXED);
}

/* "SIGUSR1", "USR1" or a number; 0 when empty or unknown. */
static int parse_signal(const char *s)
{
    static const struct {
        const char *name;
        int sig;
    } names[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP},
                 {"URG", SIGURG}, {"WINCH", SIGWINCH}};
    char *end;
    long n;

    if (s[0] == '\0')
        return 0;
    n = strtol(s, &end, 10);
    if (*end == '\0')
        return n > 0 && n < NSIG ? (int)n : 0;
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < TACL_ARRAY_SIZE(names); i++)
        if (strcasecmp(s, names[i].name) == 0)
            return names[i].sig;
    return 0;
}

static void signal_setup(void)
{
    const char *spec = tacl__config_str(TACL_CFG_FLIGHT_SIGNAL);
    int sig = parse_signal(spec);
    struct sigaction sa;

    if (spec[0] == '\0')
        return;
    if (sig == 0) {
        TACL_WARN(INIT, "TACL_FLIGHT_SIGNAL=\"%s\" is not a signal; use "
                  "SIGUSR1, SIGUSR2 or a number", spec);
        return;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0)
        TACL_WARN(INIT, "cannot install the flight recorder's handler for "
                  "signal %d: %m", sig);
}

tacl_status_t tacl__flight_init(tacl__flight_t *f, int rank, int size)
{
    long long cap = tacl__config_int(TACL_CFG_FLIGHT_RECORDS);

    memset(f, 0, sizeof(*f));
    f->rank = rank;
    f->size = size;
    if (cap <= 0)
        return TACL_OK;
    if (cap > (1 << 20))
        cap = 1 << 20;
    /* A power of two, so that a record's slot is a mask, not a division
     * (three per call, a tenth of a small call's time). */
    while ((cap & (cap - 1)) != 0)
        cap += cap & -cap;
    f->recs = calloc((size_t)cap, sizeof(*f->recs));
    if (f->recs == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory for "
                           "%lld flight records (TACL_FLIGHT_RECORDS)", cap);
    f->cap = (uint32_t)cap;
    pthread_once(&signal_once, signal_setup);
    f->signal_gen = tacl__flight_signal_gen();
    pthread_mutex_lock(&registry_lock);
    f->next = registry;
    registry = f;
    pthread_mutex_unlock(&registry_lock);
    return TACL_OK;
}

void tacl__flight_fini(tacl__flight_t *f)
{
    if (f->recs == NULL)
        return;
    pthread_mutex_lock(&registry_lock);
    for (tacl__flight_t **p = &registry; *p != NULL; p = &(*p)->next) {
        if (*p == f) {
            *p = f->next;
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    free(f->recs);
    memset(f, 0, sizeof(*f));
}

/* Write op into the next record (pending, no execution yet). */
static void record(tacl__flight_t *f, const tacl__flight_op_t *op)
{
    tacl__flight_rec_t *r = &f->recs[f->n & (f->cap - 1)];
    size_t i;

    r->op = *op;
    /* A plain copy: snprintf (or strncat) would be most of the
     * recorder's cost. */
    for (i = 0; op->algo != NULL && i < sizeof(r->algo) - 1 && op->algo[i];
         i++)
        r->algo[i] = op->algo[i];
    r->algo[i] = '\0';
    r->op.algo = NULL;
    r->ord = f->n++;
    /* The tick's clock: a record says how long ago its call began (to
     * a tick, a few milliseconds: what a hang's dump needs), and reading the
     * fine clock would be a sixth of a small call's time. */
    r->start_ns = tacl__now_coarse_ns();
    r->exec = NULL;
    r->status = TACL_OK;
    r->state = TACL__FLIGHT_PENDING;
}

void tacl__flight_begin(tacl__flight_t *f, const tacl__flight_op_t *op)
{
    if (f->cap == 0)
        return;
    record(f, op);
    f->open = 1;
}

uint64_t tacl__flight_open(tacl__flight_t *f, const tacl__flight_op_t *op)
{
    if (f->cap == 0)
        return UINT64_MAX;
    record(f, op);
    return f->n - 1;
}

uint64_t tacl__flight_claim(tacl__flight_t *f, tacl__exec_t *exec,
                            tacl__flight_describe_fn describe)
{
    if (describe != NULL)
        f->describe = describe;
    if (!f->open)
        return UINT64_MAX;
    f->open = 0;
    f->recs[(f->n - 1) & (f->cap - 1)].exec = exec;
    return f->n - 1;
}

void tacl__flight_end(tacl__flight_t *f, uint64_t ord, tacl_status_t status)
{
    tacl__flight_rec_t *r;

    /* A destroyed communicator's recorder is zeroed (cap 0). */
    if (ord == UINT64_MAX || f->cap == 0)
        return;
    r = &f->recs[ord & (f->cap - 1)];
    if (r->ord != ord ||
        __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != TACL__FLIGHT_PENDING)
        return;
    /* Atomic stores: the fast path ends its record without the lock
     * (flight.h), while a dump may read it under the lock. */
    __atomic_store_n(&r->exec, NULL, __ATOMIC_RELAXED);
    __atomic_store_n(&r->status, status, __ATOMIC_RELAXED);
    __atomic_store_n(&r->state,
                     (uint8_t)(status == TACL_OK ? TACL__FLIGHT_DONE
                                                 : TACL__FLIGHT_FAILED),
                     __ATOMIC_RELEASE);
}

static const char *status_word(tacl_status_t s)
{
    switch (s) {
    case TACL_OK: return "ok";
    case TACL_ERR_REMOTE: return "remote";
    case TACL_ERR_TIMEOUT: return "timeout";
    case TACL_ERR_NO_MEMORY: return "nomem";
    case TACL_ERR_UNSUPPORTED: return "unsupported";
    case TACL_ERR_SYSTEM: return "system";
    default: return "error";
    }
}

static const char *const state_names[] = {"pending", "done", "failed"};

static void emit(FILE *file, int to_log, const char *line)
{
    if (file != NULL)
        fprintf(file, "%s\n", line);
    if (to_log)
        TACL_WARN(COLL, "%s", line);
}

void tacl__flight_dump(tacl__xcomm_t *xc, const char *reason, FILE *file,
                       int to_log)
{
    tacl__flight_t *f = &xc->flight;
    uint64_t now = tacl__now_ns();
    uint64_t first = f->n > f->cap ? f->n - f->cap : 0;
    char head[64 + TACL__COMM_NAME_LEN], line[1024];

    /* The name has no blanks or '=' (lib replaces them), so the
     * key=value lines still split on blanks. */
    snprintf(head, sizeof(head), "TACL_FLIGHT rank=%d nranks=%d comm=%#x%s%s",
             f->rank, f->size, xc->id, xc->name[0] ? " name=" : "",
             xc->name);
    snprintf(line, sizeof(line), "%s world=%d pid=%d dump=%s records=%llu "
             "kept=%llu capacity=%u", head, xc->ctx->rank, (int)getpid(),
             reason, (unsigned long long)f->n,
             (unsigned long long)(f->n - first), f->cap);
    emit(file, to_log, line);
    for (uint64_t o = first; o < f->n; o++) {
        const tacl__flight_rec_t *r = &f->recs[o & (f->cap - 1)];
        uint8_t state = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
        tacl_status_t status = __atomic_load_n(&r->status, __ATOMIC_RELAXED);
        tacl__exec_t *exec = __atomic_load_n(&r->exec, __ATOMIC_RELAXED);
        char sig[160];
        int len;

        tacl__op_sig_format(&r->op.sig, sig, sizeof(sig));
        len = snprintf(line, sizeof(line), "%s op=%llu seq=%llu %s algo=%s "
                       "nops=%d state=%s status=%s age_ms=%.3f", head,
                       (unsigned long long)r->ord,
                       (unsigned long long)r->op.seq, sig,
                       r->algo[0] ? r->algo : "-", r->op.nops,
                       state_names[state], status_word(status),
                       (now - r->start_ns) / 1e6);
        if (exec != NULL && f->describe != NULL && len > 0 &&
            (size_t)len < sizeof(line))
            f->describe(exec, line + len, sizeof(line) - len);
        emit(file, to_log, line);
    }
    if (file != NULL)
        fflush(file);
}

/* TACL_FLIGHT_DUMP_FILE with %h (host), %p (pid) and %r (world rank). */
static FILE *open_dump_file(const tacl__xcomm_t *xc)
{
    const char *pattern = tacl__config_str(TACL_CFG_FLIGHT_DUMP_FILE);
    char path[512], host[64] = "";
    size_t o = 0;
    FILE *file;

    if (pattern[0] == '\0')
        return NULL;
    gethostname(host, sizeof(host) - 1);
    for (const char *p = pattern; *p != '\0' && o + 80 < sizeof(path); p++) {
        if (p[0] == '%' && p[1] == 'h')
            o += (size_t)snprintf(path + o, sizeof(path) - o, "%s", host);
        else if (p[0] == '%' && p[1] == 'p')
            o += (size_t)snprintf(path + o, sizeof(path) - o, "%d",
                                  (int)getpid());
        else if (p[0] == '%' && p[1] == 'r')
            o += (size_t)snprintf(path + o, sizeof(path) - o, "%d",
                                  xc->ctx->rank);
        else {
            path[o++] = *p;
            continue;
        }
        p++;
    }
    path[o] = '\0';
    file = fopen(path, "a");
    if (file == NULL)
        TACL_WARN(COLL, "cannot open TACL_FLIGHT_DUMP_FILE \"%s\": %m; the "
                  "flight records go to the log only", path);
    return file;
}

void tacl__flight_dump_auto(tacl__xcomm_t *xc, const char *reason)
{
    FILE *file;

    if (xc->flight.cap == 0)
        return;
    file = open_dump_file(xc);
    tacl__flight_dump(xc, reason, file, 1);
    if (file != NULL)
        fclose(file);
}

unsigned tacl__flight_signal_gen(void)
{
    return __atomic_load_n(&signal_gen, __ATOMIC_RELAXED);
}

void tacl__flight_dump_signalled(const void *ctx, unsigned gen)
{
    pthread_mutex_lock(&registry_lock);
    for (tacl__flight_t *f = registry; f != NULL; f = f->next) {
        tacl__xcomm_t *xc =
            (tacl__xcomm_t *)((char *)f - offsetof(tacl__xcomm_t, flight));

        if (xc->ctx != ctx || f->signal_gen == gen)
            continue;
        f->signal_gen = gen;
        tacl__flight_dump_auto(xc, "signal");
    }
    pthread_mutex_unlock(&registry_lock);
}
