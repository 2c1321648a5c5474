#!/bin/bash
# The training engine on one machine, 4 ranks under tacl-run, with two
# emulated nodes (TACL_NODE_ID per rank, so ranks 0-1 and 2-3 talk over
# the network transport) and the partition group = the node:
#   1. every PaRO strategy (with 2 micro-steps): the loss of each of 20
#      steps equals single-process training on the same global batch
#      within 1e-5 relative; state bytes per rank equal Table 2; intra-
#      and inter-group bytes per step equal Table 3 (ring algorithms);
#   2. ZeRO++ on ZeRO-3: hpZ exact; qwZ and 8-bit qgZ within 1e-2 of the
#      exact loss, 4-bit qgZ (alone and with hpZ and qwZ) within 0.15, at
#      each of 20 steps, and all three still converging over
#      200 steps (final loss within 5% of exact training's); cross-node
#      bytes against ZeRO++ Table 1, the scales' bytes stated;
#   3. a checkpoint saved by ZeRO-3 loads into PaRO-NIG (4 ranks) and into
#      a single process and continues with the same losses;
#   4. --group-size 2 (groups not tied to nodes), two ranks started by
#      torchrun's variables alone, and bad input.
#
# Usage: test_engine.sh TACL_RUN TRAIN

TACL_RUN=${1:?usage: test_engine.sh TACL_RUN TRAIN}
TRAIN=${2:?usage: test_engine.sh TACL_RUN TRAIN}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../common/checks.sh"
. "$HERE/formulas.sh"
engine_test_setup
MODEL=(--ctx 4 --emb 8 --hidden 32 --blocks 4 --batch 32 --lr 1e-2
       --data "$DATA")
N=4 M=2 S=2

# run4 LOG ARGS...: train on 4 ranks as 2 emulated nodes of 2.
run4() {
    local log=$1
    shift
    TACL_ALGO=$RING_ALGO "$TACL_RUN" -n 4 --timeout 240 -- sh -c \
        'TACL_NODE_ID=enginenode$((TACL_RANK / 2)) exec "$@"' sh \
        "$TRAIN" "${MODEL[@]}" "$@" > "$log" 2>&1
}

# expect_ok NAME RC LOG: the run succeeded (the log is shown if not).
expect_ok() {
    checks=$((checks + 1))
    if [ "$2" -ne 0 ]; then
        fail "$1: exit status $2"
        tail -20 "$3"
        return 1
    fi
    ok "$1 ran"
}

"$TRAIN" "${MODEL[@]}" --steps 20 > "$TMP/ref.log" 2>&1
expect_ok "single process" $? "$TMP/ref.log" || { finish; exit 1; }
losses_of "$TMP/ref.log" > "$TMP/ref.loss"

echo "=== every strategy, 4 ranks, 2 emulated nodes, $S micro-steps"
for st in $ALL_STRATEGIES; do
    run4 "$TMP/$st.log" --strategy "$st" --steps 20 --micro-steps $S
    expect_ok "$st" $? "$TMP/$st.log" || continue
    losses_of "$TMP/$st.log" > "$TMP/$st.loss"
    expect_close "$st" "$TMP/ref.loss" "$TMP/$st.loss" 1e-5
    check_run "$st" "$TMP/$st.log" "$st" $N $M $S 0
done
for alias in DDP:NNN ZeRO-1:NNG ZeRO-2:NGG ZeRO-3:GGG MiCS:III; do
    checks=$((checks + 1))
    if "$TRAIN" --strategy "${alias%%:*}" --steps 0 "${MODEL[@]}" |
        grep -q "^state"; then
        ok "alias ${alias%%:*} accepted"
    else
        fail "alias ${alias%%:*} refused"
    fi
done

