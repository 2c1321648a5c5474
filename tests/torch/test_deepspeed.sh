#!/bin/bash
# DeepSpeed ZeRO-3 (HPZ=1) or ZeRO-3 with zero_hpz_partition_size=HPZ on CPU
# for 5 steps on 4 ranks under torchrun, once on gloo and once on tacl: the
# per-step losses must agree (see RTOL below).  Skips (77) without the
# cached torch environment or when tacl_torch does not import.
#
# Usage: test_deepspeed.sh SRC_ROOT BUILD_ROOT HPZ

SRC=${1:?usage: test_deepspeed.sh SRC_ROOT BUILD_ROOT HPZ}
BUILD=${2:?usage: test_deepspeed.sh SRC_ROOT BUILD_ROOT HPZ}
HPZ=${3:?usage: test_deepspeed.sh SRC_ROOT BUILD_ROOT HPZ}
. "$SRC/tests/common/checks.sh"
. "$SRC/tests/torch/train_env.sh"
train_setup "$SRC" "$BUILD"

# Parameter gathers are copies, but the gradient reduce-scatter sums four
# ranks' float32 values and gloo and tacl may add them in another order;
# Adam then turns a last-bit difference into a slightly different step.
# Over 5 steps that stays far below 1e-5 relative.
RTOL=1e-5

for b in gloo tacl; do
    run_logged "zero3 hpz=$HPZ on $b" "$b" "$TMP/$b.out" \
        "$TORCHRUN" --standalone --nproc-per-node 4 \
        "$TRAIN_DIR/ds_zero3.py" --backend "$b" --hpz "$HPZ" --steps 5
done
compare_runs "DeepSpeed ZeRO-3 hpz=$HPZ, 4 ranks" "$RTOL" \
    "$TMP/gloo.out" "$TMP/tacl.out"
finish
