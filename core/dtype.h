/*
 * Questions about dtypes and ops that more than one layer asks.
 */
#ifndef TACL_CORE_DTYPE_H
#define TACL_CORE_DTYPE_H

#include "tacl.h"

/** 1 for the integer dtypes (signed or not), 0 otherwise. */
static inline int tacl__dtype_is_integer(tacl_dtype_t dtype)
{
    return dtype == TACL_INT8 || dtype == TACL_UINT8 ||
           dtype == TACL_INT32 || dtype == TACL_UINT32 ||
           dtype == TACL_INT64 || dtype == TACL_UINT64;
}

/** 1 for BAND, BOR and BXOR, which take the integer dtypes only. */
static inline int tacl__op_is_bitwise(tacl_op_t op)
{
    return op == TACL_BAND || op == TACL_BOR || op == TACL_BXOR;
}

#endif /* TACL_CORE_DTYPE_H */
