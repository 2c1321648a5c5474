#!/bin/bash
# examples/torch_sparse_ddp.py (DDP over a sparse word embedding, whose
# gradient goes through the backend's sparse all_reduce) inside the
# emulated cluster (tacl-cluster, 2 nodes x 2 ranks, one torchrun per
# node as on a real cluster), on gloo and on tacl, with and without
# find_unused_parameters: both must learn (--check), and the losses they
# print (4 decimals) must be the same.  The tokens/s each printed are
# shown side by side.  Skips (77) without root and namespaces, the torch
# environment or tacl_torch.
#
# Usage: test_cluster_sparse_ddp.sh SRC_ROOT BUILD_ROOT TACL_CLUSTER

SRC=${1:?usage: test_cluster_sparse_ddp.sh SRC_ROOT BUILD_ROOT TACL_CLUSTER}
BUILD=${2:?usage: test_cluster_sparse_ddp.sh SRC_ROOT BUILD_ROOT TACL_CLUSTER}
. "$SRC/tests/common/checks.sh"
. "$SRC/tests/torch/train_env.sh"
cluster_check "${3:?usage: test_cluster_sparse_ddp.sh SRC BUILD TACL_CLUSTER}"
train_setup "$SRC" "$BUILD"
STEPS=${STEPS:-30}

for unused in "" --find-unused; do
    for b in gloo tacl; do
        run_logged "cluster: sparse DDP on $b $unused" "$b" \
            "$TMP/$b$unused.out" cluster_torchrun \
            "$SRC/examples/torch_sparse_ddp.py" --backend "$b" \
            --steps "$STEPS" --check $unused
        grep -o 'step .*loss.*' "$TMP/$b$unused.out" > "$TMP/$b$unused.loss"
        grep -o 'tokens/s .*' "$TMP/$b$unused.out" | sed "s/^/  $unused /"
    done
    checks=$((checks + 1))
    if [ ! -s "$TMP/gloo$unused.loss" ]; then
        fail "cluster: the sparse DDP example printed no loss"
    elif diff "$TMP/gloo$unused.loss" "$TMP/tacl$unused.loss" \
        > "$TMP/diff"; then
        ok "cluster: sparse DDP losses on gloo and tacl agree $unused" \
            "($(wc -l < "$TMP/gloo$unused.loss") steps)"
    else
        fail "cluster: sparse DDP losses differ between gloo and tacl:"
        cat "$TMP/diff"
    fi
done
finish
