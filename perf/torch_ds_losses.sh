#!/bin/bash
# DeepSpeed ZeRO-3 and ZeRO-3 with hpZ (zero_hpz_partition_size=2): the
# per-step loss sequences on gloo and on tacl, side by side.
#
# Design.  Runs tests/torch/ds_zero3.py (a tiny seeded model, seeded
# per-rank data, torch's Adam, DeepSpeed's CPU accelerator) on 4 ranks,
# once per backend and configuration, and prints each pair with
# tests/torch/compare_losses.py (both losses, their relative difference,
# and whether they are bit-identical).  By default the ranks run under
# torchrun --standalone on this machine; --cluster runs one torchrun per
# node of the emulated cluster (tools/tacl-cluster --nodes 2
# --ranks-per-node 2, hpZ groups are then the nodes).  The raw outputs stay
# in OUT_DIR.
#
# Usage: perf/torch_ds_losses.sh [--cluster] [--steps N] BUILD_DIR [OUT_DIR]
# Exit status: 0 when every run worked, 1 when one failed, 2 on a usage
# error, 77 when the torch environment, tacl_torch or (with --cluster)
# the cluster is missing.

set -u

usage() {
    echo "usage: torch_ds_losses.sh [--cluster] [--steps N] BUILD_DIR" \
        "[OUT_DIR]" >&2
    exit 2
}

cluster=0
steps=5
build=
out=
while [ $# -gt 0 ]; do
    case $1 in
    --cluster) cluster=1 ;;
    --steps) [ $# -ge 2 ] || usage; steps=$2; shift ;;
    -h | --help) usage ;;
    -*) echo "torch_ds_losses.sh: unknown option $1" >&2; usage ;;
    *)
        if [ -z "$build" ]; then
            build=$1
        elif [ -z "$out" ]; then
            out=$1
        else
            usage
        fi
        ;;
    esac
    shift
done

[ -n "$build" ] || usage
SRC=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$build" && pwd) || exit 2
out=${out:-$build/torch_ds_losses}
mkdir -p "$out" || exit 2
. "$SRC/tests/common/checks.sh"
. "$SRC/tests/torch/train_env.sh"
if [ "$cluster" -eq 1 ]; then
    cluster_check "$SRC/tools/tacl-cluster"
fi
train_setup "$SRC" "$build"

status=0
for hpz in 1 2; do
    for b in gloo tacl; do
        log=$out/hpz$hpz.$b.out
        echo "ZeRO-3 hpz=$hpz on $b" >&2
        if [ "$cluster" -eq 1 ]; then
            cluster_torchrun "$TRAIN_DIR/ds_zero3.py" --backend "$b" \
                --hpz "$hpz" --steps "$steps" > "$log" 2>&1
        else
            "$TORCHRUN" --standalone --nproc-per-node 4 \
                "$TRAIN_DIR/ds_zero3.py" --backend "$b" --hpz "$hpz" \
                --steps "$steps" > "$log" 2>&1
        fi || { echo "failed, see $log" >&2; status=1; }
    done
    name="ZeRO-3"
    [ "$hpz" -eq 1 ] || name="ZeRO-3 hpZ (zero_hpz_partition_size=$hpz)"
    where="4 ranks on one node"
    [ "$cluster" -eq 0 ] || where="tacl-cluster 2 nodes x 2 ranks"
    "$PY" "$TRAIN_DIR/compare_losses.py" --rtol 1 --names gloo,tacl \
        --title "DeepSpeed $name, $where" \
        "$out/hpz$hpz.gloo.out" "$out/hpz$hpz.tacl.out" || status=1
    echo
done
echo "raw outputs: $out" >&2
exit "$status"
