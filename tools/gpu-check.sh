#!/usr/bin/env bash
# Everything tacl checks on a GPU, for a machine lent for a few minutes
# (one call of at most 10 minutes, 15 minutes of device time in all, no
# network).  It keeps to a budget of its own and bounds every phase with
# a timeout, so that one hang costs a phase, never the call, and every
# phase ends with one line in summary.txt saying ok, FAILED or skipped,
# and why.  The phases, in order of what a first session most needs:
#
#   env      the machine (GPU, driver, compilers, image), the toolkit
#            (CUDA_PATH from nvcc), the carried packages, meson
#   probe    tools/gpu_probe (prebuilt, or nvcc alone, a few seconds):
#            device, driver, context time, stream memory operations,
#            cudaIpc and cuMem POSIX descriptors in a second process
#   build    plan A: the prebuilt programs (tools/gpu-prepare.sh), if they
#            start here and were built from this tree's sources; plan B:
#            meson and ninja here (-Dcuda=enabled -Dgpu_arch=90, no
#            -Werror: a new warning of this compiler must not stop it),
#            stopping the CUDA phases unless the build has CUDA
#   kernels  the CUDA kernel tests (tests/kernels)
#   kbench   the kernel benchmark against cudaMemcpy
#   ipc      the cuda_ipc transport test (processes sharing the GPU)
#   coll     the collectives on device buffers and streams (tests/cuda),
#            and the ucx staging test where UCX was carried
#   cbench   a short collective benchmark on device buffers, 2 processes
#   latency  an 8-byte all-reduce on a stream against host memory
#   torch    the torch binding built against this image's torch
#            (bindings/torch/build_here.py) and tests/torch/test_cuda.py
#   suite    (not with --quick) the whole meson suite, plan B only
#   bench    (not with --quick) perf/gpu_bench.sh, the full benchmarks
#
# The test programs run directly under timeout, with TAP output,
# TT_REQUIRE_GPU=1 (a skip is a failure here), TACL_DEBUG=INFO, a short
# TACL_TIMEOUT and per-test deadlines.  nvidia-smi dmon runs beside.
#
# Usage: tools/gpu-check.sh [--quick] [--only PHASE,...] [--keep-going]
#   --quick       the phases above but suite and bench (what a first
#                 session runs)
#   --only P,...  these phases only (a rerun of what failed); build runs
#                 too when a chosen phase needs programs (plan A: seconds)
#   --keep-going  run every phase even when an earlier one says the GPU
#                 or the build cannot serve (to see each phase's own
#                 failure)
# Environment (seconds unless said): GPU_CHECK_BUDGET (480) for the whole
# run; GPU_CHECK_TEST_TIMEOUT (90) per test case; GPU_CHECK_DEADLINE (75)
# for a case's ranks; GPU_CHECK_TACL_TIMEOUT (20), TACL_TIMEOUT of the
# tests; GPU_CHECK_PYTHON (python3) with torch; GPU_CHECK_CARRIED=1 takes
# the carried packages even where the system has them;
# GPU_CHECK_PREBUILT=0 builds here even where plan A would do.
# Output, in $OUT (default gpu-check-out), 7 files:
#   summary.txt  one line per phase; env.txt  the machine and the probe;
#   build.log; tests.log  kernels, ipc, coll (TAP); bench.txt  kbench,
#   cbench, latency, bench; torch.log; dmon.txt  nvidia-smi dmon.
# Exit status: 0 when every phase run passed, 1 otherwise.
#
# On the device machine, with .gpu-deps and .gpu-prebuilt carried:
#   bash tools/gpu-check.sh --quick
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
self=$root/tools/gpu-check.sh
. tools/gpu-lib.sh

# --- a phase run by itself (the main run starts these under timeout) -------
phase_main() {
    local name=$1
    "phase_$name"
}

# Write the phase's one-line detail for the summary.
say() { echo "$*" > "$STATE/$PHASE.note"; }

# Run a program of the build under timeout T; its output goes to LOG.
# Returns its status (124: timed out).
run_bounded() {
    local t=$1 log=$2
    shift 2
    if [ "$t" -lt 3 ]; then
        echo "=== $(date -u +%T) $*: no time left in the phase" >> "$log"
        return 124
    fi
    echo "=== $(date -u +%T) $* (timeout ${t}s)" >> "$log"
    timeout -k 5 "$t" "$@" >> "$log" 2>&1
    local rc=$?
    echo "=== exit $rc" >> "$log"
    return $rc
}

