/*
 * Configuration table.  Each entry of TACL_CONFIG_LIST becomes one slot,
 * filled from TACL_<NAME> on first use (or on tacl__config_reload()) and
 * validated then against the entry's type (config_types below): every
 * reader of a typed entry sees either the environment's valid value or
 * the default, and tacl__config_report() (config_report.c) says which
 * values were refused.
 * This is the only file that calls getenv().
 */
#include <float.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"
#include "config.h"
#include "log.h"
#include "parse.h"

extern char **environ;

typedef struct {
    const char *name;     /* without the TACL_ prefix */
    const char *def;
    const char *doc;
    const char *value;    /* the environment's, or NULL */
    tacl__cfg_src_t src;
    int cached;           /* ival holds the value parsed (typed integer,
                             size and boolean entries): hot paths read
                             these per call, and parsing costs more than
                             the rest of a small collective's setup */
    long long ival;
} config_entry_t;

static config_entry_t config_table[TACL_CFG_COUNT] = {
#define TACL_CONFIG_ENTRY_(name, def, doc) {#name, def, doc, NULL, 0, 0, 0},
    TACL_CONFIG_LIST(TACL_CONFIG_ENTRY_)
#undef TACL_CONFIG_ENTRY_
};

/*
 * Types.  An entry not listed here is a string its reader interprets
 * (addresses, file names, link overrides, the algorithm spec) and reports
 * itself.  words: '|'-separated; for CFG_WORD the only values allowed,
 * for CFG_SIZE words allowed besides a size, for CFG_LIST the items of a
 * comma list (each may start with ^).
 */
typedef enum {
    CFG_STR = 0,
    CFG_INT,
    CFG_DOUBLE,
    CFG_SIZE,
    CFG_BOOL,
    CFG_WORD,
    CFG_LIST
} cfg_kind_t;

typedef struct {
    cfg_kind_t kind;
    double min;           /* lowest number allowed (INT, DOUBLE, SIZE) */
    const char *words;
} cfg_type_t;

#define SUBSYS_WORD_(name) #name "|"
static const cfg_type_t config_types[TACL_CFG_COUNT] = {
    [TACL_CFG_TIMEOUT] = {CFG_DOUBLE, 1e-3, NULL},
    [TACL_CFG_DEBUG] = {CFG_WORD, 0, "NONE|WARN|INFO|TRACE"},
    [TACL_CFG_DEBUG_SUBSYS] = {CFG_LIST, 0,
                               "ALL|" TACL_SUBSYS_LIST(SUBSYS_WORD_)},
    [TACL_CFG_NET] = {CFG_WORD, 0, "auto|ucx|ofi|none"},
    /* ofi.h's TACL_OFI_STRIPE_FLOOR: pieces above the eager sizes. */
    [TACL_CFG_OFI_STRIPE_MIN] = {CFG_SIZE, 262144, NULL},
    /* ofi.h's TACL_OFI_PIECE_FLOOR: pieces above the eager sizes. */
    [TACL_CFG_OFI_MAX_MSG] = {CFG_SIZE, 65536, "auto"},
    [TACL_CFG_OFI_REGISTER] = {CFG_WORD, 0, "auto|always"},
    [TACL_CFG_OFI_MR_CACHE] = {CFG_INT, 0, NULL},
    [TACL_CFG_OFI_HMEM] = {CFG_WORD, 0, "auto|on|off"},
    [TACL_CFG_NET_CUDA_CHUNK] = {CFG_SIZE, 4096, NULL},
    [TACL_CFG_NET_CUDA_CHUNKS] = {CFG_INT, 2, NULL},
    [TACL_CFG_SHM_MODE] = {CFG_WORD, 0, "auto|cma|copy"},
    [TACL_CFG_SHM_MAP] = {CFG_BOOL, 0, NULL},
    [TACL_CFG_SHM_EAGER_LIMIT] = {CFG_SIZE, 0, NULL},
    [TACL_CFG_SHM_SPIN] = {CFG_INT, 0, NULL},
    [TACL_CFG_SHM_YIELD_US] = {CFG_INT, 0, NULL},
    [TACL_CFG_CHUNK_SIZE] = {CFG_SIZE, 1, NULL},
    [TACL_CFG_FAST_MAX] = {CFG_SIZE, 0, NULL},
    [TACL_CFG_STREAM_MIN] = {CFG_SIZE, 0, "auto|never"},
    [TACL_CFG_CHECK] = {CFG_BOOL, 0, NULL},
    [TACL_CFG_BLOCKING] = {CFG_BOOL, 0, NULL},
    [TACL_CFG_PROGRESS_THREAD] = {CFG_BOOL, 0, NULL},
    [TACL_CFG_FLIGHT_RECORDS] = {CFG_INT, 0, NULL},
    [TACL_CFG_TUNER] = {CFG_WORD, 0, "model|sim"},
};
#undef SUBSYS_WORD_

