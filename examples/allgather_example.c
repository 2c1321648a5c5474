/*
 * All-gather from memory the ranks of a node share: buffers from
 * tacl_mem_alloc (as ncclMemAlloc) let the other ranks copy straight
 * from them.  The call is non-blocking, so work could run before the wait.
 * Run it with the launcher: tacl-run -n 4 ./allgather_example
 */
#include <stdio.h>
#include <tacl.h>

#define COUNT (1024 * 1024) /* floats per rank: 4 MB */

int main(void)
{
    tacl_comm_t comm;
    tacl_request_t req;
    float *mine = NULL, *all = NULL;
    long wrong = 0;
    int rank, nranks;

    if (tacl_comm_init_env(&comm) != TACL_OK) {
        fprintf(stderr, "init failed: %s\n", tacl_last_error());
        return 1;
    }
    tacl_comm_rank(comm, &rank);
    tacl_comm_size(comm, &nranks);
    if (tacl_mem_alloc((void **)&mine, COUNT * sizeof(float),
                       TACL_MEM_HOST) != TACL_OK ||
        tacl_mem_alloc((void **)&all, (size_t)nranks * COUNT * sizeof(float),
                       TACL_MEM_HOST) != TACL_OK) {
        fprintf(stderr, "tacl_mem_alloc failed: %s\n", tacl_last_error());
        tacl_comm_abort(comm);
        return 1;
    }
    for (long i = 0; i < COUNT; i++) {
        mine[i] = (float)(rank * COUNT + i);
    }
    if (tacl_allgather_nb(mine, all, COUNT, TACL_FLOAT32, comm, NULL,
                          &req) != TACL_OK ||
        tacl_request_wait(req) != TACL_OK) {
        fprintf(stderr, "allgather failed: %s\n", tacl_comm_last_error(comm));
        tacl_comm_abort(comm);
        return 1;
    }
    tacl_request_free(req);
    /* Block r holds rank r's values: r * COUNT + i, exact in float32. */
    for (long i = 0; i < (long)nranks * COUNT; i++) {
        wrong += all[i] != (float)i;
    }
    printf("rank %d of %d: %s\n", rank, nranks, wrong ? "WRONG" : "ok");
    tacl_mem_free(mine);
    tacl_mem_free(all);
    tacl_comm_destroy(comm);
    return wrong != 0;
}
