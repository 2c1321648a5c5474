#!/usr/bin/env bash
# Everything tacl checks on a GPU, in one go, for a machine lent for a
# few minutes: record the machine, install what it lacks (from the
# packages tools/gpu-prepare.sh put in .gpu-deps, since such a machine
# may reach no package index), build with CUDA, run the CUDA tests and
# then the whole suite, and run the GPU benchmarks.  Logs and figures go
# to one folder, $OUT (default gpu-check-out), in at most six files:
#   summary.txt  one line per step: ok, FAILED or skipped, and why
#   env.txt      GPU, driver, compilers, what was installed from where
#   build.log    meson setup and ninja
#   tests.log    the CUDA tests, then the whole suite
#   bench.txt    the benchmarks' output (perf/gpu_bench.sh)
# Exit status: 0 when every step passed, 1 otherwise.  A CUDA test that
# reports "skipped" here counts as a failure: on a GPU machine it must run.
#
# Usage: tools/gpu-check.sh [--no-suite]
# On the device machine, from the repository root, with .gpu-deps carried:
#   bash tools/gpu-check.sh   (under 10 minutes on 16 cores and one GPU:
#   build 2-3, CUDA tests 1, whole suite 3-4, benchmarks 3-4; --no-suite
#   skips the whole suite)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${OUT:-$root/gpu-check-out}
run_suite=1
[ "${1:-}" = --no-suite ] && run_suite=0
mkdir -p "$out"
summary=$out/summary.txt
: > "$summary"
failed=0

note() { echo "$*" | tee -a "$summary"; }
# step_ok TEXT...; step_failed WHAT [WHY...]
step_ok() { note "ok       $*"; }
step_failed() {
    local what=$1
    shift
    note "FAILED   $what${1:+: $*}"
    failed=1
}

# --- The machine -----------------------------------------------------------
{
    echo "date: $(date -u)"
    echo "host: $(uname -srm)"
    grep -h '^PRETTY_NAME' /etc/os-release 2>/dev/null
    echo "cores: $(nproc)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max \
        --format=csv 2>&1
    nvidia-smi topo -m 2>&1 | head -20
    echo "nvcc: $(nvcc --version 2>&1 | tail -1)"
    echo "cc: $(cc --version 2>&1 | head -1)"
    echo "meson: $(meson --version 2>&1)  ninja: $(ninja --version 2>&1)"
    echo "glibc: $(ldd --version 2>&1 | head -1)"
} > "$out/env.txt" 2>&1

if ! nvidia-smi > /dev/null 2>&1; then
    step_failed "GPU" "nvidia-smi sees no GPU; nothing here can be checked"
    exit 1
fi
step_ok "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"

# --- What the machine lacks ------------------------------------------------
# pkg-config, hwloc and Criterion: the system's when it has them, else the
# carried Debian packages unpacked into a private prefix (never into /).
# GPU_CHECK_CARRIED=1 takes the carried packages even where the system
# has its own (to test that path on any machine).
if [ "${GPU_CHECK_CARRIED:-0}" != 1 ] &&
   pkg-config --exists hwloc criterion 2> /dev/null; then
    echo "dependencies: the system's" >> "$out/env.txt"
