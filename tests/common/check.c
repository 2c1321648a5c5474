/*
 * The report of a failed CHECK (see check.h).
 */
#include "check.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "fork.h"

void tt_check_failed(const char *file, int line, const char *cond,
                     const char *fmt, ...)
{
    char detail[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    /* detail starts with the space the macro put before the format. */
    if (detail[1] != '\0')
        fprintf(stderr, "rank %d: %s:%d: check failed: %s:%s\n", tt_rank,
                file, line, cond, detail);
    else
        fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", tt_rank, file,
                line, cond);
    fflush(stderr);
    _exit(1);
}
