/*
 * Deterministic test values for the conformance suite.
 *
 * Every rank can compute every other rank's input from (rank, index), so
 * each rank checks its own output against a reference built locally.
 * Inputs are small integers chosen so that every summation order gives
 * the same bits in every dtype (float16 and bfloat16 included), which
 * lets the checks be memcmp-exact.
 */
#ifndef TACL_TESTS_COLL_VALUES_H
#define TACL_TESTS_COLL_VALUES_H

#include <stddef.h>
#include <stdint.h>

#include "tacl.h"

/** float16 bits of a small integer (exact for |v| < 2048). */
uint16_t val_half_from_int(int v);
/** bfloat16 bits of a small integer (exact for |v| <= 256). */
uint16_t val_bf16_from_int(int v);

/** Store integer value v as element idx of a buffer of dtype dt. */
void val_store(tacl_dtype_t dt, void *buf, size_t idx, long v);
/** Load element idx as a double (for messages). */
double val_load(tacl_dtype_t dt, const void *buf, size_t idx);

/** Input of rank for pure data movement (no reduction), element idx. */
long val_move(tacl_dtype_t dt, int rank, size_t idx);
/** Input of rank among nranks for a reduction with op, element idx. */
long val_red_input(tacl_dtype_t dt, tacl_op_t op, int rank, int nranks,
                   size_t idx);
/** The reduction of val_red_input over all ranks, element idx. */
long val_red_result(tacl_dtype_t dt, tacl_op_t op, int nranks, size_t idx);

/** Fill count elements from element first of the movement input. */
void val_fill_move(tacl_dtype_t dt, void *buf, size_t count, int rank,
                   size_t first);
/** Fill count elements from element first of the reduction input. */
void val_fill_red(tacl_dtype_t dt, tacl_op_t op, void *buf, size_t count,
                  int rank, int nranks, size_t first);
/** Fill count elements from element first of the reduction result. */
void val_fill_red_result(tacl_dtype_t dt, tacl_op_t op, void *buf,
                         size_t count, int nranks, size_t first);

/**
 * Compare count elements bit for bit.  Returns -1 when equal, else the
 * index of the first differing element.
 */
long val_first_diff(tacl_dtype_t dt, const void *got, const void *expect,
                    size_t count);

/** Element size, from the test's own table (0 for a bad dtype). */
size_t val_size(tacl_dtype_t dt);

/** Whether a dtype is unsigned. */
int val_is_unsigned(tacl_dtype_t dt);

#endif /* TACL_TESTS_COLL_VALUES_H */
