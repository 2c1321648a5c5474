#!/bin/sh
# Where the torch binding's gap to the C perf binary comes from: the same
# all-gather (MB megabytes gathered, float32, blocking calls) run five
# ways in turn, ROUNDS rounds, printing each way's loop time per call
# (us, the slowest rank's) and the medians:
#   C         the C perf binary (the library linked statically)
#   C_shared  the same binary linked against libtacl.so
#   ctypes    Python calling libtacl.so through ctypes, posix_memalign'd
#             buffers, no torch (perf/allgather_ctypes.py plain)
#   tensors   the same with torch imported and tensors as buffers
#   binding   torch's all_gather_into_tensor through tacl_torch
#             (perf/torch_probe.py under torchrun)
# Usage: perf/torch_gap.sh BUILD_DIR
# Environment: RANKS (4), MB (64), ITERS (40), ROUNDS (5).
# Needs the cached torch environment (tools/torch-venv.sh).
set -eu
BUILD=$(cd "${1:?usage: torch_gap.sh BUILD_DIR}" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
RANKS=${RANKS:-4} MB=${MB:-64} ITERS=${ITERS:-40} ROUNDS=${ROUNDS:-5}
VENV=$("$SRC/tools/torch-venv.sh")
PY=$VENV/bin/python
RUN="$BUILD/tools/tacl-run -n $RANKS setsid -w"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

. "$SRC/perf/runs.sh"
c_time() {  # the out-of-place time of a perf binary's row (runs.sh)
    $RUN "$1" -b "${MB}M" -e "${MB}M" -n "$ITERS" -w 3 -d float -c 0 \
        -z 1 -a 3 > "$TMP/c.out" 2>&1 || true
    row_of "$TMP/c.out" | awk '$2 != "-" { printf "%d\n", $2 }'
}
median() {  # the median of column $1 of the rows, "-" left out
    awk -v c="$1" '$c != "-" { print $c }' "$TMP/rows" | sort -n |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "-";
             else if (NR % 2) print v[(NR + 1) / 2];
             else printf "%d\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
py_time() {
    OMP_NUM_THREADS=1 $RUN "$PY" "$SRC/perf/allgather_ctypes.py" \
        "$BUILD/lib/libtacl.so" "$1" "$MB" "$ITERS" 2>/dev/null |
        awk '{ print $4 }' | sort -n | tail -1
}
printf '%-6s %9s %9s %9s %9s %9s\n' round C C_shared ctypes tensors binding
r=1
while [ "$r" -le "$ROUNDS" ]; do
    c=$(c_time "$BUILD/perf/all_gather_perf")
    d=$(c_time "$BUILD/perf/all_gather_perf_shared")
    p=$(py_time plain)
    t=$(py_time tensor)
    b=$("$SRC/tests/torch/run_torch.sh" "$SRC" "$BUILD" "$RANKS" \
        "$SRC/perf/torch_probe.py" --size "$MB" --iters "$ITERS" \
        --colls all_gather 2>/dev/null |
        sed -n 's/.*wall \([0-9]*\) us.*/\1/p' | sort -n | tail -1)
    printf '%-6s %9s %9s %9s %9s %9s\n' "$r" "${c:--}" "${d:--}" \
        "${p:--}" "${t:--}" "${b:--}" | tee -a "$TMP/rows"
    r=$((r + 1))
done
printf '%-6s %9s %9s %9s %9s %9s\n' median "$(median 2)" "$(median 3)" \
    "$(median 4)" "$(median 5)" "$(median 6)"
