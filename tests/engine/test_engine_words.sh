#!/bin/bash
# The engine's word embedding (train --vocab, issue 31): a replicated
# table whose row-sparse gradient goes through tacl_sparse_allreduce.
#   1. one process learns with it: the loss falls, and over 200 steps
#      the table learns the clue word each sample carries (its last
#      loss is lower than the same model's without words);
#   2. on 4 ranks as 2 emulated nodes and on 2 ranks of one node, every
#      scheme's losses equal single-process training within 1e-5 (the
#      sums' order differs from one process's); ZEN and AGSPARSE are bit
#      for bit equal to each other (tacl.h: both are the rank-order sum);
#      DENSE (the engine's dense all-reduce of the table) sums in the
#      all-reduce's order, so on 4 ranks it is held to 1e-5, and on 2
#      ranks, where two addends give one float in any order, every
#      scheme is bit for bit the same; AUTO names the scheme it ran;
#      MiCS with 2 micro-steps (rows accumulated over them) as well;
#   3. every rank ends with the same table (a checksum each rank prints),
#      and the sparse syncs (ZEN, AUTO's pick) send fewer bytes than the
#      dense one, but some;
#   4. a killed rank resumed from a snapshot continues bit for bit, so
#      the table and its Adam moments are in the snapshot;
#   5. bad input: an unknown scheme, bad --vocab and --embed-dim.
#
# Usage: test_engine_words.sh TACL_RUN TRAIN

TACL_RUN=${1:?usage: test_engine_words.sh TACL_RUN TRAIN}
TRAIN=${2:?usage: test_engine_words.sh TACL_RUN TRAIN}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../common/checks.sh"
. "$HERE/formulas.sh"
engine_test_setup
KEY=wordseng$$
trap 'rm -rf "$TMP"; rm -f /dev/shm/tacl-snap-$KEY-*' EXIT
STEPS=20
MODEL=(--ctx 4 --emb 8 --hidden 32 --blocks 4 --batch 32 --lr 1e-2
       --vocab 1000 --embed-dim 8 --steps $STEPS --data "$DATA")

# runn N LOG ARGS...: train on N local ranks; 4 ranks as 2 emulated
# nodes of 2 (so the hierarchical schemes and the network path run).
runn() {
    local n=$1 log=$2
    shift 2
    "$TACL_RUN" -n "$n" --timeout 120 -- sh -c \
        'TACL_NODE_ID=wordsnode$((TACL_RANK / 2)) exec "$@"' sh \
        "$TRAIN" "${MODEL[@]}" "$@" > "$log" 2>&1
}

# near_ref NAME LOG: LOG's losses within 1e-5 of one process's.
near_ref() {
    losses_of "$2" > "$TMP/got.loss"
    expect_close "$1" "$TMP/ref.loss" "$TMP/got.loss" 1e-5 "one process"
}

# bytes_of LOG: the embedding's bytes summed over the steps.
bytes_of() {
    awk '$1 == "step" { b += $18 } END { printf "%.0f\n", b }' "$1"
}

echo "=== one process"
"$TRAIN" "${MODEL[@]}" > "$TMP/ref.log" 2>&1
expect_rc "one process with words" 0 $?
losses_of "$TMP/ref.log" > "$TMP/ref.loss"
checks=$((checks + 1))
if awk 'NR <= 5 { a += $1 } NR > n - 5 { b += $1 }
        END { exit !(n >= 10 && b < 0.8 * a) }' n="$STEPS" "$TMP/ref.loss"
then
    ok "the loss falls: $(head -1 "$TMP/ref.loss") to" \
        "$(tail -1 "$TMP/ref.loss")"
else
    fail "the loss did not fall by a fifth: $(xargs < "$TMP/ref.loss")"
fi
# tail_mean LOG: the mean loss of steps 151..200.
tail_mean() {
    awk '$1 == "step" && $2 > 150 { s += $4; n++ }
         END { if (n) printf "%.4f\n", s / n }' "$1"
}
LONG=(--ctx 4 --emb 8 --hidden 32 --blocks 4 --batch 32 --lr 1e-2
      --steps 200 --data "$DATA")
"$TRAIN" "${LONG[@]}" > "$TMP/plain200.log" 2>&1
"$TRAIN" "${LONG[@]}" --vocab 1000 --embed-dim 8 > "$TMP/words200.log" 2>&1
plain=$(tail_mean "$TMP/plain200.log")
words=$(tail_mean "$TMP/words200.log")
checks=$((checks + 1))
if [ -n "$plain" ] && [ -n "$words" ] &&
   awk -v p="$plain" -v w="$words" 'BEGIN { exit !(w < p - 0.2) }'; then
    ok "the table learns: steps 151..200 at loss $words, $plain without it"
else
    fail "the table learned nothing: loss '$words' with it, '$plain'" \
        "without (want 0.2 lower)"
fi
expect_match "the step line reports the sync" -E \
    "^step 1 .* embed_s [0-9.]+ embed_bytes [0-9]+ embed_scheme " \
    "$TMP/ref.log"

