/*
 * Logging and the per-thread last error.
 *
 * Lines look like NCCL's: "host:pid:tid TACL WARN SHM message".  The
 * level and subsystem mask are read from the configuration once (and again
 * on tacl__log_reload()); checking whether a message is enabled is one
 * load and a compare, so disabled TRACE calls cost nothing in hot loops.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"
#include "config.h"
#include "log.h"
#include "tacl_build_config.h"

static const char *const subsys_names[TACL_SUBSYS_COUNT] = {
#define TACL_SUBSYS_NAME_(name) #name,
    TACL_SUBSYS_LIST(TACL_SUBSYS_NAME_)
#undef TACL_SUBSYS_NAME_
};

static const char *const level_names[] = {"NONE", "WARN", "INFO", "TRACE"};

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_level = TACL_LOG_WARN;
static unsigned log_mask = ~0u;
static FILE *log_file;
static char log_host[64];
/* Whether the banner and the configuration's report (its warnings) were
 * logged, which happens on the first check of whether to log anything. */
static int banner_shown;

static __thread char last_error[TACL__ERROR_LEN];
/* The peer whose failure tacl__error_peer() last recorded, or -1. */
static __thread int failed_rank = -1;

static unsigned parse_subsys(const char *spec)
{
    unsigned mask = 0, exclude = 0;
    char buf[256], *tok, *save = NULL;

    snprintf(buf, sizeof(buf), "%s", spec);
    for (tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        int neg = tok[0] == '^';
        const char *name = neg ? tok + 1 : tok;
        unsigned bits = 0;

        if (strcasecmp(name, "ALL") == 0) {
            bits = ~0u;
        } else {
            for (int i = 0; i < TACL_SUBSYS_COUNT; i++)
                if (strcasecmp(name, subsys_names[i]) == 0)
                    bits = 1u << i;
        }
        if (neg)
            exclude |= bits;
        else
            mask |= bits;
    }
    if (mask == 0)
        mask = ~0u;
    return mask & ~exclude;
}

static FILE *open_log_file(const char *pattern)
{
    char path[512];
    size_t o = 0;

    for (const char *p = pattern; *p != '\0' && o + 32 < sizeof(path); p++) {
        if (p[0] == '%' && p[1] == 'h') {
            o += (size_t)snprintf(path + o, sizeof(path) - o, "%s", log_host);
            p++;
        } else if (p[0] == '%' && p[1] == 'p') {
            o += (size_t)snprintf(path + o, sizeof(path) - o, "%d",
                                  (int)getpid());
            p++;
        } else {
            path[o++] = *p;
        }
    }
    path[o] = '\0';
    return fopen(path, "a");
}

static void log_setup(void)
{
    const char *file = tacl__config_str(TACL_CFG_DEBUG_FILE);

    gethostname(log_host, sizeof(log_host) - 1);
    log_level = TACL_MAX(tacl__config_word(TACL_CFG_DEBUG), 0);
    log_mask = parse_subsys(tacl__config_str(TACL_CFG_DEBUG_SUBSYS));
    if (log_file != NULL && log_file != stderr)
        fclose(log_file);
    log_file = stderr;
    if (file[0] != '\0') {
        FILE *f = open_log_file(file);
        if (f != NULL) {
            setvbuf(f, NULL, _IOLBF, 0);
            log_file = f;
        } else {
            fprintf(stderr, "tacl: cannot open TACL_DEBUG_FILE \"%s\", "
                            "logging to stderr\n", file);
        }
    }
}

int tacl__log_enabled(tacl__log_level_t level, tacl__subsys_t subsys)
{
    pthread_once(&log_once, log_setup);
    if (!__atomic_load_n(&banner_shown, __ATOMIC_RELAXED) &&
        !__atomic_exchange_n(&banner_shown, 1, __ATOMIC_ACQ_REL))
        tacl__log_banner();
    /* Warnings pass whatever the subsystem mask says. */
    return (int)level <= log_level &&
           (level == TACL_LOG_WARN || (log_mask & (1u << subsys)) != 0);
}