/* Names of the environment's TACL_ variables that are no entry. */
#define CONFIG_MAX_UNKNOWN 16
static char config_unknown[CONFIG_MAX_UNKNOWN][64];
static int config_n_unknown;

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;

/* A typed integer or size, in parse.h's size grammar (so an integer
 * entry takes a suffix too, as it always has). */
static int parse_int(const char *s, long long *v_p)
{
    uint64_t v;

    if (tacl__parse_size(s, 0, LLONG_MAX, &v) != TACL_PARSE_OK)
        return -1;
    *v_p = (long long)v;
    return 0;
}

static int parse_double(const char *s, double *v_p)
{
    return tacl__parse_double(s, -DBL_MAX, DBL_MAX, v_p) == TACL_PARSE_OK
               ? 0
               : -1;
}

/* Index of word (length len) in a '|' list, case ignored; -1 if none. */
static int word_index(const char *words, const char *word, size_t len)
{
    int i = 0;

    for (const char *w = words; w != NULL && *w != '\0'; i++) {
        const char *bar = strchr(w, '|');
        size_t wl = bar != NULL ? (size_t)(bar - w) : strlen(w);

        if (wl == len && strncasecmp(w, word, len) == 0)
            return i;
        w = bar != NULL ? bar + 1 : NULL;
    }
    return -1;
}

static const char *const bool_words = "0|1|false|true|no|yes|off|on";

/* Whether s is a valid value of an entry of type t. */
static int value_valid(const cfg_type_t *t, const char *s)
{
    long long ll;
    double d;

    switch (t->kind) {
    case CFG_INT:
    case CFG_SIZE:
        if (t->words != NULL && word_index(t->words, s, strlen(s)) >= 0)
            return 1;
        return parse_int(s, &ll) == 0 && (double)ll >= t->min;
    case CFG_DOUBLE:
        return parse_double(s, &d) == 0 && d >= t->min;
    case CFG_BOOL:
        return word_index(bool_words, s, strlen(s)) >= 0;
    case CFG_WORD:
        return word_index(t->words, s, strlen(s)) >= 0;
    case CFG_LIST:
        for (const char *p = s; *p != '\0';) {
            size_t len = strcspn(p, ",");
            const char *item = p[0] == '^' ? p + 1 : p;
            size_t il = p[0] == '^' ? len - 1 : len;

            if (il == 0 || word_index(t->words, item, il) < 0)
                return 0;
            p += len;
            if (*p == ',')
                p++;
        }
        return s[0] != '\0';
    case CFG_STR:
    default:
        return 1;
    }
}

static int entry_index(const char *name, size_t len)
{
    for (int i = 0; i < TACL_CFG_COUNT; i++)
        if (strlen(config_table[i].name) == len &&
            strncmp(config_table[i].name, name, len) == 0)
            return i;
    return -1;
}

/* The value readers use: the environment's if valid, else the default. */
static const char *entry_value(const config_entry_t *e)
{
    return e->src == TACL_CFG_SRC_ENV ? e->value : e->def;
}

static long long entry_int(const config_entry_t *e)
{
    long long v = 0;

    if (parse_int(entry_value(e), &v) != 0)
        (void)parse_int(e->def, &v);
    return v;
}