# TAP totals of the lines LOG gained since line FROM: "P passed, F failed".
tap_count() {
    local log=$1 from=$2
    tail -n +"$from" "$log" | awk '
        /^ok /     { ok++ }
        /^not ok / { bad++; sub(/^not ok ([0-9]+ )?- /, ""); sub(/ .*/, "");
                     sub(/^[^:]*::/, "");
                     if (bad <= 4) names = names (names ? ", " : "") $0 }
        END { printf "%d passed, %d failed%s", ok, bad,
                     bad ? " (" names (bad > 4 ? ", ..." : "") ")" : "" }'
}

# What a program said last in LOG since line FROM (not the check's lines).
last_said() {
    tail -n +"$2" "$1" | grep -v -e '^===' -e '^tacl-run:' | tail -1 |
        cut -c1-110
}

# The Criterion test programs of the build, with TAP, in the phase's time.
criterion_phase() {
    local log=$1 rc=0 results="" from r
    shift
    for prog in "$@"; do
        [ -x "$BIN/$prog" ] || continue
        from=$(($(wc -l < "$log") + 1))
        run_bounded "$((PHASE_T - SECONDS - 2))" "$log" env TT_REQUIRE_GPU=1 \
            TACL_DEBUG=INFO TACL_TIMEOUT="${GPU_CHECK_TACL_TIMEOUT:-20}" \
            TT_CUDA_DEADLINE_S="${GPU_CHECK_DEADLINE:-75}" \
            "$BIN/$prog" --jobs 1 --tap=- \
            --timeout "${GPU_CHECK_TEST_TIMEOUT:-90}"
        r=$?
        results+="$(basename "$prog"): $(tap_count "$log" "$from")"
        if [ $r -eq 124 ]; then
            results+=", then timed out"
        elif [ $r -ne 0 ]; then
            results+=" (exit $r)"
        fi
        results+="; "
        [ $r -eq 0 ] || rc=1
    done
    [ -n "$results" ] || { say "no test program in $BIN"; return 1; }
    say "${results%; }; see $(basename "$log")"
    return $rc
}

phase_probe() {
    local log=$OUT/env.txt probe=.gpu-prebuilt/tools/gpu_probe how=prebuilt
    local rc out=$STATE/probe.out
    echo "=== probe" >> "$log"
    # The prebuilt probe, if it starts here; else nvcc alone builds it.
    [ -x "$probe" ] && timeout -k 2 30 "$probe" > "$out" 2>&1
    rc=$?
    if ! grep -q '^probe: RESULT' "$out" 2> /dev/null; then
        [ -x "$probe" ] && { echo "the prebuilt probe does not start here:"
                             head -3 "$out"; } >> "$log"
        probe=$STATE/gpu_probe
        how="built here"
        if ! timeout 60 nvcc -O2 -arch=sm_90 -Icore -o "$probe" \
                tools/gpu_probe.cu >> "$log" 2>&1; then
            say "nvcc could not compile tools/gpu_probe.cu; see env.txt"
            return 1
        fi
        timeout -k 2 30 "$probe" > "$out" 2>&1
        rc=$?
    fi
    cat "$out" >> "$log"
    if [ $rc -eq 0 ]; then
        say "$(sed -n 's/^probe: device 0: ok (\(.*\))/\1/p' "$out");" \
            "$(grep -E '^probe: (context|stream|cudaIpc|cuMem)' "$out" |
               sed -E 's/^probe: ([^:]*): ([a-zA-Z]*).*/\1 \2/' |
               paste -sd ',' - | sed 's/,/, /g') ($how)"
        return 0
    fi
    [ $rc -eq 124 ] && { say "no answer in 30 s; see env.txt"; return 1; }
    grep -q '^probe: context on device 0: ok' "$out" ||
        touch "$STATE/no-gpu"
    say "$(grep 'FAILED' "$out" | grep -v RESULT | head -2 |
        sed 's/^probe: //' | cut -c1-110 | paste -sd ';' - |
        sed 's/;/; /g'); see env.txt"
    return 1
}

