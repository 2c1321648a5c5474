/*
 * p2p_latency: what a tag and a receive from any source cost a small
 * send/recv, against the untagged pair, in one run.
 *
 * Two ranks ping-pong: rank 0 sends, rank 1 receives and sends back,
 * ITERS round trips per block.  Three kinds of exchange take turns block
 * by block, so that the machine's noise falls on all of them alike:
 *   plain   tacl_send / tacl_recv (tag 0);
 *   tagged  tacl_send_tag / tacl_recv_tag with a tag above the low 20
 *           bits (both halves of the wire tag in use);
 *   any     as tagged, but rank 0 receives the answer from
 *           TACL_ANY_SOURCE (the executor holds the receive and probes).
 * Each kind runs BLOCKS blocks per size; the figure is the median block's
 * one-way time (round trip / 2), and the ratio of each kind to plain.
 * Every answer is checked (its payload is the round number).
 *
 * Output, from rank 0, one line per size and kind:
 *   "bytes kind median_us ratio_to_plain".
 * Usage, under tacl-run -n 2: p2p_latency [ITERS [MAXBYTES]]  (default
 * 2000, 4096).  Across two emulated nodes, over ofi or ucx:
 *   TACL_NET=ofi tacl-cluster --nodes 2 --ranks-per-node 1 -- p2p_latency
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parse.h"
#include "tacl.h"

#define BLOCKS 15
#define TAG ((1 << 20) + 7)

enum { PLAIN, TAGGED, ANY, NKINDS };
static const char *const kind_names[NKINDS] = {"plain", "tagged", "any"};

static tacl_comm_t comm;
static int rank;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, tacl_status_t s)
{
    fprintf(stderr, "p2p_latency: rank %d: %s: %s (%s)\n", rank, what,
            tacl_status_string(s), tacl_comm_last_error(comm));
    exit(1);
}

static void send_kind(int kind, const void *buf, size_t n, int peer)
{
    tacl_status_t s = kind == PLAIN
                          ? tacl_send(buf, n, TACL_UINT8, peer, comm, NULL)
                          : tacl_send_tag(buf, n, TACL_UINT8, peer, TAG,
                                          comm, NULL);
    if (s != TACL_OK)
        die("send", s);
}

static void recv_kind(int kind, void *buf, size_t n, int peer)
{
    int source = -1;
    tacl_status_t s;

    if (kind == PLAIN)
        s = tacl_recv(buf, n, TACL_UINT8, peer, comm, NULL);
    else
        s = tacl_recv_tag(buf, n, TACL_UINT8, kind == ANY ? TACL_ANY_SOURCE
                                                           : peer,
                          TAG, &source, comm, NULL);
    if (s != TACL_OK)
        die("recv", s);
    if (kind != PLAIN && source != peer) {
        fprintf(stderr, "p2p_latency: rank %d: source %d, want %d\n", rank,
                source, peer);
        exit(1);
    }
}

/* One block of iters round trips; its one-way time per message. */
static double block(int kind, uint8_t *buf, size_t n, int iters)
{
    double t0;

    if (tacl_barrier(comm, NULL) != TACL_OK)
        die("barrier", TACL_ERR_INTERNAL);
    t0 = now_s();
    for (int i = 0; i < iters; i++) {
        uint8_t want = (uint8_t)i;

        if (rank == 0) {
            buf[0] = want;
            send_kind(kind, buf, n, 1);
            buf[0] = (uint8_t)~want;
            recv_kind(kind, buf, n, 1);
        } else {
            recv_kind(kind, buf, n, 0);
            send_kind(kind, buf, n, 0);
        }
        if (n > 0 && buf[0] != want) {
            fprintf(stderr, "p2p_latency: rank %d: %s round %d got %u\n",
                    rank, kind_names[kind], i, buf[0]);
            exit(1);
        }
    }
    return (now_s() - t0) / iters / 2.0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    uint64_t iters = 2000, max_bytes = 4096;
    double t[NKINDS][BLOCKS];
    uint8_t *buf;
    int size;

    if ((argc > 1 &&
         tacl__parse_uint(argv[1], 1, 1000000, &iters) != TACL_PARSE_OK) ||
        (argc > 2 && tacl__parse_size(argv[2], 8, 1 << 24, &max_bytes) !=
                         TACL_PARSE_OK)) {
        fprintf(stderr, "usage: p2p_latency [ITERS [MAXBYTES]]\n");
        return 2;
    }
    if (tacl_comm_init_env(&comm) != TACL_OK) {
        fprintf(stderr, "p2p_latency: tacl_comm_init_env: %s\n",
                tacl_last_error());
        return 1;
    }
    tacl_comm_rank(comm, &rank);
    tacl_comm_size(comm, &size);
    if (size != 2) {
        fprintf(stderr, "p2p_latency: runs on 2 ranks, not %d\n", size);
        return 2;
    }
    buf = calloc((size_t)max_bytes, 1);
    if (buf == NULL)
        return 1;
    if (rank == 0)
        printf("%8s %-7s %10s %8s\n", "bytes", "kind", "median_us",
               "ratio");
    for (size_t n = 8; n <= (size_t)max_bytes; n *= 8) {
        double med[NKINDS];

        for (int b = 0; b < BLOCKS; b++)
            for (int k = 0; k < NKINDS; k++)
                t[k][b] = block(k, buf, n, (int)iters);
        for (int k = 0; k < NKINDS; k++) {
            qsort(t[k], BLOCKS, sizeof(double), cmp_double);
            med[k] = t[k][BLOCKS / 2];
        }
        for (int k = 0; rank == 0 && k < NKINDS; k++)
            printf("%8zu %-7s %10.3f %8.3f\n", n, kind_names[k],
                   med[k] * 1e6, med[k] / med[PLAIN]);
        fflush(stdout);
    }
    free(buf);
    tacl_comm_destroy(comm);
    return 0;
}
