#!/bin/sh
# The non-blocking form against the blocking call at small sizes: an
# all-reduce timed as tacl_allreduce_nb + wait + free (all_reduce_perf
# -z 0) and as tacl_allreduce (-z 1), launched in turn (blocking, _nb,
# blocking, ...) LAUNCHES times for every build and rank count, so each
# side sees the same machine.  The median launch of each cell is kept.
#
# Usage: perf/nb_latency.sh BUILD_DIR [BUILD_DIR...]
# Environment: RANKS ("2 4"), MINBYTES (8), MAXBYTES (16K), LAUNCHES (5),
# ITERS (20000), WARMUP (1000).
# Prints: build ranks bytes blocking_us nb_us nb/blocking
set -eu
RANKS=${RANKS:-2 4} MINBYTES=${MINBYTES:-8} MAXBYTES=${MAXBYTES:-16K}
LAUNCHES=${LAUNCHES:-5} ITERS=${ITERS:-20000} WARMUP=${WARMUP:-1000}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

l=1
while [ "$l" -le "$LAUNCHES" ]; do
    b=0
    for build in "$@"; do
        b=$((b + 1))
        for n in $RANKS; do
            for z in 1 0; do
                # rows: bytes and the out-of-place time (us)
                "$build/tools/tacl-run" -n "$n" setsid -w \
                    "$build/perf/all_reduce_perf" -b "$MINBYTES" \
                    -e "$MAXBYTES" -f 2 -n "$ITERS" -w "$WARMUP" -c 0 \
                    -z "$z" 2>/dev/null |
                    awk '$1 ~ /^[0-9]+$/ { print $1, $6 }' \
                        >>"$TMP/b$b.n$n.z$z"
            done
        done
    done
    l=$((l + 1))
done

median() {  # the median time of one size in one file
    awk -v s="$1" '$1 == s { print $2 }' "$2" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'
}

echo "build ranks bytes blocking_us nb_us nb/blocking"
b=0
for build in "$@"; do
    b=$((b + 1))
    for n in $RANKS; do
        for size in $(awk '{ print $1 }' "$TMP/b$b.n$n.z1" | sort -gu); do
            blk=$(median "$size" "$TMP/b$b.n$n.z1")
            nb=$(median "$size" "$TMP/b$b.n$n.z0")
            [ -n "$blk" ] && [ -n "$nb" ] || {
                echo "nb_latency.sh: $build, $n ranks, $size B: a side" \
                    "has no figure" >&2
                exit 1
            }
            awk -v b="$build" -v n="$n" -v s="$size" -v x="$blk" \
                -v y="$nb" 'BEGIN { printf "%s %d %d %.3f %.3f %.2f\n",
                                    b, n, s, x, y, y / x }'
        done
    done
done