echo "=== ZeRO++ on ZeRO-3"
run4 "$TMP/hpz.log" --strategy GGG --hpz --steps 20 --micro-steps $S
expect_ok "hpZ" $? "$TMP/hpz.log" && {
    losses_of "$TMP/hpz.log" > "$TMP/hpz.loss"
    expect_close "hpZ" "$TMP/ref.loss" "$TMP/hpz.loss" 1e-5
    check_run "hpZ" "$TMP/hpz.log" GGG $N $M $S 1
}
# The stated bounds, per step over 20 steps: 1e-2 with 8-bit values
# (qwZ's default, qgZ with --qgz-bits 8); 0.15 with qgZ's default 4 bits,
# whose noise Adam's normalisation amplifies on small gradients (the
# 200-step check below shows it still trains as well).
for q in "qwZ:--qwz:1e-2" "qgZ-8bit:--qgz --qgz-bits 8:1e-2" \
    "qgZ:--qgz:0.15" "hpZ+qwZ+qgZ:--hpz --qwz --qgz:0.15"; do
    IFS=: read -r name flags bound <<< "$q"
    # shellcheck disable=SC2086
    run4 "$TMP/$name.log" --strategy GGG $flags --steps 20
    expect_ok "$name" $? "$TMP/$name.log" || continue
    losses_of "$TMP/$name.log" > "$TMP/$name.loss"
    expect_close "$name" "$TMP/ref.loss" "$TMP/$name.loss" "$bound"
done

# Cross-node bytes, ZeRO++ Table 1.  ZeRO-3 sends 3 M across nodes (M =
# the model's bytes: forward all-gather, backward all-gather, gradient
# reduce-scatter, each g (N - 1) / N M on the world ring).  With hpZ the
# backward all-gather stays in the node; qwZ sends int8 values plus one
# float32 scale per 256 values of each rank's layer shard; qgZ's one
# cross-node hop sends int4 values of 1/M of each rank's gradient, (g -
# 1) / g of it, plus a scale per 256 values of each N-th of a layer.  In
# the float32 engine M = 4 Psi bytes, so int8 is M/4 and int4 M/8: 0.375
# M in all (ZeRO++'s 0.75 M is in float16 units: the same 1.5 Psi bytes).
"$TRAIN" "${MODEL[@]}" --steps 0 --batch 32 > "$TMP/layers.log" 2>&1
run4 "$TMP/z3bytes.log" --strategy GGG --steps 1
run4 "$TMP/zppbytes.log" --strategy GGG --hpz --qwz --qgz --steps 1
read -r _ _ layers <<< "$(grep '^layers' "$TMP/z3bytes.log")"
want=$(awk -v n=$N -v m=$M -v layers="$layers" 'BEGIN {
    g = n / m; k = split(layers, len, " ");
    for (i = 1; i <= k; i++) {
        psi += len[i]; c = len[i] / n;
        blocks += int((c + 255) / 256);
    }
    z3 = 3 * g * (n - 1) * 4 * psi / n;
    qw = g * (n - 1) * (psi / n + 4 * blocks) ;
    qg = n * ((g - 1) / g * (psi / m) / 2 + (g - 1) * 4 * blocks);
    printf "%.0f %.0f %.0f %.0f %.0f %.0f\n", z3, qw + qg, qw, qg,
        g * (n - 1) * 4 * blocks + n * (g - 1) * 4 * blocks, 4 * psi;
}')
read -r want_z3 want_zpp want_qw want_qg want_scales mbytes <<< "$want"
got_z3=$(awk '$1 == "step" { print $12 }' "$TMP/z3bytes.log")
got_zpp=$(awk '$1 == "step" { print $12 }' "$TMP/zppbytes.log")
checks=$((checks + 1))
if [ "$got_z3" = "$want_z3" ] && [ "$got_zpp" = "$want_zpp" ]; then
    ok "cross-node bytes per step: ZeRO-3 $got_z3 ($(awk -v a="$got_z3" \
        -v m="$mbytes" 'BEGIN { printf "%.3f", a / m }') M summed over" \
        "ranks), hpZ+qwZ+qgZ $got_zpp (qwZ $want_qw + qgZ $want_qg," \
        "of which scales $want_scales), ratio $(awk -v a="$got_z3" \
        -v b="$got_zpp" 'BEGIN { printf "%.2f", a / b }')"
else
    fail "cross-node bytes: ZeRO-3 $got_z3 (want $want_z3)," \
        "hpZ+qwZ+qgZ $got_zpp (want $want_zpp)"
fi

