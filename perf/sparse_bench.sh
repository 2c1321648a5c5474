#!/bin/bash
# The sparse all-reduce on the emulated cluster: tacl's schemes against
# tacl's dense all-reduce and gloo's sparse all_reduce, in one job.
#
# Design.  perf/sparse_bench.py's worker runs as the ranks of
# tools/tacl-cluster (NODES nodes of PER ranks, uplinks shaped to RATE),
# takes each rank's rows of a 256 MB table (ROWS rows of 64 float32) from
# the trace generator (perf/sparse_trace) at each density, and times
# every variant alternately; LAUNCHES launches, then --report prints the
# medians and ratios.
#
# Usage: perf/sparse_bench.sh BUILD_DIR
# Environment: NODES (4), PER (2), RATE (1gbit), LAUNCHES (3), ITERS (3),
# DENSITIES (0.001,0.01,0.1), ROWS (1048576), LIMIT (seconds per launch,
# 1200).  Exit status: 0, 1 when a launch failed, 77 when the torch
# environment, the binding or the cluster (root, namespaces) is missing.
set -u
BUILD=$(cd "${1:?usage: sparse_bench.sh BUILD_DIR}" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
NODES=${NODES:-4}
PER=${PER:-2}
RATE=${RATE:-1gbit}
LAUNCHES=${LAUNCHES:-3}
ITERS=${ITERS:-3}
DENSITIES=${DENSITIES:-0.001,0.01,0.1}
ROWS=${ROWS:-1048576}
LIMIT=${LIMIT:-1200}

. "$SRC/tests/common/checks.sh"
. "$SRC/tests/torch/train_env.sh"
cluster_check "$SRC/tools/tacl-cluster"
train_setup "$SRC" "$BUILD"  # sets PY, PYTHONPATH and TMP

echo "# sparse all-reduce on tacl-cluster $NODES nodes x $PER ranks," \
    "uplinks $RATE, $LAUNCHES launches" >&2
for ((l = 1; l <= LAUNCHES; l++)); do
    echo "launch $l" >&2
    echo "WORLD $((NODES * PER))" > "$TMP/sparse.$l"
    "$CLUSTER" --nodes "$NODES" --ranks-per-node "$PER" --inter-rate "$RATE" \
        --timeout "$LIMIT" --no-prefix -- \
        "$PY" "$SRC/perf/sparse_bench.py" --worker \
        --trace "$BUILD/perf/sparse_trace" --rows "$ROWS" \
        --densities "$DENSITIES" --iters "$ITERS" \
        >> "$TMP/sparse.$l" 2> "$TMP/err.$l" || {
        rc=$?
        tail -20 "$TMP/err.$l" >&2
        exit "$rc"
    }
done
echo "# tacl-cluster --nodes $NODES --ranks-per-node $PER --inter-rate $RATE"
"$PY" "$SRC/perf/sparse_bench.py" --report "$TMP"
