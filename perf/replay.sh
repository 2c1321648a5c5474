#!/bin/bash
# The replay harness' must-show job (issue 30): perf/replay on emulated
# clusters at 1 Gbit/s, every policy, and a markdown summary with the
# targets checked.
#
# Design.  For each cluster (NODESxPER) and each model, one tacl-cluster
# job runs build/perf/replay, which times every policy in turn on one
# communicator and prints a markdown table (replay.c says what each
# column is).  The tables go into the summary as they are, followed by
# the targets read from each table's planned row: planned >= 1.5x
# uncompressed (where compression can win), never below 1/1.02 of it,
# >= 1.1x the best bucket fusion, predicted within 15% of measured.
#
# Usage: perf/replay.sh BUILD_DIR [SUMMARY.md]
# Environment: CLUSTERS ("2x2 4x2"), MODELS ("bert-base resnet101
# vgg16"), RATE (1gbit), STEPS (10), WARMUP (2), CODEC (topk), DENSITY
# (0.01), RATIO (0.86), LIMIT (seconds per job, 3600), EXTRA (more
# replay options).  SMOKE=1: one short job (2x2, resnet50, 2 steps after
# 1 warm-up) unless those are set.  Exit status: 0, 1 when a job failed,
# 77 when the cluster cannot be emulated here (root, namespaces).
set -u
BUILD=$(cd "${1:?usage: replay.sh BUILD_DIR [SUMMARY.md]}" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
SUMMARY=${2:-$BUILD/replay-summary.md}
if [ "${SMOKE:-0}" = 1 ]; then
    CLUSTERS=${CLUSTERS:-2x2}
    MODELS=${MODELS:-resnet50}
    STEPS=${STEPS:-2}
    WARMUP=${WARMUP:-1}
fi
CLUSTERS=${CLUSTERS:-2x2 4x2}
MODELS=${MODELS:-bert-base resnet101 vgg16}
RATE=${RATE:-1gbit}
STEPS=${STEPS:-10}
WARMUP=${WARMUP:-2}
CODEC=${CODEC:-topk}
DENSITY=${DENSITY:-0.01}
RATIO=${RATIO:-0.86}
LIMIT=${LIMIT:-3600}
EXTRA=${EXTRA:-}
CLUSTER=$SRC/tools/tacl-cluster
REPLAY=$BUILD/perf/replay

[ -x "$REPLAY" ] || { echo "replay.sh: no $REPLAY; build first" >&2; exit 1; }
"$CLUSTER" --check > /dev/null 2>&1 || {
    echo "replay.sh: tacl-cluster cannot run here (needs root and" \
        "namespaces)" >&2
    exit 77
}
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT

# targets FILE: the planned row's ratios against the targets.
targets() {
    awk -F'|' '
        function num(s) { gsub(/[ x]/, "", s); return s + 0 }
        /^- planner: / {
            ms = $0; sub(/.* groups, /, "", ms); sub(/ ms.*/, "", ms)
            n = $0; sub(/^- planner: /, "", n); sub(/ tensors.*/, "", n)
            printf "- planner time: %.2f ms for %d tensors (at most 50 " \
                "ms for ResNet101 314 tensors): %s\n", ms, n, \
                (ms + 0 <= 50) ? "met" : "missed"
        }
        $2 ~ /^ *planned / {
            pm = num($7); vu = num($8); vb = num($9)
            # Comparisons go into variables: among the printf arguments a
            # ">" would be taken for a redirection.
            u = "SLOWER"
            if (vu >= 1.5) u = "met"
            else if (vu >= 1 / 1.02) u = "not slower"
            b = (vb >= 1.1) ? "met" : "missed"
            p = (pm >= 0.85 && pm <= 1.15) ? "met" : "missed"
            printf "- planned: %.3fx uncompressed (>= 1.5 where " \
                "compression can win, never below 1/1.02): %s; %.3fx " \
                "best bucket (>= 1.1): %s; predicted/measured %.3f " \
                "(within 15%%): %s\n", vu, u, vb, b, pm, p
        }' "$1"
}

status=0
{
    echo "# Replay harness: policies side by side"
    echo
    echo "perf/replay.sh: clusters $CLUSTERS at $RATE, models $MODELS," \
        "codec $CODEC (density $DENSITY), compute ratio $RATIO," \
        "$STEPS steps after $WARMUP warm-up; tacl $("$REPLAY" --version |
        awk '{print $NF}')."
} > "$SUMMARY"
for cluster in $CLUSTERS; do
    nodes=${cluster%x*}
    per=${cluster#*x}
    for model in $MODELS; do
        echo "replay.sh: $model on ${nodes}x$per" >&2
        # shellcheck disable=SC2086
        "$CLUSTER" --nodes "$nodes" --ranks-per-node "$per" \
            --inter-rate "$RATE" --quickack --timeout "$LIMIT" --no-prefix \
            -- "$REPLAY" --model "$model" --steps "$STEPS" \
            --warmup "$WARMUP" --codec "$CODEC" --density "$DENSITY" \
            --ratio "$RATIO" $EXTRA > "$TMP/out" 2> "$TMP/err"
        rc=$?
        {
            echo
            echo "## $model, $nodes nodes x $per ranks"
            if [ $rc -ne 0 ]; then
                echo
                echo "job failed (exit $rc):"
                echo
                sed 's/^/    /' "$TMP/err" | tail -20
            else
                sed -n '/^## /,$p' "$TMP/out" | sed 1d
                echo
                targets "$TMP/out"
            fi
        } >> "$SUMMARY"
        [ $rc -eq 0 ] || status=1
    done
done
echo "replay.sh: summary in $SUMMARY" >&2
exit $status
