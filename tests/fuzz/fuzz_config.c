/*
 * libFuzzer harness: configuration values.  The first byte picks an
 * entry of the configuration table, the rest is its value; the
 * validation, every reader (integer with size suffixes, double, size,
 * boolean, word, string), the report of refused values and the readers
 * built on them (link overrides, the streaming threshold) must take any
 * value without undefined behaviour.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "config.h"
#include "topo.h"

static const char *const names[TACL_CFG_COUNT] = {
#define FUZZ_NAME_(name, def, doc) "TACL_" #name,
    TACL_CONFIG_LIST(FUZZ_NAME_)
#undef FUZZ_NAME_
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tacl__node_desc_t node;
    tacl__topo_t topo;
    char *value;
    int id;

    if (size < 1)
        return 0;
    id = data[0] % TACL_CFG_COUNT;
    value = malloc(size);
    if (value == NULL)
        return 0;
    memcpy(value, data + 1, size - 1);
    value[size - 1] = '\0';
    setenv(names[id], value, 1);
    tacl__config_reload();
    (void)tacl__config_str((tacl__cfg_t)id);
    (void)tacl__config_int((tacl__cfg_t)id);
    (void)tacl__config_double((tacl__cfg_t)id);
    (void)tacl__config_size((tacl__cfg_t)id);
    (void)tacl__config_bool((tacl__cfg_t)id);
    (void)tacl__config_word((tacl__cfg_t)id);
    (void)tacl__config_report();
    memset(&topo, 0, sizeof(topo));
    (void)tacl__topo_set_links(&topo);
    memset(&node, 0, sizeof(node));
    (void)tacl__topo_stream_bytes(&node);
    unsetenv(names[id]);
    tacl__config_reload();
    free(value);
    return 0;
}
