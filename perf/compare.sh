#!/bin/sh
# Compare tacl with Open MPI on this node: all-gather, reduce-scatter and
# all-reduce on 2 and 4 ranks at 1 MB, 16 MB and 128 MB of float32, with
# the same harness (sizes, data, exact check, timing), plus the memcpy
# bandwidth that bounds both.  Prints a table and writes a CSV.
#
# Usage: perf/compare.sh BUILD_DIR [CSV_FILE]
# Environment: ITERS (default 20), WARMUP (5), RANKS ("2 4"),
# SIZES ("1M 16M 128M"), COLLS ("all_gather reduce_scatter all_reduce").
# Open MPI runs over shared memory: btl self,vader with CMA single copy.

set -u
BUILD=${1:?usage: compare.sh BUILD_DIR [CSV_FILE]}
CSV=${2:-$BUILD/compare.csv}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
RANKS=${RANKS:-"2 4"}
SIZES=${SIZES:-"1M 16M 128M"}
COLLS=${COLLS:-"all_gather reduce_scatter all_reduce"}
PERF=$BUILD/perf
LIMIT=300
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none
    --mca btl self,vader --mca btl_vader_single_copy_mechanism cma"

for exe in tacl-run memcpy_bw all_gather_perf reduce_scatter_perf \
    all_reduce_perf; do
    if [ ! -x "$PERF/$exe" ]; then
        echo "compare.sh: $PERF/$exe is missing; build it first" >&2
        exit 2
    fi
done
have_mpi=1
if [ ! -x "$PERF/mpi_coll_perf" ] || ! command -v mpirun > /dev/null; then
    echo "compare.sh: no mpi_coll_perf or mpirun: tacl figures only" >&2
    have_mpi=0
fi

TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
status=0

# Out-of-place and in-place busbw and time of the one row of a run's
# output: "oop_busbw oop_time ip_busbw ip_time wrong" or "- - - - -".
row_of() {
    awk '!/^#/ && NF >= 13 {
            print $8, $6, $12, $10, $9 + $13; found = 1; exit }
         END { if (!found) print "- - - - -" }' "$1"
}

echo "# memcpy bandwidth (the ceiling for copy-based shared memory)"
"$PERF/memcpy_bw" -t 0.2 | tee "$TMP/memcpy"
echo

echo "coll,ranks,size_bytes,tacl_busbw,ompi_busbw,ratio,tacl_time_us," \
"ompi_time_us,tacl_inplace_busbw,ompi_inplace_busbw,tacl_wrong," \
"ompi_wrong" | tr -d ' ' > "$CSV"
printf '%-15s %5s %10s %11s %11s %7s\n' coll ranks size "tacl busbw" \
    "ompi busbw" ratio
for coll in $COLLS; do
    mpi_coll=$(echo "$coll" | tr -d _)
    [ "$coll" = reduce_scatter ] && mpi_coll=reduce_scatter
    for n in $RANKS; do
        for size in $SIZES; do
            args="-b $size -e $size -n $ITERS -w $WARMUP -d float -c 1"
            out=$TMP/tacl.$coll.$n.$size
            # shellcheck disable=SC2086
            if ! "$PERF/tacl-run" --timeout $LIMIT -n "$n" \
                "$PERF/${coll}_perf" $args > "$out" 2>&1; then
                echo "compare.sh: tacl $coll -n $n $size failed:" >&2
                tail -5 "$out" >&2
                status=1
            fi
            set -- $(row_of "$out")
            t_bw=$1 t_time=$2 t_ip=$3 t_wrong=$5
            o_bw=- o_time=- o_ip=- o_wrong=-
            if [ $have_mpi = 1 ]; then
                out=$TMP/ompi.$coll.$n.$size
                # shellcheck disable=SC2086
                if ! timeout $LIMIT $MPIRUN -n "$n" "$PERF/mpi_coll_perf" \
                    "$mpi_coll" $args > "$out" 2>&1; then
                    echo "compare.sh: ompi $coll -n $n $size failed:" >&2
                    tail -5 "$out" >&2
                    status=1
                fi
                set -- $(row_of "$out")
                o_bw=$1 o_time=$2 o_ip=$3 o_wrong=$5
            fi
            bytes=$(awk '!/^#/ && NF >= 13 { print $1; exit }' \
                "$TMP/tacl.$coll.$n.$size")
            [ -n "$bytes" ] || bytes=$size
            ratio=$(awk -v t="$t_bw" -v o="$o_bw" 'BEGIN {
                if (t == "-" || o == "-" || o + 0 == 0) print "-";
                else printf "%.2f", t / o }')
            printf '%-15s %5s %10s %11s %11s %7s\n' "$coll" "$n" "$bytes" \
                "$t_bw" "$o_bw" "$ratio"
            echo "$coll,$n,$bytes,$t_bw,$o_bw,$ratio,$t_time,$o_time," \
"$t_ip,$o_ip,$t_wrong,$o_wrong" | tr -d ' ' >> "$CSV"
        done
    done
done
echo
echo "busbw in GB/s, out of place; ratio = tacl / ompi; CSV: $CSV"
exit $status
