#!/bin/bash
# Multi-node conformance suite on the emulated cluster (tacl-cluster).
#
# For each layout (2 nodes x 2 ranks, 3 x 2, and the unequal 2 + 1):
#   1. mn_check check: topology queries, every collective with exact
#      results, byte-counter invariants, split communicators; rank 0
#      checks the topology file the library dumped at init
#      (TACL_TOPO_DUMP_FILE).
#   2. mn_check ring with TACL_ALGO=allgather=ring,reducescatter=ring:
#      per-rank net and host bytes equal the ring formula.  This run loads
#      the first run's dump (TACL_TOPO_FILE) and dumps again; the two files
#      must be identical byte for byte.
# Then test_p2p_tag's rules (receives from any source) run across nodes
# on 2x2 and 2+1 (mn_check p2p), and a rank that dies must end the
# others' pending receives from any source (mn_check p2pdead); every algorithm is forced once on one of
# the layouts; host buffers
# run on nodes a topology file says have GPUs; a malformed
# topology file (bad line 3) must make init fail with an
# invalid argument naming the file and ":3:", and all_gather_perf runs a
# forced ring on 2 nodes x 1 rank over 1 Gbit/s links; its bus bandwidth
# is printed against the line rate (0.125 GB/s), not asserted.
#
# With NET=ofi (a fifth argument) it runs once over the ofi transport
# (TACL_NET=ofi, libfabric's tcp provider) instead, and only a subset
# that keeps it short: every collective on 2x2 and on the unequal 2+1,
# the hierarchical algorithms forced on 3x2, the receives from any
# source (mn_check p2p) on 2x2 and 2+1, a dead peer ending them
# (p2pdead) on 2+1, and qgZ/qwZ on 2x2.  MULTINODE_SHORT=1 in the
# environment runs that subset over UCX too (CI's sanitizer build, where
# the whole suite costs about 100 s of a serial stage).
#
# Skips (exit 77) where `tacl-cluster --check` fails (not root, no
# namespaces).
#
# Usage: test_multinode.sh TACL_CLUSTER MN_CHECK ALL_GATHER_PERF
#        REDUCE_SCATTER_PERF [ucx|ofi]

USAGE="usage: test_multinode.sh TACL_CLUSTER MN_CHECK ALL_GATHER_PERF \
REDUCE_SCATTER_PERF [ucx|ofi]"
TOOL=${1:?$USAGE}
CHECK=${2:?$USAGE}
AGPERF=${3:?$USAGE}
RSPERF=${4:?$USAGE}
NET=${5:-ucx}
RING_ALGO=allgather=ring,reducescatter=ring
LINE_RATE_GBS=0.125

if ! "$TOOL" --check; then
    echo "SKIP: tacl-cluster --check failed: the emulated cluster needs" \
        "root and network, PID, IPC and mount namespaces"
    exit 77
fi

if [ "$NET" = ofi ]; then
    # The transport's INFO line at init shows that ofi carried the job.
    export TACL_NET=ofi TACL_DEBUG=INFO TACL_DEBUG_SUBSYS=NET
fi

# Every node sees the host's /tmp, so per-run files go there.
TMP=$(mktemp -d /tmp/tacl-multinode.XXXXXX) || exit 1
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/../common/checks.sh"

# cluster NAME LOG TOOL_ARGS... -- CMD...: run a job, show its output,
# count a check that passes when the job exits 0.
cluster() {
    local name=$1 log=$2 rc
    shift 2

    checks=$((checks + 1))
    "$TOOL" --timeout 120 "$@" > "$log" 2>&1
    rc=$?
    cat "$log"
    if [ "$rc" -ne 0 ]; then
        fail "$name: exit status $rc"
        return 1
    fi
    ok "$name"
}

