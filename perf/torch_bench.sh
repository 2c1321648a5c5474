#!/bin/sh
# torch.distributed on tacl against gloo, and the binding's overhead.
#
# Usage: perf/torch_bench.sh BUILD_DIR
# Environment: RANKS (4), RUNS (3: launches, the median is kept), ITERS
# (20: timed calls), WARMUP (3: calls before them), SIZES (1M,...,128M
# for torch), C_MIN (16M: the smallest size of the C perf binaries'
# runs), GLOO (1; 0: torch on tacl only, for the overhead table alone:
# gloo's calls take most of a launch's time).
#
# Each launch runs, in turn, the C perf binaries (all_gather_perf,
# reduce_scatter_perf, all_reduce_perf; _nb calls and wait, the slowest
# rank's time, no check) from C_MIN to the largest size, then
# perf/torch_bench.py under torchrun (tests/torch/run_torch.sh prepares
# the cached virtual environment and the binding), which times each
# torch collective on tacl and on gloo, alternating.  Both sides time
# alike: buffers allocated once per size and reused, WARMUP calls, a
# barrier, ITERS timed calls, the slowest rank's mean.  Launching the
# two sides in turn lets both see the same machine; the report keeps
# each measurement's median over the launches.
#
# Each C rank runs in a session of its own (setsid), as torchrun starts
# each torch rank: where the kernel groups scheduling by session
# (autogroup, /proc/sys/kernel/sched_autogroup_enabled), 4 ranks in one
# session share one group's CPU against the machine's other work, and on
# a loaded machine the C binary then ran 1.3-4x slower than torch.
set -eu
BUILD=$(cd "${1:?usage: torch_bench.sh BUILD_DIR}" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
RANKS=${RANKS:-4}
RUNS=${RUNS:-3}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-3}
SIZES=${SIZES:-1M,2M,4M,8M,16M,32M,64M,128M}
C_MIN=${C_MIN:-16M}
C_MAX=${SIZES##*,}
BACKENDS=tacl,gloo
[ "${GLOO:-1}" = 0 ] && BACKENDS=tacl
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

run=1
while [ "$run" -le "$RUNS" ]; do
    for coll in all_gather reduce_scatter all_reduce; do
        "$BUILD/tools/tacl-run" --timeout 600 -n "$RANKS" \
            setsid -w "$BUILD/perf/${coll}_perf" -b "$C_MIN" -e "$C_MAX" -f 2 \
            -n "$ITERS" -w "$WARMUP" -d float -c 0 -z 0 -a 3 \
            > "$TMP/c.$coll.$run" 2>&1 || {
            tail -5 "$TMP/c.$coll.$run" >&2
            exit 1
        }
    done
    "$SRC/tests/torch/run_torch.sh" "$SRC" "$BUILD" "$RANKS" \
        "$SRC/perf/torch_bench.py" --worker --sizes "$SIZES" \
        --iters "$ITERS" --warmup "$WARMUP" --backends "$BACKENDS" > "$TMP/torch.$RANKS.$run" 2>"$TMP/torch.err" || {
        rc=$?
        tail -20 "$TMP/torch.err" >&2
        exit $rc
    }
    run=$((run + 1))
done
/usr/bin/python3 "$SRC/perf/torch_bench.py" --report "$TMP"
