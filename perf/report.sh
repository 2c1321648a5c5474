#!/bin/sh
# Side-by-side report: tacl, Open MPI and Gloo in one run.
#
# Measures all-gather, reduce-scatter and all-reduce on float32 with the
# same harness (common.c: sizes, data, exact check, timing, nccl-tests
# columns) in every library, on
#   shm:     host shared memory, 2 and 4 ranks on this node: tacl through
#            tacl-run, Open MPI through mpirun (btl self,vader with CMA,
#            once with its default "tuned" collectives and once with HAN),
#            Gloo through tacl-run's environment (TCP on the loopback);
#   cluster: emulated nodes (tacl-cluster, 2 nodes x 2 ranks, uplinks
#            shaped to 1gbit): tacl and Gloo as ranks of tacl-cluster;
#            Open MPI through mpirun started on node 0, whose launch agent
#            (netns_agent.sh) starts its daemons on the other nodes with
#            `ip netns exec`, since ssh does not enter network namespaces.
# Every library runs its blocking calls (-z 1): Open MPI's non-blocking
# ones would bypass its tuned and HAN components.
# Then memcpy_bw (the copy ceiling of shared memory), and report.py turns
# the JSON results into OUT_DIR/report.csv, report.md and one PNG per
# collective and setting.  Raw results stay under OUT_DIR/raw.
#
# Usage: perf/report.sh BUILD_DIR OUT_DIR
# Environment (defaults in brackets): RANKS ["2 4"], COLLS ["all_gather
# reduce_scatter all_reduce"], SIZES ["1M:64M:4 128M:128M:1", ranges
# MIN:MAX:FACTOR], ITERS [5] and WARMUP [1] on shared memory, NET_ITERS
# [3] and NET_WARMUP [1] on the cluster, NODES [2], RANKS_PER_NODE [2],
# RATE [1gbit], SETTINGS ["shm cluster"], LIMIT [300 s per run],
# TACL_ALGOS_<coll> and GLOO_ALGOS_<coll> (algorithms measured besides
# the default on the cluster), MPI_HAN [1], MPI_HAN_SKIP
# ["cluster.all_reduce"].

set -u

# Inside tacl-cluster, for the Open MPI run: every node says its address,
# node 0 starts mpirun (whose agent enters the other nodes' namespaces),
# the other nodes stay up until node 0 is done.
if [ "${1:-}" = --mpi-node-job ]; then
    dir=$2 agent=$3 per_node=$4
    shift 5     # --mpi-node-job DIR AGENT PER_NODE --
    ip=$(ip -4 -o addr show dev "$TACL_SOCKET_IFNAME" |
         awk '{ sub(/\/.*/, "", $4); print $4; exit }')
    if [ "$TACL_RANK" != 0 ]; then
        echo "$ip" > "$dir/node$TACL_RANK.tmp" &&
            mv "$dir/node$TACL_RANK.tmp" "$dir/node$TACL_RANK"
        while [ ! -e "$dir/done" ]; do
            sleep 0.2
        done
        exit 0
    fi
    printf '%s slots=%s\n' "$ip" "$per_node" > "$dir/hosts"
    waited=0
    for r in $(seq 1 $((TACL_NRANKS - 1))); do
        while [ ! -s "$dir/node$r" ] && [ $waited -lt 300 ]; do
            sleep 0.1
            waited=$((waited + 1))
        done
        if [ ! -s "$dir/node$r" ]; then
            echo "report.sh: node $r did not say its address" >&2
            touch "$dir/done"
            exit 1
        fi
        printf '%s slots=%s\n' "$(cat "$dir/node$r")" "$per_node" \
            >> "$dir/hosts"
    done
    mpirun --allow-run-as-root --oversubscribe --bind-to none \
        --hostfile "$dir/hosts" -n $((TACL_NRANKS * per_node)) \
        --mca plm_rsh_agent "$agent" \
        --mca oob_tcp_if_include "$TACL_SOCKET_IFNAME" \
        --mca btl self,vader,tcp \
        --mca btl_tcp_if_include "$TACL_SOCKET_IFNAME" \
        --mca btl_vader_single_copy_mechanism cma "$@"
    rc=$?
    touch "$dir/done"
    exit $rc
