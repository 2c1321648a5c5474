#!/bin/sh
# Benchmark the hierarchical collectives on the emulated cluster.
#
# Design.  One run of this script measures, under tools/tacl-cluster with
# every node uplink shaped to INTER_RATE (1gbit), all-gather and
# reduce-scatter with each algorithm forced (ring, mics, hring, horing)
# and left to the tuner (auto), and all-reduce with ring, hier and auto,
# on the layouts 2x2 and 4x2 (nodes x ranks per node) at 16 MB to 256 MB
# of total buffer.  It first measures the shaped link rate with a flat
# ring all-gather between two single-rank nodes, so that the bound of
# the hierarchical algorithms (each node uplink sends (p - k) / p of the
# buffer) uses the rate the shaper really gives.  Every run's output and
# JSON (-J) land in OUT_DIR/raw with a manifest line; bench_hier.py then
# reads them and prints the tables and writes OUT_DIR/bench_hier.csv and
# OUT_DIR/bench_hier.md.  The tuner's choice comes from the TUNE lines of
# TACL_DEBUG=INFO.  Progress goes to stderr.
#
# Usage: perf/bench_hier.sh [--quick] BUILD_DIR [OUT_DIR]
#   --quick  the 2x2 layout only, 16 MB to 64 MB (a check of the script).
# Environment: INTER_RATE (1gbit), LAYOUTS ("2x2 4x2"), MIN_SIZE (16M),
# MAX_SIZE (256M), ITERS (2) and WARMUP (1) for 64 MB and up,
# SMALL_ITERS (8) below 64 MB, CHECK_ALL (0: results are checked up to
# 64 MB; 1: at every size), LINK_RATE (bytes/s: skips the calibration),
# LIMIT (seconds per run, 300), QUICKACK (1, the default: tacl-cluster
# --quickack, nodes acknowledge every TCP segment at once, as
# docs/bench/bench_hier.* were measured; 0: delayed acknowledgements, with
# which the shaped links stall for 50-330 ms in some operations, see
# docs/sim/compare_bench.md), REPEAT (1: launches of each configuration;
# with more, every configuration runs once per round, rounds one after the
# other so that a slow spell of the machine falls on all configurations
# alike, and bench_hier.py keeps each size's median over the launches),
# SETTLE (15: seconds to wait after a launch that reached 128 MB; 0: none.
# On the development VM the launch right after one that freed its 128-256
# MB buffers ran 10-15% slower for 5-10 s, with the guest idle: 4x2 H-Ring
# reduce-scatter at 32 MB took 263-270 ms right after a 128-256 MB launch,
# 230-239 ms after a 15 s pause or after a small launch; see
# docs/sim/compare_bench.md).
# Exit status: 0 if every run worked and every result was exact, 1 if
# some run failed (its cells read "-"), 2 on a usage error.

set -u

usage() {
    echo "usage: bench_hier.sh [--quick] BUILD_DIR [OUT_DIR]" >&2
    exit 2
}

quick=0
build=
out=
for arg in "$@"; do
    case $arg in
    --quick) quick=1 ;;
    -h | --help) usage ;;
    -*) echo "bench_hier.sh: unknown option $arg" >&2; usage ;;
    *)
        if [ -z "$build" ]; then
            build=$arg
        elif [ -z "$out" ]; then
            out=$arg
        else
            usage
        fi
        ;;
    esac
done
[ -n "$build" ] || usage
out=${out:-$build/bench_hier}

HERE=$(cd "$(dirname "$0")" && pwd)
CLUSTER=$HERE/../tools/tacl-cluster
PY=/usr/bin/python3
INTER_RATE=${INTER_RATE:-1gbit}
ITERS=${ITERS:-2}
WARMUP=${WARMUP:-1}
SMALL_ITERS=${SMALL_ITERS:-8}
CHECK_ALL=${CHECK_ALL:-0}
LIMIT=${LIMIT:-300}
QUICKACK=${QUICKACK:-1}
REPEAT=${REPEAT:-1}
SETTLE=${SETTLE:-15}
case $REPEAT in
'' | *[!0-9]* | 0) echo "bench_hier.sh: REPEAT must be a positive integer" >&2
    exit 2 ;;
esac
case $SETTLE in
'' | *[!0-9]*) echo "bench_hier.sh: SETTLE must be a number of seconds" >&2
    exit 2 ;;
esac
case $QUICKACK in
0) ACK_OPT= ;;
1) ACK_OPT=--quickack ;;
*) echo "bench_hier.sh: QUICKACK must be 0 or 1" >&2; exit 2 ;;
esac
if [ $quick = 1 ]; then
    LAYOUTS=${LAYOUTS:-2x2}
    MIN_SIZE=${MIN_SIZE:-16M}
    MAX_SIZE=${MAX_SIZE:-64M}
else
    LAYOUTS=${LAYOUTS:-"2x2 4x2"}
    MIN_SIZE=${MIN_SIZE:-16M}
    MAX_SIZE=${MAX_SIZE:-256M}
fi

for exe in all_gather_perf reduce_scatter_perf all_reduce_perf; do
    if [ ! -x "$build/perf/$exe" ]; then
        echo "bench_hier.sh: $build/perf/$exe is missing; build it first" \
            "(ninja -C $build perf/$exe)" >&2
        exit 2
    fi
done
if ! "$CLUSTER" --check > /dev/null 2>&1; then
    echo "bench_hier.sh: this machine cannot run tacl-cluster:" >&2
    "$CLUSTER" --check >&2
    exit 2
