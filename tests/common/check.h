/*
 * CHECK, for code that runs in a forked rank process, where Criterion's
 * assertions must not be used: when cond is false it prints the rank, the
 * place, the condition and an optional printf-style detail on stderr, and
 * ends the process with exit status 1, which the parent sees as a failed
 * rank.
 *
 *     CHECK(tl != NULL);
 *     CHECK(st == TACL_OK, "init: %s", tacl_status_string(st));
 */
#ifndef TACL_TESTS_COMMON_CHECK_H
#define TACL_TESTS_COMMON_CHECK_H

/*
 * The detail's format is appended to a lone space, so that a CHECK with
 * no detail still hands the printf checks a non-empty literal.
 */
#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond))                                                         \
            tt_check_failed(__FILE__, __LINE__, #cond, " " __VA_ARGS__);     \
    } while (0)

/** Report a failed CHECK and _exit(1); called by the macro only. */
void tt_check_failed(const char *file, int line, const char *cond,
                     const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));

#endif /* TACL_TESTS_COMMON_CHECK_H */
