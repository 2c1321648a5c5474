#!/bin/bash
# Gradient compression in the engine (issue 30), on 4 ranks under
# tacl-run as 2 emulated nodes of 2 (TACL_NODE_ID), the partition group
# the node, 20 steps of the small model of test_engine.sh:
#   1. ZeRO-3 and MiCS, each with fp16, int8 and top-k 1% (error feedback
#      on), each with --plan none, fusion and full: the run succeeds, the
#      loss falls (step 20 below 0.9 x step 1), and stays near the
#      uncompressed run's: fp16 within 1e-3 relative at every step, int8
#      within 1e-2, top-k 1% (a coarse compression of a tiny model) at
#      step 20 within 1.5 x;
#   2. plans none and fusion really compress: fewer bytes cross nodes per
#      step than uncompressed; fusion and full print their plan and the
#      lines of the dense and the encoded reduce-scatter they timed (and
#      for MiCS of the all-reduce across groups) and the measured
#      counterpart of the predicted micro-step, and
#      full's predicted step is never slower than uncompressed;
#   3. error feedback is used: top-k with and without it agree for two
#      steps and differ later; with --warmup-steps 5 the first six
#      losses are the uncompressed run's, later ones differ;
#   4. which hops carry encoded data (--compress-hops): by default only
#      those between nodes, so ZeRO-3 sends fewer bytes between nodes than
#      with every hop encoded and MiCS's reduce-scatter inside the node
#      goes dense (more bytes inside the node, the same between nodes);
#      inside one node "inter" is the uncompressed run, "auto" still
#      compresses; nodes of 2 and 1 ranks: "inter" refused, naming why,
#      "auto" runs flat;
#   5. bad input: unknown codec, bad density and bits, --plan without
#      --compress, an unknown plan, strategies that do not reduce-scatter
#      their gradients, and --qgz with --compress, each named.
#
# Usage: test_engine_compress.sh TACL_RUN TRAIN

TACL_RUN=${1:?usage: test_engine_compress.sh TACL_RUN TRAIN}
TRAIN=${2:?usage: test_engine_compress.sh TACL_RUN TRAIN}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../common/checks.sh"
. "$HERE/formulas.sh"
engine_test_setup
MODEL=(--ctx 4 --emb 8 --hidden 32 --blocks 4 --batch 32 --lr 1e-2
       --steps 20 --data "$DATA")

# run4 LOG ARGS...: train on 4 ranks as 2 emulated nodes of 2.
run4() {
    local log=$1
    shift
    "$TACL_RUN" -n 4 --timeout 120 -- sh -c \
        'TACL_NODE_ID=enginenode$((TACL_RANK / 2)) exec "$@"' sh \
        "$TRAIN" "${MODEL[@]}" "$@" > "$log" 2>&1
}

# ran NAME RC LOG: one check, that the run succeeded (else its log's end).
ran() {
    expect_rc "$1 ran" 0 "$2"
    [ "$2" -eq 0 ] || { tail -5 "$3"; return 1; }
}

# step_field LOG STEP FIELD: a field of a step line (4 loss, 12 inter
# bytes).
step_field() {
    awk -v s="$2" -v f="$3" '$1 == "step" && $2 == s { print $f }' "$1"
}

# same_then_apart NAME A B K WHAT: one check, that loss lists A and B
# (20 steps) agree to the printed digit for steps 1-K and differ in some
# later step; WHAT says so when they do.
same_then_apart() {
    checks=$((checks + 1))
    if paste "$2" "$3" | awk -v k="$4" '
        NR <= k && $1 != $2 { bad = 1 }
        NR > k && $1 != $2 { differ++ }
        END { exit (bad || NR != 20 || differ == 0) }'; then
        ok "$1: $5"
    else
        fail "$1: not $5; losses:"
        paste "$2" "$3" | head -$(($4 + 2))
    fi
}

# expect_ratio NAME GOT REF LIMIT: GOT <= LIMIT x REF.
expect_ratio() {
    checks=$((checks + 1))
    if awk -v g="$2" -v r="$3" -v l="$4" \
        'BEGIN { exit !(g != "" && r != "" && g <= l * r) }'; then
        ok "$1: $2 <= $4 x $3"
    else
        fail "$1: $2 is not <= $4 x $3"
    fi
}

# expect_timed NAME LOG PREFIX K CODEC: LOG has a line starting PREFIX
# whose fields K+1..K+10 read "dense A s + B s/B, CODEC A s + B s/B",
# each line costing time and neither falling with size.
expect_timed() {
    if awk -v p="$3" -v k="$4" -v c="$5" 'index($0, p) == 1 &&
            $(k + 6) == c && $(k + 1) + $(k + 4) > 0 &&
            $(k + 7) + $(k + 10) > 0 && $(k + 4) >= 0 && $(k + 10) >= 0 {
            found = 1 }
            END { exit !found }' "$2"; then
        ok "$1"
    else
        fail "$1: no such line: $(grep "^$3" "$2")"
    fi
}

