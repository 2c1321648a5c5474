/*
 * Status strings and dtype/op metadata: the constant tables behind the
 * public helpers.
 */
#include "tacl.h"
#include "common.h"

TACL_EXPORT const char *tacl_status_string(tacl_status_t status)
{
    switch (status) {
#define TACL_STATUS_CASE_(name, value, msg)                                  \
    case name:                                                               \
        return msg;
        TACL_STATUS_LIST(TACL_STATUS_CASE_)
#undef TACL_STATUS_CASE_
    }
    return "unknown status";
}

static const struct {
    const char *name;
    size_t size;
} dtype_table[TACL_NUM_DTYPES] = {
    [TACL_INT8] = {"int8", 1},       [TACL_UINT8] = {"uint8", 1},
    [TACL_INT32] = {"int32", 4},     [TACL_UINT32] = {"uint32", 4},
    [TACL_INT64] = {"int64", 8},     [TACL_UINT64] = {"uint64", 8},
    [TACL_FLOAT16] = {"float16", 2}, [TACL_BFLOAT16] = {"bfloat16", 2},
    [TACL_FLOAT32] = {"float32", 4}, [TACL_FLOAT64] = {"float64", 8},
};

static const char *const op_names[TACL_NUM_OPS] = {
    [TACL_SUM] = "sum", [TACL_PROD] = "prod", [TACL_MAX] = "max",
    [TACL_MIN] = "min", [TACL_AVG] = "avg", [TACL_BAND] = "band",
    [TACL_BOR] = "bor", [TACL_BXOR] = "bxor",
};

TACL_EXPORT size_t tacl_dtype_size(tacl_dtype_t dtype)
{
    if ((unsigned)dtype >= TACL_NUM_DTYPES)
        return 0;
    return dtype_table[dtype].size;
}

TACL_EXPORT const char *tacl_dtype_name(tacl_dtype_t dtype)
{
    if ((unsigned)dtype >= TACL_NUM_DTYPES)
        return "invalid";
    return dtype_table[dtype].name;
}

TACL_EXPORT const char *tacl_op_name(tacl_op_t op)
{
    if ((unsigned)op >= TACL_NUM_OPS)
        return "invalid";
    return op_names[op];
}