# Convergence over 200 steps with all three, against exact training.
"$TRAIN" "${MODEL[@]}" --steps 200 > "$TMP/ref200.log" 2>&1
run4 "$TMP/zpp200.log" --strategy GGG --hpz --qwz --qgz --steps 200
checks=$((checks + 1))
if paste <(losses_of "$TMP/ref200.log") <(losses_of "$TMP/zpp200.log") |
    awk 'NR == 1 { first = $2 } { a = $1; b = $2; n++ }
         END { printf "exact %.4f, hpZ+qwZ+qgZ %.4f (from %.4f)\n", a, b,
                      first;
               exit !(n == 200 && b < 0.7 * first && b < 1.05 * a) }'; then
    ok "hpZ+qwZ+qgZ converges over 200 steps (within 5% of exact)"
else
    fail "hpZ+qwZ+qgZ does not converge like exact training"
fi

echo "=== checkpoints"
run4 "$TMP/save.log" --strategy GGG --steps 10 --save "$TMP/ckpt"
expect_ok "ZeRO-3 saves after 10 steps" $? "$TMP/save.log"
run4 "$TMP/load.log" --strategy NIG --steps 10 --load "$TMP/ckpt"
expect_ok "PaRO-NIG loads it" $? "$TMP/load.log" && {
    tail -n 10 "$TMP/ref.loss" > "$TMP/ref.tail"
    losses_of "$TMP/load.log" > "$TMP/load.loss"
    expect_close "NIG after ZeRO-3's checkpoint" "$TMP/ref.tail" \
        "$TMP/load.loss" 1e-5
}
"$TRAIN" "${MODEL[@]}" --strategy DDP --steps 10 --load "$TMP/ckpt" \
    > "$TMP/load1.log" 2>&1
expect_ok "a single process loads it" $? "$TMP/load1.log" && {
    losses_of "$TMP/load1.log" > "$TMP/load1.loss"
    expect_close "single process after ZeRO-3's checkpoint" \
        "$TMP/ref.tail" "$TMP/load1.loss" 1e-5
}

echo "=== --group-size 2 on one node"
TACL_ALGO= "$TACL_RUN" -n 4 --timeout 120 -- "$TRAIN" "${MODEL[@]}" \
    --strategy IIG --group-size 2 --steps 20 > "$TMP/gs.log" 2>&1
expect_ok "IIG --group-size 2" $? "$TMP/gs.log" && {
    losses_of "$TMP/gs.log" > "$TMP/gs.loss"
    expect_close "IIG --group-size 2 (tuner's algorithms)" "$TMP/ref.loss" \
        "$TMP/gs.loss" 1e-5
}

echo "=== torchrun's variables (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)"
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket();
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for r in 0 1; do
    env -u TACL_RANK -u TACL_NRANKS -u TACL_ROOT_ADDR MASTER_ADDR=127.0.0.1 \
        MASTER_PORT="$port" RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r \
        timeout 120 "$TRAIN" "${MODEL[@]}" --strategy IIG --group-size 1 \
        --steps 5 > "$TMP/torchrun.$r" 2>&1 &
done
wait %1
rc0=$?
wait %2
expect_rc "two ranks from torchrun's variables" 0 $((rc0 | $?)) && {
    head -n 5 "$TMP/ref.loss" > "$TMP/ref.head"
    losses_of "$TMP/torchrun.0" > "$TMP/torchrun.loss"
    expect_close "IIG on 2 torchrun-style ranks" "$TMP/ref.head" \
        "$TMP/torchrun.loss" 1e-5
}

echo "=== bad input"
bad "invalid strategy GNN" 2 "invalid strategy" "$TRAIN" --strategy GNN
bad "unknown option" 2 "usage" "$TRAIN" --frobnicate
bad "missing text" 1 "cannot open" "$TRAIN" --data "$TMP/none"
bad "hpZ off ZeRO-3" 1 "ZeRO-3 (GGG) only" "$TRAIN" --strategy IIG --hpz
bad "batch not divisible" 1 "multiple of world" "$TRAIN" --batch 3 \
    --micro-steps 2
bad "group size not dividing" 1 "does not divide" "$TACL_RUN" -n 4 \
    --timeout 60 -- "$TRAIN" --group-size 3
bad "not a checkpoint" 1 "not an engine checkpoint" "$TRAIN" --load "$DATA"
finish
