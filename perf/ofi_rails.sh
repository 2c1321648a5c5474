#!/bin/sh
# ofi striping over several rails on the emulated cluster: issue 32's
# multi-rail figures, for a quiet machine (needs root, like tacl-cluster).
#
# Design.  One ring all-gather of SIZE bytes (256 MB), 2 nodes x 1 rank,
# over TACL_NET=ofi, once per rail count in RAILS (1 2 4), every rail
# shaped to INTER_RATE (1 Gbit/s) by tacl-cluster --rails K --inter-rate;
# with K > 1 the ranks get TACL_NICS=eth0..eth<K-1> and ofi stripes each
# message of TACL_OFI_STRIPE_MIN (1 MB) or more over the K rails.  The
# runs follow one another, so a slow spell of the machine shows as a
# ratio off; each rail count's busbw (all_gather_perf's average) and its
# ratio to the first count's are printed, one log per run under OUT_DIR.
# The issue's bar: 2 rails at 1.8x or more of 1 rail, 4 rails at 3.4x.
#
# Usage: perf/ofi_rails.sh BUILD_DIR [OUT_DIR]
# Environment: SIZE (256M), RAILS ("1 2 4"), INTER_RATE (1gbit),
# ITERS (3), WARMUP (1).
set -u
BUILD=${1:?usage: perf/ofi_rails.sh BUILD_DIR [OUT_DIR]}
OUT=${2:-ofi_rails.out}
SIZE=${SIZE:-256M}
RAILS=${RAILS:-1 2 4}
RATE=${INTER_RATE:-1gbit}
ITERS=${ITERS:-3}
WARMUP=${WARMUP:-1}
TOOL=$(dirname "$0")/../tools/tacl-cluster
status=0
base=

mkdir -p "$OUT" || exit 2
printf '%-6s %-12s %s\n' rails "busbw GB/s" "vs ${RAILS%% *} rail(s)"
for k in $RAILS; do
    log=$OUT/allgather_ring_rails$k.log
    if ! TACL_NET=ofi "$TOOL" --timeout 900 --nodes 2 --ranks-per-node 1 \
        --rails "$k" --inter-rate "$RATE" -- \
        "$BUILD/perf/all_gather_perf" -A allgather=ring -b "$SIZE" \
        -e "$SIZE" -n "$ITERS" -w "$WARMUP" > "$log" 2>&1; then
        echo "rails $k failed: see $log" >&2
        status=1
        continue
    fi
    bw=$(sed -n 's/^\[node 0 rank 0\] # Avg bus bandwidth *: *//p' "$log")
    if [ -z "$bw" ]; then
        echo "rails $k: no busbw in $log" >&2
        status=1
        continue
    fi
    [ -n "$base" ] || base=$bw
    printf '%-6s %-12s %s\n' "$k" "$bw" \
        "$(awk -v a="$bw" -v b="$base" 'BEGIN { printf "%.2fx", a / b }')"
done
echo "logs in $OUT" >&2
exit $status
