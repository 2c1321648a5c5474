#!/bin/bash
# The training engine on emulated clusters (tacl-cluster): 2 nodes x 2
# ranks, 4 x 2 and 3 x 3, the partition group = the node.  In each
# layout every PaRO strategy trains 20 steps with 2 micro-steps under
# ring algorithms; the loss of every step equals single-process training
# on the same global batch within 1e-5 relative, the state bytes of every
# rank equal PaRO Table 2 and the intra- and inter-node bytes of every
# step the Table 3 formulas (tests/engine/formulas.sh).  ZeRO-3 with hpZ
# must match it as closely, ZeRO-3 with hpZ+qwZ+qgZ within the bound
# test_engine.sh states for it.  One cluster job per layout runs all the
# strategies one after the other.
#
# Skips (exit 77) where `tacl-cluster --check` fails (not root, no
# namespaces).  ENGINE_LAYOUTS ("2x2 4x2 3x3") picks layouts.
#
# Usage: test_engine_cluster.sh TACL_CLUSTER TRAIN

TOOL=${1:?usage: test_engine_cluster.sh TACL_CLUSTER TRAIN}
TRAIN=${2:?usage: test_engine_cluster.sh TACL_CLUSTER TRAIN}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../common/checks.sh"
. "$HERE/formulas.sh"

if ! "$TOOL" --check; then
    echo "SKIP: tacl-cluster --check failed: the emulated cluster needs" \
        "root and network, PID, IPC and mount namespaces"
    exit 77
fi
DATA=${ENGINE_DATA:-/usr/share/common-licenses/GPL-3}
if [ ! -r "$DATA" ]; then
    echo "SKIP: the training text $DATA (Debian's base-files) is missing"
    exit 77
fi
# Every node sees the host's /tmp, so per-run files go there.
TMP=$(mktemp -d /tmp/tacl-engine.XXXXXX) || exit 1
trap 'rm -rf "$TMP"' EXIT
S=2

for layout in ${ENGINE_LAYOUTS:-2x2 4x2 3x3}; do
    nodes=${layout%x*} per=${layout#*x}
    n=$((nodes * per))
    batch=$((n * S * 4))
    model=(--ctx 4 --emb 8 --hidden 32 --blocks 4 --batch $batch
           --lr 1e-2 --data "$DATA" --steps 20 --micro-steps $S)
    dir="$TMP/$layout"
    mkdir -p "$dir"
    echo "=== $layout: $n ranks, batch $batch"
    "$TRAIN" "${model[@]}" --micro-steps 1 > "$dir/ref.log" 2>&1
    losses_of "$dir/ref.log" > "$dir/ref.loss"
    # Each rank runs every strategy, its output in DIR/STRATEGY.RANK.
    # Then ZeRO-3 with hpZ (exact) and with hpZ+qwZ+qgZ (quantized).
    TACL_ALGO=$RING_ALGO "$TOOL" --nodes "$nodes" --ranks-per-node "$per" \
        --timeout 500 -- sh -c 'dir=$1; shift; for st in '"$ALL_STRATEGIES"'
            do "$@" --strategy $st > "$dir/$st.$TACL_RANK" 2>&1 || exit 1
            done
            "$@" --strategy GGG --hpz > "$dir/hpZ.$TACL_RANK" 2>&1 || exit 1
            "$@" --strategy GGG --hpz --qwz --qgz \
                > "$dir/ZeRO++.$TACL_RANK" 2>&1' \
        sh "$dir" "$TRAIN" "${model[@]}" > "$dir/job.log" 2>&1
    expect_rc "$layout: every strategy trains" 0 $? || tail -20 "$dir/job.log"
    for st in $ALL_STRATEGIES; do
        cat "$dir/$st".* > "$dir/$st.log" 2>/dev/null
        losses_of "$dir/$st.log" > "$dir/$st.loss"
        checks=$((checks + 1))
        if out=$(close_losses "$dir/ref.loss" "$dir/$st.loss" 1e-5); then
            ok "$layout $st: losses as single-process training ($out)"
        else
            fail "$layout $st: losses differ ($out)"
            tail -5 "$dir/$st.log"
        fi
        check_run "$layout $st" "$dir/$st.log" "$st" $n "$per" $S 0
    done
    # The bounds test_engine.sh states: hpZ exact, hpZ+qwZ+qgZ (4-bit
    # gradients) within 0.15 relative per step.
    for v in "hpZ:1e-5" "ZeRO++:0.15"; do
        name=${v%%:*} bound=${v#*:}
        cat "$dir/$name".* > "$dir/$name.log" 2>/dev/null
        losses_of "$dir/$name.log" > "$dir/$name.loss"
        checks=$((checks + 1))
        if out=$(close_losses "$dir/ref.loss" "$dir/$name.loss" "$bound")
        then
            ok "$layout $name: losses within $bound of single-process ($out)"
        else
            fail "$layout $name: losses differ ($out)"
            tail -5 "$dir/$name.log"
        fi
    done
done
finish