fi
PERF=$(cd "$build/perf" && pwd)
mkdir -p "$out/raw" || exit 2
out=$(cd "$out" && pwd)
RAW=$out/raw
rm -f "$RAW"/*.json "$RAW"/*.log "$RAW/manifest.tsv"

# Sizes in MB as integers, for splitting the range at 64 MB.
mb() {
    case $1 in
    *G) echo $((${1%G} * 1024)) ;;
    *M) echo "${1%M}" ;;
    *) echo "bench_hier.sh: sizes take an M or G suffix: $1" >&2; exit 2 ;;
    esac
}
min_mb=$(mb "$MIN_SIZE") || exit 2
max_mb=$(mb "$MAX_SIZE") || exit 2
[ "$min_mb" -le "$max_mb" ] || usage

# The size ranges each configuration runs, as MIN:MAX:ITERS:CHECK words:
# below 64 MB SMALL_ITERS timed iterations, from 64 MB on ITERS; results
# checked up to 64 MB, and above it only with CHECK_ALL=1 (a check costs
# one more iteration per placement, about a quarter of the run).
RANGES=
group() {
    lo=0
    s=$min_mb
    while [ "$s" -le "$max_mb" ]; do
        if [ "$s" -ge "$1" ] && [ "$s" -le "$2" ]; then
            [ "$lo" -gt 0 ] || lo=$s
            hi=$s
        fi
        s=$((s * 2))
    done
    if [ "$lo" -gt 0 ]; then
        RANGES="$RANGES ${lo}M:${hi}M:$3:$4"
    fi
}
group 1 63 "$SMALL_ITERS" 1
group 64 64 "$ITERS" 1
group 65 1048576 "$ITERS" "$CHECK_ALL"

total=1
for layout in $LAYOUTS; do
    for r in $RANGES; do
        total=$((total + 13))
    done
done
total=$((total * REPEAT))
round=1
count=0
failed=0
start=$(date +%s)

# run_one LAYOUT COLL ALGO MIN MAX ITERS CHECK: one perf binary under the
# cluster, output and JSON to RAW, one manifest line.
run_one() {
    layout=$1 coll=$2 algo=$3 lo=$4 hi=$5 iters=$6 check=$7
    nodes=${layout%x*}
    rpn=${layout#*x}
    tag=$layout.$coll.$algo.$lo
    [ "$REPEAT" = 1 ] || tag=$tag.r$round
    count=$((count + 1))
    set -- -b "$lo" -e "$hi" -f 2 -n "$iters" -w "$WARMUP" \
        -c "$check" -J "$RAW/$tag.json"
    if [ "$algo" != auto ]; then
        set -- "$@" -A "$algo"
    fi
    printf '[%d/%d] %s %s %s %s..%s -n %s ... ' "$count" "$total" \
        "$layout" "$coll" "$algo" "$lo" "$hi" "$iters" >&2
    t0=$(date +%s)
    TACL_DEBUG=INFO TACL_DEBUG_SUBSYS=TUNE "$CLUSTER" --nodes "$nodes" \
        --ranks-per-node "$rpn" --inter-rate "$INTER_RATE" \
        ${ACK_OPT:+"$ACK_OPT"} --timeout "$LIMIT" -- \
        "$PERF/${coll}_perf" "$@" \
        > "$RAW/$tag.log" 2>&1
    rc=$?
    t1=$(date +%s)
    if [ $rc -eq 0 ]; then
        echo "$((t1 - t0)) s" >&2
    else
        echo "FAILED (exit $rc, $((t1 - t0)) s); last lines:" >&2
        tail -5 "$RAW/$tag.log" | sed 's/^/    /' >&2
        failed=1
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$layout" "$coll" "$algo" \
        "$tag.json" "$tag.log" "$rc" "$((t1 - t0))" >> "$RAW/manifest.tsv"
}

echo "bench_hier: layouts $LAYOUTS, $MIN_SIZE..$MAX_SIZE, uplinks" \
    "$INTER_RATE${ACK_OPT:+ $ACK_OPT}, $REPEAT round(s), output in $out" >&2

# One launch of every configuration, the calibration first.
one_round() {
    # The shaped rate: a flat ring all-gather of 64 MB between two nodes of
    # one rank each sends 32 MB each way over the one link.
    if [ -n "${LINK_RATE:-}" ]; then
        count=$((count + 1))
        echo "[$count/$total] link rate from LINK_RATE: $LINK_RATE B/s" >&2
    else
        run_one 2x1 all_gather ring 64M 64M 4 1
    fi

    for layout in $LAYOUTS; do
        for coll in all_gather reduce_scatter all_reduce; do
            if [ $coll = all_reduce ]; then
                algos="ring hier auto"
            else
                algos="ring mics hring horing auto"
            fi
            for algo in $algos; do
                for r in $RANGES; do
                    # Split MIN:MAX:ITERS:CHECK into the positional words.
                    IFS=: read -r lo hi iters check <<EOF_RANGE
$r
EOF_RANGE
                    run_one "$layout" "$coll" "$algo" "$lo" "$hi" "$iters" \
                        "$check"
                    [ "$(mb "$hi")" -lt 128 ] || sleep "$SETTLE"
                done
            done
        done
    done
}

while [ "$round" -le "$REPEAT" ]; do
    one_round
    round=$((round + 1))
done
echo "bench_hier: runs took $(($(date +%s) - start)) s" >&2

"$PY" "$HERE/bench_hier.py" --raw "$RAW" --out "$out" \
    --inter-rate "$INTER_RATE" ${LINK_RATE:+--link-rate "$LINK_RATE"}
py=$?
if [ $py -ne 0 ] && [ $py -ne 1 ]; then
    exit 2
fi
[ $failed = 0 ] && [ $py = 0 ]
