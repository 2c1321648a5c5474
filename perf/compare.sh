#!/bin/sh
# Compare tacl with Open MPI on this node: all-gather, reduce-scatter and
# all-reduce on 2 and 4 ranks at 1 MB, 16 MB and 128 MB of float32, with
# the same harness (sizes, data, exact check, timing), plus the memcpy
# bandwidth that bounds both.  Prints a table and writes a CSV.
#
# The "bound" column is the busbw a collective would reach if the bytes
# each rank must move went at the memcpy rate measured here with every
# core copying at once, ranks sharing the cores.  Every byte written must
# be written once and every byte that feeds it read from memory at least
# once per node (ranks reading the same block at the same time share one
# read through the last-level cache), so a rank's work is, in copies,
# (bytes read + bytes written) / 2 of the S-byte buffer: all-gather
# (S/n + S) / 2 (its block read, S written), reduce-scatter (S + S/n) / 2,
# all-reduce (2n + 1) S / 2n (the reduce-scatter, then its reduced block
# read for the peers and the n - 1 others written).  It bounds a
# collective whose bytes all stream through memory; where more stays in
# the last-level cache (the memcpy rate is measured on buffers larger
# than it), as reduce-scatter's received chunks do at 16 MB, a run can
# pass it.
#
# The "tacl -R" column is tacl again with its buffers from tacl_mem_alloc
# (all_gather_perf -R 1, as nccl-tests' -R with ncclMemAlloc): peers map
# them and copy without cross-memory system calls.  It is launched in
# turn with the other two, so all three see the same machine.
#
# Usage: perf/compare.sh BUILD_DIR [CSV_FILE]
# Environment: ITERS (default 20), WARMUP (5), REPEAT (3: launches per
# side, the median is kept), RANKS ("2 4"),
# SIZES ("1M 16M 128M"), COLLS ("all_gather reduce_scatter all_reduce").
# Open MPI runs over shared memory: btl self,vader with CMA single copy.

set -u
BUILD=${1:?usage: compare.sh BUILD_DIR [CSV_FILE]}
CSV=${2:-$BUILD/compare.csv}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
REPEAT=${REPEAT:-3}
RANKS=${RANKS:-"2 4"}
SIZES=${SIZES:-"1M 16M 128M"}
COLLS=${COLLS:-"all_gather reduce_scatter all_reduce"}
PERF=$BUILD/perf
TOOLS=$BUILD/tools
MICRO=$PERF/micro
LIMIT=300
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none
    --mca btl self,vader --mca btl_vader_single_copy_mechanism cma"

for exe in "$TOOLS/tacl-run" "$MICRO/memcpy_bw" "$MICRO/core_rtt" \
    "$PERF/all_gather_perf" "$PERF/reduce_scatter_perf" \
    "$PERF/all_reduce_perf"; do
    if [ ! -x "$exe" ]; then
        echo "compare.sh: $exe is missing; build it first" >&2
        exit 2
    fi
done
. "$(dirname "$0")/runs.sh"
have_mpi=$(have_mpi_of compare.sh "$PERF/mpi_coll_perf")

TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
status=0

echo "# memcpy bandwidth (the ceiling for copy-based shared memory)"
"$MICRO/memcpy_bw" -t 0.2 | tee "$TMP/memcpy"
echo

NCORES=$(nproc 2> /dev/null || echo 1)

# The memory bound on busbw (see above) for coll on n ranks at bytes.
bound_of() {
    awk -v coll="$1" -v n="$2" -v s="$3" -v cores="$NCORES" '
        !/^#/ && NF >= 4 && $1 <= s { rate = $4 * 1e9 }
        END {
            if (rate == 0 || n < 2) { print "-"; exit }
            if (coll == "all_gather") { e = (s / n + s) / 2; f = (n - 1) / n }
            else if (coll == "reduce_scatter") {
                e = (s + s / n) / 2; f = (n - 1) / n }
            else { e = (2 * n + 1) * s / (2 * n); f = 2 * (n - 1) / n }
            share = n > cores ? n / cores : 1
            printf "%.2f", s / (e * share / rate) * f / 1e9
        }' "$TMP/memcpy"
}

# a / b to two places, or "-" when either is missing.
ratio_of() {
    awk -v t="$1" -v o="$2" 'BEGIN {
        if (t == "-" || o == "-" || o + 0 == 0) print "-";
        else printf "%.2f", t / o }'
}

echo "coll,ranks,size_bytes,tacl_busbw,ompi_busbw,ratio,tacl_time_us," \
"ompi_time_us,tacl_inplace_busbw,ompi_inplace_busbw,tacl_wrong," \
"ompi_wrong,bound_busbw,rtt_min_ns,rtt_max_ns,tacl_reg_busbw," \
"ratio_reg,tacl_reg_time_us,tacl_reg_inplace_busbw,tacl_reg_wrong" |
    tr -d ' ' > "$CSV"
