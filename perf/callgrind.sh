#!/bin/sh
# Instructions per small all-reduce call, by phase, from callgrind: a
# count that does not depend on how busy the machine is.
#
# Rank 0 of a 2-rank all_reduce_perf runs under valgrind's callgrind,
# rank 1 natively (so rank 1 is nearly always ahead and rank 0's waits
# are short).  Two runs with different iteration counts are subtracted,
# which removes start-up, warm-up and the first call's one-time work; the
# difference is divided by the difference in calls.  Each phase is the
# inclusive cost of the functions named below (callgrind_annotate), so a
# phase the compiler inlined into its caller shows up in "other".
#
# Usage: perf/callgrind.sh BUILD_DIR
# A phase the build does not have (or inlined) prints 0.  An 8-byte call
# takes the fast path (tacl__fast_try, or tacl__fast_again for the
# owner's repeated call; fast_call the bookkeeping, tacl__fast_run the
# collective) unless
# TACL_FAST_MAX=0 sends it the normal way (schedule, executor, shm).
# Environment: BYTES (default 8), N1 (2000), N2 (6000) iterations,
# COLL (allreduce, the default, or broadcast), ROOT (broadcast's root,
# 0: rank 0, the one measured, is the root; 1: it is a receiver).

set -u
BUILD=${1:?usage: callgrind.sh BUILD_DIR}
BYTES=${BYTES:-8}
N1=${N1:-2000}
N2=${N2:-6000}
COLL=${COLL:-allreduce}
ROOT=${ROOT:-0}
case $COLL in
allreduce) PERF=all_reduce_perf; ENTRY=tacl_allreduce; WHO="" ;;
broadcast) PERF=broadcast_perf; ENTRY=tacl_broadcast
    WHO=$([ "$ROOT" = 0 ] && echo ", rank 0 the root" ||
          echo ", rank 0 a receiver") ;;
*) echo "callgrind.sh: COLL is allreduce or broadcast" >&2; exit 2 ;;
esac
for t in valgrind callgrind_annotate; do
    command -v $t > /dev/null || { echo "callgrind.sh: no $t" >&2; exit 2; }
done
. "$(dirname "$0")/runs.sh"
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT

# The perf harness runs each size out of place and in place: two calls
# per iteration (warm-up 10 each, the same in both runs).
run() {
    cg_rank0 "$BUILD" "$TMP/cg.$1" "$TMP/out.$1" "$BUILD/perf/$PERF" \
        -b "$BYTES" -e "$BYTES" -n "$1" -w 10 -c 0 -z 1 -r "$ROOT" ||
        { echo "callgrind.sh: run of $1 iterations failed" >&2
          cat "$TMP/out.$1" >&2; exit 1; }
    callgrind_annotate --inclusive=yes --threshold=100 "$TMP/cg.$1" \
        > "$TMP/ann.$1" 2> /dev/null
}
run "$N1"
run "$N2"

# Inclusive instructions of function $2, FILE:NAME where the name alone
# is ambiguous (its lines that name an object; recursive entries, "f'2",
# are inside the first and left out).
incl() {
    awk -v f="$2" '
        index($0, (f ~ /:/ ? "/" : ":") f " [") { gsub(/,/, "", $1); n += $1 }
        END { print n + 0 }' "$TMP/ann.$1"
}
calls=$(( 2 * (N2 - N1) ))
printf '# instructions per %s-byte %s call on 2 ranks (rank 0%s)\n' \
    "$BYTES" "$COLL" "$WHO"
printf '%-26s %10s\n' phase "instr/call"
for f in $ENTRY coll.c:post tacl__comm_enter tacl__comm_leave validate \
    tacl__coll_memory tacl__dev_ptr_type tacl__fast_again fast_call \
    tacl__fast_try tacl__flight_note_args tacl__flight_open \
    tacl__flight_end tacl__fast_run \
    tacl__ops_start tacl__algo_build \
    tacl__plan_build tacl__exec_start tacl__exec_wait ctx_progress_locked \
    tacl__shm_progress tacl__shm_wait tacl__exec_free malloc calloc free \
    pthread_mutex_lock clock_gettime; do
    a=$(incl "$N1" "$f")
    b=$(incl "$N2" "$f")
    printf '%-26s %10.0f\n' "${f#*:}" "$(echo "($b - $a) / $calls" | bc -l)"
done
a=$(awk '/PROGRAM TOTALS/ { gsub(/,/, "", $1); print $1 }' "$TMP/ann.$N1")
b=$(awk '/PROGRAM TOTALS/ { gsub(/,/, "", $1); print $1 }' "$TMP/ann.$N2")
printf '%-26s %10.0f\n' "whole program" "$(echo "($b - $a) / $calls" | bc -l)"
