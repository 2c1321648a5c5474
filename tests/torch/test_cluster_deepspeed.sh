#!/bin/bash
# DeepSpeed inside the emulated cluster (tacl-cluster, 2 nodes x 2 ranks),
# on gloo and on tacl, losses compared as in test_deepspeed.sh: ZeRO-3
# with hpZ (zero_hpz_partition_size=2, so each secondary group is one
# node) started by one torchrun per node, and plain ZeRO-3 started by
# tacl-cluster's own launcher with torchrun's variables.  Skips (77)
# without root and namespaces, the torch environment or tacl_torch.
#
# Usage: test_cluster_deepspeed.sh SRC_ROOT BUILD_ROOT TACL_CLUSTER

SRC=${1:?usage: test_cluster_deepspeed.sh SRC_ROOT BUILD_ROOT TACL_CLUSTER}
BUILD=${2:?usage: test_cluster_deepspeed.sh SRC_ROOT BUILD_ROOT TACL_CLUSTER}
. "$SRC/tests/common/checks.sh"
. "$SRC/tests/torch/train_env.sh"
cluster_check "${3:?usage: test_cluster_deepspeed.sh SRC BUILD TACL_CLUSTER}"
train_setup "$SRC" "$BUILD"

# The same bound as on one node (see test_deepspeed.sh).
RTOL=1e-5

for b in gloo tacl; do
    run_logged "cluster: torchrun per node, zero3 hpz=2 on $b" \
        "$TMP/hpz.$b.out" cluster_torchrun \
        "$TRAIN_DIR/ds_zero3.py" --backend "$b" --hpz 2 --steps 5
done
compare_runs "cluster 2x2: DeepSpeed ZeRO-3 hpz=2" "$RTOL" \
    "$TMP/hpz.gloo.out" "$TMP/hpz.tacl.out"

for b in gloo tacl; do
    run_logged "cluster: tacl-cluster ranks, zero3 on $b" \
        "$TMP/z3.$b.out" cluster_ranks \
        "$PY" "$TRAIN_DIR/ds_zero3.py" --backend "$b" --hpz 1 --steps 5
done
compare_runs "cluster 2x2: DeepSpeed ZeRO-3" "$RTOL" \
    "$TMP/z3.gloo.out" "$TMP/z3.tacl.out"
finish
