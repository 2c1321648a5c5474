#!/usr/bin/env bash
# The GPU benchmarks of issue 15, each against a peer measured in the same
# run, median of REPEAT launches per figure (tools/gpu-check.sh runs this
# into bench.txt):
#
# 1. Kernels: perf/micro/cuda_kernel_bench ($MB MB tensors) times the
#    copy kernel, sum over float32 / bfloat16 / float16, quantize,
#    dequantize and the fused dequantize-sum-quantize against
#    cudaMemcpyAsync device-to-device on the same GPU; the ratios of sum
#    float32, sum bfloat16 (target 0.85) and quantize (target 0.70) are
#    printed.
# 2. Collectives on device buffers (--mem cuda): all-gather,
#    reduce-scatter and all-reduce, 2 and 4 processes sharing the one GPU,
#    1 MB to MAXBYTES.  The copy bound: the processes share one GPU's
#    memory, and for these collectives every byte of busbw is one byte a
#    rank copies (reads once and writes once) on that GPU, all ranks at
#    once: so P ranks together reach at most the GPU's device-to-device
#    copy rate C, and each rank's busbw at most C / P.  C is cudaMemcpy
#    device-to-device of $MB MB measured in step 1 of this run (bytes
#    copied per second, i.e. half of the read + write figure
#    cuda_kernel_bench prints).  A cudaMemcpyPeer between two processes
#    through IPC would measure the same copy engine path on one GPU, with
#    the IPC setup in the way; the single-process figure is the cleaner
#    bound.  The out-of-place busbw is shown beside C / P and the ratio
#    (target 0.80 from 256 MB).
# 3. Latency: an 8-byte float all-reduce, 2 processes, device buffers on
#    a stream (--mem cuda) against the same call on host memory; the time
#    per call (mean over 2000 calls) of each and their ratio.
#
# Usage: perf/gpu_bench.sh BUILD_DIR
# Environment: REPEAT (3) launches per figure, MAXBYTES (1G), REG (1:
# device buffers from tacl_mem_alloc, which peers map once; 0: cudaMalloc,
# which they map per message), MB (256, the kernels' tensors).  The first
# launch of each collective checks its results exactly (-c 1), the
# others only time (-c 0).  Exit 77, saying why, without a GPU or without
# a CUDA build; 1 when a launch failed; else 0.
set -u
BUILD=${1:?usage: gpu_bench.sh BUILD_DIR}
REPEAT=${REPEAT:-3}
MAXBYTES=${MAXBYTES:-1G}
REG=${REG:-1}
MB=${MB:-256}
LIMIT=240

if ! nvidia-smi > /dev/null 2>&1; then
    echo "gpu_bench: skipped: nvidia-smi sees no GPU"
    exit 77
fi
if [ ! -x "$BUILD/perf/micro/cuda_kernel_bench" ]; then
    echo "gpu_bench: skipped: $BUILD was built without CUDA" \
         "(no perf/micro/cuda_kernel_bench)"
    exit 77
fi
RUN="$BUILD/tools/tacl-run"
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
status=0

# The median of the numbers on stdin (one per line).
median() {
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "nan"; exit }
        print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "# $(nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader | head -1); REPEAT=$REPEAT, median kept"

# --- 1. Kernels ---------------------------------------------------------
echo "=== kernels against cudaMemcpy device-to-device ($MB MB)"
for rep in $(seq "$REPEAT"); do
    if ! timeout $LIMIT "$BUILD/perf/micro/cuda_kernel_bench" "$MB" 20 \
            > "$TMP/kern.$rep" 2>&1; then
        echo "FAILED: cuda_kernel_bench launch $rep"
        cat "$TMP/kern.$rep"
        status=1
    fi