phase_build() {
    local log=$OUT/build.log t=$PHASE_T
    : > "$STATE/bin"
    # Plan A: the prebuilt programs, built from these very sources, if
    # they start here (the image's C library and the carried packages).
    if [ "${GPU_CHECK_PREBUILT:-1}" = 0 ]; then
        echo "plan A: not tried (GPU_CHECK_PREBUILT=0)" >> "$log"
    elif [ -f .gpu-prebuilt/MANIFEST ]; then
        local want have bad=""
        want=$(sed -n 's/^source_hash //p' .gpu-prebuilt/MANIFEST)
        have=$(gpu_source_hash)
        if [ "$want" != "$have" ]; then
            echo "plan A: .gpu-prebuilt is of other sources ($want, this" \
                 "tree $have)" >> "$log"
        else
            for prog in tests/cuda/test_coll_cuda \
                        tests/kernels/test_reduce_cuda \
                        tests/transport/test_transport_cuda_ipc; do
                if ! timeout 10 ".gpu-prebuilt/$prog" --version \
                        > "$STATE/start.out" 2>&1; then
                    bad+="$prog: $(head -c 200 "$STATE/start.out"); "
                fi
            done
            if [ -z "$bad" ]; then
                echo "$root/.gpu-prebuilt" > "$STATE/bin"
                say "plan A: prebuilt programs of this tree start here" \
                    "($(awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1,
                        $2 }' .gpu-prebuilt/MANIFEST))"
                return 0
            fi
            echo "plan A: prebuilt programs do not start here: $bad" >> "$log"
        fi
    else
        echo "plan A: nothing prebuilt (.gpu-prebuilt not carried)" >> "$log"
    fi
    # Plan B: build here.
    local b=$root/build-gpu quick_targets=()
    rm -rf "$b"
    echo "=== plan B: meson setup ($(date -u +%T))" >> "$log"
    if ! timeout $((t / 3)) $MESON setup "$b" --buildtype=release \
            -Dcuda=enabled -Dgpu_arch=90 -Dwerror=false -Dmpi=disabled \
            >> "$log" 2>&1; then
        say "plan B: meson setup failed; see build.log"
        touch "$STATE/no-build"
        return 1
    fi
    if ! grep -q '^#define TACL_HAVE_CUDA 1' "$b/core/tacl_build_config.h"
    then
        say "plan B: the build has no CUDA; see build.log"
        touch "$STATE/no-build"
        return 1
    fi
    # --quick: the programs the phases run and libtacl; else everything.
    if [ "$QUICK" = 1 ]; then
        quick_targets=("${GPU_PROGRAMS[@]}" "lib/libtacl.so.$TACL_VERSION")
    else
        quick_targets=(all)
    fi
    # (test_ucx_cuda exists only where UCX was found.)
    local targets=()
    for target in "${quick_targets[@]}"; do
        ninja -C "$b" -t query "$target" > /dev/null 2>&1 &&
            targets+=("$target")
    done
    echo "=== plan B: ninja ${targets[*]} ($(date -u +%T))" >> "$log"
    timeout -k 5 $((t - SECONDS - 5)) ninja -C "$b" "${targets[@]}" \
        >> "$log" 2>&1
    local rc=$?
    if [ $rc -ne 0 ]; then
        touch "$STATE/no-build"
        [ $rc -eq 124 ] && { say "plan B: ninja did not finish in time;" \
                                 "see build.log"; return 1; }
        say "plan B: ninja failed: $(grep -m1 -E 'error|FAILED' "$log" |
            cut -c1-100); see build.log"
        return 1
    fi
    echo "$b" > "$STATE/bin"
    say "plan B: built here with CUDA (sm_90, $(grep -c '\.cu' \
        "$b/build.ninja") CUDA build lines)"
}

phase_kernels() {
    criterion_phase "$OUT/tests.log" \
        tests/kernels/test_reduce_cuda tests/kernels/test_quant_cuda
}

