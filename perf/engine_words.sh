#!/bin/bash
# The engine's word embedding on the emulated cluster (issue 31's
# figure): ZeRO-3 with a replicated word table (--vocab, --embed-dim),
# its gradient synced by each sparse all-reduce scheme and by the dense
# all-reduce of the table, on 2 nodes of 2 ranks whose uplinks are
# shaped to INTER_RATE (1gbit), one tacl-cluster job running every
# scheme in turn.  The model is perf/engine_bench.sh's.
#
# Prints a markdown table: scheme asked for, the scheme that ran (AUTO's
# pick), the loss at the last step, the embedding sync's mean seconds
# and bytes (all ranks) per step and tokens/s, each over the steps after
# the first SKIP, and the sync's seconds against the dense one's.  Logs
# (rank 0) go to OUT_DIR.
#
# Usage: perf/engine_words.sh BUILD_DIR [OUT_DIR]
# Environment: STEPS (50; STEPS=3 is a smoke test), INTER_RATE (1gbit),
# VOCAB (100000), EMBED_DIM (64), SCHEMES ("dense zen agsparse auto
# zen_hier dense_zen"), SKIP (2), MODEL (the engine's shape options).
# Needs root and namespaces (tacl-cluster --check); exit 77 without.

set -u
build=${1:?usage: engine_words.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/engine_words}
HERE=$(cd "$(dirname "$0")" && pwd)
CLUSTER=$HERE/../tools/tacl-cluster
TRAIN=$build/engine/train
STEPS=${STEPS:-50}
INTER_RATE=${INTER_RATE:-1gbit}
VOCAB=${VOCAB:-100000}
EMBED_DIM=${EMBED_DIM:-64}
SCHEMES=${SCHEMES:-dense zen agsparse auto zen_hier dense_zen}
SKIP=${SKIP:-2}
MODEL=${MODEL:---ctx 8 --emb 32 --hidden 1024 --blocks 4 --batch 64}

# shellcheck source=engine_cluster.sh disable=SC2154
. "$HERE/engine_cluster.sh"
engine_cluster_setup engine_words
echo "engine_words: schemes $SCHEMES, $STEPS steps, vocab $VOCAB x" \
    "$EMBED_DIM, 2x2 at $INTER_RATE" >&2
# shellcheck disable=SC2016
"$CLUSTER" --nodes 2 --ranks-per-node 2 --inter-rate "$INTER_RATE" \
    --timeout 20000 -- sh -c '
    dir=$1 schemes=$2; shift 2
    for sc in $schemes; do
        "$@" --sparse-scheme "$sc" > "$dir/$sc.$TACL_RANK" 2>&1 || exit 1
    done' sh "$work" "$SCHEMES" "$TRAIN" $MODEL --strategy ZeRO-3 \
    --vocab "$VOCAB" --embed-dim "$EMBED_DIM" --steps "$STEPS" \
    > "$work/job.log" 2>&1 ||
    { echo "engine_words: the job failed:" >&2; tail -20 "$work/job.log" >&2; }
for sc in $SCHEMES; do
    cp "$work/$sc.0" "$out/$sc.log" 2> /dev/null
done

# One row a scheme from its step lines: the scheme that ran, the last
# loss, after SKIP steps the mean sync seconds and bytes, and tokens/s.
stats() {
    awk -v skip="$SKIP" '
        $1 == "step" { n = $2; loss = $4; ran = $20
                       if (n > skip) { s += $16; b += $18; t += 1 / $6; c++ } }
        END {
            if (c == 0) { print "- - - - -"; exit }
            printf "%s %s %.6f %.0f %.0f\n", ran, loss, s / c, b / c, c / t
        }' "$1"
}
{
    echo "2 nodes x 2 ranks, inter-node $INTER_RATE, ZeRO-3, vocab" \
        "$VOCAB x $EMBED_DIM, $STEPS steps (means after $SKIP)"
    echo
    echo "| scheme | ran | loss@$STEPS | sync s/step | sync bytes/step | tokens/s | sync vs dense |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
    base=
    for sc in $SCHEMES; do
        read -r ran loss secs bytes tps <<< "$(stats "$out/$sc.log" 2> /dev/null || echo "- - - - -")"
        [ "$sc" = dense ] && base=$secs
        awk -v sc="$sc" -v r="$ran" -v l="$loss" -v s="$secs" -v b="$bytes" \
            -v t="$tps" -v d="$base" 'BEGIN {
            ratio = (s + 0 > 0 && d + 0 > 0) ? sprintf("%.3f", s / d) : "-"
            printf "| %s | %s | %s | %s | %s | %s | %s |\n", sc, r, l, s, b,
                   t, ratio }'
    done
} | tee "$out/engine_words.md"
