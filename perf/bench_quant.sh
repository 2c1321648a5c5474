#!/usr/bin/env bash
# ZeRO++ benchmark on the emulated cluster: qgZ reduce-scatter against
# ring and MiCS reduce-scatter, and qwZ all-gather against ring all-gather,
# float16 and float32, 1 Gbit/s between nodes, in one run.  For each size
# it prints the out-of-place time of every variant, its ratio to the
# float16 ring, and the largest error the quantized runs saw (every element
# is also checked against the quantization bound; a value beyond it makes
# the run fail).
#
#   perf/bench_quant.sh BUILD_DIR [OUT_DIR] [--quick]
#
# Needs root (tacl-cluster).  Writes OUT_DIR/bench_quant.csv and .md.
set -u
BUILD=${1:?usage: bench_quant.sh BUILD_DIR [OUT_DIR] [--quick]}
OUT=${2:-$BUILD/bench}
QUICK=0
[ "${3:-}" = "--quick" ] && QUICK=1
HERE=$(cd "$(dirname "$0")" && pwd)
TOOL=$HERE/../tools/tacl-cluster
LAYOUT=${LAYOUT:-2,2}
RATE=${RATE:-1gbit}
if [ "$QUICK" -eq 1 ]; then SIZES="16M 64M"; else SIZES="16M 64M 256M"; fi

"$TOOL" --check > /dev/null 2>&1 || {
    echo "bench_quant: tacl-cluster cannot run here (needs root)" >&2
    exit 77
}
mkdir -p "$OUT"
CSV=$OUT/bench_quant.csv
echo "collective,dtype,variant,bytes,time_us,max_error" > "$CSV"

# run COLL DTYPE VARIANT SIZE ARGS...: one size of one variant; appends a
# CSV row (out-of-place time and, when quantized, the largest error).
run() {
    local coll=$1 dtype=$2 variant=$3 size=$4 log
    shift 4
    log=$OUT/quant.$coll.$dtype.$variant.$size.log
    echo "bench_quant: $coll $dtype $variant $size" >&2
    if ! "$TOOL" --ranks-per-node-list "$LAYOUT" --inter-rate "$RATE" \
        --no-prefix --timeout 600 -- "$BUILD/perf/${coll}_perf" -d "$dtype" \
        -b "$size" -e "$size" -n 2 -w 1 "$@" > "$log" 2>&1; then
        echo "bench_quant: $coll $dtype $variant $size FAILED (see $log)" >&2
        echo "$coll,$dtype,$variant,$size,,failed" >> "$CSV"
        return
    fi
    awk -v c="$coll" -v d="$dtype" -v v="$variant" '
        $1 ~ /^[0-9]+$/ && NF >= 13 { bytes = $1; t = $6 }
        /max abs error/ { err = $9 }
        END { printf "%s,%s,%s,%s,%s,%s\n", c, d, v, bytes, t, err }
    ' "$log" >> "$CSV"
}

for size in $SIZES; do
    for dtype in half float; do
        run reduce_scatter "$dtype" ring "$size" -A reducescatter=ring
        run reduce_scatter "$dtype" mics "$size" -A reducescatter=mics
        run reduce_scatter "$dtype" qgz-int4 "$size" -Q 4:256
        run reduce_scatter "$dtype" qgz-int8 "$size" -Q 8:256
        run all_gather "$dtype" ring "$size" -A allgather=ring
        run all_gather "$dtype" qwz-int8 "$size" -Q 8:256
    done
done

# The table: each variant's time and its ratio to the float16 ring of the
# same collective and size (the ZeRO++ baseline).
/usr/bin/python3 - "$CSV" "$OUT/bench_quant.md" "$LAYOUT" "$RATE" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
base = {(r["collective"], r["bytes"]): float(r["time_us"])
        for r in rows if r["dtype"] == "half" and r["variant"] == "ring"
        and r["time_us"]}
lines = ["# ZeRO++ quantized collectives, ranks per node %s, %s between "
         "nodes" % (sys.argv[3], sys.argv[4]), "",
         "| collective | bytes | dtype | variant | time (ms) | "
         "x float16 ring time | max error |",
         "| --- | ---: | --- | --- | ---: | ---: | ---: |"]
for r in rows:
    if not r["time_us"]:
        lines.append("| %s | %s | %s | %s | failed | | |" % (
            r["collective"], r["bytes"], r["dtype"], r["variant"]))
        continue
    t = float(r["time_us"])
    b = base.get((r["collective"], r["bytes"]))
    lines.append("| %s | %s | %s | %s | %.1f | %s | %s |" % (
        r["collective"], r["bytes"], r["dtype"], r["variant"], t / 1e3,
        "%.3f" % (t / b) if b else "", r["max_error"] or "exact"))
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