phase_kbench() {
    local mb=64 reps=10 log=$OUT/bench.txt from
    [ "$QUICK" = 1 ] || { mb=256; reps=20; }
    from=$(($(wc -l < "$log") + 1))
    run_bounded $((PHASE_T - SECONDS - 3)) "$log" \
        "$BIN/perf/micro/cuda_kernel_bench" "$mb" "$reps"
    local rc=$?
    [ $rc -eq 124 ] && { say "did not finish in its time; see bench.txt"
                         return 1; }
    [ $rc -ne 0 ] && { say "exit $rc: $(last_said "$log" "$from");" \
                           "see bench.txt"; return 1; }
    local pick='^(copy kernel|sum float32|sum bfloat16|quantize float32 int8) '
    say "$(grep -E "$pick" "$log" |
        sed -E 's/^(.*[^ ]) +[0-9.]+ GB\/s +([0-9.]+)% .*/\1 \2%/' |
        paste -sd ',' - | sed 's/,/, /g') of cudaMemcpy D2D (${mb} MB)"
}

phase_ipc() {
    criterion_phase "$OUT/tests.log" \
        tests/transport/test_transport_cuda_ipc
}

phase_coll() {
    local rc
    criterion_phase "$OUT/tests.log" tests/cuda/test_coll_cuda \
        tests/transport/test_ucx_cuda tests/transport/test_ofi_cuda
    rc=$?
    [ -x "$BIN/tests/transport/test_ucx_cuda" ] ||
        say "$(cat "$STATE/$PHASE.note"); no ucx_cuda test: this build has" \
            "no UCX (carry .gpu-deps)"
    return $rc
}

# One collective benchmark (perf binary NAME) on device buffers.
coll_bench() {
    local t=$1 name=$2
    shift 2
    run_bounded "$t" "$OUT/bench.txt" "$BIN/tools/tacl-run" -n 2 \
        "$BIN/perf/$name" --mem cuda "$@"
}

phase_cbench() {
    local rc=0 out="" per=$(((PHASE_T - 5) / 4)) why=""
    for name in all_reduce_perf all_gather_perf reduce_scatter_perf; do
        local from=$(($(wc -l < "$OUT/bench.txt") + 1))
        coll_bench "$per" "$name" -R 1 -b 1M -e 64M -f 8 -n 5 -w 2 -c 1
        local r=$?
        [ $r -ne 0 ] && rc=1
        [ $r -ne 0 ] && [ -z "$why" ] && why=$(last_said "$OUT/bench.txt" \
                                                          "$from")
        out+="${name%_perf}: $(tail -n +"$from" "$OUT/bench.txt" |
            awk -v r=$r '$1 ~ /^[0-9]+$/ && NF >= 13 { last = $8 }
                END { if (r == 124) print "timed out";
                      else if (r) print "exit " r;
                      else printf "%s GB/s busbw at 64 MB", last }'); "
    done
    # The same all-reduce from cudaMalloc memory: a mapping per message.
    local from=$(($(wc -l < "$OUT/bench.txt") + 1))
    coll_bench "$per" all_reduce_perf -R 0 -b 64M -e 64M -n 5 -w 2 -c 1
    [ $? -ne 0 ] && rc=1
    out+="cudaMalloc all_reduce: $(tail -n +"$from" "$OUT/bench.txt" |
        awk '$1 ~ /^[0-9]+$/ && NF >= 13 { last = $8 }
             END { print (last ? last " GB/s" : "no figure") }')"
    say "$out${why:+ (first failure: $why)}; see bench.txt"
    return $rc
}

phase_latency() {
    local out="" rc=0 per=$(((PHASE_T - 2) / 2)) why=""
    for mem in cuda host; do
        local from=$(($(wc -l < "$OUT/bench.txt") + 1))
        run_bounded "$per" "$OUT/bench.txt" "$BIN/tools/tacl-run" -n 2 \
            "$BIN/perf/all_reduce_perf" --mem $mem -b 8 -e 8 -n 1000 \
            -w 100 -c 1
        local r=$?
        [ $r -ne 0 ] && rc=1
        [ $r -ne 0 ] && [ -z "$why" ] && why=$(last_said "$OUT/bench.txt" \
                                                          "$from")
        out+="$mem $(tail -n +"$from" "$OUT/bench.txt" |
            awk -v r=$r '$1 == 8 && NF >= 13 { us = $6 }
                END { if (r == 124) print "timed out";
                      else if (r) print "exit " r; else print us " us" }'); "
    done
    say "8-byte all_reduce, 2 processes: ${out%; }${why:+ ($why)}"
    return $rc
}

