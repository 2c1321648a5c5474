#!/bin/bash
# DeepSpeed inside the emulated cluster (tacl-cluster, 2 nodes x 2 ranks),
# on gloo and on tacl, losses compared as in test_deepspeed.sh.  HPZ=2:
# ZeRO-3 with zero_hpz_partition_size=2 (each secondary group is one node)
# started by one torchrun per node, the multi-node form.  HPZ=1: plain
# ZeRO-3 started by tacl-cluster's own launcher with torchrun's variables
# (env://).  Skips (77) without root and namespaces, the torch environment
# or tacl_torch.
#
# Usage: test_cluster_deepspeed.sh SRC_ROOT BUILD_ROOT TACL_CLUSTER HPZ

usage="usage: test_cluster_deepspeed.sh SRC BUILD TACL_CLUSTER HPZ"
SRC=${1:?$usage}
BUILD=${2:?$usage}
HPZ=${4:?$usage}
. "$SRC/tests/common/checks.sh"
. "$SRC/tests/torch/train_env.sh"
cluster_check "${3:?$usage}"
train_setup "$SRC" "$BUILD"

# The same bound as on one node (see test_deepspeed.sh).
RTOL=1e-5

for b in gloo tacl; do
    if [ "$HPZ" -gt 1 ]; then
        run_logged "cluster: torchrun per node, zero3 hpz=$HPZ on $b" \
            "$b" "$TMP/$b.out" cluster_torchrun \
            "$TRAIN_DIR/ds_zero3.py" --backend "$b" --hpz "$HPZ" --steps 5
    else
        run_logged "cluster: tacl-cluster ranks, zero3 on $b" \
            "$b" "$TMP/$b.out" cluster_ranks \
            "$PY" "$TRAIN_DIR/ds_zero3.py" --backend "$b" --steps 5
    fi
done
compare_runs "cluster 2x2: DeepSpeed ZeRO-3 hpz=$HPZ" "$RTOL" \
    "$TMP/gloo.out" "$TMP/tacl.out"
finish
