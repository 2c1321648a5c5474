/*
 * libFuzzer harness: the topology file parser.  Any input must either be
 * refused with a status or parse into a topology whose written form
 * parses again into the same nodes and rank placement.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "log.h"
#include "topo.h"

static void check_round_trip(const tacl__topo_t *topo)
{
    tacl__topo_t again;
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);

    if (f == NULL)
        abort();
    if (tacl__topo_write(topo, f) != TACL_OK)
        abort();
    fclose(f);
    memset(&again, 0, sizeof(again));
    if (tacl__topo_parse(out, "dump", &again) != TACL_OK) {
        fprintf(stderr, "the written topology does not parse:\n%s", out);
        abort();
    }
    if (again.n_nodes != topo->n_nodes || again.nranks != topo->nranks ||
        strcmp(again.machine, topo->machine) != 0)
        abort();
    for (int n = 0; n < topo->n_nodes; n++)
        if (strcmp(again.nodes[n].name, topo->nodes[n].name) != 0)
            abort();
    for (int r = 0; r < topo->nranks; r++)
        if (again.node_of[r] != topo->node_of[r])
            abort();
    tacl__topo_fini(&again);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    tacl__topo_t topo;

    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    memset(&topo, 0, sizeof(topo));
    if (tacl__topo_parse(text, "fuzz", &topo) == TACL_OK) {
        check_round_trip(&topo);
        tacl__topo_fini(&topo);
    }
    free(text);
    return 0;
}