phase_torch() {
    local log=$OUT/torch.log py=${GPU_CHECK_PYTHON:-python3} site=$STATE/site
    local pc rc built verdict
    if ! run_bounded 60 "$log" "$py" -c 'import torch; print("torch",
            torch.__version__, "CUDA", torch.version.cuda, "GPU",
            torch.cuda.is_available())'; then
        say "$py cannot import torch; see torch.log"
        return 1
    fi
    # libtacl for the binding: the prebuilt one, or the build's.
    if [ -f "$BIN/lib/pkgconfig/tacl.pc" ]; then
        pc=$BIN/lib/pkgconfig
    else
        pc=$BIN/meson-uninstalled
    fi
    # The build gets what the test (a minute at most) leaves.
    PKG_CONFIG_PATH=$pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} \
        MAX_JOBS=$(nproc) run_bounded $((PHASE_T - SECONDS - 60)) "$log" \
        "$py" bindings/torch/build_here.py "$site"
    rc=$?
    if [ $rc -ne 0 ]; then
        say "the binding did not build ($([ $rc -eq 124 ] &&
            echo "out of time" || echo "exit $rc")); see torch.log"
        return 1
    fi
    built=$SECONDS
    PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH} TT_REQUIRE_GPU=1 \
        TACL_DEBUG=INFO TACL_TIMEOUT="${GPU_CHECK_TACL_TIMEOUT:-20}" \
        OMP_NUM_THREADS=1 run_bounded $((PHASE_T - SECONDS - 3)) "$log" \
        "$py" tests/torch/test_cuda.py --nproc 2
    rc=$?
    verdict=$(grep -E '^test_cuda: ' "$log" | tail -1)
    say "binding built in ${built} s; ${verdict:-no verdict}$(
        [ $rc -eq 124 ] && echo " (out of time)"); see torch.log"
    return $rc
}

phase_suite() {
    [ -f "$BIN/build.ninja" ] || { say "needs plan B's build (the prebuilt" \
                                       "programs are the CUDA ones only)"
                                   return 77; }
    run_bounded $((PHASE_T - SECONDS - 3)) "$OUT/tests.log" \
        meson test -C "$BIN" --print-errorlogs --num-processes 8 \
        --timeout-multiplier 2
    local rc=$?
    say "$(grep -E '^(Ok|Fail|Skipped|Timeout):' "$OUT/tests.log" | tail -4 |
        tr -s ' ' | paste -sd ' ' -)"
    return $rc
}

phase_bench() {
    run_bounded $((PHASE_T - SECONDS - 3)) "$OUT/bench.txt" \
        env REPEAT=1 MAXBYTES=256M perf/gpu_bench.sh "$BIN"
    local rc=$?
    say "$([ $rc -eq 124 ] && echo "timed out" || echo "exit $rc"); see" \
        "bench.txt"
    return $rc
}

if [ "${1:-}" = --phase ]; then
    PHASE=$2
    phase_main "$2"
    exit $?
fi

# --- the main run ------------------------------------------------------------
QUICK=0
ONLY=""
KEEP_GOING=0
while [ $# -gt 0 ]; do
    case $1 in
    --quick) QUICK=1 ;;
    --only) ONLY=,$2,; shift ;;
    --keep-going) KEEP_GOING=1 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
               exit 0 ;;
    *) echo "gpu-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
OUT=${OUT:-$root/gpu-check-out}
mkdir -p "$OUT"
STATE=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
BUDGET=${GPU_CHECK_BUDGET:-480}
TACL_VERSION=$(sed -n "s/^ *version : '\(.*\)',/\1/p" meson.build | head -1)
export OUT STATE QUICK TACL_VERSION
summary=$OUT/summary.txt
: > "$summary"
for f in env.txt build.log tests.log bench.txt torch.log; do
    : > "$OUT/$f"
done
failed=0
dmon_pid=""
cleanup() {
    [ -n "$dmon_pid" ] && kill "$dmon_pid" 2> /dev/null
    rm -rf "$STATE"
}
trap cleanup EXIT

note() { echo "$*" | tee -a "$summary"; }

# want PHASE: whether PHASE is to run.
want() {
    case $1 in
    suite|bench) [ "$QUICK" = 0 ] || return 1 ;;
    esac
    [ -z "$ONLY" ] || [[ $ONLY == *",$1,"* ]]
}