if [ "$NET" = ofi ] || [ "${MULTINODE_SHORT:-0}" = 1 ]; then
    echo "=== over $NET: the short subset"
    for run in "2x2 2,2 -" "2+1 2,1 allgather=rd,reducescatter=rd,allreduce=rd" \
        "3x2 2,2,2 allgather=mics,reducescatter=horing,allreduce=hier"; do
        read -r name list algo <<< "$run"
        dir="$TMP/$NET.$name"
        mkdir -p "$dir"
        if [ "$algo" = - ]; then
            cluster "$NET $name: collectives" "$dir/check.log" \
                --ranks-per-node-list "$list" -- "$CHECK" check "$list" "$dir"
        else
            TACL_ALGO=$algo cluster "$NET $name: collectives with $algo" \
                "$dir/check.log" --ranks-per-node-list "$list" -- \
                "$CHECK" check "$list" "$dir"
        fi
        [ "$NET" = ofi ] || continue
        checks=$((checks + 1))
        if grep -q "ofi ready: provider tcp" "$dir/check.log"; then
            ok "ofi $name: the ranks set up ofi over libfabric's tcp"
        else
            fail "ofi $name: no rank says \"ofi ready: provider tcp\""
        fi
    done
    for list in 2,2 2,1; do
        cluster "$NET $list: receives from any source" \
            "$TMP/$NET.p2p.$list.log" --ranks-per-node-list "$list" -- \
            "$CHECK" p2p "$list"
    done
    cluster "$NET 2,1: a dead peer ends receives from any source" \
        "$TMP/$NET.p2pdead.log" --ranks-per-node-list 2,1 -- \
        "$CHECK" p2pdead 2,1
    cluster "$NET 2,2: qgZ int4 float16" "$TMP/$NET.qgz.log" \
        --ranks-per-node-list 2,2 -- "$RSPERF" -Q 4:64 -d half \
        -b 8008 -e 8008 -n 2 -w 1
    cluster "$NET 2,2: qwZ int8 bfloat16" "$TMP/$NET.qwz.log" \
        --ranks-per-node-list 2,2 -- "$AGPERF" -Q 8:256 -d bfloat16 \
        -b 8008 -e 8008 -n 2 -w 1
    finish
    exit
fi

for layout in "2x2 2,2" "3x2 2,2,2" "2+1 2,1"; do
    read -r name list <<< "$layout"
    args=(--ranks-per-node-list "$list")
    dir="$TMP/$name"
    mkdir -p "$dir/barrier"
    echo "=== layout $name (ranks per node $list)"
    TACL_TOPO_DUMP_FILE="$dir/topo.1" cluster "$name: collectives" \
        "$dir/check.log" "${args[@]}" -- "$CHECK" check "$list" \
        "$dir/barrier"
    TACL_ALGO=$RING_ALGO TACL_TOPO_FILE="$dir/topo.1" \
        TACL_TOPO_DUMP_FILE="$dir/topo.2" cluster "$name: ring bytes" \
        "$dir/ring.log" "${args[@]}" -- "$CHECK" ring "$list"
    checks=$((checks + 1))
    if [ ! -s "$dir/topo.1" ] || [ ! -s "$dir/topo.2" ]; then
        fail "$name: a topology dump is missing or empty"
    elif ! cmp -s "$dir/topo.1" "$dir/topo.2"; then
        fail "$name: the topology dumped after loading the dump differs:"
        diff -u "$dir/topo.1" "$dir/topo.2"
    else
        ok "$name: dump, load and dump again give the same file"
        cat "$dir/topo.1"
    fi
done

# test_p2p_tag's rules across nodes: any-source receives over shm and ucx.
for list in 2,2 2,1; do
    echo "=== receives from any source, ranks per node $list"
    cluster "$list: receives from any source" "$TMP/p2p.$list.log" \
        --ranks-per-node-list "$list" -- "$CHECK" p2p "$list"
done
cluster "2,1: a dead peer ends receives from any source" \
    "$TMP/p2pdead.log" --ranks-per-node-list 2,1 -- "$CHECK" p2pdead 2,1

# Every algorithm forced once (the hierarchical ones need equal nodes of
# two ranks or more; the 2+1 layout takes the flat ones), then the
# hierarchical ones on the larger layouts of the brief: 4x2 and PaRO
# Figure 4's 3x3.
for forced in "2+1 2,1 allgather=rd,reducescatter=rd,allreduce=rd" \
    "2+1 2,1 allgather=direct,reducescatter=direct,allreduce=direct" \
    "3x2 2,2,2 allgather=bruck,reducescatter=mics,allreduce=hier" \
    "3x2 2,2,2 allgather=mics,reducescatter=horing,allreduce=rd" \
    "2x2 2,2 allgather=horing,reducescatter=hring,allreduce=hier" \
    "3x2 2,2,2 allgather=hring,reducescatter=ring,allreduce=ring" \
    "4x2 2,2,2,2 allgather=mics,reducescatter=horing,allreduce=hier" \
    "3x3 3,3,3 allgather=horing,reducescatter=mics,allreduce=hier"; do
    read -r name list algo <<< "$forced"
    dir="$TMP/$name.$algo"
    mkdir -p "$dir"
    echo "=== layout $name, TACL_ALGO=$algo"
    TACL_ALGO=$algo cluster "$name: collectives with $algo" \
        "$dir/check.log" --ranks-per-node-list "$list" -- \
        "$CHECK" check "$list" "$dir"
