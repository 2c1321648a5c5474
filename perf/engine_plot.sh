#!/bin/bash
# Loss against step for every strategy, on one chart: one process, then
# every PaRO strategy and ZeRO-3 with hpZ+qwZ+qgZ on 4 local ranks as two
# emulated nodes (TACL_NODE_ID), 200 steps each with the tests' small
# model, into docs/engine_loss.svg (engine_plot.py draws it).  The exact
# strategies lie on the single-process curve (the tests bound the gap at
# 1e-5 relative); the quantized run is the one that departs from it.
#
# Usage: perf/engine_plot.sh BUILD_DIR [OUT.svg]
set -u
build=${1:?usage: engine_plot.sh BUILD_DIR [OUT.svg]}
HERE=$(cd "$(dirname "$0")" && pwd)
svg=${2:-$HERE/../docs/engine_loss.svg}
TRAIN=$build/engine/train
STEPS=${STEPS:-200}
MODEL=(--ctx 4 --emb 8 --hidden 32 --blocks 4 --batch 32 --lr 1e-2
       --steps "$STEPS")
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
"$TRAIN" "${MODEL[@]}" > "$work/single.log" || exit 1
curves=("single process=$work/single.log")
for st in NNN NNI NNG NII NIG NGG INI ING III IIG IGG GNG GIG GGG ZeRO++; do
    flags=(--strategy "$st")
    [ "$st" = ZeRO++ ] && flags=(--strategy GGG --hpz --qwz --qgz)
    "$build/tools/tacl-run" -n 4 -- sh -c \
        'TACL_NODE_ID=plotnode$((TACL_RANK / 2)) exec "$@"' sh \
        "$TRAIN" "${MODEL[@]}" "${flags[@]}" > "$work/$st.log" || exit 1
    curves+=("$st (4 ranks)=$work/$st.log")
done
/usr/bin/python3 "$HERE/engine_plot.py" "$svg" \
    "Engine: loss per step, every strategy (2 nodes x 2 ranks) and one process" \
    "${curves[@]}" && echo "engine_plot: wrote $svg"