elif compgen -G ".gpu-deps/*.deb" > /dev/null; then
    deps=${TMPDIR:-/tmp}/tacl-gpu-deps
    rm -rf "$deps"
    mkdir -p "$deps"
    for f in .gpu-deps/*.deb; do
        dpkg-deb -x "$f" "$deps" || step_failed "unpack $f"
    done
    libdir=$deps/usr/lib/x86_64-linux-gnu
    # The packages' .pc files name /usr; the static-link requirements of
    # Criterion's are not carried, so they go.
    for pc in "$libdir"/pkgconfig/*.pc; do
        sed -i -e "s|^prefix=/usr|prefix=$deps/usr|" \
            -e "s|^libdir=/usr|libdir=$deps/usr|" \
            -e "s|^includedir=/usr|includedir=$deps/usr|" \
            -e '/^Requires.private:/d' -e '/^Libs.private:/d' "$pc"
    done
    export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PKG_CONFIG_PATH=$libdir/pkgconfig
    export PKG_CONFIG=$deps/usr/bin/pkgconf
    echo "dependencies: carried packages in $deps:" \
         "$(ls .gpu-deps | tr '\n' ' ')" >> "$out/env.txt"
else
    step_failed "dependencies" "hwloc or Criterion is missing and" \
        "nothing was carried (run tools/gpu-prepare.sh first)"
    exit 1
fi

# --- Build -----------------------------------------------------------------
build=build-gpu
rm -rf "$build"
if meson setup "$build" --buildtype=debugoptimized -Dcuda=enabled \
        > "$out/build.log" 2>&1 &&
   ninja -C "$build" >> "$out/build.log" 2>&1; then
    step_ok "build with CUDA ($(grep -c '\.cu' "$build/build.ninja") CUDA" \
        "build lines)"
else
    step_failed "build" "see build.log"
    tail -30 "$out/build.log"
    exit 1
fi

# --- Tests -----------------------------------------------------------------
# The meson suite 'cuda' first, on its own: every test that needs a GPU
# is registered in it (kernels, collectives on device buffers, cuda_ipc,
# ucx staging), and on this machine none of them may skip.
mapfile -t gpu_tests < <(meson test -C "$build" --list --suite cuda \
    2>/dev/null | sed -n 's/^[^ ]* \/ //p')
{
    echo "=== CUDA tests (suite cuda): ${gpu_tests[*]}"
    meson test -C "$build" --print-errorlogs --num-processes 4 \
        --suite cuda
} > "$out/tests.log" 2>&1
rc=$?
skipped=$(sed -n 's/^ *[0-9]*\/[0-9]* *tacl[^ ]* \/ \([^ ]*\) *SKIP.*/\1/p' \
    "$out/tests.log" | tr '\n' ' ')
if [ ${#gpu_tests[@]} -eq 0 ]; then
    step_failed "CUDA tests" "the build lists no test in suite cuda"
elif [ $rc -ne 0 ]; then
    step_failed "CUDA tests (${#gpu_tests[@]})" "see tests.log"
elif [ -n "$skipped" ]; then
    step_failed "CUDA tests" "skipped on a GPU machine: $skipped"
else
    step_ok "CUDA tests: ${#gpu_tests[@]} passed (${gpu_tests[*]})"
fi
if [ $run_suite -eq 1 ]; then
    echo "=== the whole suite" >> "$out/tests.log"
    if meson test -C "$build" --print-errorlogs --num-processes 8 \
            --timeout-multiplier 2 >> "$out/tests.log" 2>&1; then
        step_ok "whole suite: $(grep -E '^Ok:' "$out/tests.log" | tail -1)," \
            "$(grep -E '^Skipped:' "$out/tests.log" | tail -1)"
    else
        step_failed "whole suite" "$(grep -E '^Fail:' "$out/tests.log" |
            tail -1); see tests.log"
    fi
fi

# --- Benchmarks --------------------------------------------------------------
# One command per line; each one's output is appended to bench.txt.
# perf/gpu_bench.sh: the kernels against cudaMemcpy D2D, all-gather,
# reduce-scatter and all-reduce on device buffers among 2 and 4 processes
# of this GPU against the copy bound, 1 MB to 1 GB, and the latency of an
# 8-byte all-reduce on a stream against host memory, each the median of
# 3 launches (about 3 to 4 minutes on one H100-class GPU).  Exit 77 (it
# found no GPU) is a failure here.
benches=(
    "perf/gpu_bench.sh $build"
)
: > "$out/bench.txt"
for cmd in "${benches[@]}"; do
    echo "=== $cmd" >> "$out/bench.txt"
    timeout 420 $cmd >> "$out/bench.txt" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        step_ok "bench: $cmd"
    elif [ $rc -eq 124 ]; then
        step_failed "bench: $cmd" "did not finish in 420 s; see bench.txt"
    else
        step_failed "bench: $cmd" "exit $rc; see bench.txt"
    fi
done

echo "--- gpu-check: $( [ $failed -eq 0 ] && echo all passed ||
    echo FAILURES), files in $out"
exit $failed
