/*
 * parse.h: the one grammar of numbers, sizes and reals that the
 * configuration, the tools and the perf binaries share.  Every form the
 * tools took before is still taken; everything else is refused with the
 * reason a message will give.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <stdint.h>

#include "parse.h"

static uint64_t size_ok(const char *s)
{
    uint64_t v = 12345;
    tacl__parse_err_t err = tacl__parse_size(s, 0, UINT64_MAX, &v);

    cr_expect_eq(err, TACL_PARSE_OK, "'%s': %s", s,
                 tacl__parse_strerror(err));
    return v;
}

static tacl__parse_err_t size_err(const char *s)
{
    uint64_t v = 12345;
    tacl__parse_err_t err = tacl__parse_size(s, 0, UINT64_MAX, &v);

    cr_expect_eq(v, 12345, "'%s' set the output on failure", s);
    return err;
}

Test(parse, sizes_take_every_suffix_the_tools_took)
{
    cr_expect_eq(size_ok("0"), 0);
    cr_expect_eq(size_ok("4096"), 4096);
    cr_expect_eq(size_ok("512B"), 512);
    cr_expect_eq(size_ok("512b"), 512);
    cr_expect_eq(size_ok("4K"), 4096);
    cr_expect_eq(size_ok("4k"), 4096);
    cr_expect_eq(size_ok("4KB"), 4096);
    cr_expect_eq(size_ok("4kb"), 4096);
    cr_expect_eq(size_ok("64KiB"), 64u << 10);
    cr_expect_eq(size_ok("2Mi"), 2u << 20);
    cr_expect_eq(size_ok("32M"), 32u << 20);
    cr_expect_eq(size_ok("1g"), 1u << 30);
    cr_expect_eq(size_ok("1GB"), 1u << 30);
    cr_expect_eq(size_ok("16G"), 16ull << 30);
    cr_expect_eq(size_ok("007"), 7, "decimal, not octal");
    cr_expect_eq(size_ok("18446744073709551615"), UINT64_MAX);
    cr_expect_eq(size_ok("17179869183G"), 17179869183ull << 30);
}

Test(parse, sizes_refuse_everything_else)
{
    cr_expect_eq(size_err(""), TACL_PARSE_EMPTY);
    cr_expect_eq(size_err("-1"), TACL_PARSE_NEGATIVE);
    cr_expect_eq(size_err("-4K"), TACL_PARSE_NEGATIVE);
    cr_expect_eq(size_err(" 4K"), TACL_PARSE_NOT_NUMBER);
    cr_expect_eq(size_err("+4K"), TACL_PARSE_NOT_NUMBER);
    cr_expect_eq(size_err("K"), TACL_PARSE_NOT_NUMBER);
    cr_expect_eq(size_err("0x10"), TACL_PARSE_SUFFIX);
    cr_expect_eq(size_err("1.5M"), TACL_PARSE_SUFFIX);
    cr_expect_eq(size_err("4K "), TACL_PARSE_SUFFIX);
    cr_expect_eq(size_err("4T"), TACL_PARSE_SUFFIX);
    cr_expect_eq(size_err("4KK"), TACL_PARSE_SUFFIX);
    cr_expect_eq(size_err("4iB"), TACL_PARSE_SUFFIX);
    cr_expect_eq(size_err("4KBB"), TACL_PARSE_SUFFIX);
    cr_expect_eq(size_err("1M2"), TACL_PARSE_SUFFIX);
    cr_expect_eq(size_err("18446744073709551616"), TACL_PARSE_OVERFLOW);
    cr_expect_eq(size_err("17179869184G"), TACL_PARSE_OVERFLOW);
    cr_expect_eq(size_err("99999999999999999999999K"), TACL_PARSE_OVERFLOW);
}

Test(parse, sizes_and_numbers_keep_to_their_range)
{
    uint64_t v = 0;
    int i = -1;

    cr_expect_eq(tacl__parse_size("4K", 1, 4096, &v), TACL_PARSE_OK);
    cr_expect_eq(v, 4096);
    cr_expect_eq(tacl__parse_size("0", 1, 4096, &v), TACL_PARSE_RANGE);
    cr_expect_eq(tacl__parse_size("4097", 1, 4096, &v), TACL_PARSE_RANGE);
    cr_expect_eq(tacl__parse_int("4096", 1, 4096, &i), TACL_PARSE_OK);
    cr_expect_eq(i, 4096);
    cr_expect_eq(tacl__parse_int("0", 1, 4096, &i), TACL_PARSE_RANGE);
    cr_expect_eq(tacl__parse_int("4097", 1, 4096, &i), TACL_PARSE_RANGE);
    cr_expect_eq(i, 4096, "a refused value leaves the output alone");
}

Test(parse, numbers_are_plain_digits)
{
    uint64_t v = 0;
    int i = 0;

    cr_expect_eq(tacl__parse_uint("42", 0, UINT64_MAX, &v), TACL_PARSE_OK);
    cr_expect_eq(v, 42);
    cr_expect_eq(tacl__parse_int("010", 0, 100, &i), TACL_PARSE_OK);
    cr_expect_eq(i, 10);
    cr_expect_eq(tacl__parse_uint("4K", 0, UINT64_MAX, &v),
                 TACL_PARSE_TRAILING, "a number takes no suffix");
    cr_expect_eq(tacl__parse_uint("4 ", 0, UINT64_MAX, &v),
                 TACL_PARSE_TRAILING);
    cr_expect_eq(tacl__parse_uint("-0", 0, UINT64_MAX, &v),
                 TACL_PARSE_NEGATIVE);
    cr_expect_eq(tacl__parse_uint("x", 0, UINT64_MAX, &v),
                 TACL_PARSE_NOT_NUMBER);
    cr_expect_eq(tacl__parse_uint("", 0, UINT64_MAX, &v), TACL_PARSE_EMPTY);
    cr_expect_eq(tacl__parse_int("2147483648", 0, INT32_MAX, &i),
                 TACL_PARSE_RANGE);
}

static double real_ok(const char *s)
{
    double v = -99;
    tacl__parse_err_t err = tacl__parse_double(s, -DBL_MAX, DBL_MAX, &v);

    cr_expect_eq(err, TACL_PARSE_OK, "'%s': %s", s,
                 tacl__parse_strerror(err));
    return v;
}

static tacl__parse_err_t real_err(const char *s)
{
    double v = -99;
    tacl__parse_err_t err = tacl__parse_double(s, -DBL_MAX, DBL_MAX, &v);

    cr_expect_eq(v, -99, "'%s' set the output on failure", s);
    return err;
}

Test(parse, reals)
{
    double v;

    cr_expect_eq(real_ok("60"), 60);
    cr_expect_eq(real_ok("0.5"), 0.5);
    cr_expect_eq(real_ok(".5"), 0.5);
    cr_expect_eq(real_ok("5."), 5);
    cr_expect_eq(real_ok("2e-3"), 2e-3);
    cr_expect_eq(real_ok("1E+6"), 1e6);
    cr_expect_eq(real_ok("-1.25"), -1.25);
    cr_expect_eq(real_ok("1e-400"), 0, "too small to tell from 0");
    cr_expect_eq(real_err(""), TACL_PARSE_EMPTY);
    cr_expect_eq(real_err("abc"), TACL_PARSE_NOT_NUMBER);
    cr_expect_eq(real_err("inf"), TACL_PARSE_NOT_NUMBER);
    cr_expect_eq(real_err("nan"), TACL_PARSE_NOT_NUMBER);
    cr_expect_eq(real_err(" 1"), TACL_PARSE_NOT_NUMBER);
    cr_expect_eq(real_err("+1"), TACL_PARSE_NOT_NUMBER);
    cr_expect_eq(real_err("."), TACL_PARSE_NOT_NUMBER);
    cr_expect_eq(real_err("1.2.3"), TACL_PARSE_NOT_NUMBER);
    cr_expect_eq(real_err("-"), TACL_PARSE_NOT_NUMBER);
    cr_expect_eq(real_err("5s"), TACL_PARSE_TRAILING);
    cr_expect_eq(real_err("0x10"), TACL_PARSE_TRAILING);
    cr_expect_eq(real_err("1e"), TACL_PARSE_TRAILING);
    cr_expect_eq(real_err("1e+"), TACL_PARSE_TRAILING);
    cr_expect_eq(real_err("1 "), TACL_PARSE_TRAILING);
    cr_expect_eq(real_err("1e999"), TACL_PARSE_OVERFLOW);
    cr_expect_eq(tacl__parse_double("-1", 0, 10, &v), TACL_PARSE_NEGATIVE);
    cr_expect_eq(tacl__parse_double("0", DBL_MIN, 10, &v), TACL_PARSE_RANGE);
    cr_expect_eq(tacl__parse_double("11", 0, 10, &v), TACL_PARSE_RANGE);
}

Test(parse, every_refusal_has_a_reason)
{
    for (int e = TACL_PARSE_EMPTY; e <= TACL_PARSE_RANGE; e++) {
        const char *why = tacl__parse_strerror((tacl__parse_err_t)e);

        cr_expect_neq(why, NULL);
        cr_expect_str_neq(why, "invalid", "error %d has no reason", e);
        cr_expect_str_neq(why, "valid", "error %d has no reason", e);
    }
}
