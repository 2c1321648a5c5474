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
#      (target: ofi at 0.95x ucx's busbw in every cell); 1 and 4 MB in
#      a launch of their own with SMALL_ITERS (30) timed calls, since a
#      few calls of a few milliseconds differ by 2x between launches;
#   3. 8-byte all-reduce latency across the nodes, 2 x 1, 1000 calls.
# At the end a table: each cell's ucx and ofi times (out-of-place /
# in-place, microseconds, node 0 rank 0's line) and ucx's time over
# ofi's, which is ofi's busbw over ucx's.
# Several rails (ofi striping over tacl-cluster --rails): perf/ofi_rails.sh.
#
# Usage: perf/ofi_vs_ucx.sh BUILD_DIR [OUT_DIR]
# Environment: INTER_RATE (1gbit), ITERS (3), SMALL_ITERS (30), WARMUP (1),
# SMALL_WARMUP (5: the first calls of a launch also set up connections,
# which both transports make on first use, and the 1 MB cells are short
# enough for that to show: with one warm-up call ofi's out-of-place 1 MB
# MiCS all-gather took 0.84x ucx's time and its in-place one 1.10x).
set -u
BUILD=${1:?usage: perf/ofi_vs_ucx.sh BUILD_DIR [OUT_DIR]}
OUT=${2:-ofi_vs_ucx.out}
RATE=${INTER_RATE:-1gbit}
ITERS=${ITERS:-3}
SMALL_ITERS=${SMALL_ITERS:-30}
WARMUP=${WARMUP:-1}
SMALL_WARMUP=${SMALL_WARMUP:-5}
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
# coll NAME PERF ALGO: 1-4 MB and 16-256 MB, 2 x 2.
coll() {
    run "$1_small" --nodes 2 --ranks-per-node 2 -- "$BUILD/perf/$2" \
        -A "$3" -b 1M -e 4M -f 4 -n "$SMALL_ITERS" -w "$SMALL_WARMUP"
    run "$1" --nodes 2 --ranks-per-node 2 -- "$BUILD/perf/$2" \
        -A "$3" -b 16M -e 256M -f 4 -n "$ITERS" -w "$WARMUP"
}
for algo in ring mics; do
    coll "allgather_$algo" all_gather_perf "allgather=$algo"
    coll "reducescatter_$algo" reduce_scatter_perf "reducescatter=$algo"
done
for algo in ring hier; do
    coll "allreduce_$algo" all_reduce_perf "allreduce=$algo"
done
run latency_8b --nodes 2 --ranks-per-node 1 -- \
    "$BUILD/perf/all_reduce_perf" -b 8 -e 8 -n 1000 -w 100
# The table: node 0 rank 0's rows (size, out-of-place and in-place
# times) of each pair of logs, joined by size.
echo "| run | bytes | ucx us (out / in) | ofi us (out / in) | ucx/ofi out | in |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for u in "$OUT"/*.ucx.log; do
    o=${u%.ucx.log}.ofi.log
    [ -f "$o" ] || continue
    name=$(basename "${u%.ucx.log}")
    awk -v name="${name%_small}" '
        $1 == "[node" && $5 ~ /^[0-9]+$/ && NF >= 17 {
            if (FILENAME == ARGV[1]) { uo[$5] = $10; ui[$5] = $14; next }
            if ($5 in uo)
                printf "| %s | %s | %s / %s | %s / %s | %.2f | %.2f |\n",
                    name, $5, uo[$5], ui[$5], $10, $14,
                    uo[$5] / $10, ui[$5] / $14
        }' "$u" "$o"
done
echo "logs in $OUT" >&2
exit $status
