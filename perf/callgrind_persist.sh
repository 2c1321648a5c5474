#!/bin/sh
# Instructions and allocator calls per all-reduce on 2 ranks, by the way
# it is called: blocking, "_nb" + wait, and persistent start + wait
# (perf/latency.c's LAT_MODE), from callgrind, which does not depend on
# how busy the machine is.
#
# As perf/callgrind.sh: rank 0 runs under callgrind, rank 1 natively; two
# runs of different lengths are subtracted (warm-up and the first call's
# one-time work cancel) and the difference is divided by the difference
# in calls (lat_tacl makes ITERS + ITERS/10 + 10 calls of the cell).
# Only what runs inside the API calls of the loop is collected
# (tacl_allreduce, tacl_allreduce_nb, tacl_start, tacl_request_wait,
# tacl_request_free): start-up and shutdown wait on the peer for a time
# that varies from run to run.  malloc, calloc, realloc and free are
# counted calls, not instructions.  Waits do not poll
# (TACL_SHM_SPIN=0 TACL_SHM_YIELD_US=0 unless set): polls made while the
# native rank is descheduled count what the machine's load is, not what
# the call costs (docs/bench/latency.md says the same of callgrind.sh).
# Each mode runs with the fast path as configured and with
# TACL_FAST_MAX=0 (the fast path serves blocking calls only).
#
# Usage: perf/callgrind_persist.sh BUILD_DIR
# Environment: SIZES ("8 65536" bytes), N1 (400), N2 (1200) iterations
# (multiples of 20).

set -u
BUILD=${1:?usage: callgrind_persist.sh BUILD_DIR}
SIZES=${SIZES:-"8 65536"}
N1=${N1:-400}
N2=${N2:-1200}
command -v valgrind > /dev/null ||
    { echo "callgrind_persist.sh: no valgrind" >&2; exit 2; }
export TACL_SHM_SPIN="${TACL_SHM_SPIN:-0}"
export TACL_SHM_YIELD_US="${TACL_SHM_YIELD_US:-0}"
. "$(dirname "$0")/runs.sh"
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT

# run OUT ITERS: one launch, rank 0 under callgrind into $TMP/OUT.
run() {
    cg_rank0 "$BUILD" "$TMP/$1" "$TMP/$1.out" "$BUILD/perf/lat_tacl" "$2" ||
        { echo "callgrind_persist.sh: run $1 failed" >&2
          cat "$TMP/$1.out" >&2; exit 1; }
}
export CG_OPTS="--collect-atstart=no --toggle-collect=tacl_allreduce
    --toggle-collect=tacl_allreduce_nb --toggle-collect=tacl_start
    --toggle-collect=tacl_request_wait --toggle-collect=tacl_request_free"

# Total instructions and calls of the allocator in a callgrind file
# (names are compressed: "(id) name" the first time, "(id)" after).
totals() {
    awk '
        /^(c?fn)=\(/ {
            id = $1; sub(/^c?fn=/, "", id)
            if (NF > 1) name[id] = $2
            if ($0 ~ /^cfn=/) callee = name[id]
            next }
        /^calls=/ { split($1, c, "="); n = c[2]
            if (callee == "malloc" || callee == "calloc" ||
                callee == "realloc" || callee == "free")
                allocs[callee] += n
            next }
        /^summary:|^totals:/ { total = $2 }
        END { printf "%s %d %d %d %d\n", total, allocs["malloc"],
              allocs["calloc"], allocs["realloc"], allocs["free"] }' "$1"
}

calls=$(( (N2 - N1) + (N2 - N1) / 10 ))
printf '# per all-reduce on 2 ranks (rank 0), %d-call difference\n' \
    "$calls"
printf '%-10s %6s %-8s %10s %7s %7s %7s %7s\n' mode bytes fast instr \
    malloc calloc realloc free
for bytes in $SIZES; do
    for fast in default 0; do
        for mode in blocking nb persistent; do
            if [ "$fast" = 0 ]; then
                export TACL_FAST_MAX=0
            else
                unset TACL_FAST_MAX
            fi
            export LAT_MODE="$mode" LAT_COLL=allreduce LAT_BYTES="$bytes"
            run a "$N1"
            run b "$N2"
            # shellcheck disable=SC2046 # five numbers, split on purpose
            set -- $(totals "$TMP/a")
            a_i=$1 a_m=$2 a_c=$3 a_r=$4 a_f=$5
            # shellcheck disable=SC2046
            set -- $(totals "$TMP/b")
            printf '%-10s %6s %-8s %10.0f %7.2f %7.2f %7.2f %7.2f\n' \
                "$mode" "$bytes" "$fast" \
                "$(echo "($1 - $a_i) / $calls" | bc -l)" \
                "$(echo "($2 - $a_m) / $calls" | bc -l)" \
                "$(echo "($3 - $a_c) / $calls" | bc -l)" \
                "$(echo "($4 - $a_r) / $calls" | bc -l)" \
                "$(echo "($5 - $a_f) / $calls" | bc -l)"
        done
    done
done
