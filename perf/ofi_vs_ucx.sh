#!/bin/sh
# ofi against ucx on the emulated cluster: the runs behind issue 32's
# closing figures, for a quiet machine (needs root, like tacl-cluster).
#
# Design.  Every configuration runs once with TACL_NET=ucx and once with
# TACL_NET=ofi (libfabric's tcp provider), one right after the other, so
# a slow spell of the machine falls on both alike; the tables are the
# perf binaries' own, one log per run under OUT_DIR:
#   1. ring all-gather, 2 nodes x 1 rank, 64 MB over INTER_RATE links
#      (the bar: ofi at 85% of the line rate or more);
#   2. all-gather, reduce-scatter and all-reduce with ring and MiCS
#      (all-reduce: ring and hier), 2 nodes x 2 ranks, 1 MB to 256 MB
#      (target: ofi at 0.95x ucx's busbw in every cell);
#   3. 8-byte all-reduce latency across the nodes, 2 x 1, 1000 calls.
# Several rails (ofi striping over tacl-cluster --rails): perf/ofi_rails.sh.
#
# Usage: perf/ofi_vs_ucx.sh BUILD_DIR [OUT_DIR]
# Environment: INTER_RATE (1gbit), ITERS (3), WARMUP (1).
set -u
BUILD=${1:?usage: perf/ofi_vs_ucx.sh BUILD_DIR [OUT_DIR]}
OUT=${2:-ofi_vs_ucx.out}
RATE=${INTER_RATE:-1gbit}
ITERS=${ITERS:-3}
WARMUP=${WARMUP:-1}
TOOL=$(dirname "$0")/../tools/tacl-cluster
status=0

mkdir -p "$OUT" || exit 2
# run NAME LAYOUT_ARGS -- CMD...: once per network transport.
run() {
    name=$1
    shift
    for net in ucx ofi; do
        echo "== $name over $net" >&2
        if ! TACL_NET=$net "$TOOL" --timeout 600 --inter-rate "$RATE" \
            "$@" > "$OUT/$name.$net.log" 2>&1; then
            echo "   failed: see $OUT/$name.$net.log" >&2
            status=1
        fi
    done
}

run ring_2x1 --nodes 2 --ranks-per-node 1 -- \
    "$BUILD/perf/all_gather_perf" -A allgather=ring -b 64M -e 64M \
    -n "$ITERS" -w "$WARMUP"
for algo in ring mics; do
    run "allgather_$algo" --nodes 2 --ranks-per-node 2 -- \
        "$BUILD/perf/all_gather_perf" -A "allgather=$algo" -b 1M -e 256M \
        -f 4 -n "$ITERS" -w "$WARMUP"
    run "reducescatter_$algo" --nodes 2 --ranks-per-node 2 -- \
        "$BUILD/perf/reduce_scatter_perf" -A "reducescatter=$algo" \
        -b 1M -e 256M -f 4 -n "$ITERS" -w "$WARMUP"
done
for algo in ring hier; do
    run "allreduce_$algo" --nodes 2 --ranks-per-node 2 -- \
        "$BUILD/perf/all_reduce_perf" -A "allreduce=$algo" -b 1M -e 256M \
        -f 4 -n "$ITERS" -w "$WARMUP"
done
run latency_8b --nodes 2 --ranks-per-node 1 -- \
    "$BUILD/perf/all_reduce_perf" -b 8 -e 8 -n 1000 -w 100
echo "logs in $OUT; compare each pair's busbw columns" >&2
exit $status