static void log_vprint(tacl__log_level_t level, tacl__subsys_t subsys,
                       const char *file, int line, const char *fmt,
                       va_list ap)
{
    char msg[TACL__ERROR_LEN + 256];

    vsnprintf(msg, sizeof(msg), fmt, ap);
    pthread_mutex_lock(&log_lock);
    if (level >= TACL_LOG_TRACE)
        fprintf(log_file, "%s:%d:%ld TACL %s %s %s:%d %s\n", log_host,
                (int)getpid(), (long)syscall(SYS_gettid), level_names[level],
                subsys_names[subsys], file, line, msg);
    else
        fprintf(log_file, "%s:%d:%ld TACL %s %s %s\n", log_host,
                (int)getpid(), (long)syscall(SYS_gettid), level_names[level],
                subsys_names[subsys], msg);
    pthread_mutex_unlock(&log_lock);
}

void tacl__log(tacl__log_level_t level, tacl__subsys_t subsys,
               const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    log_vprint(level, subsys, file, line, fmt, ap);
    va_end(ap);
}

static tacl_status_t error_vrecord(tacl_status_t status,
                                   tacl__subsys_t subsys, const char *file,
                                   int line, const char *fmt, va_list ap)
{
    tacl__log_level_t level;

    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    level = (status == TACL_ERR_INVALID_ARG || status == TACL_ERR_INVALID_USAGE)
                ? TACL_LOG_INFO
                : TACL_LOG_WARN;
    if (tacl__log_enabled(level, subsys))
        tacl__log(level, subsys, file, line, "%s (%s)", last_error,
                  tacl_status_string(status));
    return status;
}

tacl_status_t tacl__error_record(tacl_status_t status, tacl__subsys_t subsys,
                                 const char *file, int line,
                                 const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    status = error_vrecord(status, subsys, file, line, fmt, ap);
    va_end(ap);
    return status;
}

tacl_status_t tacl__error_peer_record(int rank, tacl__subsys_t subsys,
                                      const char *file, int line,
                                      const char *fmt, ...)
{
    tacl_status_t status;
    va_list ap;

    va_start(ap, fmt);
    status = error_vrecord(TACL_ERR_REMOTE, subsys, file, line, fmt, ap);
    va_end(ap);
    failed_rank = rank;
    return status;
}

int tacl__error_take_failed_rank(void)
{
    int rank = failed_rank;

    failed_rank = -1;
    return rank;
}

const char *tacl__last_error(void)
{
    return last_error;
}

void tacl__last_error_clear(void)
{
    last_error[0] = '\0';
    failed_rank = -1;
}

void tacl__log_reload(void)
{
    pthread_once(&log_once, log_setup);
    tacl__config_reload();
    pthread_mutex_lock(&log_lock);
    log_setup();
    pthread_mutex_unlock(&log_lock);
    __atomic_store_n(&banner_shown, 0, __ATOMIC_RELEASE);
}

void tacl__build_describe(char *buf, size_t len)
{
    snprintf(buf, len, "tacl %s (CUDA %s, UCX %s%s, hwloc %s, fuzz "
             "harnesses %s, %s build, %s)", TACL_VERSION_STRING,
             TACL_HAVE_CUDA ? "yes" : "no", TACL_BUILD_UCX ? "yes " : "no",
             TACL_BUILD_UCX_VERSION, TACL_BUILD_HWLOC_VERSION,
             TACL_BUILD_FUZZ ? "yes" : "no", TACL_BUILD_TYPE, TACL_BUILD_CC);
}

void tacl__log_banner(void)
{
    static int done;
    char desc[256];
    /* The first check calls this again, and prints the banner first. */
    int enabled = tacl__log_enabled(TACL_LOG_INFO, TACL_SUBSYS_INIT);

    if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL) || !enabled)
        return;
    tacl__build_describe(desc, sizeof(desc));
    tacl__log(TACL_LOG_INFO, TACL_SUBSYS_INIT, __FILE__, __LINE__, "%s",
              desc);
}
