/*
 * Strict parsing of numbers and sizes: one grammar for every reader, the
 * configuration's TACL_ variables, the launcher's variables, topology
 * files and the command lines of tacl-run, tacl-sim, tacl-info and the
 * perf binaries.
 *
 *   number  decimal digits and nothing else: no sign, no white space, no
 *           0x or leading-zero octal ("010" is ten).
 *   size    a number, then optionally K, M or G (powers of 1024; k, m
 *           and g too, which the perf binaries and the configuration
 *           have always taken), then optionally i (KiB, as the
 *           configuration took it), then optionally B: 4K, 4KB, 4KiB,
 *           512B, 1g.  No fractions ("1.5M").
 *   real    an optional minus, digits with at most one decimal point,
 *           an optional exponent: 0.5, 2e-3, -1.  No white space, no hex,
 *           no inf or nan.
 *
 * The whole string must be the value.  A negative value where none is
 * allowed, a value that does not fit in 64 bits and one outside [lo, hi]
 * are refused; each refusal has a reason (tacl__parse_strerror) for the
 * caller's message, which names the flag or variable and the value.
 *
 * Header-only (static inline) so that programs that do not link tacl,
 * tacl-run and the MPI and Gloo comparison harnesses, read numbers as the
 * library does; it includes nothing of tacl.  Valid C and C++.
 */
#ifndef TACL_CORE_PARSE_H
#define TACL_CORE_PARSE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/** Why a string is not a valid value; 0 when it is. */
typedef enum {
    TACL_PARSE_OK = 0,
    TACL_PARSE_EMPTY,      /* "" */
    TACL_PARSE_NEGATIVE,   /* a minus sign where none is allowed */
    TACL_PARSE_NOT_NUMBER, /* does not start with a digit */
    TACL_PARSE_TRAILING,   /* a number followed by something else */
    TACL_PARSE_SUFFIX,     /* a size followed by no K, M, G or B */
    TACL_PARSE_OVERFLOW,   /* does not fit in 64 bits (or a double) */
    TACL_PARSE_RANGE       /* a number outside [lo, hi] */
} tacl__parse_err_t;

/** A lowercase phrase saying why, for "bad value 'x' for -n: <why>". */
static inline const char *tacl__parse_strerror(tacl__parse_err_t err)
{
    switch (err) {
    case TACL_PARSE_OK:
        return "valid";
    case TACL_PARSE_EMPTY:
        return "empty";
    case TACL_PARSE_NEGATIVE:
        return "negative values are not allowed";
    case TACL_PARSE_NOT_NUMBER:
        return "not a decimal number";
    case TACL_PARSE_TRAILING:
        return "unexpected characters after the number";
    case TACL_PARSE_SUFFIX:
        return "unknown suffix (a size takes K, M or G, powers of 1024, "
               "then an optional B)";
    case TACL_PARSE_OVERFLOW:
        return "too large";
    case TACL_PARSE_RANGE:
        return "out of range";
    }
    return "invalid";
}

/* The leading digits of s into *v_p; *end_p past them.  The common first
 * step of numbers and sizes. */
static inline tacl__parse_err_t tacl__parse_digits_(const char *s,
                                                    uint64_t *v_p,
                                                    const char **end_p)
{
    uint64_t v = 0;
    const char *p = s;

    if (*s == '\0')
        return TACL_PARSE_EMPTY;
    if (*s == '-')
        return TACL_PARSE_NEGATIVE;
    if (*s < '0' || *s > '9')
        return TACL_PARSE_NOT_NUMBER;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');

        if (v > (UINT64_MAX - d) / 10)
            return TACL_PARSE_OVERFLOW;
        v = v * 10 + d;
    }
    *v_p = v;
    *end_p = p;
    return TACL_PARSE_OK;
}

/** A number in [lo, hi]: decimal digits only.  *v_p is set on success. */
static inline tacl__parse_err_t tacl__parse_uint(const char *s, uint64_t lo,
                                                 uint64_t hi, uint64_t *v_p)
{
    const char *end;
    uint64_t v;
    tacl__parse_err_t err = tacl__parse_digits_(s, &v, &end);

    if (err != TACL_PARSE_OK)
        return err;
    if (*end != '\0')
        return TACL_PARSE_TRAILING;
    if (v < lo || v > hi)
        return TACL_PARSE_RANGE;
    *v_p = v;
    return TACL_PARSE_OK;
}

/** The same into an int; lo and hi are at least 0. */
static inline tacl__parse_err_t tacl__parse_int(const char *s, int lo, int hi,
                                                int *v_p)
{
    uint64_t v;
    tacl__parse_err_t err = tacl__parse_uint(s, (uint64_t)lo, (uint64_t)hi,
                                             &v);

    if (err == TACL_PARSE_OK)
        *v_p = (int)v;
    return err;
}

/** A size in bytes in [lo, hi], with the suffixes above. */
static inline tacl__parse_err_t tacl__parse_size(const char *s, uint64_t lo,
                                                 uint64_t hi, uint64_t *v_p)
{
    const char *p;
    uint64_t v, scale = 1;
    tacl__parse_err_t err = tacl__parse_digits_(s, &v, &p);

    if (err != TACL_PARSE_OK)
        return err;
    switch (*p) {
    case 'K':
    case 'k':
        scale = (uint64_t)1 << 10;
        break;
    case 'M':
    case 'm':
        scale = (uint64_t)1 << 20;
        break;
    case 'G':
    case 'g':
        scale = (uint64_t)1 << 30;
        break;
    default:
        break;
    }
    if (scale > 1) {
        p++;
        if (*p == 'i')
            p++;
    }
    if (*p == 'B' || *p == 'b')
        p++;
    if (*p != '\0')
        return TACL_PARSE_SUFFIX;
    if (v > UINT64_MAX / scale)
        return TACL_PARSE_OVERFLOW;
    v *= scale;
    if (v < lo || v > hi)
        return TACL_PARSE_RANGE;
    *v_p = v;
    return TACL_PARSE_OK;
}

/** A finite real number in [lo, hi], in the grammar above. */
static inline tacl__parse_err_t tacl__parse_double(const char *s, double lo,
                                                   double hi, double *v_p)
{
    const char *p = s;
    char *end;
    double v;
    int digits = 0, points = 0;

    if (*p == '\0')
        return TACL_PARSE_EMPTY;
    if (*p == '-')
        p++;
    for (; (*p >= '0' && *p <= '9') || *p == '.'; p++) {
        if (*p == '.')
            points++;
        else
            digits++;
    }
    if (digits == 0 || points > 1)
        return TACL_PARSE_NOT_NUMBER;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '-' || *p == '+')
            p++;
        if (*p < '0' || *p > '9')
            return TACL_PARSE_TRAILING;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p != '\0')
        return TACL_PARSE_TRAILING;
    /* The grammar is strtod's minus its white space, signs, hex, inf and
     * nan; a result beyond a double is infinite (and one too small to
     * tell from 0 is taken, as strtod rounds it). */
    v = strtod(s, &end);
    if (*end != '\0' || !isfinite(v))
        return TACL_PARSE_OVERFLOW;
    if (v < lo || v > hi)
        return s[0] == '-' && lo >= 0 ? TACL_PARSE_NEGATIVE
                                      : TACL_PARSE_RANGE;
    *v_p = v;
    return TACL_PARSE_OK;
}

#endif /* TACL_CORE_PARSE_H */
