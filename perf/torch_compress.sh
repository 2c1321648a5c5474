#!/bin/bash
# DDP training with gradient-compression hooks on the emulated cluster:
# no hook, tacl's hook (fp16; topk 1% with error feedback, on DDP's
# buckets and on tacl-plan's groups), torch's
# fp16_compress_hook, powerSGD_hook and batched_powerSGD_hook (with
# torch 2.15's _orthogonalize bug patched: torch-bpsgd-fix), all on the
# tacl backend (the unpatched batched hook fails by itself:
# PSGD_HOOKS=torch-bpsgd asks for it, in a launch of its own).
#
# Design.  perf/torch_compress.py's worker trains one small model (the MLP
# of tests/torch/test_compress.py, 16 -> WIDTH -> WIDTH -> 1; WIDTH 1024
# makes about 1.07 M parameters, 4.3 MB of float32 gradients a step) for
# STEPS steps per hook, from the same weights on the same data.  Its 4
# ranks live in tools/tacl-cluster --nodes 2 --ranks-per-node 2 with every
# node uplink shaped to RATE, started by tacl-cluster's launcher with
# torchrun's variables (env://), as perf/torch_bench_cluster.sh does.
# LAUNCHES launches; then torch_compress.py --report prints, per hook,
# samples/s over the timed steps (all but the first 5; median of the
# launches), its ratio to no hook, and the loss at the last step.
#
# Usage: perf/torch_compress.sh BUILD_DIR
# Environment: STEPS (200; 20 for a smoke test), RATE (1gbit), LAUNCHES
# (3), WIDTH (1024), BATCH (32), HOOKS (none,tacl-fp16,tacl-topk1,
# tacl-topk1-plan,torch-fp16,torch-psgd,torch-bpsgd-fix), PSGD_HOOKS (none), LIMIT (seconds per launch,
# 1800), PSGD_LIMIT (600).
#
# PSGD_HOOKS run in a launch of their own, under PSGD_LIMIT, so that their
# failure does not lose the other rows (their row then says no run
# finished): torch-bpsgd, whose torch 2.15 fails by itself.  torch's
# powerSGD_hook, whose callbacks start collectives, runs with the others
# since those go to the binding's callback communicator
# (docs/design/torch.md, "Completion threads").
# Exit status: 0 on success (a failed PSGD_HOOKS launch included), 1 when
# a launch of HOOKS failed, 77 when the torch environment, the binding or
# the cluster (root, namespaces) is missing.
set -u
BUILD=$(cd "${1:?usage: torch_compress.sh BUILD_DIR}" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
STEPS=${STEPS:-200}
RATE=${RATE:-1gbit}
LAUNCHES=${LAUNCHES:-3}
WIDTH=${WIDTH:-1024}
BATCH=${BATCH:-32}
HOOKS=${HOOKS:-none,tacl-fp16,tacl-topk1,tacl-topk1-plan,torch-fp16,torch-psgd,torch-bpsgd-fix}
PSGD_HOOKS=${PSGD_HOOKS:-}
LIMIT=${LIMIT:-1800}
PSGD_LIMIT=${PSGD_LIMIT:-600}

. "$SRC/tests/common/checks.sh"
. "$SRC/tests/torch/train_env.sh"
cluster_check "$SRC/tools/tacl-cluster"
train_setup "$SRC" "$BUILD"  # sets PY, PYTHONPATH and TMP

echo "# DDP hooks on tacl-cluster 2 nodes x 2 ranks, uplinks $RATE," \
    "$STEPS steps, width $WIDTH, batch $BATCH a rank, $LAUNCHES launches" >&2
# launch TAG HOOKS LIMIT: one launch's output in $TMP/compress.TAG.
launch() {
    "$CLUSTER" --nodes 2 --ranks-per-node 2 --inter-rate "$RATE" \
        --timeout "$3" --no-prefix -- \
        "$PY" "$SRC/perf/torch_compress.py" --worker --steps "$STEPS" \
        --width "$WIDTH" --batch "$BATCH" --hooks "$2" \
        --plan-tool "$BUILD/planner/tacl-plan" \
        > "$TMP/compress.$1" 2> "$TMP/err.$1"
}

for ((l = 1; l <= LAUNCHES; l++)); do
    echo "launch $l: $HOOKS" >&2
    launch "$l" "$HOOKS" "$LIMIT" || {
        rc=$?
        tail -20 "$TMP/err.$l" >&2
        exit "$rc"
    }
    [ -n "$PSGD_HOOKS" ] || continue
    echo "launch $l: $PSGD_HOOKS (at most $PSGD_LIMIT s)" >&2
    launch "psgd.$l" "$PSGD_HOOKS" "$PSGD_LIMIT" || {
        echo "launch $l of $PSGD_HOOKS failed ($?); its last lines:" >&2
        tail -5 "$TMP/err.psgd.$l" >&2
    }
done
echo "# tacl-cluster --nodes 2 --ranks-per-node 2 --inter-rate $RATE," \
    "$STEPS steps, width $WIDTH, batch $BATCH a rank"
"$PY" "$SRC/perf/torch_compress.py" --report "$TMP" \
    --hooks "$HOOKS${PSGD_HOOKS:+,$PSGD_HOOKS}"
# The plan tacl-topk1-plan ran with in each launch: tacl-plan's table.
for f in "$TMP"/err.[0-9]*; do
    grep -q '^PLAN tacl-plan:' "$f" || continue
    echo "# tacl-plan in launch ${f##*.}:"
    sed -n '/^PLAN tacl-plan:/,/^step /p' "$f" | sed 1d
done
