#!/bin/sh
# Small all-reduce latency: the C perf binary (blocking calls), torch on
# tacl and torch on gloo (perf/torch_latency.py, async_op=False), and
# torch's own floor (its fake backend, which moves nothing), for each
# build given, launches interleaved so that every build sees the same
# machine.
#
# Usage: perf/torch_latency.sh BUILD_DIR [BUILD_DIR...]
#   Each BUILD_DIR is a build of a tacl tree (the tree is found from the
#   build's meson-info); its own binding is built into it (run_torch.sh).
# Environment: RANKS ("2 4"), SIZES (8,4096), LAUNCHES (3: the median
# over launches is kept), ITERS (3000), REPS (5: rounds per launch).
# Prints one line per build, ranks and size:
#   build ranks bytes C_us torch_tacl_us torch_gloo_us torch_floor_us
#   tacl/C gloo/tacl
set -eu
RANKS=${RANKS:-2 4} SIZES=${SIZES:-8,4096} LAUNCHES=${LAUNCHES:-3}
ITERS=${ITERS:-3000} REPS=${REPS:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

src_of() {  # the source tree of a build (meson records it)
    python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["directories"]["source"])' \
        "$1/meson-info/meson-info.json"
}

l=1
while [ "$l" -le "$LAUNCHES" ]; do
    b=0
    for build in "$@"; do
        b=$((b + 1))
        build=$(cd "$build" && pwd)
        src=$(src_of "$build")
        for n in $RANKS; do
            for size in $(echo "$SIZES" | tr , ' '); do
                "$build/tools/tacl-run" -n "$n" setsid -w \
                    "$build/perf/all_reduce_perf" -b "$size" -e "$size" \
                    -n $((ITERS * 5)) -w 300 -z 1 -a 3 2>/dev/null |
                    awk -v b=$b -v n=$n '/^ +[0-9]+ +[0-9]+ +float/ {
                        print "C", b, n, $1, $6 }' >> "$TMP/rows"
            done
            "$src/tests/torch/run_torch.sh" "$src" "$build" "$n" \
                "$HERE/torch_latency.py" --sizes "$SIZES" \
                --iters "$ITERS" --reps "$REPS" 2>"$TMP/err" |
                awk -v b=$b -v n=$n '/^LATENCY/ {
                    print $2, b, n, $3, $4 }' >> "$TMP/rows" || {
                tail -20 "$TMP/err" >&2
                exit 1
            }
        done
    done
    l=$((l + 1))
done
printf '%-6s %5s %6s %8s %11s %11s %12s %7s %9s\n' build ranks bytes \
    C_us torch_tacl torch_gloo torch_floor tacl/C gloo/tacl
b=0
for build in "$@"; do
    b=$((b + 1))
    for n in $RANKS; do
        for size in $(echo "$SIZES" | tr , ' '); do
            med() {
                awk -v k="$1" -v b=$b -v n=$n -v s=$size \
                    '$1 == k && $2 == b && $3 == n && $4 == s { print $5 }' \
                    "$TMP/rows" | sort -n | awk '{ v[NR] = $1 } END {
                    if (NR == 0) print "-"; else if (NR % 2)
                    print v[(NR + 1) / 2]; else
                    printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
            }
            c=$(med C) t=$(med tacl) g=$(med gloo) f=$(med floor)
            printf '%-6s %5s %6s %8s %11s %11s %12s %7s %9s\n' \
                "$(basename "$(src_of "$build")")" "$n" "$size" "$c" "$t" \
                "$g" "$f" "$(awk -v a="$t" -v c="$c" 'BEGIN {
                    if (c > 0) printf "%.2f", a / c; else print "-" }')" \
                "$(awk -v g="$g" -v a="$t" 'BEGIN {
                    if (a > 0) printf "%.2f", g / a; else print "-" }')"
        done
    done
done
