/*
 * The smallest tacl program: every rank contributes its rank number, the
 * all-reduce sums them, and each rank checks the result.  Copy it to start.
 * Run it with the launcher: tacl-run -n 4 ./allreduce_example
 */
#include <stdio.h>
#include <tacl.h>

#define COUNT 1024

int main(void)
{
    static float buf[COUNT];
    tacl_comm_t comm;
    int rank, nranks, i, wrong = 0;

    /* Joins the ranks tacl-run (or torchrun) started. */
    if (tacl_comm_init_env(&comm) != TACL_OK) {
        fprintf(stderr, "init failed: %s\n", tacl_last_error());
        return 1;
    }
    tacl_comm_rank(comm, &rank);
    tacl_comm_size(comm, &nranks);
    for (i = 0; i < COUNT; i++) {
        buf[i] = (float)(rank + i);
    }
    /* In place (sendbuf == recvbuf); a NULL stream completes on return. */
    if (tacl_allreduce(buf, buf, COUNT, TACL_FLOAT32, TACL_SUM, comm,
                       NULL) != TACL_OK) {
        fprintf(stderr, "allreduce failed: %s\n", tacl_comm_last_error(comm));
        tacl_comm_abort(comm);
        return 1;
    }
    for (i = 0; i < COUNT; i++) {
        wrong += buf[i] != (float)(nranks * (nranks - 1) / 2 + nranks * i);
    }
    printf("rank %d of %d: %s\n", rank, nranks, wrong ? "WRONG" : "ok");
    tacl_comm_destroy(comm);
    return wrong != 0;
}
