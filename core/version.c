/*
 * The library's version, asked through the public API.
 */
#include "tacl.h"
#include "common.h"
#include "log.h"

TACL_EXPORT tacl_status_t tacl_get_version(int *version_p)
{
    if (version_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT, "version_p is NULL");
    *version_p = TACL_VERSION_CODE;
    return TACL_OK;
}
