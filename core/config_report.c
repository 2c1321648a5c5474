/*
 * The configuration's report (config.h, tacl__config_report): the values
 * the environment set, those it set wrong and the TACL_ variables no
 * entry knows, each said once at INFO or WARN under subsystem ENV.  Apart
 * from config.c, which the logger reads its own settings from, so that
 * neither calls the other back.
 */
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "config.h"
#include "log.h"

/* Edit distance of a and b (up to 63 characters each). */
static int edit_distance(const char *a, const char *b)
{
    int prev[64], cur[64];
    size_t la = strlen(a), lb = strlen(b);

    if (la > 63 || lb > 63)
        return 64;
    for (size_t j = 0; j <= lb; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;

            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del
                                                                      : ins);
        }
        memcpy(prev, cur, sizeof(prev));
    }
    return prev[lb];
}

int tacl__config_report(void)
{
    char what[256];
    int n = 0;

    for (int i = 0; i < TACL_CFG_COUNT; i++) {
        tacl__cfg_src_t src = tacl__config_source((tacl__cfg_t)i);
        const char *name = tacl__config_name((tacl__cfg_t)i);
        const char *value = tacl__config_raw((tacl__cfg_t)i);

        if (src == TACL_CFG_SRC_ENV)
            TACL_INFO(ENV, "TACL_%s set by environment to %s", name, value);
        if (src != TACL_CFG_SRC_INVALID)
            continue;
        tacl__config_describe((tacl__cfg_t)i, what, sizeof(what));
        TACL_WARN(ENV, "TACL_%s=\"%s\" is invalid (expected %s); using the "
                  "default \"%s\"", name, value, what,
                  tacl__config_default((tacl__cfg_t)i));
        n++;
    }
    for (int u = 0; tacl__config_unknown(u) != NULL; u++) {
        const char *var = tacl__config_unknown(u), *name = var + 5;
        /* A suggestion only for a near miss: at most two edits, and
         * fewer than half the name's letters. */
        int best = -1, best_d = TACL_MIN(3, (int)(strlen(name) + 1) / 2);

        for (int i = 0; i < TACL_CFG_COUNT; i++) {
            int d = edit_distance(name, tacl__config_name((tacl__cfg_t)i));

            if (d < best_d) {
                best_d = d;
                best = i;
            }
        }
        if (best >= 0)
            TACL_WARN(ENV, "unknown variable %s is ignored; did you mean "
                      "TACL_%s?", var, tacl__config_name((tacl__cfg_t)best));
        else
            TACL_WARN(ENV, "unknown variable %s is ignored (tacl-info lists "
                      "the known ones)", var);
        n++;
    }
    return n;
}

void tacl__config_report_once(void)
{
    static int done;

    if (!__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL))
        (void)tacl__config_report();
}