# run_phase NAME CAP MIN: run phase NAME under timeout, min(CAP, what the
# budget has left but a few seconds for the summary); skip it when that
# is under MIN.
run_phase() {
    local name=$1 cap=$2 min=$3 left t rc why
    left=$((BUDGET - SECONDS - 8))
    t=$((cap < left ? cap : left))
    if [ $t -lt "$min" ]; then
        note "skipped  $name: ${left#-} s of the ${BUDGET} s budget left;" \
             "it needs ${min}"
        return
    fi
    PHASE_T=$t PHASE=$name timeout -k 5 "$t" bash "$self" --phase "$name"
    rc=$?
    why=$(cat "$STATE/$name.note" 2> /dev/null)
    case $rc in
    0) note "ok       $name ($((SECONDS - PHASE_START_MAIN)) s): $why" ;;
    77) note "skipped  $name: $why" ;;
    124|137) failed=1
        note "FAILED   $name: did not end within its ${t} s" \
             "(timeout)${why:+; last: $why}" ;;
    *) failed=1
       note "FAILED   $name ($((SECONDS - PHASE_START_MAIN)) s):" \
            "${why:-exit $rc}" ;;
    esac
}

# gate NAME: why NAME cannot run after what came before (empty: it can).
gate() {
    [ "$KEEP_GOING" = 1 ] && return
    if [ -f "$STATE/no-gpu-env" ]; then
        echo "nvidia-smi sees no GPU (env)"
    elif [ -f "$STATE/no-gpu" ]; then
        echo "the probe found no usable GPU"
    elif [ "$1" != probe ] && [ "$1" != build ] && [ -z "$BIN" ]; then
        echo "no programs to run (the build phase failed or did not run)"
    fi
}

phase() {
    local name=$1 why
    want "$name" || return
    why=$(gate "$name")
    if [ -n "$why" ]; then
        note "skipped  $name: $why"
        return
    fi
    PHASE_START_MAIN=$SECONDS
    export BIN
    run_phase "$@"
}

