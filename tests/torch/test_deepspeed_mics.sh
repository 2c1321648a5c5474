#!/bin/bash
# DeepSpeed's own MiCS (mics_shard_size=2, 4 ranks, 5 steps) on tacl
# against DeepSpeed ZeRO-3 on tacl, same model, seed and data: the
# per-step losses must agree within 1e-4 relative.  MiCS gathers its
# parameters through torch's coalescing manager (startCoalescing /
# endCoalescing), which gloo does not implement, so tacl is the only CPU
# backend that runs it.  MiCS left DeepSpeed after 0.19.0: that release
# goes into its own folder beside the cached environment (pip --target,
# once), ahead of the environment's DeepSpeed on PYTHONPATH.  Skips (77)
# without the torch environment or when 0.19.0 cannot be installed.
#
# Usage: test_deepspeed_mics.sh SRC_ROOT BUILD_ROOT

SRC=${1:?usage: test_deepspeed_mics.sh SRC_ROOT BUILD_ROOT}
BUILD=${2:?usage: test_deepspeed_mics.sh SRC_ROOT BUILD_ROOT}
. "$SRC/tests/common/checks.sh"
. "$SRC/tests/torch/train_env.sh"
train_setup "$SRC" "$BUILD"

DS=${TACL_DS_MICS:-${XDG_CACHE_HOME:-$HOME/.cache}/tacl/deepspeed-0.19.0}
if [ ! -f "$DS/deepspeed/runtime/zero/mics.py" ]; then
    if ! "$PY" -m pip install --quiet --no-deps --no-build-isolation \
            --target "$DS.part" deepspeed==0.19.0 >"$TMP/pip.log" 2>&1; then
        echo "SKIP: DeepSpeed 0.19.0 (the last with MiCS) cannot be" \
            "installed: $(tail -n 1 "$TMP/pip.log")"
        exit 77
    fi
    rm -rf "$DS" && mv "$DS.part" "$DS"
fi
export PYTHONPATH=$DS:$PYTHONPATH

# Gathers are copies; MiCS adds gradients over its replica groups after
# the shard's reduce-scatter, ZeRO-3 over all four ranks at once, so the
# sums differ in order: a last-bit difference that Adam carries on.
RTOL=1e-4
for mode in zero3 mics; do
    args=()
    [ "$mode" = mics ] && args=(--mics 2)
    run_logged "$mode on tacl" tacl "$TMP/$mode.out" \
        "$TORCHRUN" --standalone --nproc-per-node 4 \
        "$TRAIN_DIR/ds_zero3.py" --backend tacl --steps 5 "${args[@]}"
done
expect_grep "MiCS ran (DeepSpeed 0.19.0, shards of 2)" \
    "mics 2 torch .* deepspeed 0.19.0" "$TMP/mics.out"
NAMES=zero3,mics compare_runs "DeepSpeed 0.19.0 MiCS (shard 2) vs ZeRO-3, 4 ranks on tacl" \
    "$RTOL" "$TMP/zero3.out" "$TMP/mics.out"
finish