for st in ZeRO-3 MiCS; do
    ref=$TMP/$st.ref.log
    run4 "$ref" --strategy "$st"
    ran "$st uncompressed" $? "$ref" || continue
    losses_of "$ref" > "$ref.loss"
    for codec in fp16 int8 topk; do
        for plan in none fusion full; do
            name="$st $codec plan $plan"
            log=$TMP/$st.$codec.$plan.log
            run4 "$log" --strategy "$st" --compress "$codec" --plan "$plan"
            ran "$name" $? "$log" || continue
            losses_of "$log" > "$log.loss"
            l1=$(step_field "$log" 1 4)
            l20=$(step_field "$log" 20 4)
            expect_ratio "$name: the loss falls" "$l20" "$l1" 0.9
            case $codec in
            fp16 | int8)
                rel=1e-3
                [ "$codec" = int8 ] && rel=1e-2
                expect_close "$name" "$ref.loss" "$log.loss" $rel \
                    uncompressed
                ;;
            topk)
                expect_ratio "$name: loss at step 20 near uncompressed" \
                    "$l20" "$(step_field "$ref" 20 4)" 1.5
                ;;
            esac
            if [ "$plan" != full ]; then
                expect_ratio "$name: compressed (inter-node bytes a step)" \
                    "$(step_field "$log" 20 12)" \
                    "$(step_field "$ref" 20 12)" 0.95
            fi
            if [ "$plan" != none ]; then
                expect_grep "$name: prints the plan" \
                    "^plan $plan codec $codec groups [1-9]" "$log"
                # plan lines: reduce-scatter dense A s + B s/B, CODEC A s
                # + B s/B: both calls timed, each costing time (on this
                # tiny model a line's slope may be lost in the noise).
                expect_timed "$name: the plan priced by both calls, timed" \
                    "$log" 'plan lines:' 4 "$codec"
                # MiCS's groups are also all-reduced across groups, which
                # is where its compression pays: that call timed too.
                [ "$st" = MiCS ] &&
                    expect_timed "$name: the all-reduce across groups timed" \
                        "$log" 'plan lines across groups:' 14 "$codec"
                # The prediction's measured counterpart, after the steps.
                if awk '$1 == "plan" && $2 == "measured" && $3 > 0 &&
                        $9 > 0 { found = 1 } END { exit !found }' "$log"; then
                    ok "$name: prints the measured micro-step"
                else
                    fail "$name: no measured micro-step:" \
                        "$(grep '^plan measured' "$log")"
                fi
            fi
            if [ "$plan" = full ]; then
                # plan predicted P ms a micro-step, uncompressed U ms ...
                read -r _ _ pred _ _ _ _ unc _ < <(grep '^plan predicted' \
                    "$log")
                expect_ratio "$name: predicted no slower than uncompressed" \
                    "$pred" "$unc" 1.0000001
            fi
        done
    done
done

# Error feedback: the residual a step leaves is what the next step's
# encoding adds back, so runs with and without it agree for two steps
# (nothing is left over before the first update) and differ from the
# third.  (On this model and 20 steps, with Adam, the run without it is
# not measurably worse, so the loss bounds alone would not notice it gone.)
for st in ZeRO-3 MiCS; do
    name="$st topk plan none"
    log=$TMP/$st.topk.none.log
    run4 "$log.noef" --strategy "$st" --compress topk --no-error-feedback
    ran "$name without error feedback" $? "$log.noef" || continue
    losses_of "$log.noef" > "$log.noef.loss"
    same_then_apart "$name" "$log.loss" "$log.noef.loss" 2 \
        "error feedback leaves steps 1-2 alone, changes later ones"
done

# Warm-up (--warmup-steps, 1-bit Adam's freeze_step): steps 1-5 run
# uncompressed, so the losses of steps 1-6 are the uncompressed run's
# to the last printed digit (step 6's compressed reduction first shows
# in step 7's loss), and later ones are not.
for st in ZeRO-3 MiCS; do
    name="$st topk --warmup-steps 5"
    log=$TMP/$st.topk.warm.log
    run4 "$log" --strategy "$st" --compress topk --warmup-steps 5
    ran "$name" $? "$log" || continue
    losses_of "$log" > "$log.loss"
    same_then_apart "$name" "$TMP/$st.ref.log.loss" "$log.loss" 6 \
        "steps 1-6 as uncompressed, later ones compressed"
    expect_grep "$name: says so" "warmup 5 hops" "$log"
done

