#!/bin/bash
# Benchmark the training engine's strategies on the emulated cluster.
#
# For each layout (2x2 and 4x2 by default) and each of REPEAT launches,
# one tacl-cluster job with every node uplink shaped to INTER_RATE
# (1gbit) trains STEPS steps with every PaRO strategy and with ZeRO-3 +
# hpZ + qwZ + qgZ, one after the other (algorithms: the tuner's choice).
# The model (ctx 8, emb 32, hidden 1024, 4 blocks: 2.2 M parameters, 8.8
# MB in float32), the global batch (64) and 4 micro-steps make
# communication most of ZeRO-3's step at 1 Gbit/s; the script measures
# the compute-only time of one rank (one process alone on the machine,
# the same micro-batches; the ranks of a job share the cores, so this
# underestimates their compute) and prints the share of ZeRO-3's step it
# leaves to communication.
# engine_bench.py prints, per layout, tokens/s (median of the launches,
# steps after the first), its ratio to ZeRO-3, peak RSS and model-state
# bytes of rank 0, intra- and inter-node bytes per step, and which
# strategy PaRO's principles recommend against which ran fastest.
#
# Usage: perf/engine_bench.sh BUILD_DIR [OUT_DIR]
# Environment: LAYOUTS ("2x2 4x2"), REPEAT (3), STEPS (6), INTER_RATE.
# Needs root and namespaces (tacl-cluster --check); exit 77 without.

set -u
build=${1:?usage: engine_bench.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/engine_bench}
HERE=$(cd "$(dirname "$0")" && pwd)
CLUSTER=$HERE/../tools/tacl-cluster
TRAIN=$build/engine/train
LAYOUTS=${LAYOUTS:-2x2 4x2}
REPEAT=${REPEAT:-3}
STEPS=${STEPS:-6}
INTER_RATE=${INTER_RATE:-1gbit}
STRATEGIES="NNN NNI NNG NII NIG NGG INI ING III IIG IGG GNG GIG GGG ZeRO++"
MODEL="--ctx 8 --emb 32 --hidden 1024 --blocks 4 --batch 64 --micro-steps 4"

if ! "$CLUSTER" --check >/dev/null 2>&1; then
    echo "engine_bench: tacl-cluster cannot run here (root and" \
        "namespaces needed)" >&2
    exit 77
fi
[ -x "$TRAIN" ] || { echo "engine_bench: no $TRAIN (libopenblas-dev?)" >&2;
                     exit 2; }
# The nodes see the host's /tmp; results are copied to OUT_DIR at the end.
work=$(mktemp -d /tmp/tacl-engine-bench.XXXXXX) || exit 1
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
rm -f "$out"/*.log
for layout in $LAYOUTS; do
    nodes=${layout%x*} per=${layout#*x}
    n=$((nodes * per))
    for rep in $(seq 1 "$REPEAT"); do
        # Compute only: one process running one rank's micro-batches.
        # shellcheck disable=SC2086
        "$TRAIN" $MODEL --batch $((64 / n)) --steps "$STEPS" \
            > "$out/compute.$layout.$rep.log" 2>&1
        echo "engine_bench: $layout launch $rep of $REPEAT" >&2
        dir="$work/$layout.$rep"
        mkdir -p "$dir"
        # shellcheck disable=SC2016
        "$CLUSTER" --nodes "$nodes" --ranks-per-node "$per" \
            --inter-rate "$INTER_RATE" --timeout 1200 -- sh -c '
            dir=$1; shift
            for st in '"$STRATEGIES"'; do
                flags="--strategy $st"
                [ "$st" = ZeRO++ ] && flags="--strategy GGG --hpz --qwz --qgz"
                "$@" $flags > "$dir/$st.$TACL_RANK" 2>&1 || exit 1
            done' sh "$dir" "$TRAIN" $MODEL --steps "$STEPS" \
            > "$dir/job.log" 2>&1 ||
            echo "engine_bench: $layout launch $rep failed" >&2
        for st in $STRATEGIES; do
            cp "$dir/$st.0" "$out/$layout.$rep.$st.log" 2>/dev/null
        done
    done
done
/usr/bin/python3 "$HERE/engine_bench.py" "$out" "$LAYOUTS" "$STRATEGIES" \
    | tee "$out/engine_bench.md"
