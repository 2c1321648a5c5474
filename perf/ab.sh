#!/bin/sh
# Compare two builds of tacl on this node, A before B: the same perf
# binaries from each, launched alternately (A, B, A, B, ...) so that both
# see the same machine, REPEAT launches per side, median busbw kept.
# Prints busbw per cell and B/A; a ratio below 1 means B is slower.
#
# Usage: perf/ab.sh BUILD_A BUILD_B
# Environment: ITERS (default 20), WARMUP (5), REPEAT (5), RANKS ("2 4"),
# SIZES ("1M 16M 128M"), COLLS ("all_gather reduce_scatter all_reduce"),
# EXTRA (more perf flags, e.g. "-R 1" for tacl_mem_alloc buffers).

set -u
A=${1:?usage: ab.sh BUILD_A BUILD_B}
B=${2:?usage: ab.sh BUILD_A BUILD_B}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
REPEAT=${REPEAT:-5}
RANKS=${RANKS:-"2 4"}
SIZES=${SIZES:-"1M 16M 128M"}
COLLS=${COLLS:-"all_gather reduce_scatter all_reduce"}
EXTRA=${EXTRA:-}
LIMIT=300

# The launcher and the perf binaries of a build (the launcher moved from
# perf/ to tools/; either layout works).
run_of() {
    if [ -x "$1/tools/tacl-run" ]; then echo "$1/tools/tacl-run"
    else echo "$1/perf/tacl-run"; fi
}
for b in "$A" "$B"; do
    for coll in $COLLS; do
        if [ ! -x "$b/perf/${coll}_perf" ] || [ ! -x "$(run_of "$b")" ]; then
            echo "ab.sh: $b/perf/${coll}_perf or tacl-run is missing" >&2
            exit 2
        fi
    done
done

TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/runs.sh"

printf '%-15s %5s %10s %9s %9s %7s\n' coll ranks size "A busbw" \
    "B busbw" "B/A"
status=0
for coll in $COLLS; do
    for n in $RANKS; do
        for size in $SIZES; do
            args="-b $size -e $size -n $ITERS -w $WARMUP -d float -c 1 $EXTRA"
            rep=1
            while [ $rep -le "$REPEAT" ]; do
                for side in A B; do
                    if [ $side = A ]; then b=$A; else b=$B; fi
                    # shellcheck disable=SC2086
                    if ! "$(run_of "$b")" --timeout $LIMIT -n "$n" \
                        "$b/perf/${coll}_perf" $args \
                        > "$TMP/$side.$rep" 2>&1; then
                        echo "ab.sh: $side $coll $n $size failed:" >&2
                        cat "$TMP/$side.$rep" >&2
                        status=1
                    fi
                done
                rep=$((rep + 1))
            done
            set -- $(median_row "$TMP/A")
            a_bw=$1 a_wrong=$5
            set -- $(median_row "$TMP/B")
            b_bw=$1 b_wrong=$5
            [ "$a_wrong" != 0 ] || [ "$b_wrong" != 0 ] && status=1
            printf '%-15s %5s %10s %9s %9s %7s\n' "$coll" "$n" "$size" \
                "$a_bw" "$b_bw" "$(awk -v a="$a_bw" -v b="$b_bw" 'BEGIN {
                    if (a == "-" || b == "-" || a + 0 == 0) print "-";
                    else printf "%.2f", b / a }')"
        done
    done
done
exit $status
