#!/bin/bash
# FSDP2 fully_shard on a 2x2 CPU device mesh (hybrid sharding) for 4 steps
# on 4 ranks under torchrun, once on gloo and once on tacl: each run checks
# that the two replicas hold equal shards, and the per-step losses must
# agree.  Skips (77) without the torch environment, without tacl_torch, or
# when the installed torch has no FSDP2.
#
# Usage: test_fsdp2.sh SRC_ROOT BUILD_ROOT

SRC=${1:?usage: test_fsdp2.sh SRC_ROOT BUILD_ROOT}
BUILD=${2:?usage: test_fsdp2.sh SRC_ROOT BUILD_ROOT}
. "$SRC/tests/common/checks.sh"
. "$SRC/tests/torch/train_env.sh"
train_setup "$SRC" "$BUILD"

# As for DeepSpeed: gradient reductions are float32 sums whose order may
# differ between backends, so the losses agree to a stated bound.
RTOL=1e-5

for b in gloo tacl; do
    run_logged "fsdp2 hsdp 2x2 on $b" "$b" "$TMP/$b.out" \
        "$TORCHRUN" --standalone --nproc-per-node 4 \
        "$TRAIN_DIR/fsdp2_hsdp.py" --backend "$b" --steps 4
done
compare_runs "FSDP2 HSDP 2x2, 4 ranks" "$RTOL" "$TMP/gloo.out" "$TMP/tacl.out"
finish
