#!/bin/bash
# Gradient compression in the training engine on the emulated cluster
# (issue 30's figure): ZeRO-3 and MiCS, uncompressed and with each codec
# (top-k 1% with error feedback, int8) under each plan (none: every layer
# on its own; fusion: the planner's groups; full: its groups and a
# decision per group), on 2 nodes of 2 ranks whose uplinks are shaped to
# INTER_RATE (1gbit), one tacl-cluster job running every configuration in
# turn.  The model is perf/engine_bench.sh's (2.2 M parameters).
#
# Prints a markdown table: strategy, codec, plan, the loss at the last
# step and its ratio to the uncompressed run's (the mean of the last 10
# steps' losses beside it: one step's batch is noisy), tokens/s (steps
# after the first SKIP, which cover fusion's and full's profiled steps)
# and its ratio to uncompressed.  Logs (rank 0, with the printed plans)
# go to OUT_DIR.
#
# Usage: perf/engine_compress.sh BUILD_DIR [OUT_DIR]
# Environment: STEPS (200; STEPS=20 is a smoke test), INTER_RATE (1gbit),
# STRATEGIES ("ZeRO-3 MiCS"), CODECS ("topk int8"), PLANS ("none fusion
# full"), DENSITY (0.01), WARMUP (0: steps uncompressed first, the
# engine's --warmup-steps), HOPS (auto: --compress-hops, which hops carry
# encoded data), SKIP (4), MODEL (the engine's shape options).
# Needs root and namespaces (tacl-cluster --check); exit 77 without.

set -u
build=${1:?usage: engine_compress.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/engine_compress}
HERE=$(cd "$(dirname "$0")" && pwd)
CLUSTER=$HERE/../tools/tacl-cluster
TRAIN=$build/engine/train
STEPS=${STEPS:-200}
INTER_RATE=${INTER_RATE:-1gbit}
STRATEGIES=${STRATEGIES:-ZeRO-3 MiCS}
CODECS=${CODECS:-topk int8}
PLANS=${PLANS:-none fusion full}
DENSITY=${DENSITY:-0.01}
WARMUP=${WARMUP:-0}
HOPS=${HOPS:-auto}
SKIP=${SKIP:-4}
MODEL=${MODEL:---ctx 8 --emb 32 --hidden 1024 --blocks 4 --batch 64}

# shellcheck source=engine_cluster.sh disable=SC2154
. "$HERE/engine_cluster.sh"
engine_cluster_setup engine_compress
# The list of runs: NAME STRATEGY CODEC PLAN, "none" codec uncompressed.
runs=()
for st in $STRATEGIES; do
    runs+=("$st none -")
    for codec in $CODECS; do
        for plan in $PLANS; do
            runs+=("$st $codec $plan")
        done
    done
done
printf '%s\n' "${runs[@]}" > "$work/runs"
echo "engine_compress: ${#runs[@]} runs of $STEPS steps, 2x2 at" \
    "$INTER_RATE" >&2
# shellcheck disable=SC2016
"$CLUSTER" --nodes 2 --ranks-per-node 2 --inter-rate "$INTER_RATE" \
    --timeout 20000 -- sh -c '
    dir=$1 density=$2 warmup=$3 hops=$4; shift 4
    while read -r st codec plan; do
        flags="--strategy $st"
        [ "$codec" = none ] ||
            flags="$flags --compress $codec --plan $plan --density $density \
                --warmup-steps $warmup --compress-hops $hops"
        "$@" $flags > "$dir/$st.$codec.$plan.$TACL_RANK" 2>&1 || exit 1
    done < "$dir/runs"' sh "$work" "$DENSITY" "$WARMUP" "$HOPS" "$TRAIN" $MODEL \
    --steps "$STEPS" > "$work/job.log" 2>&1 ||
    { echo "engine_compress: the job failed:" >&2; tail -20 "$work/job.log" >&2; }
for r in "${runs[@]}"; do
    read -r st codec plan <<< "$r"
    cp "$work/$st.$codec.$plan.0" "$out/$st.$codec.$plan.log" 2> /dev/null
done

# One row a run: its step lines give the last loss, the mean of the last
# 10, and tokens/s after SKIP steps (total samples over total seconds).
stats() {
    awk -v skip="$SKIP" '
        $1 == "step" { n = $2; loss[n] = $4; tps[n] = $6 }
        END {
            if (n == 0) { print "- - -"; exit }
            m = 0; k = 0
            for (i = n - 9; i <= n; i++) if (i >= 1) { m += loss[i]; k++ }
            t = 0; c = 0
            for (i = skip + 1; i <= n; i++) if (tps[i] > 0) { t += 1 / tps[i]; c++ }
            printf "%s %.6f %s\n", loss[n], m / k, c ? sprintf("%.0f", c / t) : "-"
        }' "$1"
}
{
    echo "2 nodes x 2 ranks, inter-node $INTER_RATE, $STEPS steps," \
        "top-k density $DENSITY (error feedback on), $WARMUP steps uncompressed first"
    echo
    echo "| strategy | codec | plan | loss@$STEPS | ratio | mean last 10 | ratio | tokens/s | ratio |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    for r in "${runs[@]}"; do
        read -r st codec plan <<< "$r"
        read -r loss mean tps <<< "$(stats "$out/$st.$codec.$plan.log" 2> /dev/null || echo "- - -")"
        if [ "$codec" = none ]; then
            base_loss=$loss base_mean=$mean base_tps=$tps
        fi
        awk -v st="$st" -v c="$codec" -v p="$plan" -v l="$loss" \
            -v bl="$base_loss" -v m="$mean" -v bm="$base_mean" \
            -v t="$tps" -v bt="$base_tps" '
            function ratio(a, b) { return (a + 0 > 0 && b + 0 > 0) ? sprintf("%.3f", a / b) : "-" }
            BEGIN { printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                    st, c, p, l, ratio(l, bl), m, ratio(m, bm), t, ratio(t, bt) }'
    done
} | tee "$out/engine_compress.md"
