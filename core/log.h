/*
 * Logging and error recording.
 *
 * TACL_DEBUG selects the level (NONE, WARN, INFO, TRACE), TACL_DEBUG_SUBSYS
 * a comma-separated list of subsystems whose INFO and TRACE lines are
 * printed (or ALL, or ^NAME to exclude one; INIT and ENV by default, as
 * NCCL does; warnings are printed whatever the list),
 * TACL_DEBUG_FILE a file name in which %h expands to the host name and %p
 * to the process id.  Messages are lowercase and say what happened and
 * what to do.
 *
 * tacl__error() is how an error is decided: it formats the reason into the
 * calling thread's last-error buffer, logs it, and returns the status so a
 * caller can write `return tacl__error(TACL_ERR_INVALID_ARG, TACL_SUBSYS_COLL,
 * "count %zu overflows", count);`.
 */
#ifndef TACL_CORE_LOG_H
#define TACL_CORE_LOG_H

#include <stdarg.h>

#include "tacl.h"

#define TACL_SUBSYS_LIST(X)                                                  \
    X(INIT)                                                                  \
    X(ENV)                                                                   \
    X(BOOT)                                                                  \
    X(TOPO)                                                                  \
    X(SHM)                                                                   \
    X(IPC)                                                                   \
    X(NET)                                                                   \
    X(COLL)                                                                  \
    X(SCHED)                                                                 \
    X(TUNE)                                                                  \
    X(ALLOC)

typedef enum {
#define TACL_SUBSYS_ENUM_(name) TACL_SUBSYS_##name,
    TACL_SUBSYS_LIST(TACL_SUBSYS_ENUM_)
#undef TACL_SUBSYS_ENUM_
    TACL_SUBSYS_COUNT
} tacl__subsys_t;

typedef enum {
    TACL_LOG_NONE = 0,
    TACL_LOG_WARN,
    TACL_LOG_INFO,
    TACL_LOG_TRACE
} tacl__log_level_t;

/** Whether a message of this level and subsystem would be printed. */
int tacl__log_enabled(tacl__log_level_t level, tacl__subsys_t subsys);

void tacl__log(tacl__log_level_t level, tacl__subsys_t subsys,
               const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define TACL_LOG_(level, subsys, ...)                                        \
    do {                                                                     \
        if (tacl__log_enabled(level, TACL_SUBSYS_##subsys))                  \
            tacl__log(level, TACL_SUBSYS_##subsys, __FILE__, __LINE__,       \
                      __VA_ARGS__);                                          \
    } while (0)

/** Log at a level for a subsystem named without its prefix: WARN(SHM, ...). */
#define TACL_WARN(subsys, ...) TACL_LOG_(TACL_LOG_WARN, subsys, __VA_ARGS__)
#define TACL_INFO(subsys, ...) TACL_LOG_(TACL_LOG_INFO, subsys, __VA_ARGS__)
#define TACL_TRACE(subsys, ...) TACL_LOG_(TACL_LOG_TRACE, subsys, __VA_ARGS__)

/**
 * Record an error as the calling thread's last error and log it (at WARN
 * for system, internal, remote and timeout errors, at INFO for a caller's
 * bad argument or usage), then return status.  Subsystem named without its
 * prefix: tacl__error(TACL_ERR_SYSTEM, SHM, "mmap failed: %m").
 */
#define tacl__error(status, subsys, ...)                                     \
    tacl__error_record((status), TACL_SUBSYS_##subsys, __FILE__, __LINE__,   \
                       __VA_ARGS__)

tacl_status_t tacl__error_record(tacl_status_t status, tacl__subsys_t subsys,
                                 const char *file, int line,
                                 const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/**
 * tacl__error(TACL_ERR_REMOTE, ...) for the failure of one peer, `rank`
 * of the context (it died, or its link broke): also notes the rank, so
 * that the executor can name it to the other ranks.
 */
#define tacl__error_peer(rank, subsys, ...)                                  \
    tacl__error_peer_record((rank), TACL_SUBSYS_##subsys, __FILE__,         \
                            __LINE__, __VA_ARGS__)

tacl_status_t tacl__error_peer_record(int rank, tacl__subsys_t subsys,
                                      const char *file, int line,
                                      const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/**
 * The rank the calling thread's last tacl__error_peer() named, or -1;
 * reading it (or tacl__last_error_clear) forgets it.
 */
int tacl__error_take_failed_rank(void);

/** Bytes an error message may have, its NUL included: every buffer that
 *  keeps one (the thread's, a context's failure, a communicator's) holds
 *  at least this many, so no message is cut on its way to the user. */
#define TACL__ERROR_LEN 4096

/** The calling thread's last error message ("" if none). */
const char *tacl__last_error(void);
/** Clear the calling thread's last error message. */
void tacl__last_error_clear(void);

/** Re-read the logging configuration (tests change it between cases). */
void tacl__log_reload(void);

/**
 * The build in one line: version and options (CUDA, UCX, hwloc, fuzz
 * harnesses, build type, compiler), from tacl_build_config.h.
 */
void tacl__build_describe(char *buf, size_t len);

/**
 * Log the version banner at INFO (INIT), once per process: on the first
 * check of whether to log anything, or at the first init, whichever
 * comes first.
 */
void tacl__log_banner(void);

#endif /* TACL_CORE_LOG_H */