printf '%-15s %5s %10s %11s %11s %7s %11s %7s %7s %9s\n' coll ranks size \
    "tacl busbw" "ompi busbw" ratio "tacl -R" "ratio" bound "rtt ns"
for coll in $COLLS; do
    mpi_coll=$(echo "$coll" | tr -d _)
    [ "$coll" = reduce_scatter ] && mpi_coll=reduce_scatter
    for n in $RANKS; do
        for size in $SIZES; do
            args="-b $size -e $size -n $ITERS -w $WARMUP -d float -c 1"
            # Each side runs REPEAT times, alternating, and keeps its
            # median run: the spread between launches (where the pages of
            # the buffers land in the cache) is larger than within one.
            rep=1
            rtts=$TMP/rtt.$coll.$n.$size
            while [ $rep -le "$REPEAT" ]; do
                "$MICRO/core_rtt" >> "$rtts"
                out=$TMP/tacl.$coll.$n.$size.$rep
                # shellcheck disable=SC2086
                logged_run compare.sh "tacl $coll -n $n $size" "$out" \
                    "$TOOLS/tacl-run" --timeout $LIMIT -n "$n" \
                    "$PERF/${coll}_perf" $args
                "$MICRO/core_rtt" >> "$rtts"
                out=$TMP/reg.$coll.$n.$size.$rep
                # shellcheck disable=SC2086
                logged_run compare.sh "tacl -R 1 $coll -n $n $size" "$out" \
                    "$TOOLS/tacl-run" --timeout $LIMIT -n "$n" \
                    "$PERF/${coll}_perf" $args -R 1
                "$MICRO/core_rtt" >> "$rtts"
                out=$TMP/ompi.$coll.$n.$size.$rep
                # shellcheck disable=SC2086
                [ $have_mpi = 1 ] && logged_run compare.sh \
                    "ompi $coll -n $n $size" "$out" \
                    timeout $LIMIT $MPIRUN -n "$n" \
                    "$PERF/mpi_coll_perf" "$mpi_coll" $args
                rep=$((rep + 1))
            done
            set -- $(median_row "$TMP/tacl.$coll.$n.$size")
            t_bw=$1 t_time=$2 t_ip=$3 t_wrong=$5
            set -- $(median_row "$TMP/reg.$coll.$n.$size")
            r_bw=$1 r_time=$2 r_ip=$3 r_wrong=$5
            o_bw=- o_time=- o_ip=- o_wrong=-
            if [ $have_mpi = 1 ]; then
                set -- $(median_row "$TMP/ompi.$coll.$n.$size")
                o_bw=$1 o_time=$2 o_ip=$3 o_wrong=$5
            fi
            bytes=$(awk '!/^#/ && NF >= 13 { print $1; exit }' \
                "$TMP/tacl.$coll.$n.$size.1")
            [ -n "$bytes" ] || bytes=$size
            ratio=$(ratio_of "$t_bw" "$o_bw")
            ratio_reg=$(ratio_of "$r_bw" "$o_bw")
            bound=$(bound_of "$coll" "$n" "$bytes")
            set -- $(awk '$2 ~ /^[0-9]/ {
                    if (n++ == 0 || $2 < lo) lo = $2
                    if ($2 > hi) hi = $2 }
                END { if (n) print lo, hi; else print "- -" }' "$rtts")
            rtt_lo=$1 rtt_hi=$2
            printf '%-15s %5s %10s %11s %11s %7s %11s %7s %7s %9s\n' \
                "$coll" "$n" "$bytes" "$t_bw" "$o_bw" "$ratio" "$r_bw" \
                "$ratio_reg" "$bound" "$rtt_lo-$rtt_hi"
            echo "$coll,$n,$bytes,$t_bw,$o_bw,$ratio,$t_time,$o_time," \
"$t_ip,$o_ip,$t_wrong,$o_wrong,$bound,$rtt_lo,$rtt_hi,$r_bw,$ratio_reg," \
"$r_time,$r_ip,$r_wrong" | tr -d ' ' >> "$CSV"
        done
    done
done
echo
echo "busbw in GB/s, out of place; ratio = tacl / ompi; tacl -R = tacl"
echo "with buffers from tacl_mem_alloc, and its ratio to ompi; bound = the"
echo "memory bound (memcpy rate, all cores copying, ranks sharing cores);"
echo "rtt = the fewest-most nanoseconds a cache line took between two cores"
echo "(core_rtt) before the cell's launches: tens when they share a cache,"
echo "hundreds when a virtual machine's host has put them apart, which"
echo "slows every hand-off of data from core to core through the cache;"
echo "CSV: $CSV"
exit $status
