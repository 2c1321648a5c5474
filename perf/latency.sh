#!/bin/sh
# Small-collective latency, tacl against Open MPI (btl self,vader) on this
# node: all-reduce, all-gather, reduce-scatter, broadcast and barrier from
# 8 B to 8 KB (perf/latency.c), launched in turn (tacl, Open MPI, tacl,
# ...) REPEAT times per rank count; the median launch of each cell is
# kept.  Two figures per side: the mean time per call over the whole loop,
# and that of the fastest of 20 blocks of the loop (a shared machine
# deschedules ranks now and then, which the mean carries and the best
# block mostly does not).  ratio = ompi / tacl: above 1, tacl is faster.
#
# Usage: perf/latency.sh BUILD_DIR [BASE_BUILD_DIR]
# With a second build (one with perf/latency.c built into it), its tacl is
# launched in turn too, and its columns are printed as "base".
# Environment: RANKS ("2 4 8"), REPEAT (5), ITERS (2000), MAXBYTES (8192:
# the largest size measured, so MAXBYTES=128 runs 8, 32 and 128 bytes);
# PERSIST=1 also launches tacl's persistent collectives (lat_tacl with
# LAT_MODE=persistent: tacl_start + wait on a request made once per cell)
# in turn and adds their columns (pers_mean, pers_best) at the end.
# COLLS ("allreduce allgather reducescatter broadcast barrier"): the
# collectives measured, e.g. COLLS=broadcast.  PIN=1 pins rank i of
# every launch, tacl's and Open MPI's alike, to core i mod the cores
# (taskset, through perf/pin_rank.sh): without it the scheduler places
# them, and two ranks may share a core for a while.

set -u
BUILD=${1:?usage: latency.sh BUILD_DIR [BASE_BUILD_DIR]}
BASE=${2:-}
RANKS=${RANKS:-"2 4 8"}
REPEAT=${REPEAT:-5}
ITERS=${ITERS:-2000}
PERSIST=${PERSIST:-0}
MAXBYTES=${MAXBYTES:-8192}
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none
    --mca btl self,vader"
COLLS=${COLLS:-}
PIN=${PIN:-0}
# lat_tacl and lat_mpi read LAT_COLL (a comma-separated list).
if [ -n "$COLLS" ]; then
    LAT_COLL=$(printf '%s' "$COLLS" | tr -s ' ' ',')
    export LAT_COLL
    MPIRUN="$MPIRUN -x LAT_COLL"
fi
# PINNER is left unquoted where it is used, on purpose: empty, it is no
# word at all (so a checkout path with a space cannot take PIN=1).
PINNER=
[ "$PIN" = 1 ] && PINNER="$(cd "$(dirname "$0")" && pwd)/pin_rank.sh"
LIMIT=300

if [ ! -x "$BUILD/perf/lat_tacl" ] || [ ! -x "$BUILD/tools/tacl-run" ]; then
    echo "latency.sh: $BUILD/perf/lat_tacl or tacl-run is missing" >&2
    exit 2
fi
. "$(dirname "$0")/runs.sh"
have_mpi=$(have_mpi_of latency.sh "$BUILD/perf/lat_mpi")
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
status=0

for n in $RANKS; do
    rep=1
    while [ $rep -le "$REPEAT" ]; do
        # shellcheck disable=SC2086
        logged_run latency.sh "tacl on $n ranks" "$TMP/tacl.$n.$rep" \
            "$BUILD/tools/tacl-run" --timeout $LIMIT -n "$n" \
            $PINNER "$BUILD/perf/lat_tacl" "$ITERS" "$MAXBYTES"
        # shellcheck disable=SC2086
        [ "$PERSIST" = 1 ] && logged_run latency.sh \
            "persistent tacl on $n ranks" "$TMP/pers.$n.$rep" \
            env LAT_MODE=persistent \
            "$BUILD/tools/tacl-run" --timeout $LIMIT -n "$n" \
            $PINNER "$BUILD/perf/lat_tacl" "$ITERS" "$MAXBYTES"
        # shellcheck disable=SC2086
        [ -n "$BASE" ] && logged_run latency.sh \
            "base tacl on $n ranks" "$TMP/base.$n.$rep" \
            "$BASE/tools/tacl-run" --timeout $LIMIT \
            -n "$n" $PINNER "$BASE/perf/lat_tacl" "$ITERS" "$MAXBYTES"
        # shellcheck disable=SC2086
        [ $have_mpi = 1 ] && logged_run latency.sh \
            "Open MPI on $n ranks" "$TMP/ompi.$n.$rep" \
            timeout $LIMIT $MPIRUN -n "$n" \
            $PINNER "$BUILD/perf/lat_mpi" "$ITERS" "$MAXBYTES"
        rep=$((rep + 1))
    done
done

# Median per (side, ranks, coll, bytes) of the mean and best columns.
for f in "$TMP"/tacl.* "$TMP"/ompi.* "$TMP"/base.* "$TMP"/pers.*; do
    [ -f "$f" ] || continue
    side=$(basename "$f" | cut -d. -f1)
    n=$(basename "$f" | cut -d. -f2)
    awk -v side="$side" -v n="$n" 'NF == 4 && $3 ~ /^[0-9.]+$/ {
        print side, n, $1, $2, $3, $4 }' "$f"
done | awk -v pers="$PERSIST" '
    function median(list,    v, k, i, j, t) {
        k = split(list, v, " ")
        for (i = 2; i <= k; i++)
            for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) {
                t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
        return k ? v[int((k + 1) / 2)] : "-"
    }
    {
        key = $2 " " $3 " " $4
        if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
        mean[$1, key] = mean[$1, key] " " $5
        best[$1, key] = best[$1, key] " " $6
    }
    END {
        printf "%5s %-14s %6s %10s %10s %6s %10s %10s %6s %10s %10s",
            "ranks", "coll", "bytes", "tacl_mean", "ompi_mean", "ratio",
            "tacl_best", "ompi_best", "ratio", "base_mean", "base_best"
        if (pers == 1)
            printf " %10s %10s", "pers_mean", "pers_best"
        printf "\n"
        for (i = 1; i <= nk; i++) {
            split(order[i], k, " ")
            tm = median(mean["tacl", order[i]])
            om = median(mean["ompi", order[i]])
            tb = median(best["tacl", order[i]])
            ob = median(best["ompi", order[i]])
            rm = (tm != "-" && om != "-" && tm > 0) ? sprintf("%.2f", om / tm) : "-"
            rb = (tb != "-" && ob != "-" && tb > 0) ? sprintf("%.2f", ob / tb) : "-"
            printf "%5s %-14s %6s %10s %10s %6s %10s %10s %6s %10s %10s",
                k[1], k[2], k[3], tm, om, rm, tb, ob, rb,
                median(mean["base", order[i]]), median(best["base", order[i]])
            if (pers == 1)
                printf " %10s %10s", median(mean["pers", order[i]]),
                    median(best["pers", order[i]])
            printf "\n"
        }
    }'
echo "# times in us per call, median of $REPEAT launches; ratio = ompi / tacl"
exit $status
