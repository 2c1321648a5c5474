#!/bin/bash
# Busbw of torch.distributed's all_gather_into_tensor, reduce_scatter_tensor
# and all_reduce through the tacl backend against gloo on the emulated
# cluster, in one run.
#
# Design.  perf/torch_bench.py's worker (the same one torch_bench.sh runs
# on one node) times each collective on the tacl default group and on a
# gloo group over the same ranks, alternating, 1 MB to 128 MB of float32.
# Here its 4 ranks live in tools/tacl-cluster --nodes 2 --ranks-per-node 2
# with every node uplink shaped to RATE, started by tacl-cluster's
# launcher with torchrun's variables (env://).  LAUNCHES launches; then
# torch_bench.py --report prints each cell's median busbw and the ratio
# tacl / gloo.  tests/torch/run_torch.sh prepares the cached torch
# environment and this build's binding first.
#
# Usage: perf/torch_bench_cluster.sh BUILD_DIR
# Environment: RATE (1gbit), LAUNCHES (3), ITERS (3), WARMUP (1), SIZES
# (1M,2M,4M,8M,16M,32M,64M,128M), LIMIT (seconds per launch, 900).
# Exit status: 0 on success, 1 when a launch failed, 77 when the torch
# environment, the binding or the cluster (root, namespaces) is missing.
set -u
BUILD=$(cd "${1:?usage: torch_bench_cluster.sh BUILD_DIR}" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
RATE=${RATE:-1gbit}
LAUNCHES=${LAUNCHES:-3}
ITERS=${ITERS:-3}
WARMUP=${WARMUP:-1}
SIZES=${SIZES:-1M,2M,4M,8M,16M,32M,64M,128M}
LIMIT=${LIMIT:-900}

. "$SRC/tests/common/checks.sh"
. "$SRC/tests/torch/train_env.sh"
cluster_check "$SRC/tools/tacl-cluster"
train_setup "$SRC" "$BUILD"  # sets PY, PYTHONPATH and TMP

echo "# torch busbw on tacl-cluster 2 nodes x 2 ranks, uplinks $RATE," \
    "$LAUNCHES launches" >&2
for ((l = 1; l <= LAUNCHES; l++)); do
    echo "launch $l" >&2
    "$CLUSTER" --nodes 2 --ranks-per-node 2 --inter-rate "$RATE" \
        --timeout "$LIMIT" --no-prefix -- \
        "$PY" "$SRC/perf/torch_bench.py" --worker --sizes "$SIZES" \
        --iters "$ITERS" --warmup "$WARMUP" > "$TMP/torch.4.$l" 2> "$TMP/err.$l" || {
        rc=$?
        tail -20 "$TMP/err.$l" >&2
        exit "$rc"
    }
done
echo "# tacl-cluster --nodes 2 --ranks-per-node 2 --inter-rate $RATE"
"$PY" "$SRC/perf/torch_bench.py" --report "$TMP"