static int entry_bool(const config_entry_t *e)
{
    const char *s = entry_value(e);
    int i = word_index(bool_words, s, strlen(s));

    return i >= 0 ? i % 2 : entry_int(e) != 0;
}

/* Loads so far (config_read): what a reader that parses a value once
 * compares, to parse it again after a reload. */
static _Atomic unsigned config_gen;

static void config_read(void);

unsigned tacl__config_generation(void)
{
    pthread_once(&config_once, config_read);
    return atomic_load_explicit(&config_gen, memory_order_acquire);
}

/* Entries renamed, read under their former names too (the new name
 * wins when both are set). */
static const struct {
    const char *former;
    tacl__cfg_t id;
} config_former[] = {
    {"UCX_CUDA_CHUNK", TACL_CFG_NET_CUDA_CHUNK},   /* ofi stages too */
    {"UCX_CUDA_CHUNKS", TACL_CFG_NET_CUDA_CHUNKS},
};

static int former_index(const char *name, size_t len)
{
    for (size_t i = 0; i < TACL_ARRAY_SIZE(config_former); i++)
        if (strlen(config_former[i].former) == len &&
            strncmp(config_former[i].former, name, len) == 0)
            return (int)i;
    return -1;
}

static void config_read(void)
{
    char var[64];

    pthread_mutex_lock(&config_lock);
    for (int i = 0; i < TACL_CFG_COUNT; i++) {
        config_entry_t *e = &config_table[i];

        snprintf(var, sizeof(var), "TACL_%s", e->name);
        e->value = getenv(var);
        for (size_t f = 0; e->value == NULL && f < TACL_ARRAY_SIZE(config_former);
             f++)
            if (config_former[f].id == (tacl__cfg_t)i) {
                snprintf(var, sizeof(var), "TACL_%s",
                         config_former[f].former);
                e->value = getenv(var);
            }
        /* An empty value of a typed entry means unset, as in a shell. */
        e->src = e->value == NULL || (e->value[0] == '\0' &&
                                      config_types[i].kind != CFG_STR)
                 ? TACL_CFG_SRC_DEFAULT
                 : value_valid(&config_types[i], e->value)
                     ? TACL_CFG_SRC_ENV
                     : TACL_CFG_SRC_INVALID;
    }
    /* Typed numbers and booleans are parsed once, here. */
    for (int i = 0; i < TACL_CFG_COUNT; i++) {
        config_entry_t *e = &config_table[i];
        cfg_kind_t kind = config_types[i].kind;

        e->cached = 0;
        if (kind == CFG_INT || kind == CFG_SIZE)
            e->ival = entry_int(e);
        else if (kind == CFG_BOOL)
            e->ival = entry_bool(e);
        else
            continue;
        e->cached = 1;
    }
    config_n_unknown = 0;
    for (char **env = environ; env != NULL && *env != NULL; env++) {
        const char *eq = strchr(*env, '=');
        size_t len = eq != NULL ? (size_t)(eq - *env) : strlen(*env);

        if (len <= 5 || strncmp(*env, "TACL_", 5) != 0 ||
            entry_index(*env + 5, len - 5) >= 0 ||
            former_index(*env + 5, len - 5) >= 0 ||
            config_n_unknown == CONFIG_MAX_UNKNOWN)
            continue;
        snprintf(config_unknown[config_n_unknown++], sizeof(config_unknown[0]),
                 "%.*s", (int)len, *env);
    }
    atomic_fetch_add_explicit(&config_gen, 1, memory_order_release);
    pthread_mutex_unlock(&config_lock);
}

static const config_entry_t *config_get(tacl__cfg_t id)
{
    pthread_once(&config_once, config_read);
    return &config_table[id];
}


const char *tacl__config_str(tacl__cfg_t id)
{
    return entry_value(config_get(id));
}

int tacl__config_is_set(tacl__cfg_t id)
{
    return config_get(id)->value != NULL;
}