done
cat "$TMP/kern.1"
# Lines look like "NAME   123.4 GB/s   95.1% of copy   1.234 ms".
kernel_ratio() {
    local name=$1 target=$2 r
    r=$(for rep in $(seq "$REPEAT"); do
            grep -E "^$name +[0-9.]+ GB/s" "$TMP/kern.$rep" |
                sed -E 's/.* ([0-9.]+)% of copy.*/\1/'
        done | median)
    printf "%-28s %6s%% of cudaMemcpy D2D (median of %d; target %s%%)\n" \
        "$name" "$r" "$REPEAT" "$target"
}
kernel_ratio "copy kernel" 85
kernel_ratio "sum float32" 85
kernel_ratio "sum bfloat16" 85
kernel_ratio "quantize float32 int8" 70
kernel_ratio "quantize bfloat16 int8" 70
kernel_ratio "quantize bfloat16 int4" 70
# C: bytes copied per second by cudaMemcpy D2D, GB/s (half of read+write).
copy_gbs=$(for rep in $(seq "$REPEAT"); do
        grep -E '^cudaMemcpy device-to-device' "$TMP/kern.$rep" |
            awk '{ print $(NF - 6) / 2 }'
    done | median)
echo "copy rate C (cudaMemcpy D2D, bytes copied): $copy_gbs GB/s"

# --- 2. Collectives on device buffers -------------------------------------
echo "=== collectives, device buffers, processes sharing one GPU," \
     "busbw against C / P"
for coll in all_gather reduce_scatter all_reduce; do
    for np in 2 4; do
        for rep in $(seq "$REPEAT"); do
            check=$([ "$rep" = 1 ] && echo 1 || echo 0)
            if ! timeout $LIMIT "$RUN" -n $np "$BUILD/perf/${coll}_perf" \
                    --mem cuda -R "$REG" -b 1M -e "$MAXBYTES" -f 4 -n 10 -w 3 \
                    -c $check > "$TMP/$coll.$np.$rep" 2>&1; then
                echo "FAILED: $coll $np processes, launch $rep" \
                     "(tail of its output:)"
                tail -5 "$TMP/$coll.$np.$rep"
                status=1
            fi
        done
        echo "--- $coll, $np processes (-d float -o sum, out of place)"
        printf "%12s %12s %12s %8s\n" size "busbw GB/s" "C/P GB/s" ratio
        sizes=$(awk '$1 ~ /^[0-9]+$/ && NF >= 13 { print $1 }' \
            "$TMP/$coll.$np.1")
        for size in $sizes; do
            bw=$(for rep in $(seq "$REPEAT"); do
                    awk -v s="$size" '$1 == s && NF >= 13 { print $8 }' \
                        "$TMP/$coll.$np.$rep"
                done | median)
            awk -v s="$size" -v b="$bw" -v c="$copy_gbs" -v p=$np 'BEGIN {
                bound = c / p
                printf "%12d %12.2f %12.2f %8.2f\n", s, b, bound,
                       (bound > 0 ? b / bound : 0) }'
        done
        grep -E '^# Out of bounds' "$TMP/$coll.$np.1" |
            sed 's/^#/  checked (launch 1):/'
    done
done

# --- 3. Latency of an 8-byte all-reduce -----------------------------------
echo "=== 8-byte all-reduce, 2 processes: device buffers on a stream" \
     "against host memory (us per call, mean of 2000)"
for mem in cuda host; do
    for rep in $(seq "$REPEAT"); do
        if ! timeout $LIMIT "$RUN" -n 2 "$BUILD/perf/all_reduce_perf" \
                --mem $mem -b 8 -e 8 -n 2000 -w 200 -c 1 \
                > "$TMP/lat.$mem.$rep" 2>&1; then
            echo "FAILED: latency, --mem $mem, launch $rep"
            tail -5 "$TMP/lat.$mem.$rep"
            status=1
        fi
    done
    lat=$(for rep in $(seq "$REPEAT"); do
            awk '$1 == 8 && NF >= 13 { print $6 }' "$TMP/lat.$mem.$rep"
        done | median)
    eval "lat_$mem=\$lat"
    printf "%-6s %10s us\n" "$mem" "$lat"
done
awk -v d="$lat_cuda" -v h="$lat_host" 'BEGIN {
    printf "device on a stream / host: %.2f\n", (h > 0 ? d / h : 0) }'
exit $status
