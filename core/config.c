/*
 * Configuration table.  Each entry of TACL_CONFIG_LIST becomes one slot,
 * filled from TACL_<NAME> on first use (or on tacl__config_reload()).
 * This is the only file that calls getenv().
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

typedef struct {
    const char *name;     /* without the TACL_ prefix */
    const char *def;
    const char *doc;
    const char *value;    /* the environment's, or NULL */
} config_entry_t;

static config_entry_t config_table[TACL_CFG_COUNT] = {
#define TACL_CONFIG_ENTRY_(name, def, doc) {#name, def, doc, NULL},
    TACL_CONFIG_LIST(TACL_CONFIG_ENTRY_)
#undef TACL_CONFIG_ENTRY_
};

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;

static void config_read(void)
{
    char var[64];

    pthread_mutex_lock(&config_lock);
    for (int i = 0; i < TACL_CFG_COUNT; i++) {
        snprintf(var, sizeof(var), "TACL_%s", config_table[i].name);
        config_table[i].value = getenv(var);
    }
    pthread_mutex_unlock(&config_lock);
}

static const config_entry_t *config_get(tacl__cfg_t id)
{
    pthread_once(&config_once, config_read);
    return &config_table[id];
}

const char *tacl__config_str(tacl__cfg_t id)
{
    const config_entry_t *e = config_get(id);
    return e->value != NULL ? e->value : e->def;
}

int tacl__config_is_set(tacl__cfg_t id)
{
    return config_get(id)->value != NULL;
}

long long tacl__config_int(tacl__cfg_t id)
{
    const config_entry_t *e = config_get(id);
    const char *s = e->value != NULL ? e->value : e->def;
    char *end;
    long long v, scale = 1;

    errno = 0;
    v = strtoll(s, &end, 0);
    if (errno != 0 || end == s)
        return strtoll(e->def, NULL, 0);
    /* Accept K, M and G suffixes for sizes.  A product out of range is
     * treated like a number strtoll could not hold (the default), and
     * multiplied rather than shifted, since shifting a negative or large
     * value is undefined. */
    switch (*end) {
    case 'k': case 'K': scale = 1ll << 10; break;
    case 'm': case 'M': scale = 1ll << 20; break;
    case 'g': case 'G': scale = 1ll << 30; break;
    default: break;
    }
    if (__builtin_mul_overflow(v, scale, &v))
        return strtoll(e->def, NULL, 0);
    return v;
}

double tacl__config_double(tacl__cfg_t id)
{
    const config_entry_t *e = config_get(id);
    const char *s = e->value != NULL ? e->value : e->def;
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s)
        return strtod(e->def, NULL);
    return v;
}

const char *tacl__config_env(const char *name)
{
    return getenv(name);
}

void tacl__config_reload(void)
{
    pthread_once(&config_once, config_read);
    config_read();
}

void tacl__config_print(FILE *file)
{
    for (int i = 0; i < TACL_CFG_COUNT; i++) {
        const config_entry_t *e = config_get((tacl__cfg_t)i);
        fprintf(file, "TACL_%s\n    default: \"%s\"%s%s%s\n    %s\n", e->name,
                e->def, e->value ? "  value: \"" : "",
                e->value ? e->value : "", e->value ? "\"" : "", e->doc);
    }
}