for n in 4 2; do
    echo "=== $n ranks"
    for sc in zen agsparse dense auto; do
        runn $n "$TMP/$sc$n.log" --sparse-scheme $sc
        rc=$?
        expect_rc "$n ranks, --sparse-scheme $sc" 0 $rc
        [ $rc -eq 0 ] || tail -5 "$TMP/$sc$n.log"
        near_ref "$n ranks, $sc" "$TMP/$sc$n.log"
        replicas_agree "$n ranks, $sc" "$TMP/$sc$n.log" $n
    done
    same_bits "$n ranks: zen and agsparse" "$TMP/zen$n.log" \
        "$TMP/agsparse$n.log"
    want="^summary .* embed_s [0-9.]+ embed_bytes [1-9][0-9]*"
    expect_match "$n ranks: the summary reports dense's time and bytes" \
        -E "$want embed_scheme dense$" "$TMP/dense$n.log"
    expect_match "$n ranks: auto names the scheme it ran" -E \
        "^step 1 .* embed_scheme (zen|agsparse|dense|zen_hier)$" \
        "$TMP/auto$n.log"
    # AUTO runs ZEN_HIER on the 2 emulated nodes: on the node and rail
    # communicators, whose bytes count too.  A step's rows (up to 128 of
    # 1000 a rank) are more than a hundredth of the table's bytes.
    db=$(bytes_of "$TMP/dense$n.log")
    for sc in zen auto; do
        checks=$((checks + 1))
        sb=$(bytes_of "$TMP/$sc$n.log")
        if [ "$sb" -gt $((db / 100)) ] && [ "$sb" -lt "$db" ]; then
            ok "$n ranks: $sc sent $sb bytes for the table, dense $db"
        else
            fail "$n ranks: $sc sent $sb bytes, dense $db"
        fi
    done
done
for sc in dense auto; do
    same_bits "2 ranks: zen and $sc" "$TMP/zen2.log" "$TMP/${sc}2.log"
done
# Rows of two micro-steps accumulate before the sync (a sample's place
# in the global batch, so its words, do not depend on the split).
runn 4 "$TMP/mics.log" --strategy MiCS --micro-steps 2 --sparse-scheme zen
expect_rc "4 ranks, MiCS, 2 micro-steps" 0 $?
near_ref "4 ranks, MiCS, 2 micro-steps" "$TMP/mics.log"
replicas_agree "4 ranks, MiCS, 2 micro-steps" "$TMP/mics.log" 4

echo "=== a killed rank resumed from a snapshot"
SNAP=(--strategy ZeRO-3 --snapshot-every 2 --steps 12)
runn 4 "$TMP/full.log" "${SNAP[@]}" --snapshot-key "$KEY-full" \
    --sparse-scheme zen
expect_rc "uninterrupted run" 0 $?
runn 4 "$TMP/kill.log" "${SNAP[@]}" --snapshot-key "$KEY-mem" \
    --sparse-scheme zen --kill-at 1:7
expect_rc "rank 1 killed after step 7" 137 $?
runn 4 "$TMP/resume.log" "${SNAP[@]}" --snapshot-key "$KEY-mem" \
    --sparse-scheme zen --resume
expect_rc "resumed run" 0 $?
step=$(awk '$1 == "resume:" && $2 == "restored" { print $4 }' \
    "$TMP/resume.log")
checks=$((checks + 1))
if [ -n "$step" ] && [ "$step" -ge 2 ] &&
   cmp -s <(bits_of "$TMP/full.log" | tail -n $((12 - step))) \
       <(bits_of "$TMP/resume.log") &&
   [ "$(sums_of "$TMP/full.log")" = "$(sums_of "$TMP/resume.log")" ]; then
    ok "resumed from step $step: steps $((step + 1))..12 and the table" \
        "bit for bit"
else
    fail "resume from step '$step' differs from the uninterrupted run"
    paste <(bits_of "$TMP/full.log") <(bits_of "$TMP/resume.log")
fi

echo "=== bad input"
BAD=("$TRAIN" --ctx 4 --emb 8 --hidden 32 --blocks 4 --steps 1
     --data "$DATA")
bad "an unknown scheme" 2 "unknown scheme 'bogus'" \
    "${BAD[@]}" --vocab 100 --sparse-scheme bogus
bad "--vocab 1" 2 "--vocab wants" "${BAD[@]}" --vocab 1
bad "--vocab abc" 2 "not 'abc'" "${BAD[@]}" --vocab abc
bad "a vocabulary too large" 1 "--vocab 99999999" "${BAD[@]}" --vocab 99999999
bad "--embed-dim 0" 2 "--embed-dim wants" "${BAD[@]}" --vocab 100 --embed-dim 0
bad "a table too large" 1 "more than" \
    "${BAD[@]}" --vocab 4000000 --embed-dim 1000
bad "--sparse-scheme without --vocab" 2 "need --vocab" \
    "${BAD[@]}" --sparse-scheme zen
bad "--vocab with a checkpoint" 2 "checkpoints" \
    "${BAD[@]}" --vocab 100 --save "$TMP/ckpt"

finish