# Hops.  The default (auto) runs above were the inter-node route.
for st in ZeRO-3 MiCS; do
    name="$st topk --compress-hops all"
    log=$TMP/$st.topk.all.log
    run4 "$log" --strategy "$st" --compress topk --compress-hops all
    ran "$name" $? "$log" || continue
    losses_of "$log" > "$log.loss"
    auto=$TMP/$st.topk.none.log
    expect_grep "$st topk: the default hops said" "hops auto$" "$auto"
    checks=$((checks + 1))
    if ! cmp -s "$auto.loss" "$log.loss"; then
        ok "$name: other losses than the default's"
    else
        fail "$name: the same losses as the default's"
    fi
    a_intra=$(step_field "$auto" 20 10)
    a_inter=$(step_field "$auto" 20 12)
    f_intra=$(step_field "$log" 20 10)
    f_inter=$(step_field "$log" 20 12)
    checks=$((checks + 1))
    if [ "$st" = ZeRO-3 ] && [ "$a_inter" -lt "$f_inter" ]; then
        ok "$st: fewer bytes between nodes encoding only there" \
            "($a_inter < $f_inter)"
    elif [ "$st" = MiCS ] && [ "$a_inter" -eq "$f_inter" ] &&
        [ "$a_intra" -gt "$f_intra" ]; then
        ok "$st: the group's reduce-scatter dense inside the node" \
            "(intra $a_intra > $f_intra, inter $a_inter both)"
    else
        fail "$st: bytes a step, default intra $a_intra inter $a_inter," \
            "all hops intra $f_intra inter $f_inter"
    fi
done

# One node: nothing is between nodes, so "inter" is the dense reduction
# (the uncompressed losses) and "auto" compresses as asked.
run1() {
    local log=$1
    shift
    "$TACL_RUN" -n 4 --timeout 120 -- "$TRAIN" "${MODEL[@]}" "$@" \
        > "$log" 2>&1
}
one=$TMP/one
run1 "$one.ref" --strategy ZeRO-3
ran "one node uncompressed" $? "$one.ref" && losses_of "$one.ref" > "$one.ref.loss"
run1 "$one.inter" --strategy ZeRO-3 --compress topk --compress-hops inter
if ran "one node, --compress-hops inter" $? "$one.inter"; then
    losses_of "$one.inter" > "$one.inter.loss"
    expect_close "one node, inter" "$one.ref.loss" "$one.inter.loss" 1e-6 \
        uncompressed
fi
run1 "$one.auto" --strategy ZeRO-3 --compress topk
if ran "one node, auto" $? "$one.auto"; then
    losses_of "$one.auto" > "$one.auto.loss"
    same_then_apart "one node, auto" "$one.ref.loss" "$one.auto.loss" 1 \
        "compresses (step 1 as uncompressed, later steps not)"
fi

# Nodes of 2 and 1 ranks: no inter-node route.
run3() {
    local log=$1
    shift
    "$TACL_RUN" -n 3 --timeout 120 -- sh -c \
        'TACL_NODE_ID=enginenode$((TACL_RANK / 2)) exec "$@"' sh \
        "$TRAIN" "${MODEL[@]}" --batch 30 --group-size 1 --strategy ZeRO-3 \
        --compress topk "$@" \
        > "$log" 2>&1
}
run3 "$TMP/uneven.inter" --compress-hops inter
expect_rc "uneven nodes, inter refused" 1 $?
expect_grep "uneven nodes, inter: says why" \
    "compress-hops inter needs the same number of ranks on every node .3 ranks on 2 nodes, 1 to 2 a node." \
    "$TMP/uneven.inter"
run3 "$TMP/uneven.auto"
ran "uneven nodes, auto runs flat" $? "$TMP/uneven.auto"

echo "=== bad input"
bad "unknown hops" 2 "\-\-compress-hops wants auto, inter or all, not 'most'" \
    "$TRAIN" --compress topk --compress-hops most
bad "--compress-hops without --compress" 2 "need --compress CODEC" \
    "$TRAIN" --compress-hops inter
bad "unknown codec" 2 "no codec called 'zip'" "$TRAIN" --compress zip
bad "density 0" 2 "\-\-density wants a share in (0, 1]" "$TRAIN" \
    --compress topk --density 0
bad "density 1.5" 2 "\-\-density wants a share in (0, 1]" "$TRAIN" \
    --compress topk --density 1.5
bad "int8 with 4 bits" 2 "int8 quantizes to 8 bits" "$TRAIN" \
    --compress int8 --bits 4
bad "--plan without --compress" 2 "need --compress CODEC" "$TRAIN" \
    --plan full
bad "--warmup-steps without --compress" 2 "need --compress CODEC" \
    "$TRAIN" --warmup-steps 3
bad "unknown plan" 2 "\-\-plan wants none, fusion or full" "$TRAIN" \
    --compress fp16 --plan most
bad "DDP does not reduce-scatter" 2 \
    "strategy DDP: --compress needs a strategy that reduce-scatters" \
    "$TRAIN" --strategy DDP --compress fp16
bad "IIG reduces in two hops" 2 \
    "strategy IIG: --compress needs a strategy" "$TRAIN" --strategy IIG \
    --compress topk
bad "qgZ and --compress" 2 "\-\-compress and --qgz both compress" \
    "$TRAIN" --strategy ZeRO-3 --qgz --compress int8
bad "no profiled step" 2 "\-\-profile-steps must be at least 1" \
    "$TRAIN" --compress fp16 --plan fusion --profile-steps 0
finish