# --- env (in this shell: what it finds is the other phases' environment) ----
env_phase() {
    local e=$OUT/env.txt smi gpu
    {
        echo "date: $(date -u)"
        echo "host: $(uname -srm); $(grep -h '^PRETTY_NAME' /etc/os-release \
            2> /dev/null)"
        echo "cores: $(nproc); memory: $(free -g 2> /dev/null |
            awk '/^Mem:/ { print $2 " GiB" }')"
        echo "check: budget ${BUDGET} s, quick $QUICK, only '${ONLY//,/ }'"
    } >> "$e"
    smi=$(timeout 10 nvidia-smi --query-gpu=name,driver_version,memory.total \
          --format=csv,noheader 2>&1)
    if [ $? -ne 0 ] || [ -z "$smi" ]; then
        echo "nvidia-smi: $smi" >> "$e"
        touch "$STATE/no-gpu-env"
        failed=1
        note "FAILED   env: nvidia-smi sees no GPU: $(echo "$smi" | head -1 |
            cut -c1-80)"
    else
        gpu=$(echo "$smi" | head -1)
        echo "GPU: $smi" >> "$e"
        timeout 10 nvidia-smi topo -m >> "$e" 2>&1
        # Power, utilisation, clocks and memory, every second, beside.
        nvidia-smi dmon -s pucm -o T > "$OUT/dmon.txt" 2>&1 &
        dmon_pid=$!
    fi
    # The toolkit: the one of nvcc, wherever it is (meson's own lookup
    # of CUDA_PATH/CUDA_HOME/CUDA_ROOT/default path is not relied on).
    local nvcc
    nvcc=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2> /dev/null |
           sort -V | tail -1)
    if [ -n "$nvcc" ]; then
        export CUDA_PATH
        CUDA_PATH=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
        export PATH=$CUDA_PATH/bin:$PATH
        echo "nvcc: $nvcc ($(timeout 10 nvcc --version 2>&1 | tail -1));" \
             "CUDA_PATH=$CUDA_PATH" >> "$e"
    else
        echo "nvcc: none found" >> "$e"
    fi
    {
        echo "cc: $(cc --version 2>&1 | head -1)"
        echo "c++: $(c++ --version 2>&1 | head -1)"
        echo "glibc: $(ldd --version 2>&1 | head -1)"
        echo "ninja: $(ninja --version 2>&1)"
        echo "python: $(${GPU_CHECK_PYTHON:-python3} --version 2>&1)"
    } >> "$e"
    # pkg-config, hwloc, Criterion, UCX: the system's, else the carried
    # packages, unpacked into a private prefix (never into /); a library
    # the system has stays the system's.
    if [ "${GPU_CHECK_CARRIED:-0}" != 1 ] &&
       pkg-config --exists hwloc criterion 2> /dev/null; then
        echo "dependencies: the system's" >> "$e"
    elif compgen -G ".gpu-deps/*.deb" > /dev/null; then
        local deps=$STATE/deps libdir pc so name sys
        mkdir -p "$deps"
        for f in .gpu-deps/*.deb; do
            timeout 20 dpkg-deb -x "$f" "$deps" ||
                echo "dependencies: cannot unpack $f" >> "$e"
        done
        libdir=$deps/usr/lib/x86_64-linux-gnu
        for pc in "$libdir"/pkgconfig/*.pc; do
            sed -i -e "s|^prefix=/usr|prefix=$deps/usr|" \
                -e "s|^libdir=/usr|libdir=$deps/usr|" \
                -e "s|^includedir=/usr|includedir=$deps/usr|" \
                -e '/^Requires.private:/d' -e '/^Libs.private:/d' "$pc"
        done
        for so in "$libdir"/lib*.so.*; do
            [ -f "$so" ] && [ ! -L "$so" ] || continue
            name=$(basename "$so")
            sys=$(ldconfig -p 2> /dev/null | awk -v n="${name%.so.*}.so." \
                  'index($1, n) == 1 { print $NF; exit }')
            [ -n "$sys" ] && ln -sf "$sys" "$so"
        done
        export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        export PKG_CONFIG_PATH=$libdir/pkgconfig
        export PKG_CONFIG=$deps/usr/bin/pkgconf
        export UCX_MODULE_DIR=$libdir/ucx
        echo "dependencies: carried, in $deps: $(ls .gpu-deps |
            tr '\n' ' ')" >> "$e"
    else
        echo "dependencies: hwloc or Criterion missing, nothing carried" >> "$e"
    fi
    if command -v meson > /dev/null; then
        MESON=meson
    elif [ -f .gpu-deps/meson.pyz ]; then
        MESON="python3 $root/.gpu-deps/meson.pyz"
    else
        MESON=meson
    fi
    export MESON
    echo "meson: $MESON ($($MESON --version 2>&1 | head -1))" >> "$e"
    [ -f "$STATE/no-gpu-env" ] ||
        note "ok       env: ${gpu}; $(basename "${CUDA_PATH:-no-nvcc}");" \
             "$(grep -m1 '^dependencies' "$e" | cut -c1-36); $MESON"
}

BIN=""
# (A carry that lost the programs' execute bits must not cost plan A.)
[ -d .gpu-prebuilt ] && find .gpu-prebuilt -type f ! -name '*.*' \
    ! -name MANIFEST -exec chmod u+x {} + 2> /dev/null
env_phase
phase probe 40 10
# The build runs when a later phase needs programs.
need_bin=0
for p in kernels kbench ipc coll cbench latency torch suite bench; do
    want "$p" && need_bin=1
done
if [ $need_bin = 1 ] && { want build || [ -n "$ONLY" ]; }; then
    ONLY_SAVED=$ONLY
    [ -n "$ONLY" ] && ONLY=$ONLY,build,
    phase build $([ "$QUICK" = 1 ] && echo 300 || echo 420) 30
    ONLY=$ONLY_SAVED
    BIN=$(cat "$STATE/bin" 2> /dev/null)
fi
phase kernels 90 20
phase kbench 60 15
phase ipc 120 25
phase coll 200 40
phase cbench 90 25
phase latency 45 12
phase torch 240 60
phase suite 600 60
phase bench 420 60

# Logs stay small enough to come back: the head and tail of a long one.
for f in "$OUT"/*.log "$OUT"/*.txt; do
    [ -f "$f" ] && [ "$(stat -c %s "$f")" -gt 3000000 ] || continue
    { head -c 1000000 "$f"; echo; echo "[... trimmed ...]"
      tail -c 1900000 "$f"; } > "$f.tmp" && mv "$f.tmp" "$f"
done
note "--- gpu-check: $( [ $failed -eq 0 ] && echo "all passed" ||
    echo FAILURES) in ${SECONDS} s of the ${BUDGET} s budget; files in $OUT"
exit $failed
