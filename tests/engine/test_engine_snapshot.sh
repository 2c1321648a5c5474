#!/bin/bash
# The engine's in-memory snapshots (train --snapshot-*, --resume) on 4
# local ranks under tacl-run, ZeRO-3, a snapshot every 2 steps:
#   1. a run killed (rank 1 SIGKILLs itself after step 7) and restarted
#      with --resume restores a saved step from peer memory, and every
#      loss from there on is bit-for-bit the uninterrupted run's
#      (loss_bits, the double's bits);
#   2. the same with the node-local stores gone (as when every node is
#      lost): --resume reads the files of --snapshot-file, with the same
#      bit-for-bit losses;
#   1c. the same with paced saves (--snapshot-pace: skipped, not waited
#      for, while the previous save's copies travel);
#   3. --resume with nothing saved says so and trains from step 0, with
#      the uninterrupted run's losses;
#   5. with gradient compression (top-k 1%, error feedback) the residuals
#      and the plan are saved too: a resumed run's losses are the
#      uninterrupted run's bit for bit (plan none), and the killed run's
#      up to its kill (plan fusion, whose groups come from each run's
#      own timings); resumed under other settings it says the residuals
#      start from zero;
#   6. MiCS replicas (ranks holding the same shards) send CRCs only
#      and serve a lost rank's state;
#   4. bad input.
#
# Usage: test_engine_snapshot.sh TACL_RUN TRAIN

TACL_RUN=${1:?usage: test_engine_snapshot.sh TACL_RUN TRAIN}
TRAIN=${2:?usage: test_engine_snapshot.sh TACL_RUN TRAIN}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../common/checks.sh"
TMP=$(mktemp -d) || exit 1
KEY=snapeng$$
trap 'rm -rf "$TMP"; rm -f /dev/shm/tacl-snap-$KEY-*' EXIT

DATA=${ENGINE_DATA:-/usr/share/common-licenses/GPL-3}
if [ ! -r "$DATA" ]; then
    echo "SKIP: the training text $DATA (Debian's base-files) is missing"
    exit 77
fi
STEPS=12
MODEL=(--ctx 4 --emb 8 --hidden 32 --blocks 4 --batch 32 --lr 1e-2
       --strategy ZeRO-3 --steps $STEPS --snapshot-every 2 --data "$DATA")

# run4 LOG ARGS...: train on 4 local ranks.
run4() {
    local log=$1
    shift
    "$TACL_RUN" -n 4 --timeout 120 -- "$TRAIN" "${MODEL[@]}" "$@" \
        > "$log" 2>&1
}

