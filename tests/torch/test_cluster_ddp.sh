#!/bin/bash
# examples/torch_ddp.py (DDP, 30 steps, --check: the loss must halve)
# inside the emulated cluster (tacl-cluster, 2 nodes x 2 ranks, started by
# its own launcher with torchrun's variables and env://), on gloo and on
# tacl: both must learn, and the losses they print (4 decimals) must be the
# same.  Skips (77) without root and namespaces, the torch environment or
# tacl_torch.
#
# Usage: test_cluster_ddp.sh SRC_ROOT BUILD_ROOT TACL_CLUSTER

SRC=${1:?usage: test_cluster_ddp.sh SRC_ROOT BUILD_ROOT TACL_CLUSTER}
BUILD=${2:?usage: test_cluster_ddp.sh SRC_ROOT BUILD_ROOT TACL_CLUSTER}
. "$SRC/tests/common/checks.sh"
. "$SRC/tests/torch/train_env.sh"
cluster_check "${3:?usage: test_cluster_ddp.sh SRC BUILD TACL_CLUSTER}"
train_setup "$SRC" "$BUILD"
if [ ! -f "$SRC/examples/torch_ddp.py" ]; then
    echo "SKIP: examples/torch_ddp.py is missing"
    exit 77
fi

for b in gloo tacl; do
    run_logged "cluster: DDP example on $b" "$b" "$TMP/$b.out" cluster_ranks \
        "$PY" "$SRC/examples/torch_ddp.py" --backend "$b" --steps 30 \
        --check
    grep -o 'step .*loss.*' "$TMP/$b.out" > "$TMP/$b.loss"
done
checks=$((checks + 1))
if [ ! -s "$TMP/gloo.loss" ]; then
    fail "cluster: the DDP example printed no loss"
elif diff "$TMP/gloo.loss" "$TMP/tacl.loss" > "$TMP/diff"; then
    ok "cluster: DDP losses on gloo and tacl agree ($(wc -l < \
        "$TMP/gloo.loss") printed steps)"
else
    fail "cluster: DDP losses differ between gloo and tacl:"
    cat "$TMP/diff"
fi
finish