fi

BUILD=${1:?usage: report.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: report.sh BUILD_DIR OUT_DIR}
RANKS=${RANKS:-"2 4"}
COLLS=${COLLS:-"all_gather reduce_scatter all_reduce"}
SIZES=${SIZES:-"1M:64M:4 128M:128M:1"}
ITERS=${ITERS:-5}
WARMUP=${WARMUP:-1}
NET_ITERS=${NET_ITERS:-3}
NET_WARMUP=${NET_WARMUP:-1}
NODES=${NODES:-2}
RANKS_PER_NODE=${RANKS_PER_NODE:-2}
RATE=${RATE:-1gbit}
SETTINGS=${SETTINGS:-"shm cluster"}
LIMIT=${LIMIT:-300}
MPI_HAN=${MPI_HAN:-1}
# Open MPI 4.1.4's HAN all-reduce dies (SIGSEGV) across emulated nodes.
MPI_HAN_SKIP=${MPI_HAN_SKIP:-"cluster.all_reduce"}
TACL_ALGOS_all_gather=${TACL_ALGOS_all_gather:-hring}
TACL_ALGOS_reduce_scatter=${TACL_ALGOS_reduce_scatter:-hring}
TACL_ALGOS_all_reduce=${TACL_ALGOS_all_reduce:-hier}
GLOO_ALGOS_all_reduce=${GLOO_ALGOS_all_reduce:-"halving_doubling"}
HERE=$(cd "$(dirname "$0")" && pwd)
PERF=$BUILD/perf
PY=/usr/bin/python3
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none
    --mca btl self,vader --mca btl_vader_single_copy_mechanism cma"