long long tacl__config_int(tacl__cfg_t id)
{
    const config_entry_t *e = config_get(id);

    return e->cached && config_types[id].kind != CFG_BOOL ? e->ival
                                                          : entry_int(e);
}

unsigned long long tacl__config_size(tacl__cfg_t id)
{
    long long v = tacl__config_int(id);

    return v > 0 ? (unsigned long long)v : 0;
}

double tacl__config_double(tacl__cfg_t id)
{
    double v = 0;

    if (parse_double(tacl__config_str(id), &v) != 0)
        (void)parse_double(config_get(id)->def, &v);
    return v;
}

int tacl__config_bool(tacl__cfg_t id)
{
    const config_entry_t *e = config_get(id);

    if (e->cached && config_types[id].kind == CFG_BOOL)
        return (int)e->ival;
    return entry_bool(e);
}

int tacl__config_word(tacl__cfg_t id)
{
    const char *s = tacl__config_str(id);

    if (config_types[id].words == NULL)
        return -1;
    return word_index(config_types[id].words, s, strlen(s));
}

tacl__cfg_src_t tacl__config_source(tacl__cfg_t id)
{
    return config_get(id)->src;
}

const char *tacl__config_source_name(tacl__cfg_src_t src)
{
    static const char *const names[] = {"default", "environment", "invalid"};

    return (unsigned)src < 3 ? names[src] : "?";
}

const char *tacl__config_name(tacl__cfg_t id)
{
    return (unsigned)id < TACL_CFG_COUNT ? config_get(id)->name : NULL;
}

const char *tacl__config_default(tacl__cfg_t id)
{
    return (unsigned)id < TACL_CFG_COUNT ? config_get(id)->def : NULL;
}

const char *tacl__config_doc(tacl__cfg_t id)
{
    return (unsigned)id < TACL_CFG_COUNT ? config_get(id)->doc : NULL;
}

const char *tacl__config_raw(tacl__cfg_t id)
{
    return (unsigned)id < TACL_CFG_COUNT ? config_get(id)->value : NULL;
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

/* What an entry of type t takes, for a warning. */
static void describe_type(const cfg_type_t *t, char *buf, size_t len)
{
    switch (t->kind) {
    case CFG_INT:
        snprintf(buf, len, "an integer >= %.0f", t->min);
        break;
    case CFG_DOUBLE:
        snprintf(buf, len, "a number >= %g", t->min);
        break;
    case CFG_SIZE:
        snprintf(buf, len, "a size >= %.0f (K, M, G suffixes)%s%s", t->min,
                 t->words != NULL ? " or one of " : "",
                 t->words != NULL ? t->words : "");
        break;
    case CFG_BOOL:
        snprintf(buf, len, "a boolean (%s)", bool_words);
        break;
    case CFG_WORD:
        snprintf(buf, len, "one of %s", t->words);
        break;
    case CFG_LIST:
        snprintf(buf, len, "a comma list of %s", t->words);
        break;
    default:
        snprintf(buf, len, "a string");
        break;
    }
}

void tacl__config_describe(tacl__cfg_t id, char *buf, size_t len)
{
    if ((unsigned)id >= TACL_CFG_COUNT) {
        snprintf(buf, len, "nothing");
        return;
    }
    describe_type(&config_types[id], buf, len);
}

const char *tacl__config_unknown(int i)
{
    pthread_once(&config_once, config_read);
    return i >= 0 && i < config_n_unknown ? config_unknown[i] : NULL;
}

void tacl__config_print(FILE *file)
{
    for (int i = 0; i < TACL_CFG_COUNT; i++) {
        const config_entry_t *e = config_get((tacl__cfg_t)i);

        fprintf(file, "TACL_%s = \"%s\" (%s", e->name, entry_value(e),
                tacl__config_source_name(e->src));
        if (e->src == TACL_CFG_SRC_INVALID)
            fprintf(file, ": \"%s\" refused, default used", e->value);
        else if (e->src == TACL_CFG_SRC_ENV)
            fprintf(file, "; default \"%s\"", e->def);
        fprintf(file, ")\n    %s\n", e->doc);
    }
}