# same_losses NAME FROM LOG [FULL]: LOG's steps FROM+1..STEPS have
# exactly the uninterrupted run's (FULL's, full.log by default) loss
# bits, and LOG has no other step.
same_losses() {
    local out full=${4:-$TMP/full.log}
    checks=$((checks + 1))
    out=$(awk -v from="$2" -v last=$STEPS '
        FNR == 1 { file++ }
        $1 == "step" && file == 1 { want[$2] = $14 }
        $1 == "step" && file == 2 {
            n++
            if ($2 <= from || !($2 in want) || want[$2] != $14)
                bad = bad " " $2
        }
        END {
            if (n != last - from) print "steps: " n ", want " last - from
            else if (bad != "") print "differ at step" bad
        }' "$full" "$3")
    if [ -n "$out" ]; then
        fail "$1: $out"
        grep '^step\|resume\|train:' "$3" | head -20
    else
        ok "$1: steps $(($2 + 1))..$STEPS bit-for-bit"
    fi
}

# restored LOG: the step --resume restored ("" if none).
restored() {
    awk '$1 == "resume:" && $2 == "restored" { print $4 }' "$1"
}

# resumed_same NAME LOG [FULL]: LOG restored a step, and its losses from
# there are the uninterrupted run's (FULL's, full.log by default).
resumed_same() {
    local step
    step=$(restored "$2")
    if [ -n "$step" ]; then
        same_losses "$1: restored" "$step" "$2" "$3"
    else
        checks=$((checks + 1))
        fail "$1: the resume restored nothing"
    fi
}

run4 "$TMP/full.log" --snapshot-key "$KEY-full"
expect_rc "uninterrupted run" 0 $?

# 1. A killed rank, the job restarted: from peer memory.
run4 "$TMP/kill.log" --snapshot-key "$KEY-mem" --kill-at 1:7
expect_rc "run with rank 1 killed after step 7" 137 $?
expect_match "tacl-run saw rank 1 killed" -F "rank 1" "$TMP/kill.log"
run4 "$TMP/resume.log" --snapshot-key "$KEY-mem" --resume
expect_rc "resumed run" 0 $?
step=$(restored "$TMP/resume.log")
checks=$((checks + 1))
if [ -n "$step" ] && [ "$step" -ge 2 ] && [ "$step" -le 7 ] &&
   [ $((step % 2)) -eq 0 ]; then
    ok "resumed from saved step $step"
    same_losses "restored from memory" "$step" "$TMP/resume.log"
else
    fail "resume: restored step '$step', want an even step of 2..6"
    cat "$TMP/resume.log"
fi

# 1b. The same with the other ways copies travel: the restored state is
# the same whatever the traffic class (scheduled copies still learn
# their plan at step 7: coll_snap_background holds the planned ones).
for mode in foreground blocking scheduled; do
    run4 "$TMP/kill-$mode.log" --snapshot-key "$KEY-$mode" --kill-at 1:7 \
        --snapshot-mode $mode
    expect_rc "--snapshot-mode $mode: rank 1 killed after step 7" 137 $?
    run4 "$TMP/resume-$mode.log" --snapshot-key "$KEY-$mode" --resume \
        --snapshot-mode $mode
    expect_rc "--snapshot-mode $mode: resumed run" 0 $?
    resumed_same "--snapshot-mode $mode" "$TMP/resume-$mode.log"
done
# 1b'. A deeper model, more shards than a set holds regions (10 layers
# times 4 kinds): each kind's shards travel packed; above, each shard
# is its own region.
run4 "$TMP/deep-full.log" --snapshot-key "$KEY-deepf" --blocks 8
expect_rc "deep model: uninterrupted run" 0 $?
run4 "$TMP/deep-kill.log" --snapshot-key "$KEY-deep" --blocks 8 \
    --kill-at 1:7
expect_rc "deep model: rank 1 killed after step 7" 137 $?
run4 "$TMP/deep-resume.log" --snapshot-key "$KEY-deep" --blocks 8 --resume
expect_rc "deep model: resumed run" 0 $?
step=$(restored "$TMP/deep-resume.log")
checks=$((checks + 1))
if [ -n "$step" ]; then
    ok "deep model: resumed from saved step $step"
    same_losses "deep model (packed shards)" "$step" \
        "$TMP/deep-resume.log" "$TMP/deep-full.log"
else
    fail "deep model: the resume restored nothing"
fi
# 1c. Paced saves (--snapshot-pace, tacl_snapshot_due): a due save is
# skipped while the previous one's copies travel.  Every due step is a
# save or a skip, saved at least once; a resume from what was saved has
# the same losses.
run4 "$TMP/paced.log" --snapshot-key "$KEY-paced" --snapshot-pace 0
expect_rc "--snapshot-pace 0: uninterrupted run" 0 $?
checks=$((checks + 1))
out=$(awk -v due=$((STEPS / 2)) '$1 == "snapshots" {
        n++; s = $3; b = $5; o = $7 }
    END {
        if (n != 1) print "no snapshots line"
        else if (s < 1 || s + b + o != due)
            print "saved " s ", skipped " b " + " o ", want " due " in all"
    }' "$TMP/paced.log")
if [ -z "$out" ]; then
    ok "--snapshot-pace 0: $(grep '^snapshots' "$TMP/paced.log")"
else
    fail "--snapshot-pace 0: $out"
fi
run4 "$TMP/kill-paced.log" --snapshot-key "$KEY-paced" --kill-at 1:7 \
    --snapshot-pace 0
expect_rc "--snapshot-pace 0: rank 1 killed after step 7" 137 $?
run4 "$TMP/resume-paced.log" --snapshot-key "$KEY-paced" --resume \
    --snapshot-pace 0
expect_rc "--snapshot-pace 0: resumed run" 0 $?
resumed_same "--snapshot-pace 0" "$TMP/resume-paced.log"
"$TRAIN" --snapshot-pace 1.5 > "$TMP/bad.log" 2>&1
expect_rc "--snapshot-pace 1.5" 2 $?
expect_match "--snapshot-pace 1.5 is named" -F "'1.5'" "$TMP/bad.log"
"$TRAIN" --snapshot-mode sideways > "$TMP/bad.log" 2>&1
expect_rc "an unknown --snapshot-mode" 2 $?
expect_match "an unknown --snapshot-mode is named" -F "sideways" \
    "$TMP/bad.log"

# 1d. --snapshot-keep: a job that ends normally keeps its stores, so a
# later --resume restores its last save from memory (and, without
# --snapshot-keep, purges them at its own end); the resume says how long
# the restore took.
run4 "$TMP/keep.log" --snapshot-key "$KEY-keep" --snapshot-keep
expect_rc "--snapshot-keep: run" 0 $?
run4 "$TMP/resume-keep.log" --snapshot-key "$KEY-keep" --resume \
    --steps $((STEPS + 2)) --timeline
expect_rc "--snapshot-keep: resumed run" 0 $?
# --timeline: rank 0's wall-clock instants, once each, in order.
checks=$((checks + 1))
order=$(awk '$1 == "timeline" { n[$2]++; t[$2] = $3 }
    END {
        split("start communicator restored first_step", want, " ")
        for (i = 1; i <= 4; i++) {
            if (n[want[i]] != 1) { print want[i] " printed " n[want[i]] + 0 " times"; exit }
            if (i > 1 && t[want[i]] < t[want[i - 1]]) { print want[i] " before " want[i - 1]; exit }
        }
    }' "$TMP/resume-keep.log")
if [ -z "$order" ]; then
    ok "--timeline: start, communicator, restored, first_step in order"
else
    fail "--timeline: $order"
    grep "^timeline" "$TMP/resume-keep.log"
fi
expect_grep "--snapshot-keep: the last save restored, with its time" \
    "^resume: restored step $STEPS \(key $KEY-keep\) in [0-9]+\.[0-9]{3} s$" \
    "$TMP/resume-keep.log"
if [ -d /dev/shm ]; then
    checks=$((checks + 1))
    if ls /dev/shm | grep -q "^tacl-snap-$KEY-keep-"; then
        fail "the resumed run (no --snapshot-keep) left its stores"
    else
        ok "the resumed run purged its stores at its end"
    fi
fi

# 2. Every node-local store lost: from the files.
run4 "$TMP/killf.log" --snapshot-key "$KEY-file" --kill-at 2:7 \
    --snapshot-file "$TMP/ckpt" --snapshot-flush-every 1
expect_rc "run with files, rank 2 killed after step 7" 137 $?
if [ -d /dev/shm ]; then
    checks=$((checks + 1))
    n=$(ls /dev/shm | grep -c "^tacl-snap-$KEY-file-")
    rm -f /dev/shm/tacl-snap-$KEY-file-*
    if [ "$n" -gt 0 ] && [ -z "$(ls /dev/shm | grep "^tacl-snap-$KEY-file-")" ]
    then
        ok "the killed job's $n stores removed"
    else
        fail "the killed job left $n stores, or they did not go"
    fi
    run4 "$TMP/resumef.log" --snapshot-key "$KEY-file" --resume \
        --snapshot-file "$TMP/ckpt"
    expect_rc "resumed run from the files" 0 $?
    step=$(restored "$TMP/resumef.log")
    if [ -n "$step" ]; then
        same_losses "restored from the files" "$step" "$TMP/resumef.log"
    else
        checks=$((checks + 1))
        fail "resume from the files restored nothing"
        cat "$TMP/resumef.log"
    fi
    # A damaged file is refused, never loaded.
    printf '\377' | dd of="$TMP/ckpt.rank3" bs=1 seek=3000 conv=notrunc \
        2> /dev/null
    rm -f /dev/shm/tacl-snap-$KEY-file-*
    run4 "$TMP/damaged.log" --snapshot-key "$KEY-file" --resume \
        --snapshot-file "$TMP/ckpt"
    rc=$?
    checks=$((checks + 1))
    if [ $rc -ne 0 ]; then ok "a damaged file fails the resume (exit $rc)"
    else fail "a damaged file was resumed from"; fi
    expect_match "the damaged file is named" -E \
        "ckpt.rank3.*(checksum|truncated)" "$TMP/damaged.log"
else
    echo "note: no /dev/shm here; the file tier part is skipped"
fi

# 3. Nothing saved under the key.
run4 "$TMP/fresh.log" --snapshot-key "$KEY-none" --resume
expect_rc "--resume with nothing saved" 0 $?
expect_match "--resume with nothing saved says so" -F \
    "nothing saved under key '$KEY-none'" "$TMP/fresh.log"
same_losses "--resume with nothing saved trains from step 0" 0 \
    "$TMP/fresh.log"

# 5. Compressed gradients: the residuals and the plan travel with the
# shards.
run4 "$TMP/ctop-full.log" --snapshot-key "$KEY-ctf" --compress topk
expect_rc "top-k: uninterrupted run" 0 $?
run4 "$TMP/ctop-kill.log" --snapshot-key "$KEY-ctk" --compress topk \
    --kill-at 1:7
expect_rc "top-k: rank 1 killed after step 7" 137 $?
run4 "$TMP/ctop-resume.log" --snapshot-key "$KEY-ctk" --compress topk \
    --resume
expect_rc "top-k: resumed run" 0 $?
expect_match "top-k: the plan and residuals restored" -E \
    "^resume: plan of 6 groups and its residuals restored" \
    "$TMP/ctop-resume.log"
resumed_same "top-k, plan none" "$TMP/ctop-resume.log" "$TMP/ctop-full.log"

# A fusion plan is drawn from each run's timings, so the resumed run is
# held against the killed one, whose plan it restores, over the steps
# both ran.
run4 "$TMP/cfus-kill.log" --snapshot-key "$KEY-cfk" --compress topk \
    --plan fusion --profile-steps 2 --snapshot-every 4 --kill-at 1:11
expect_rc "top-k fusion: rank 1 killed after step 11" 137 $?
run4 "$TMP/cfus-resume.log" --snapshot-key "$KEY-cfk" --compress topk \
    --plan fusion --profile-steps 2 --snapshot-every 4 --resume
expect_rc "top-k fusion: resumed run" 0 $?
step=$(restored "$TMP/cfus-resume.log")
checks=$((checks + 1))
out=$(awk -v from="${step:-99}" '
    FNR == 1 { file++ }
    $1 == "step" && file == 1 { want[$2] = $14 }
    $1 == "step" && file == 2 && $2 in want {
        n++
        if ($2 <= from || want[$2] != $14) bad = bad " " $2
    }
    END { if (n == 0) print "no step in common"
          else if (bad != "") print "differ at step" bad
          else print n " steps" }' "$TMP/cfus-kill.log" "$TMP/cfus-resume.log")
if [ -n "$step" ] && grep -q "^resume: plan of [1-9][0-9]* groups" \
    "$TMP/cfus-resume.log" && [ "${out% steps}" != "$out" ]; then
    ok "top-k fusion: the plan restored, steps after $step as the killed" \
        "run's ($out)"
else
    fail "top-k fusion: restored '$step': $out"
    grep '^step\|resume\|plan' "$TMP/cfus-resume.log" | head -12
fi

# Resumed under another density: the residuals mean nothing there.
run4 "$TMP/cdens-kill.log" --snapshot-key "$KEY-cdk" --compress topk \
    --kill-at 1:7
expect_rc "top-k: killed again" 137 $?
run4 "$TMP/cdens-resume.log" --snapshot-key "$KEY-cdk" --compress topk \
    --density 0.02 --resume
expect_rc "top-k: resumed at another density" 0 $?
expect_match "top-k: another density starts the residuals from zero" -F \
    "made under other compression settings; they start from zero" \
    "$TMP/cdens-resume.log"

# 6. Replicas: MiCS in two partition groups of 2, so ranks 0 and 2 (1
# and 3) hold the same shards and serve as one another's copies.  A save
# sends its holder a header and CRCs only, where --snapshot-send-all
# sends the whole state; the training is the same either way.  Rank 1
# killed and every store of its gone, the resume fetches its state from
# rank 3's own copy, and the losses are the uninterrupted run's.
MICS=(--strategy MiCS --group-size 2)
run4 "$TMP/mics-all.log" --snapshot-key "$KEY-ma" "${MICS[@]}" \
    --snapshot-send-all
expect_rc "MiCS, every copy sent: uninterrupted run" 0 $?
run4 "$TMP/mics-twins.log" --snapshot-key "$KEY-mt" "${MICS[@]}"
expect_rc "MiCS, replicas: uninterrupted run" 0 $?
same_losses "MiCS: replicas or copies sent, the same training" 0 \
    "$TMP/mics-twins.log" "$TMP/mics-all.log"
checks=$((checks + 1))
sent() {
    awk '$1 == "snapshots" { for (i = 1; i < NF; i++)
        if ($i == "sent_bytes") print $(i + 1) }' "$1"
}
all=$(sent "$TMP/mics-all.log")
twins=$(sent "$TMP/mics-twins.log")
if [ -n "$all" ] && [ -n "$twins" ] && [ "$twins" -gt 0 ] &&
   [ $((twins * 20)) -lt "$all" ]; then
    ok "MiCS: a save sends $twins bytes with replicas, $all without"
else
    fail "MiCS: a save sent '$twins' bytes with replicas, '$all' without"
fi
run4 "$TMP/mics-kill.log" --snapshot-key "$KEY-mk" "${MICS[@]}" \
    --kill-at 1:7
expect_rc "MiCS, replicas: rank 1 killed after step 7" 137 $?
rm -f /dev/shm/tacl-snap-$KEY-mk-h1-*
TACL_DEBUG=INFO TACL_DEBUG_SUBSYS=COLL run4 "$TMP/mics-resume.log" --snapshot-key "$KEY-mk" \
    "${MICS[@]}" --resume
expect_rc "MiCS, replicas: resumed run" 0 $?
expect_match "MiCS: rank 1 fetched its state from its replica, rank 3" -E \
    "rank 1 fetches its version [0-9]+ from rank 3" "$TMP/mics-resume.log"
resumed_same "MiCS, replicas" "$TMP/mics-resume.log" "$TMP/mics-all.log"

# 4. Bad input.
"$TRAIN" --kill-at x > "$TMP/bad.log" 2>&1
expect_rc "--kill-at without RANK:STEP" 2 $?
"$TRAIN" --resume --load "$TMP/none" > "$TMP/bad.log" 2>&1
expect_rc "--resume with --load" 2 $?
expect_match "--resume with --load says why" -F "exclude each other" \
    "$TMP/bad.log"
"$TRAIN" --snapshot-key "bad/key" --snapshot-every 1 --steps 1 --data "$DATA" \
    > "$TMP/bad.log" 2>&1
expect_rc "a bad snapshot key" 1 $?
expect_match "a bad snapshot key is named" -F "job key" "$TMP/bad.log"

finish