case $PERF in
/*) ;;
*) PERF=$(pwd)/$PERF ;;
esac
TOOLS=$PERF/../tools
MICRO=$PERF/micro
for exe in "$TOOLS/tacl-run" "$MICRO/memcpy_bw" "$PERF/all_gather_perf" \
    "$PERF/reduce_scatter_perf" "$PERF/all_reduce_perf"; do
    if [ ! -x "$exe" ]; then
        echo "report.sh: $exe is missing; build it first" >&2
        exit 2
    fi
done
have_mpi=1
if [ ! -x "$PERF/mpi_coll_perf" ] || ! command -v mpirun > /dev/null; then
    echo "report.sh: no mpi_coll_perf or mpirun: no Open MPI figures" >&2
    have_mpi=0
fi
have_gloo=1
if [ ! -x "$PERF/gloo_coll_perf" ]; then
    echo "report.sh: no gloo_coll_perf (libgloo-dev and a C++ compiler" \
        "are needed): no Gloo figures" >&2
    have_gloo=0
fi
if ! $PY -c 'import matplotlib' 2> /dev/null; then
    echo "report.sh: installing python3-matplotlib for the plots" >&2
    apt-get install -y python3-matplotlib > /dev/null 2>&1 ||
        echo "report.sh: no matplotlib: the report will have no plots" >&2
fi

mkdir -p "$OUT/raw" || exit 1
rm -f "$OUT"/raw/*.json "$OUT"/raw/*.log "$OUT"/raw/*.txt
# The Gloo store and the MPI job's files must be seen by every
# emulated node: tacl-cluster shares /tmp, not $TMPDIR.
TMP=$(mktemp -d /tmp/tacl-report.XXXXXX) || exit 1
trap 'rm -rf "$TMP"' EXIT
FAIL=$OUT/raw/failures.log
: > "$FAIL"
started=$(date +%s)

# Machine description, taken now, while measuring.
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "host: $(hostname)"
    echo "nproc: $(nproc)"
    echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo |
        head -1)"
    echo "kernel: $(uname -sr)"
    echo "memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' \
        /proc/meminfo)"
    echo "loadavg_start: $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ $have_mpi = 1 ]; then
        echo "openmpi: $(mpirun --version 2>&1 | head -1)"
    fi
    if [ $have_gloo = 1 ]; then
        echo "gloo: $(dpkg-query -W -f '${Version}' libgloo-dev 2>/dev/null)"
    fi
} > "$OUT/raw/machine.txt"

# run_case NAME TIMEOUT CMD...: runs one measurement, logs a failure.
run_case() {
    name=$1
    shift
    echo "report.sh: $name" >&2
    timeout "$LIMIT" "$@" > "$OUT/raw/$name.log" 2>&1
    rc=$?
    if [ $rc != 0 ]; then
        echo "$name: failed (exit $rc), see raw/$name.log" >> "$FAIL"
        tail -3 "$OUT/raw/$name.log" >&2
    fi
}

# The perf arguments of one size range (MIN:MAX:FACTOR).
range_args() {
    echo "$1" | awk -F: '{ printf "-b %s -e %s -f %s", $1, $2, $3 }'
}

mpi_name() {
    case $1 in
    all_gather) echo allgather ;;
    all_reduce) echo allreduce ;;
    *) echo "$1" ;;
    esac
}

# A fresh store directory for one Gloo job.
gloo_store() {
    d=$(mktemp -d "$TMP/gloo.XXXXXX") && echo "$d"
}

echo "# memcpy bandwidth (the ceiling for copy-based shared memory)" \
    > "$OUT/raw/memcpy.txt"
"$MICRO/memcpy_bw" -t 0.2 -p 2 >> "$OUT/raw/memcpy.txt" 2>&1

for setting in $SETTINGS; do
    [ "$setting" = shm ] || continue
    for coll in $COLLS; do
        for n in $RANKS; do
            i=0
            for range in $SIZES; do
                i=$((i + 1))
                args="$(range_args "$range") -n $ITERS -w $WARMUP -d float
                    -z 1"
                tag=shm.$n.$coll.$i
                # shellcheck disable=SC2086
                run_case "$tag.tacl.auto" "$TOOLS/tacl-run" --timeout \
                    "$LIMIT" -n "$n" "$PERF/${coll}_perf" $args \
                    -J "$OUT/raw/$tag.tacl.auto.json"
                if [ $have_mpi = 1 ]; then
                    # shellcheck disable=SC2086
                    run_case "$tag.ompi.tuned" $MPIRUN -n "$n" \
                        "$PERF/mpi_coll_perf" "$(mpi_name "$coll")" $args \
                        -A tuned -J "$OUT/raw/$tag.ompi.tuned.json"
                    if [ "$MPI_HAN" = 1 ]; then
                        # shellcheck disable=SC2086
                        run_case "$tag.ompi.han" $MPIRUN \
                            --mca coll_han_priority 100 -n "$n" \
                            "$PERF/mpi_coll_perf" "$(mpi_name "$coll")" \
                            $args -A han -J "$OUT/raw/$tag.ompi.han.json"
                    fi
                fi
                if [ $have_gloo = 1 ]; then
                    for algo in default \
                        $(eval echo "\${GLOO_ALGOS_$coll:-}"); do
                        a=""
                        [ "$algo" = default ] || a="-A $algo"
                        # shellcheck disable=SC2086
                        TACL_GLOO_STORE=$(gloo_store) run_case \
                            "$tag.gloo.$algo" "$TOOLS/tacl-run" --timeout \
                            "$LIMIT" -n "$n" "$PERF/gloo_coll_perf" \
                            "$(mpi_name "$coll")" $args $a \
                            -J "$OUT/raw/$tag.gloo.$algo.json"
                    done
                fi
            done
        done
    done
done

CLUSTER="$HERE/../tools/tacl-cluster --nodes $NODES --ranks-per-node $RANKS_PER_NODE
    --inter-rate $RATE --timeout $LIMIT --no-prefix"
cname=cluster-${NODES}x$RANKS_PER_NODE-$RATE
n=$((NODES * RANKS_PER_NODE))
for setting in $SETTINGS; do
    [ "$setting" = cluster ] || continue
    if ! "$HERE/../tools/tacl-cluster" --check > /dev/null 2>&1; then
        echo "cluster: tacl-cluster --check failed: no emulated nodes" \
            >> "$FAIL"
        continue
    fi
    for coll in $COLLS; do
        i=0
        for range in $SIZES; do
            i=$((i + 1))
            args="$(range_args "$range") -n $NET_ITERS -w $NET_WARMUP -d float
                -z 1"
            tag=$cname.$n.$coll.$i
            for algo in auto $(eval echo "\${TACL_ALGOS_$coll:-}"); do
                a=""
                [ "$algo" = auto ] || a="-A $algo"
                # shellcheck disable=SC2086
                run_case "$tag.tacl.$algo" $CLUSTER -- \
                    "$PERF/${coll}_perf" $args $a \
                    -J "$OUT/raw/$tag.tacl.$algo.json"
            done
            if [ $have_mpi = 1 ]; then
                for algo in tuned han; do
                    [ $algo = han ] && [ "$MPI_HAN" != 1 ] && continue
                    if [ $algo = han ] && echo " $MPI_HAN_SKIP " |
                        grep -q " cluster.$coll "; then
                        echo "$tag.ompi.han: skipped (MPI_HAN_SKIP: Open" \
                            "MPI 4.1.4's HAN $coll crashes with SIGSEGV" \
                            "here)" >> "$OUT/raw/skipped.log"
                        continue
                    fi
                    d=$(mktemp -d "$TMP/mpi.XXXXXX") || continue
                    han=""
                    [ $algo = han ] && han="--mca coll_han_priority 100"
                    # One rank per node: node 0 runs mpirun, which starts
                    # RANKS_PER_NODE ranks on every node.
                    # shellcheck disable=SC2086
                    run_case "$tag.ompi.$algo" "$HERE/../tools/tacl-cluster" \
                        --nodes "$NODES" --ranks-per-node 1 \
                        --inter-rate "$RATE" --timeout "$LIMIT" \
                        --no-prefix -- "$HERE/report.sh" --mpi-node-job \
                        "$d" "$HERE/netns_agent.sh" "$RANKS_PER_NODE" -- $han \
                        "$PERF/mpi_coll_perf" "$(mpi_name "$coll")" $args \
                        -A $algo -J "$OUT/raw/$tag.ompi.$algo.json"
                done
            fi
            if [ $have_gloo = 1 ]; then
                for algo in default $(eval echo "\${GLOO_ALGOS_$coll:-}"); do
                    a=""
                    [ "$algo" = default ] || a="-A $algo"
                    # shellcheck disable=SC2086
                    TACL_GLOO_STORE=$(gloo_store) run_case \
                        "$tag.gloo.$algo" $CLUSTER -- \
                        "$PERF/gloo_coll_perf" "$(mpi_name "$coll")" \
                        $args $a -J "$OUT/raw/$tag.gloo.$algo.json"
                done
            fi
        done
    done
done

{
    echo "loadavg_end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "runtime_s: $(($(date +%s) - started))"
    echo "command: perf/report.sh $BUILD $OUT"
} >> "$OUT/raw/machine.txt"
$PY "$HERE/report.py" "$OUT/raw" "$OUT" || exit 1
if [ -s "$FAIL" ]; then
    echo "report.sh: some runs failed:" >&2
    cat "$FAIL" >&2
    exit 1
fi
exit 0