done

# Quantized collectives across nodes (qwZ, qgZ), odd counts (1001
# elements per rank), every element checked against the quantization
# bound by the perf binaries (a value beyond it fails the run).
for q in "2,2 4" "2,2,2,2 8"; do
    read -r list n <<< "$q"
    echo "=== quantized, ranks per node $list"
    cluster "$list: qgZ int4 float16, 1001 per rank" "$TMP/qgz.$n.log" \
        --ranks-per-node-list "$list" -- "$RSPERF" -Q 4:64 -d half \
        -b $((2 * 1001 * n)) -e $((2 * 1001 * n)) -n 2 -w 1
    cluster "$list: qwZ int8 bfloat16, 1001 per rank" "$TMP/qwz.$n.log" \
        --ranks-per-node-list "$list" -- "$AGPERF" -Q 8:256 -d bfloat16 \
        -b $((2 * 1001 * n)) -e $((2 * 1001 * n)) -n 2 -w 1
done

# Host buffers on nodes a topology file describes with peer-connected
# GPUs: the data still moves through host memory (shm), so the counters
# must still show it on link class host, not gpu.
echo "=== layout 2x2, TACL_TOPO_FILE describing GPU nodes"
{
    echo "tacl-topology 1"
    echo "machine gpu-described"
    echo "link host bw=20 lat=1"
    echo "link gpu bw=240 lat=3"
    echo "link net bw=50 lat=15"
    for n in 0 1; do
        echo "node g$n packages=2 numa=2 cores=48 threads=96 gpus=8" \
            "gpu_peer=1 nics=4 nic_gbps=100"
    done
} > "$TMP/gpu.topo"
mkdir -p "$TMP/gpu"
TACL_TOPO_FILE="$TMP/gpu.topo" cluster "2x2: host buffers, GPU topology" \
    "$TMP/gpu/check.log" --ranks-per-node-list 2,2 -- \
    "$CHECK" check 2,2 "$TMP/gpu"

# A malformed line 3, two ways: a bad number and an unknown statement.
echo "=== malformed topology files"
printf 'tacl-topology 1\nmachine broken\nlink net bw=fast lat=12\n' \
    > "$TMP/bad-number.topo"
printf 'tacl-topology 1\n# fine so far\nswitch s0 ports=8\n' \
    > "$TMP/bad-statement.topo"
for bad in bad-number bad-statement; do
    TACL_TOPO_FILE="$TMP/$bad.topo" cluster "$bad.topo refused at init" \
        "$TMP/$bad.log" --ranks-per-node-list 2,1 -- \
        "$CHECK" badtopo 2,1 "$TMP/$bad.topo"
done

# The shaped ring: 2 nodes x 1 rank at 1 Gbit/s, 64 MB, ring forced.
echo "=== all_gather_perf, ring, 2 nodes x 1 rank, 1 Gbit/s links"
if cluster "all_gather_perf 64M over 1 Gbit/s" "$TMP/perf.log" \
    --nodes 2 --ranks-per-node 1 --inter-rate 1gbit -- \
    "$AGPERF" -A allgather=ring -b 64M -e 64M -n 3 -w 1; then
    # Bus bandwidth from the times (the table rounds to 0.01 GB/s):
    # all-gather busbw = size / time * (p - 1) / p with p = 2.
    checks=$((checks + 1))
    if ! sed 's/^\[node [0-9]* rank [0-9]*\] //' "$TMP/perf.log" |
        awk -v line="$LINE_RATE_GBS" '$1 == 67108864 && NF >= 13 {
            for (k = 0; k < 2; k++) {
                t = $(6 + 4 * k) * 1e-6
                bw = $1 / t / 1e9 / 2
                printf "busbw %s: %.4f GB/s = %.1f%% of the %.3f GB/s " \
                    "line rate\n", k ? "in-place" : "out-of-place", bw,
                    100 * bw / line, line
            }
            found = 1
        }
        END { exit !found }'; then
        fail "all_gather_perf: no 64 MB result line in its output"
    fi
fi

finish
